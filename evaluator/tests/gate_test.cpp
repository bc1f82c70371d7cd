#include "evaluator/gate.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

namespace ptxevo::evaluator {
namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// An F64 reference drawn from N(0,1), and an output of `dt` holding it rounded.
HostTensor normal_ref(std::int64_t n, std::uint64_t seed = 1) {
  HostTensor ref("y", DType::F64, {n});
  std::mt19937_64 rng(seed);
  fill_distribution(Distribution::Normal, rng, ref);
  return ref;
}
HostTensor rounded(const HostTensor& ref, DType dt, double scale = 1.0) {
  HostTensor out(ref.name, dt, ref.shape);
  for (std::int64_t i = 0; i < ref.numel(); ++i) out.set(i, ref.get(i) * scale);
  return out;
}

// ---- distributions ----------------------------------------------------------------------------
struct Moments {
  double mean = 0, sd = 0, max_abs = 0;
};
Moments moments(const HostTensor& t) {
  Moments m;
  const double n = static_cast<double>(t.numel());
  for (std::int64_t i = 0; i < t.numel(); ++i) m.mean += t.get(i) / n;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double d = t.get(i) - m.mean;
    m.sd += d * d / n;
    m.max_abs = std::max(m.max_abs, std::abs(t.get(i)));
  }
  m.sd = std::sqrt(m.sd);
  return m;
}

TEST(Distributions, NormalHasUnitVariance) {
  HostTensor t("x", DType::F32, {1 << 16});
  std::mt19937_64 rng(7);
  fill_distribution(Distribution::Normal, rng, t);
  const Moments m = moments(t);
  EXPECT_NEAR(m.mean, 0.0, 0.02);
  EXPECT_NEAR(m.sd, 1.0, 0.02);
  EXPECT_GT(m.max_abs, 3.0);
}

TEST(Distributions, LargeUniformCoversTheRange) {
  HostTensor t("x", DType::BF16, {1 << 16});
  std::mt19937_64 rng(7);
  fill_distribution(Distribution::LargeUniform, rng, t);
  const Moments m = moments(t);
  EXPECT_NEAR(m.mean, 0.0, 10.0);
  EXPECT_NEAR(m.sd, 1e3 / std::sqrt(3.0), 10.0);
  EXPECT_GT(m.max_abs, 990.0);
  EXPECT_LE(m.max_abs, 1000.0);
}

TEST(Distributions, SparseSpikesHasRareLargeElements) {
  const std::int64_t n = 1 << 17;
  HostTensor t("x", DType::F32, {n});
  std::mt19937_64 rng(11);
  fill_distribution(Distribution::SparseSpikes, rng, t);
  std::int64_t spikes = 0;
  double noise_max = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = std::abs(t.get(i));
    if (v == 100.0) ++spikes;
    else noise_max = std::max(noise_max, v);
  }
  // About 0.1%: expected 131; the Poisson spread is about 11.
  EXPECT_GT(spikes, 80);
  EXPECT_LT(spikes, 190);
  EXPECT_LT(noise_max, 0.1);  // N(0, 1e-2) noise stays far below the spikes
  EXPECT_GT(noise_max, 0.03);

  // Even a tiny tensor gets one.
  HostTensor small("s", DType::F16, {8});
  fill_distribution(Distribution::SparseSpikes, rng, small);
  int small_spikes = 0;
  for (std::int64_t i = 0; i < 8; ++i) small_spikes += std::abs(small.get(i)) == 100.0;
  EXPECT_GE(small_spikes, 1);
}

TEST(Distributions, HeavyTailIsHeavyAndFinite) {
  const std::int64_t n = 1 << 16;
  HostTensor t("x", DType::F16, {n});
  std::mt19937_64 rng(5);
  fill_distribution(Distribution::HeavyTail, rng, t);
  std::vector<double> a(static_cast<std::size_t>(n));
  std::int64_t beyond10 = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    a[static_cast<std::size_t>(i)] = std::abs(t.get(i));
    ASSERT_TRUE(std::isfinite(t.get(i)));
    beyond10 += a[static_cast<std::size_t>(i)] > 10;
  }
  std::nth_element(a.begin(), a.begin() + n / 2, a.end());
  // Student-t(2): median |t| = sqrt(2/3); P(|t| > 10) = 1 - 10/sqrt(102) ~ 0.98%.
  EXPECT_NEAR(a[static_cast<std::size_t>(n / 2)], std::sqrt(2.0 / 3.0), 0.03);
  EXPECT_NEAR(static_cast<double>(beyond10) / static_cast<double>(n), 1 - 10 / std::sqrt(102.0), 0.002);
}

TEST(Distributions, IntegersAreSmall) {
  HostTensor t("i", DType::I32, {4096});
  std::mt19937_64 rng(3);
  fill_distribution(Distribution::HeavyTail, rng, t);
  std::set<double> seen;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.get(i);
    ASSERT_GE(v, -8);
    ASSERT_LE(v, 8);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 17u);
  HostTensor u("u", DType::U8, {4096});
  fill_distribution(Distribution::Normal, rng, u);
  for (std::int64_t i = 0; i < u.numel(); ++i) ASSERT_LT(u.get(i), 16);
}

TEST(Distributions, DeterministicPerSeedAndFreshPerCall) {
  HostTensor a("x", DType::F32, {100000}), b = a, c = a;
  std::mt19937_64 r1(42), r2(42);
  fill_distribution(Distribution::Normal, r1, a);
  fill_distribution(Distribution::Normal, r2, b);
  EXPECT_EQ(first_difference(a, b), -1);
  fill_distribution(Distribution::Normal, r1, c);  // the generator advanced: new data
  EXPECT_NE(fingerprint(a), fingerprint(c));
}

// Degenerate rows: even rows take the kinds in turn, odd rows keep the normal draw; tiny and
// denormal rows are nonzero and below their bounds in every float dtype.
TEST(Distributions, DegenerateRowsOverlayTheEvenRows) {
  const std::vector<DegenerateRow> kinds = {DegenerateRow::Zero, DegenerateRow::Constant, DegenerateRow::Tiny,
                                            DegenerateRow::Denormal, DegenerateRow::LargestFinite};
  for (const DType dt : {DType::F32, DType::BF16, DType::F16, DType::F64}) {
    const std::int64_t rows = 12, n = 257;
    HostTensor t("x", dt, {rows, n});
    std::mt19937_64 rng(7);
    fill_distribution(Distribution::DegenerateRows, rng, t);
    const HostTensor drawn = t;
    overlay_degenerate_rows(t, n, kinds, 99);
    for (std::int64_t r = 0; r < rows; ++r) {
      double lo = std::numeric_limits<double>::infinity(), hi = 0, first = t.get(r * n);
      bool constant = true, nonzero = false;
      for (std::int64_t c = 0; c < n; ++c) {
        const double v = t.get(r * n + c);
        ASSERT_TRUE(std::isfinite(v)) << to_string(dt) << " row " << r;
        lo = std::min(lo, std::abs(v));
        hi = std::max(hi, std::abs(v));
        constant &= v == first;
        nonzero |= v != 0;
        if (r % 2) {
          ASSERT_EQ(v, drawn.get(r * n + c)) << "odd rows keep the draw";
        }
      }
      if (r % 2) continue;
      switch (kinds[static_cast<std::size_t>(r / 2) % kinds.size()]) {
        case DegenerateRow::Zero: EXPECT_EQ(hi, 0) << to_string(dt); break;
        case DegenerateRow::Constant: EXPECT_TRUE(constant && first != 0) << to_string(dt); break;
        case DegenerateRow::Tiny:
          // fp16 cannot hold 1e-30: the row rounds to zero there, as any fp16 input of it would.
          EXPECT_LT(hi, 1e-28) << to_string(dt);
          if (dt != DType::F16) {
            EXPECT_TRUE(nonzero) << to_string(dt);
          }
          break;
        case DegenerateRow::Denormal:
          EXPECT_TRUE(nonzero) << to_string(dt);
          EXPECT_LT(hi, smallest_normal(dt)) << to_string(dt);
          break;
        case DegenerateRow::LargestFinite: {
          const double largest = dt == DType::F16 ? 65504.0 : dt == DType::BF16 ? 3.38e38 : dt == DType::F32 ? 3.4e38 : 1.79e308;
          EXPECT_GE(lo, 0.49 * largest) << to_string(dt);
          break;
        }
      }
    }
  }
  EXPECT_STREQ(to_string(Distribution::DegenerateRows), "degenerate_rows");
  EXPECT_EQ(all_distributions().size(), 4U);  // added by the gate where inputs declare them, not cycled
  EXPECT_EQ(degenerate_row_from("denormal"), DegenerateRow::Denormal);
  EXPECT_FALSE(degenerate_row_from("huge").has_value());
}

// ---- poison -----------------------------------------------------------------------------------
TEST(Poison, PatternsDifferAndAreCounted) {
  for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::U8}) {
    HostTensor p0("o", dt, {1000}), p1("o", dt, {1000});
    poison(p0, 0);
    poison(p1, 1);
    EXPECT_EQ(first_difference(p0, p1), 0) << to_string(dt);
    EXPECT_EQ(count_poison(p0, 0), 1000) << to_string(dt);
    EXPECT_EQ(count_poison(p0, 1), 0) << to_string(dt);
    EXPECT_EQ(count_poison(p1, 1), 1000) << to_string(dt);
    if (dt == DType::F64 || dt == DType::F32 || dt == DType::F16 || dt == DType::BF16) {
      EXPECT_TRUE(std::isnan(p0.get(3))) << to_string(dt);
      EXPECT_TRUE(std::isnan(p1.get(3))) << to_string(dt);
      // A canonical NaN computed by a kernel is not mistaken for poison.
      p0.set(5, std::numeric_limits<double>::quiet_NaN());
      EXPECT_EQ(count_poison(p0, 0), 999) << to_string(dt);
    }
    for (std::int64_t i = 0; i < 10; ++i) p1.set(i, 1.0);
    EXPECT_EQ(count_poison(p1, 1), 990) << to_string(dt);
  }
  HostTensor t("o", DType::F32, {4});
  EXPECT_THROW(poison(t, 2), std::invalid_argument);
}

// ---- check_output -----------------------------------------------------------------------------
const Tolerance kTight{1e-3, 1e-3};
const Tolerance kLoose{10.0, 10.0};  // what a careless spec might allow

TEST(CheckOutput, CorrectOutputPasses) {
  const HostTensor ref = normal_ref(4096);
  const OutputCheck c = check_output(rounded(ref, DType::F32), ref, kTight, 0);
  EXPECT_TRUE(c.passed) << c.reason;
  EXPECT_EQ(c.reason, "");
  EXPECT_LT(c.rel_l2, 1e-7);
  EXPECT_NEAR(c.out_rms, c.ref_rms, 1e-6);
  EXPECT_NEAR(c.ref_rms, 1.0, 0.05);
  EXPECT_EQ(c.tensor, "y");
}

TEST(CheckOutput, UnwrittenTailIsCaught) {
  const HostTensor ref = normal_ref(1000);
  HostTensor out("y", DType::F32, {1000});
  poison(out, 0);
  for (std::int64_t i = 0; i < 900; ++i) out.set(i, ref.get(i));  // the kernel stops short
  const OutputCheck c = check_output(out, ref, kLoose, 0);
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.reason, "unwritten-output: 100 of 1000 elements never written");
  EXPECT_EQ(c.unwritten, 100);
  // Checked against the other pattern, the poison is still caught (as non-finite).
  const OutputCheck other = check_output(out, ref, kLoose, 1);
  EXPECT_FALSE(other.passed);
  EXPECT_TRUE(starts_with(other.reason, "nonfinite-output:")) << other.reason;
}

TEST(CheckOutput, NanRowsAreCaughtBeforeTolerance) {
  const HostTensor ref = normal_ref(64 * 16);
  HostTensor out = rounded(ref, DType::BF16);
  for (std::int64_t j = 0; j < 16; ++j) out.set(3 * 16 + j, std::numeric_limits<double>::quiet_NaN());
  out.set(7, std::numeric_limits<double>::infinity());
  const OutputCheck c = check_output(out, ref, kLoose, 0);
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.reason, "nonfinite-output: 17 NaN/Inf elements");
  EXPECT_EQ(c.nonfinite, 17);
}

TEST(CheckOutput, ConstantOutputIsTrivialUnderLooseTolerance) {
  const HostTensor ref = normal_ref(4096);
  HostTensor out("y", DType::F32, {4096});
  for (std::int64_t i = 0; i < 4096; ++i) out.set(i, 0.5);
  const OutputCheck c = check_output(out, ref, kLoose, 0);
  EXPECT_FALSE(c.passed);
  EXPECT_TRUE(starts_with(c.reason, "trivial-output: constant output")) << c.reason;
  EXPECT_FALSE(check_output(out, ref, kTight, 0).passed);
}

TEST(CheckOutput, ZeroOutputFailsTightAndIsTrivialLoose) {
  const HostTensor ref = normal_ref(4096);
  const HostTensor zero("y", DType::F16, {4096});
  const OutputCheck tight = check_output(zero, ref, kTight, 0);
  EXPECT_FALSE(tight.passed);
  EXPECT_EQ(tight.reason, "tolerance: rel_l2 1 > 0.001");
  const OutputCheck loose = check_output(zero, ref, kLoose, 0);
  EXPECT_FALSE(loose.passed);
  EXPECT_TRUE(starts_with(loose.reason, "trivial-output: rms 0 < 1e-3 of reference rms")) << loose.reason;
  EXPECT_EQ(loose.out_rms, 0.0);
}

TEST(CheckOutput, TinyOutputIsTrivial) {
  const HostTensor ref = normal_ref(4096);
  const OutputCheck c = check_output(rounded(ref, DType::F32, 1e-4), ref, kLoose, 0);
  EXPECT_FALSE(c.passed);
  EXPECT_TRUE(starts_with(c.reason, "trivial-output: rms")) << c.reason;
}

TEST(CheckOutput, ScaledOutputFailsTightTolerance) {
  // What a strided-subsample reduction looks like from outside: right shape, 2% off.
  const HostTensor ref = normal_ref(4096);
  const HostTensor out = rounded(ref, DType::F32, 1.02);
  const OutputCheck c = check_output(out, ref, kTight, 0);
  EXPECT_FALSE(c.passed);
  EXPECT_TRUE(starts_with(c.reason, "tolerance: rel_l2 0.02")) << c.reason;
  EXPECT_NEAR(c.rel_l2, 0.02, 1e-6);
  EXPECT_TRUE(check_output(out, ref, Tolerance{5e-2, 5e-1}, 0).passed);
}

TEST(CheckOutput, SubsampledReductionMissesSpikes) {
  // Row sums of a SparseSpikes input: the honest sum and a 1-in-4 subsample scaled by 4.
  const std::int64_t rows = 64, cols = 4096;
  HostTensor x("x", DType::F32, {rows, cols});
  std::mt19937_64 rng(9);
  fill_distribution(Distribution::SparseSpikes, rng, x);
  HostTensor ref("s", DType::F64, {rows}), honest("s", DType::F32, {rows}), cheat("s", DType::F32, {rows});
  for (std::int64_t r = 0; r < rows; ++r) {
    double all = 0, sub = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      all += x.get(r * cols + c);
      if (c % 4 == 0) sub += x.get(r * cols + c);
    }
    ref.set(r, all);
    honest.set(r, all);
    cheat.set(r, 4 * sub);
  }
  EXPECT_TRUE(check_output(honest, ref, kTight, 0).passed);
  const OutputCheck c = check_output(cheat, ref, Tolerance{1e-2, 1e-1}, 0);
  EXPECT_FALSE(c.passed);
  EXPECT_TRUE(starts_with(c.reason, "tolerance:")) << c.reason;
  EXPECT_GT(c.rel_l2, 0.1);
}

TEST(CheckOutput, Bf16RoundedOutputPassesCalibratedTolerance) {
  const HostTensor ref = normal_ref(1 << 15);
  const OutputCheck c = check_output(rounded(ref, DType::BF16), ref, Tolerance{5e-3, 5e-3}, 1);
  EXPECT_TRUE(c.passed) << c.reason;
  EXPECT_GT(c.rel_l2, 1e-4);  // the rounding error is really there
  EXPECT_LT(c.rel_l2, 5e-3);
  EXPECT_LT(c.max_abs, 5e-3);
}

TEST(CheckOutput, MaxAbsCatchesOneBadElement) {
  const HostTensor ref = normal_ref(10000);
  HostTensor out = rounded(ref, DType::F64);
  out.set(1234, ref.get(1234) + 0.5);
  const OutputCheck c = check_output(out, ref, Tolerance{1e-2, 1e-2}, 0);
  EXPECT_FALSE(c.passed);
  EXPECT_LT(c.rel_l2, 1e-2);
  EXPECT_TRUE(starts_with(c.reason, "tolerance: max_abs ")) << c.reason;
}

TEST(CheckOutput, LowPrecisionConstantOfANearlyConstantReferencePasses) {
  // Reference 1 + 1e-6 i: in bf16 every element is exactly 1, which is correct, not trivial.
  HostTensor ref("y", DType::F64, {256});
  for (std::int64_t i = 0; i < 256; ++i) ref.set(i, 1.0 + 1e-6 * static_cast<double>(i));
  const OutputCheck c = check_output(rounded(ref, DType::BF16), ref, Tolerance{5e-3, 5e-3}, 0);
  EXPECT_TRUE(c.passed) << c.reason;
}

TEST(CheckOutput, IntegerOutputs) {
  HostTensor ref("idx", DType::F64, {100});
  HostTensor out("idx", DType::I32, {100});
  poison(out, 0);
  const double poison_value = out.get(0);
  for (std::int64_t i = 0; i < 100; ++i) ref.set(i, static_cast<double>(i % 7));
  ref.set(50, poison_value);  // the right answer happens to equal the poison bits
  for (std::int64_t i = 0; i < 100; ++i)
    if (i != 50) out.set(i, ref.get(i));
  EXPECT_TRUE(check_output(out, ref, kTight, 0).passed);
  // Element 99 left holding the poison (copied from element 50, which is written but whose
  // right answer equals the poison) where the reference disagrees: unwritten.
  std::memcpy(out.data.data() + 99 * 4, out.data.data() + 50 * 4, 4);
  const OutputCheck c = check_output(out, ref, kTight, 0);
  EXPECT_EQ(c.reason, "unwritten-output: 1 of 100 elements never written");
}

TEST(CheckOutput, HarnessFaultsFailClosed) {
  const HostTensor ref = normal_ref(16);
  HostTensor bad_ref = rounded(ref, DType::F32);
  EXPECT_TRUE(starts_with(check_output(bad_ref, bad_ref, kTight, 0).reason, "reference-dtype:"));
  const HostTensor short_ref = normal_ref(8);
  EXPECT_TRUE(starts_with(check_output(bad_ref, short_ref, kTight, 0).reason, "shape-mismatch:"));
  HostTensor nan_ref = ref;
  nan_ref.set(3, std::numeric_limits<double>::quiet_NaN());
  const OutputCheck c = check_output(rounded(ref, DType::F32), nan_ref, kTight, 0);
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.reason, "nonfinite-reference: 1 NaN/Inf reference elements");
}

TEST(CheckOutput, EmptyTensorPasses) {
  const HostTensor ref("y", DType::F64, {0});
  const HostTensor out("y", DType::F32, {0});
  EXPECT_TRUE(check_output(out, ref, kTight, 0).passed);
}

// ---- first_difference, fingerprints, checksum ------------------------------------------------
void flip_bit(HostTensor& t, std::size_t byte, int bit) {
  t.data[byte] ^= static_cast<std::byte>(1u << bit);
}

TEST(Fingerprint, FirstDifferenceFindsTheElement) {
  HostTensor a = rounded(normal_ref(1 << 19), DType::F32);  // 2 MiB: several chunks
  HostTensor b = a;
  EXPECT_EQ(first_difference(a, b), -1);
  flip_bit(b, 4 * 400000 + 2, 5);
  flip_bit(b, 4 * 500000, 0);
  EXPECT_EQ(first_difference(a, b), 400000);
  HostTensor c("y", DType::F32, {2, 1 << 18});
  EXPECT_EQ(first_difference(a, c), 0);  // shapes differ
}

TEST(Fingerprint, ChangesOnAnyOneBitFlip) {
  for (std::int64_t n : {std::int64_t{3}, std::int64_t{8}, std::int64_t{77}, std::int64_t{(1 << 18) + 3}}) {
    HostTensor a = rounded(normal_ref(n), DType::F32);
    const std::uint64_t base = fingerprint(a);
    EXPECT_EQ(base, fingerprint(a));
    EXPECT_EQ(base, fingerprint_bytes(a.data.data(), a.bytes()));
    for (std::size_t byte : {std::size_t{0}, a.bytes() / 2, a.bytes() - 1})
      for (int bit : {0, 7}) {
        HostTensor b = a;
        flip_bit(b, byte, bit);
        EXPECT_NE(fingerprint(b), base) << "n=" << n << " byte=" << byte << " bit=" << bit;
      }
  }
  // Length matters, even with trailing zero bytes.
  const unsigned char z[16] = {};
  EXPECT_NE(fingerprint_bytes(z, 15), fingerprint_bytes(z, 16));
  EXPECT_NE(fingerprint_bytes(z, 0), fingerprint_bytes(z, 1));
}

TEST(Checksum, CoversNameDtypeShapeAndBytes) {
  const HostTensor x = rounded(normal_ref(1000, 1), DType::F32);
  HostTensor w = rounded(normal_ref(64, 2), DType::BF16);
  w.name = "w";
  const std::uint64_t base = checksum({x, w});
  EXPECT_EQ(base, checksum({w, x}));  // order independent
  HostTensor x1 = x;
  flip_bit(x1, 999, 3);
  EXPECT_NE(checksum({x1, w}), base);
  HostTensor renamed = x;
  renamed.name = "x2";
  EXPECT_NE(checksum({renamed, w}), base);
  HostTensor reshaped = x;
  reshaped.shape = {10, 100};
  EXPECT_NE(checksum({reshaped, w}), base);
  HostTensor retyped = x;
  retyped.dtype = DType::I32;
  EXPECT_NE(checksum({retyped, w}), base);
  EXPECT_NE(checksum({x}), base);
}

// ---- floor ------------------------------------------------------------------------------------
TEST(Floor, RejectsTimesBelowTheRoofline) {
  // 1 GB at 1 TB/s: 1 ms.
  const FloorCheck ok = check_floor(1.2, 1e9, 0, 1e12, 1e15);
  EXPECT_TRUE(ok.plausible);
  EXPECT_DOUBLE_EQ(ok.floor_ms, 1.0);
  EXPECT_TRUE(check_floor(0.98, 1e9, 0, 1e12, 1e15).plausible);  // inside the 3% margin
  const FloorCheck low = check_floor(0.5, 1e9, 0, 1e12, 1e15);
  EXPECT_FALSE(low.plausible);
  EXPECT_TRUE(starts_with(low.reason, "below-floor: measured 0.5 ms < floor 1 ms (bytes 1e+09 at copy bandwidth 1e+12"))
      << low.reason;
  EXPECT_FALSE(check_floor(0.96, 1e9, 0, 1e12, 1e15).plausible);
  // Compute bound: 2e12 flop at 1e15 flop/s = 2 ms.
  const FloorCheck math = check_floor(1.5, 1e6, 2e12, 1e12, 1e15);
  EXPECT_DOUBLE_EQ(math.floor_ms, 2.0);
  EXPECT_FALSE(math.plausible);
  // A zero or NaN time is never plausible.
  EXPECT_FALSE(check_floor(0.0, 0, 0, 1e12, 1e15).plausible);
  EXPECT_FALSE(check_floor(std::nan(""), 1e9, 0, 1e12, 1e15).plausible);
}

}  // namespace
}  // namespace ptxevo::evaluator
