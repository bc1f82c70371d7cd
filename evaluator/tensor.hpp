// Host-side tensors the engine owns: typed byte buffers with a shape, plus the dtype
// conversions the fp64 references and the gate need (fp16/bf16 done in software).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace ptxevo::evaluator {

enum class DType { F64, F32, F16, BF16, I64, I32, U8 };

std::size_t dtype_size(DType t);
const char* to_string(DType t);
// "bf16", "bfloat16", "fp32", "float32", "f32", ... -> DType; false for unknown names.
bool parse_dtype(const std::string& name, DType* out);

double half_to_double(std::uint16_t h);
double bf16_to_double(std::uint16_t b);
std::uint16_t double_to_half(double v);  // round to nearest even
std::uint16_t double_to_bf16(double v);  // round to nearest even

// A byte vector whose elements are not value-initialized on resize: tensors of 2^31 elements
// are zeroed in parallel by HostTensor instead of serially by std::vector.
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  using std::allocator<T>::allocator;
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using ByteBuffer = std::vector<std::byte, DefaultInitAllocator<std::byte>>;

struct HostTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;
  ByteBuffer data;  // zeroed by the constructor

  HostTensor() = default;
  HostTensor(std::string n, DType t, std::vector<std::int64_t> s);
  std::int64_t numel() const;
  std::size_t bytes() const { return data.size(); }
  double get(std::int64_t i) const;       // element i converted to double
  void set(std::int64_t i, double v);     // element i rounded to the tensor's dtype
};

}  // namespace ptxevo::evaluator
