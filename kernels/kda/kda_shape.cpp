#include "kernels/kda/kda_shape.hpp"

#include <map>
#include <stdexcept>

namespace ptxevo::kernels {
namespace {

std::string list(const std::vector<std::int64_t>& xs) {
  std::string s;
  for (auto x : xs) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}

// The packed length sets, by sequence count. Where they come from (docs/kda.md 3.4, 4.3, 5):
const std::map<std::int64_t, std::vector<std::int64_t>>& length_sets() {
  static const std::map<std::int64_t, std::vector<std::int64_t>> k = {
      {2, {1, 1}},                                     // single-token sequences
      {3, {17, 33, 65}},                               // FlashKDA test_fwd_full
      {4, {16, 4, 8, 12}},                             // FlashKDA [16] and [4, 8, 12] in one pack
      {5, {15, 85, 200, 900, 800}},                    // FLA test_chunk_varlen [0,15,100,300,1200,2000]
      {6, {1300, 547, 2048, 963, 271, 3063}},          // benchmark scenarios 2 and 5 (sum 8192)
      {7, {1, 15, 16, 17, 63, 64, 65}},                // every chunk boundary of C = 16 and 64
      {8, {1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024}},  // benchmark scenarios 3 and 6
      {9, {129, 1, 31, 700, 2, 33, 250, 47, 96}},      // held out (sum 1289)
      {10, {300, 5, 1000, 64, 17, 1, 500, 128, 33, 2000}},  // held out (sum 4048)
  };
  return k;
}

}  // namespace

std::vector<std::int64_t> kda_length_set(std::int64_t n) {
  auto it = length_sets().find(n);
  return it == length_sets().end() ? std::vector<std::int64_t>{} : it->second;
}

std::vector<std::int64_t> kda_length_set_counts() {
  std::vector<std::int64_t> out;
  for (const auto& [n, l] : length_sets()) out.push_back(n);
  return out;
}

std::vector<std::int64_t> kda_cu_seqlens(const std::vector<std::int64_t>& lengths) {
  std::vector<std::int64_t> c = {0};
  for (auto l : lengths) c.push_back(c.back() + l);
  return c;
}

void check_cu_seqlens(const std::vector<std::int64_t>& c, std::int64_t total_tokens) {
  auto fail = [&](const std::string& m) {
    throw std::invalid_argument("kda_fwd: cu_seqlens [" + list(c) + "] " + m);
  };
  if (c.size() < 2) fail("needs at least 2 entries (one sequence)");
  if (c.front() != 0) fail("must start at 0");
  for (std::size_t i = 1; i < c.size(); ++i)
    if (c[i] <= c[i - 1])
      fail("must be strictly increasing (every sequence needs at least one token): entry " + std::to_string(i) +
           " is " + std::to_string(c[i]) + " after " + std::to_string(c[i - 1]));
  if (c.back() != total_tokens)
    fail("must end at the number of packed tokens, " + std::to_string(total_tokens) + ", not " +
         std::to_string(c.back()));
}

KdaDims kda_dims(const evaluator::Shape& s) {
  for (const auto& [k, v] : s)
    if (k != "B" && k != "T" && k != "H" && k != "N" && k != "D")
      throw std::invalid_argument("kda_fwd: unknown shape dimension '" + k +
                                  "' (the dimensions are B, T, H, N and optionally D = 128)");
  auto get = [&](const char* k) {
    auto it = s.find(k);
    if (it == s.end())
      throw std::invalid_argument(std::string("kda_fwd: shape lacks dimension ") + k +
                                  " (write B, T, H and N: N = B for fixed-length rows)");
    if (it->second < 1)
      throw std::invalid_argument(std::string("kda_fwd: dimension ") + k + " must be >= 1, got " +
                                  std::to_string(it->second));
    return it->second;
  };
  if (auto it = s.find("D"); it != s.end() && it->second != 128)
    throw std::invalid_argument("kda_fwd: head dim D=" + std::to_string(it->second) +
                                " is not supported: K = V = 128 (as FlashKDA requires and KDA models use)");
  KdaDims d;
  d.batch = get("B");
  d.tokens = get("T");
  d.heads = get("H");
  d.sequences = get("N");
  std::int64_t elems = 0;
  if (__builtin_mul_overflow(d.batch * d.tokens, d.heads * 128, &elems) || d.batch > (std::int64_t{1} << 31) ||
      d.tokens > (std::int64_t{1} << 31) || d.heads > 65535 || elems > (std::int64_t{1} << 36))
    throw std::invalid_argument("kda_fwd: B*T*H*128 = " + std::to_string(d.batch) + "*" + std::to_string(d.tokens) +
                                "*" + std::to_string(d.heads) + "*128 is too large (at most 2^36 elements, H <= 65535)");
  if (d.sequences == d.batch) {
    d.packed = false;
    for (std::int64_t b = 0; b <= d.batch; ++b) d.cu_seqlens.push_back(b * d.tokens);
    return d;
  }
  if (d.batch != 1)
    throw std::invalid_argument("kda_fwd: N=" + std::to_string(d.sequences) + " with B=" + std::to_string(d.batch) +
                                ": packed variable-length sequences need B = 1 (as with cu_seqlens in FlashKDA and "
                                "FLA); for B fixed-length rows write N = B");
  const std::vector<std::int64_t> lengths = kda_length_set(d.sequences);
  if (lengths.empty())
    throw std::invalid_argument("kda_fwd: no length set for N=" + std::to_string(d.sequences) +
                                " packed sequences; sets exist for N in {" + list(kda_length_set_counts()) +
                                "} (kernels/kda/README.md lists them)");
  d.packed = true;
  d.cu_seqlens = kda_cu_seqlens(lengths);
  if (d.cu_seqlens.back() != d.tokens)
    throw std::invalid_argument("kda_fwd: the N=" + std::to_string(d.sequences) + " set's lengths [" + list(lengths) +
                                "] sum to " + std::to_string(d.cu_seqlens.back()) + ", so T must be " +
                                std::to_string(d.cu_seqlens.back()) + ", not " + std::to_string(d.tokens));
  return d;
}

}  // namespace ptxevo::kernels
