#include "evaluator/tensor.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

namespace ptxevo::evaluator {
namespace {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::F64), 8u);
  EXPECT_EQ(dtype_size(DType::F32), 4u);
  EXPECT_EQ(dtype_size(DType::F16), 2u);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::I64), 8u);
  EXPECT_EQ(dtype_size(DType::I32), 4u);
  EXPECT_EQ(dtype_size(DType::U8), 1u);
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::U8}) {
    DType back = DType::U8;
    ASSERT_TRUE(parse_dtype(to_string(t), &back)) << to_string(t);
    EXPECT_EQ(back, t);
  }
}

TEST(DType, ParsesAliases) {
  const std::pair<const char*, DType> cases[] = {
      {"bf16", DType::BF16},   {"bfloat16", DType::BF16}, {"fp16", DType::F16},  {"half", DType::F16},
      {"float16", DType::F16}, {"fp32", DType::F32},      {"float", DType::F32}, {"float32", DType::F32},
      {"f32", DType::F32},     {"fp64", DType::F64},      {"double", DType::F64}, {"f64", DType::F64},
      {"i32", DType::I32},     {"int32", DType::I32},     {"i64", DType::I64},   {"int64", DType::I64},
      {"u8", DType::U8}};
  for (const auto& [name, want] : cases) {
    DType got = DType::U8;
    ASSERT_TRUE(parse_dtype(name, &got)) << name;
    EXPECT_EQ(got, want) << name;
  }
  DType untouched = DType::I32;
  EXPECT_FALSE(parse_dtype("fp8", &untouched));
  EXPECT_FALSE(parse_dtype("", &untouched));
  EXPECT_FALSE(parse_dtype("F32 ", &untouched));
  EXPECT_EQ(untouched, DType::I32);
}

TEST(Half, ExactValues) {
  EXPECT_EQ(half_to_double(0x3C00), 1.0);
  EXPECT_EQ(half_to_double(0xC000), -2.0);
  EXPECT_EQ(half_to_double(0x7BFF), 65504.0);
  EXPECT_EQ(half_to_double(0x0001), std::ldexp(1.0, -24));  // smallest subnormal
  EXPECT_EQ(half_to_double(0x03FF), 1023 * std::ldexp(1.0, -24));
  EXPECT_EQ(half_to_double(0x0400), std::ldexp(1.0, -14));  // smallest normal
  EXPECT_TRUE(std::signbit(half_to_double(0x8000)));
  EXPECT_EQ(half_to_double(0x7C00), std::numeric_limits<double>::infinity());
  EXPECT_EQ(half_to_double(0xFC00), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(half_to_double(0x7E00)));
  EXPECT_TRUE(std::isnan(half_to_double(0x7C01)));
}

TEST(Half, RoundTripsEveryPattern) {
  for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
    const double v = half_to_double(static_cast<std::uint16_t>(h));
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(half_to_double(double_to_half(v))));
      continue;
    }
    ASSERT_EQ(double_to_half(v), h) << std::hex << h;
  }
}

TEST(Half, RoundsToNearestEven) {
  const double ulp1 = std::ldexp(1.0, -10);  // spacing just above 1
  EXPECT_EQ(double_to_half(1.0 + ulp1 / 2), 0x3C00);          // tie -> even (down)
  EXPECT_EQ(double_to_half(1.0 + 1.5 * ulp1), 0x3C02);        // tie -> even (up)
  EXPECT_EQ(double_to_half(1.0 + ulp1 / 2 + 1e-12), 0x3C01);  // just above the tie
  EXPECT_EQ(double_to_half(65504.0 + 15.999), 0x7BFF);        // below the overflow threshold
  EXPECT_EQ(double_to_half(65520.0), 0x7C00);                 // tie at max rounds to inf
  EXPECT_EQ(double_to_half(1e300), 0x7C00);
  EXPECT_EQ(double_to_half(-1e300), 0xFC00);
  // Subnormals: ties to even, and the smallest-subnormal boundary.
  const double sub = std::ldexp(1.0, -24);
  EXPECT_EQ(double_to_half(sub / 2), 0x0000);          // tie with 0 -> even (0)
  EXPECT_EQ(double_to_half(sub * 0.5000001), 0x0001);  // above half -> smallest subnormal
  EXPECT_EQ(double_to_half(sub * 1.5), 0x0002);        // tie -> even
  EXPECT_EQ(double_to_half(sub * 2.5), 0x0002);        // tie -> even
  EXPECT_EQ(double_to_half(std::ldexp(1.0, -14) - sub / 4), 0x0400);  // rounds up into the normals
  EXPECT_EQ(double_to_half(1e-300), 0x0000);
  EXPECT_EQ(double_to_half(-1e-300), 0x8000);
  EXPECT_EQ(double_to_half(std::numeric_limits<double>::denorm_min()), 0x0000);
  EXPECT_EQ(double_to_half(std::numeric_limits<double>::quiet_NaN()) & 0x7E00, 0x7E00);
}

TEST(Bf16, ExactValuesAndRounding) {
  EXPECT_EQ(bf16_to_double(0x3F80), 1.0);
  EXPECT_EQ(bf16_to_double(0x0001), std::ldexp(1.0, -133));
  EXPECT_EQ(bf16_to_double(0x7F80), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(bf16_to_double(0x7FC1)));
  const double ulp1 = std::ldexp(1.0, -7);
  EXPECT_EQ(double_to_bf16(1.0 + ulp1 / 2), 0x3F80);
  EXPECT_EQ(double_to_bf16(1.0 + 1.5 * ulp1), 0x3F82);
  // A value whose float rounding lands exactly on a bf16 tie: double rounding would go wrong.
  const double tricky = 1.0 + ulp1 / 2 + std::ldexp(1.0, -30);
  EXPECT_EQ(double_to_bf16(tricky), 0x3F81);
  EXPECT_EQ(double_to_bf16(3.5e38), 0x7F80);
  EXPECT_EQ(double_to_bf16(-0.0), 0x8000);
  EXPECT_EQ(double_to_bf16(std::ldexp(1.0, -134)), 0x0000);  // tie with zero -> even
  EXPECT_EQ(double_to_bf16(std::ldexp(1.0, -134) * 3), 0x0002);
  EXPECT_EQ(double_to_bf16(std::numeric_limits<double>::quiet_NaN()) & 0x7FC0, 0x7FC0);
}

TEST(Bf16, RoundTripsEveryPatternAndMatchesFloatTruncationRule) {
  for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
    const double v = bf16_to_double(static_cast<std::uint16_t>(b));
    if (std::isnan(v)) continue;
    ASSERT_EQ(double_to_bf16(v), b) << std::hex << b;
  }
  // For values exactly representable in float, RNE on the float bits is the reference rule.
  std::uint32_t x = 12345;
  for (int i = 0; i < 100000; ++i) {
    x = x * 1664525u + 1013904223u;
    const float f = std::bit_cast<float>(x);
    if (std::isnan(f)) continue;
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
    std::uint32_t want = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16;
    ASSERT_EQ(double_to_bf16(static_cast<double>(f)), want) << std::hex << bits;
  }
}

TEST(HostTensor, AllocatesZeroedAndConverts) {
  HostTensor t("x", DType::BF16, {3, 5});
  EXPECT_EQ(t.numel(), 15);
  EXPECT_EQ(t.bytes(), 30u);
  for (std::int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(t.get(i), 0.0);
  t.set(4, 1.0 + 1.0 / 256);  // tie -> even: 1.0
  EXPECT_EQ(t.get(4), 1.0);
  t.set(5, 3.14159);
  EXPECT_NEAR(t.get(5), 3.14159, 3.14159 * 0x1p-8);

  HostTensor s("s", DType::F32, {});
  EXPECT_EQ(s.numel(), 1);  // a scalar
  s.set(0, 0.1);
  EXPECT_EQ(s.get(0), static_cast<double>(0.1f));

  HostTensor e("e", DType::F64, {4, 0});
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(e.bytes(), 0u);
}

TEST(HostTensor, IntegersSaturateAndRound) {
  HostTensor u("u", DType::U8, {4});
  u.set(0, 300);
  u.set(1, -5);
  u.set(2, 2.5);  // nearest even
  u.set(3, std::nan(""));
  EXPECT_EQ(u.get(0), 255);
  EXPECT_EQ(u.get(1), 0);
  EXPECT_EQ(u.get(2), 2);
  EXPECT_EQ(u.get(3), 0);
  HostTensor i("i", DType::I32, {2});
  i.set(0, -1e12);
  i.set(1, -7);
  EXPECT_EQ(i.get(0), static_cast<double>(std::numeric_limits<std::int32_t>::min()));
  EXPECT_EQ(i.get(1), -7);
  HostTensor l("l", DType::I64, {1});
  l.set(0, 1e30);
  EXPECT_EQ(l.get(0), static_cast<double>(std::numeric_limits<std::int64_t>::max()));
}

TEST(HostTensor, F16ElementsAndBounds) {
  HostTensor h("h", DType::F16, {2});
  h.set(0, 70000.0);
  EXPECT_TRUE(std::isinf(h.get(0)));
  h.set(1, -0.5);
  EXPECT_EQ(h.get(1), -0.5);
  EXPECT_THROW(h.get(2), std::out_of_range);
  EXPECT_THROW(h.set(-1, 0), std::out_of_range);
  EXPECT_THROW(HostTensor("bad", DType::F32, {-1}), std::invalid_argument);
}

}  // namespace
}  // namespace ptxevo::evaluator
