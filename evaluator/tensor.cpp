#include "evaluator/tensor.hpp"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace ptxevo::evaluator {
namespace {

// IEEE binary16 and bfloat16 differ only in field widths, so one rounding routine serves both.
struct SmallFloat {
  int mant_bits;         // stored fraction bits: 10 (fp16), 7 (bf16)
  int bias;              // 15, 127
  std::uint16_t inf;     // +inf bit pattern
  std::uint16_t qnan;    // canonical quiet NaN
};
constexpr SmallFloat kHalf{10, 15, 0x7C00, 0x7E00};
constexpr SmallFloat kBf16{7, 127, 0x7F80, 0x7FC0};

// Rounds v to the format, nearest even, with gradual underflow. Works on the double's bits so
// the result is exact: no intermediate float rounding (double rounding through float would be
// wrong for bf16 ties).
std::uint16_t round_to_small(double v, const SmallFloat& f) {
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(v);
  const std::uint16_t sign = (bits >> 63) ? 0x8000 : 0;
  const std::uint64_t mag = bits & ~(std::uint64_t{1} << 63);
  const int biased = static_cast<int>(mag >> 52);  // 0x7FF: inf or NaN
  const int e = biased - 1023;                     // unbiased
  const int emin = 1 - f.bias, emax = f.bias;
  const int shift = 52 - f.mant_bits;  // fraction bits dropped for a normal result
  if (e >= emin && e <= emax) {
    // Normal result (the common case): rebias the exponent in place and round the magnitude as
    // an integer; a carry out of the fraction bumps the exponent, past the largest finite value
    // to exactly the inf pattern.
    std::uint64_t x = mag - (static_cast<std::uint64_t>(1023 - f.bias) << 52);
    x += (std::uint64_t{1} << (shift - 1)) - 1 + ((x >> shift) & 1);
    return static_cast<std::uint16_t>(sign | (x >> shift));
  }
  if (biased == 0x7FF) return sign | ((mag << 12) ? f.qnan : f.inf);
  if (e > emax) return sign | f.inf;
  // Subnormal result. Double subnormals (< 2^-1022) are far below half the smallest fp16/bf16
  // subnormal and round to zero, as does anything below half of it (shift > 54).
  const int sub_shift = shift + (emin - e);
  if (biased == 0 || sub_shift > 54) return sign;
  const std::uint64_t m = (mag & ((std::uint64_t{1} << 52) - 1)) | (std::uint64_t{1} << 52);  // 53 bits
  std::uint64_t q = m >> sub_shift;
  const std::uint64_t rem = m & ((std::uint64_t{1} << sub_shift) - 1);
  const std::uint64_t halfway = std::uint64_t{1} << (sub_shift - 1);
  if (rem > halfway || (rem == halfway && (q & 1))) ++q;
  // q == 2^mant_bits is the smallest normal: the bit pattern carries into the exponent by itself.
  return static_cast<std::uint16_t>(sign | q);
}

// Saturating double -> integer: NaN becomes 0, out-of-range values clamp (a cast would be UB).
template <class I>
I to_int(double v) {
  if (std::isnan(v)) return 0;
  const double r = std::nearbyint(v);
  if (r <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  // 2^63 is exactly representable; anything at or above it saturates.
  if (r >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(r);
}

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
void store(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

}  // namespace

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::F64: return 8;
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I64: return 8;
    case DType::I32: return 4;
    case DType::U8: return 1;
  }
  return 0;
}

const char* to_string(DType t) {
  switch (t) {
    case DType::F64: return "f64";
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I64: return "i64";
    case DType::I32: return "i32";
    case DType::U8: return "u8";
  }
  return "?";
}

bool parse_dtype(const std::string& name, DType* out) {
  struct Alias {
    const char* name;
    DType t;
  };
  static constexpr Alias kAliases[] = {
      {"bf16", DType::BF16}, {"bfloat16", DType::BF16}, {"fp16", DType::F16},   {"half", DType::F16},
      {"float16", DType::F16}, {"f16", DType::F16},     {"fp32", DType::F32},   {"float", DType::F32},
      {"float32", DType::F32}, {"f32", DType::F32},     {"fp64", DType::F64},   {"double", DType::F64},
      {"float64", DType::F64}, {"f64", DType::F64},     {"i32", DType::I32},    {"int32", DType::I32},
      {"i64", DType::I64},     {"int64", DType::I64},   {"u8", DType::U8},      {"uint8", DType::U8}};
  for (const auto& a : kAliases)
    if (name == a.name) {
      if (out) *out = a.t;
      return true;
    }
  return false;
}

double half_to_double(std::uint16_t h) {
  const std::uint64_t sign = static_cast<std::uint64_t>(h & 0x8000) << 48;
  const std::uint64_t exp = (h >> 10) & 0x1F;
  const std::uint64_t frac = h & 0x3FF;
  // Built from bits (no ldexp): the gate converts up to 2^31 elements per check.
  if (exp == 0) {  // zero or subnormal: frac * 2^-24, exact
    const double v = static_cast<double>(frac) * 0x1p-24;
    return sign ? -v : v;
  }
  if (exp == 0x1F)
    return std::bit_cast<double>(sign | (std::uint64_t{0x7FF} << 52) | (frac ? std::uint64_t{1} << 51 : 0));
  return std::bit_cast<double>(sign | ((exp - 15 + 1023) << 52) | (frac << 42));
}

double bf16_to_double(std::uint16_t b) {
  // bf16 is the top half of an fp32, so the widening is exact (NaN payloads included).
  return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16));
}

std::uint16_t double_to_half(double v) { return round_to_small(v, kHalf); }
std::uint16_t double_to_bf16(double v) { return round_to_small(v, kBf16); }

HostTensor::HostTensor(std::string n, DType t, std::vector<std::int64_t> s)
    : name(std::move(n)), dtype(t), shape(std::move(s)) {
  const std::int64_t count = numel();
  const std::size_t elem = dtype_size(dtype);
  if (static_cast<std::uint64_t>(count) > std::numeric_limits<std::size_t>::max() / elem)
    throw std::invalid_argument("tensor '" + name + "' is too large");
  data.resize(static_cast<std::size_t>(count) * elem);
  // Zero in parallel: a serial memset of 20 GB took 12 s on the GPU host.
  constexpr std::size_t kChunk = std::size_t{1} << 24;
  const std::size_t total = data.size();
  tbb::parallel_for(std::size_t{0}, (total + kChunk - 1) / kChunk, [&](std::size_t c) {
    const std::size_t begin = c * kChunk;
    std::memset(data.data() + begin, 0, std::min(kChunk, total - begin));
  });
}

std::int64_t HostTensor::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) throw std::invalid_argument("tensor '" + name + "' has a negative dimension");
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d)
      throw std::invalid_argument("tensor '" + name + "' has too many elements");
    n *= d;
  }
  return n;
}

double HostTensor::get(std::int64_t i) const {
  const std::size_t sz = dtype_size(dtype);
  if (i < 0 || static_cast<std::uint64_t>(i) >= data.size() / sz)
    throw std::out_of_range("element " + std::to_string(i) + " out of range in tensor '" + name + "'");
  const std::byte* p = data.data() + static_cast<std::size_t>(i) * sz;
  switch (dtype) {
    case DType::F64: return load<double>(p);
    case DType::F32: return static_cast<double>(load<float>(p));
    case DType::F16: return half_to_double(load<std::uint16_t>(p));
    case DType::BF16: return bf16_to_double(load<std::uint16_t>(p));
    case DType::I64: return static_cast<double>(load<std::int64_t>(p));
    case DType::I32: return static_cast<double>(load<std::int32_t>(p));
    case DType::U8: return static_cast<double>(load<std::uint8_t>(p));
  }
  return 0;
}

void HostTensor::set(std::int64_t i, double v) {
  const std::size_t sz = dtype_size(dtype);
  if (i < 0 || static_cast<std::uint64_t>(i) >= data.size() / sz)
    throw std::out_of_range("element " + std::to_string(i) + " out of range in tensor '" + name + "'");
  std::byte* p = data.data() + static_cast<std::size_t>(i) * sz;
  switch (dtype) {
    case DType::F64: store(p, v); return;
    case DType::F32: store(p, static_cast<float>(v)); return;  // IEEE: rounds to nearest even, overflows to inf
    case DType::F16: store(p, double_to_half(v)); return;
    case DType::BF16: store(p, double_to_bf16(v)); return;
    case DType::I64: store(p, to_int<std::int64_t>(v)); return;
    case DType::I32: store(p, to_int<std::int32_t>(v)); return;
    case DType::U8: store(p, to_int<std::uint8_t>(v)); return;
  }
}

}  // namespace ptxevo::evaluator
