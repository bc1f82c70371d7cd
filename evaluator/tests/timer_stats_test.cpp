#include "evaluator/timer_stats.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

namespace ptxevo::evaluator {
namespace {

TEST(Summarize, EmptyInput) {
  const SampleStats s = summarize({});
  EXPECT_EQ(s.n, 0u);
  EXPECT_EQ(s.median, 0);
  EXPECT_EQ(s.rel_ci_width(), 0);
  const PairedRatio p = paired_ratio({}, {});
  EXPECT_EQ(p.n, 0u);
  EXPECT_EQ(p.ratio, 1);
  EXPECT_FALSE(p.significant());
}

TEST(Summarize, SmallSamples) {
  const SampleStats one = summarize({3.0});
  EXPECT_EQ(one.n, 1u);
  EXPECT_EQ(one.median, 3.0);
  EXPECT_EQ(one.ci_low, 3.0);
  EXPECT_EQ(one.ci_high, 3.0);
  const SampleStats even = summarize({4, 1, 3, 2});
  EXPECT_EQ(even.median, 2.5);
  EXPECT_EQ(even.mean, 2.5);
  EXPECT_EQ(even.min, 1);
  EXPECT_EQ(even.max, 4);
  EXPECT_EQ(even.ci_low, 1);  // n <= 5: no narrower interval reaches 95%
  EXPECT_EQ(even.ci_high, 4);
}

TEST(Summarize, ExactBinomialRanksForSmallN) {
  // n = 10: P(X <= 1) = 11/1024 <= 2.5% < P(X <= 2) = 56/1024, so [x(2), x(9)].
  std::vector<double> v;
  for (int i = 1; i <= 10; ++i) v.push_back(i * 1.0);
  const SampleStats s = summarize(v);
  EXPECT_EQ(s.median, 5.5);
  EXPECT_EQ(s.ci_low, 2);
  EXPECT_EQ(s.ci_high, 9);
  // n = 6: P(X = 0) = 1/64 <= 2.5%: [x(1), x(6)]; n = 20: [x(6), x(15)].
  std::vector<double> w;
  for (int i = 1; i <= 20; ++i) w.push_back(i * 1.0);
  const SampleStats t = summarize(w);
  EXPECT_EQ(t.ci_low, 6);
  EXPECT_EQ(t.ci_high, 15);
}

TEST(Summarize, NormalApproximationRanks) {
  // n = 100: j = floor(50 - 9.8) = 40, k = ceil(59.8) = 60 (1-based), on shuffled input.
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i * 0.5);
  std::mt19937 g(1);
  std::shuffle(v.begin(), v.end(), g);
  const SampleStats s = summarize(v);
  EXPECT_EQ(s.n, 100u);
  EXPECT_EQ(s.median, 25.25);
  EXPECT_EQ(s.ci_low, 20.0);
  EXPECT_EQ(s.ci_high, 30.0);
  EXPECT_NEAR(s.rel_ci_width(), 10.0 / 25.25, 1e-12);
}

TEST(Summarize, CoverageIsAboutNinetyFivePercent) {
  // Empirical coverage of the true median (0 for N(0,1)) over many trials, for small and large n.
  std::mt19937_64 g(3);
  std::normal_distribution<double> nd;
  for (std::size_t n : {std::size_t{12}, std::size_t{29}, std::size_t{30}, std::size_t{200}}) {
    int covered = 0;
    const int trials = 2000;
    for (int t = 0; t < trials; ++t) {
      std::vector<double> v(n);
      for (auto& x : v) x = nd(g);
      const SampleStats s = summarize(v);
      covered += s.ci_low <= 0 && 0 <= s.ci_high;
    }
    EXPECT_GT(covered, trials * 0.93) << "n=" << n;
    EXPECT_LT(covered, trials * 0.995) << "n=" << n;
  }
}

TEST(Summarize, NansAreDropped) {
  const SampleStats s = summarize({1.0, std::nan(""), 3.0});
  EXPECT_EQ(s.n, 2u);
  EXPECT_EQ(s.median, 2.0);
}

TEST(PairedRatio, DetectsAConsistentSpeedup) {
  std::mt19937_64 g(5);
  std::normal_distribution<double> noise(0, 0.01);
  std::vector<double> base, cand, same;
  for (int i = 0; i < 50; ++i) {
    const double drift = 1.0 + 0.2 * std::sin(i * 0.3);  // clock drift affects both alike
    base.push_back(drift * (1.0 + noise(g)));
    cand.push_back(drift * 0.8 * (1.0 + noise(g)));
    same.push_back(drift * (1.0 + noise(g)));
  }
  const PairedRatio p = paired_ratio(base, cand);
  EXPECT_EQ(p.n, 50u);
  EXPECT_NEAR(p.ratio, 1.25, 0.02);
  EXPECT_TRUE(p.significant());
  EXPECT_LE(p.ci_low, p.ratio);
  EXPECT_GE(p.ci_high, p.ratio);
  const PairedRatio q = paired_ratio(base, same);
  EXPECT_NEAR(q.ratio, 1.0, 0.02);
  EXPECT_FALSE(q.significant());
  const PairedRatio slower = paired_ratio(cand, base);
  EXPECT_TRUE(slower.significant());
  EXPECT_LT(slower.ci_high, 1);
}

TEST(PairedRatio, SizesMustMatch) {
  EXPECT_THROW(paired_ratio({1, 2}, {1}), std::invalid_argument);
}

// Pairs drawn with relative noise `sigma` until timing_done says stop; returns the count.
int pairs_until_done(double sigma, int min_samples, int max_samples, double width) {
  std::mt19937_64 g(11);
  std::normal_distribution<double> noise(0, sigma);
  std::vector<double> base, cand;
  while (!timing_done(base, cand, min_samples, max_samples, width)) {
    base.push_back(1.0 + noise(g));
    cand.push_back(0.9 * (1.0 + noise(g)));
  }
  return static_cast<int>(base.size());
}

TEST(TimingDone, QuietShapesStopAtTheMinimumNoisyOnesRunToTheMaximum) {
  EXPECT_EQ(pairs_until_done(0.0005, 10, 30, 0.01), 10);
  EXPECT_EQ(pairs_until_done(0.05, 10, 30, 0.01), 30);
  // In between: more pairs than the minimum, an even count, never past the maximum.
  const int mid = pairs_until_done(0.004, 10, 30, 0.01);
  EXPECT_GE(mid, 10);
  EXPECT_LE(mid, 30);
  EXPECT_EQ(mid % 2, 0);
}

TEST(TimingDone, AWidthOfZeroOrAMinimumAtTheMaximumTakesEverySample) {
  EXPECT_EQ(pairs_until_done(0.0005, 10, 30, 0.0), 30);
  EXPECT_EQ(pairs_until_done(0.0005, 30, 30, 0.01), 30);
  EXPECT_EQ(pairs_until_done(0.0005, 40, 30, 0.01), 30);  // a minimum above the maximum is the maximum
}

}  // namespace
}  // namespace ptxevo::evaluator
