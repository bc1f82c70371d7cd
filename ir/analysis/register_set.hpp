// A dense set of register ids (a dynamic bitset): liveness sets are unions and differences of
// these, over every block, until a fixed point, so they must be cheap to combine and compare.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ptxevo::ir {

class RegisterSet {
 public:
  RegisterSet() = default;
  explicit RegisterSet(std::size_t universe) : words_((universe + 63) / 64, 0) {}

  void insert(int r) { words_[word(r)] |= bit(r); }
  void erase(int r) { words_[word(r)] &= ~bit(r); }
  bool contains(int r) const { return (words_[word(r)] & bit(r)) != 0; }

  // this |= o; returns true when this set grew.
  bool unite(const RegisterSet& o) {
    bool grew = false;
    for (std::size_t i = 0; i < words_.size(); ++i) {
      const std::uint64_t next = words_[i] | o.words_[i];
      grew |= next != words_[i];
      words_[i] = next;
    }
    return grew;
  }

  std::size_t size() const {
    std::size_t n = 0;
    for (auto w : words_) n += static_cast<std::size_t>(std::popcount(w));
    return n;
  }

  template <class Fn>
  void for_each(Fn&& fn) const {
    for (std::size_t i = 0; i < words_.size(); ++i)
      for (std::uint64_t w = words_[i]; w != 0; w &= w - 1)
        fn(static_cast<int>(i * 64 + static_cast<std::size_t>(std::countr_zero(w))));
  }

  bool operator==(const RegisterSet&) const = default;

 private:
  static std::size_t word(int r) { return static_cast<std::size_t>(r) / 64; }
  static std::uint64_t bit(int r) { return std::uint64_t{1} << (static_cast<unsigned>(r) % 64); }
  std::vector<std::uint64_t> words_;
};

}  // namespace ptxevo::ir
