#include "search/prior/rank_metrics.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace ptxevo::search::prior {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
using V = std::vector<double>;

TEST(RankMetrics, AverageRanksOfTies) {
  const V r = average_ranks(V{5, 6, 7, 8, 7});
  EXPECT_EQ(r, (V{1, 2, 3.5, 5, 3.5}));
  EXPECT_EQ(average_ranks(V{kInf, 1, kInf}), (V{2.5, 1, 2.5}));
}

TEST(RankMetrics, SpearmanByHand) {
  // Ranks (1..5) vs (1, 2, 3.5, 5, 3.5): deviations from 3 give sum ab = 8, sum aa = 10,
  // sum bb = 9.5, so rho = 8 / sqrt(95).
  EXPECT_NEAR(spearman(V{1, 2, 3, 4, 5}, V{5, 6, 7, 8, 7}), 8.0 / std::sqrt(95.0), 1e-15);
  EXPECT_DOUBLE_EQ(spearman(V{1, 2, 3}, V{30, 20, 10}), -1.0);
  EXPECT_DOUBLE_EQ(spearman(V{1, 2, 3}, V{1, 4, 9}), 1.0);  // monotone, not linear
  EXPECT_TRUE(std::isnan(spearman(V{1, 1, 1}, V{1, 2, 3})));
  EXPECT_TRUE(std::isnan(spearman(V{1}, V{1})));
}

TEST(RankMetrics, PairwiseAccuracyByHand) {
  // One discordant pair (1, 2) out of 6.
  EXPECT_DOUBLE_EQ(pairwise_accuracy(V{1, 2, 3, 4}, V{1, 3, 2, 4}), 5.0 / 6.0);
  // A tie in the prediction counts half.
  EXPECT_DOUBLE_EQ(pairwise_accuracy(V{1, 1, 3, 4}, V{1, 2, 3, 4}), 5.5 / 6.0);
  // Pairs tied in the truth do not count: only (0, 2) and (1, 2) remain, both right.
  EXPECT_DOUBLE_EQ(pairwise_accuracy(V{2, 1, 3}, V{1, 1, 5}), 1.0);
  EXPECT_TRUE(std::isnan(pairwise_accuracy(V{1, 2}, V{3, 3})));
}

TEST(RankMetrics, TopKRecallByHand) {
  const V pred{0.1, 0.5, 0.2, 0.9, 0.3}, truth{1, 2, 3, 4, 5};
  EXPECT_DOUBLE_EQ(top_k_recall(pred, truth, 1), 1.0);        // {0} vs {0}
  EXPECT_DOUBLE_EQ(top_k_recall(pred, truth, 2), 0.5);        // {0, 2} vs {0, 1}
  EXPECT_DOUBLE_EQ(top_k_recall(pred, truth, 3), 2.0 / 3.0);  // {0, 2, 4} vs {0, 1, 2}
  EXPECT_DOUBLE_EQ(top_k_recall(pred, truth, 10), 1.0);       // capped at n
  EXPECT_TRUE(std::isnan(top_k_recall(pred, truth, 0)));
}

TEST(RankMetrics, WithinGroupsAverages) {
  // Group 1 perfectly ranked, group 2 reversed, group 3 a single row (undefined, skipped).
  const V pred{1, 2, 3, 3, 2, 1, 9};
  const V truth{10, 20, 30, 1, 2, 3, 0};
  const std::vector<GroupId> g{1, 1, 1, 2, 2, 2, 3};
  const GroupedMetric rho = spearman_within_groups(pred, truth, g);
  EXPECT_EQ(rho.groups, 2u);
  EXPECT_DOUBLE_EQ(rho.mean, 0.0);
  const GroupedMetric pairs = pairwise_accuracy_within_groups(pred, truth, g);
  EXPECT_DOUBLE_EQ(pairs.mean, 0.5);
  const GroupedMetric top1 = top_k_recall_within_groups(pred, truth, g, 1);
  EXPECT_EQ(top1.groups, 3u);  // a single row is its own top 1
  EXPECT_DOUBLE_EQ(top1.mean, 2.0 / 3.0);
  // Levels differ wildly between groups; within-group metrics ignore them.
  const V shifted{1, 2, 3, 103, 102, 101, 9};
  EXPECT_DOUBLE_EQ(spearman_within_groups(shifted, truth, g).mean, 0.0);
  EXPECT_TRUE(std::isnan(spearman_within_groups(V{1}, V{1}, std::vector<GroupId>{4}).mean));
}

TEST(RankMetrics, MedianWithCensoredValues) {
  EXPECT_DOUBLE_EQ(median(V{3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median(V{4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median(V{1, kInf, 3}), 3.0);
  EXPECT_DOUBLE_EQ(median(V{1, 2, 3, kInf}), 2.5);
  EXPECT_EQ(median(V{1, 2, kInf, kInf}), kInf);
  EXPECT_EQ(median(V{1, kInf, kInf}), kInf);
}

TEST(RankMetrics, BootstrapIntervalCoversTheTrueRatio) {
  // Log-normal samples with medians 30 and 100: true ratio 0.3. Across 100 independent
  // experiments the 95% interval should cover it in roughly 95 (binomial sd ~2).
  std::mt19937_64 rng(12345);
  std::lognormal_distribution<double> warm(std::log(30.0), 0.5), cold(std::log(100.0), 0.5);
  int covered = 0;
  V a(20), b(20);
  for (int experiment = 0; experiment < 100; ++experiment) {
    for (double& x : a) x = warm(rng);
    for (double& x : b) x = cold(rng);
    const RatioInterval ci = bootstrap_median_ratio(a, b, rng, 1000);
    EXPECT_LE(ci.lower, ci.ratio);
    EXPECT_GE(ci.upper, ci.ratio);
    covered += ci.lower <= 0.3 && 0.3 <= ci.upper;
  }
  EXPECT_GE(covered, 85);
  EXPECT_LE(covered, 100);

  // The default: 10,000 resamples, seeded, reproducible.
  std::mt19937_64 r1(7), r2(7);
  const RatioInterval c1 = bootstrap_median_ratio(a, b, r1), c2 = bootstrap_median_ratio(a, b, r2);
  EXPECT_EQ(c1.resamples, 10000u);
  EXPECT_EQ(c1.lower, c2.lower);
  EXPECT_EQ(c1.upper, c2.upper);
  EXPECT_LT(c1.lower, c1.upper);
}

TEST(RankMetrics, BootstrapHandlesCensoredRuns) {
  std::mt19937_64 rng(1);
  // Cold runs mostly never reach the target: median E_cold infinite, ratio 0, no NaN anywhere.
  const V warm{10, 12, 11, 9, kInf}, cold{kInf, kInf, kInf, 50, 60};
  const RatioInterval a = bootstrap_median_ratio(warm, cold, rng, 2000);
  EXPECT_EQ(a.ratio, 0.0);
  EXPECT_EQ(a.lower, 0.0);
  // A resample with 3 or more of the censored warm run has an infinite warm median: probability
  // 1 - P(Bin(5, 0.2) <= 2) = 5.8%, more than the 2.5% upper tail, so the upper bound is infinite.
  EXPECT_EQ(a.upper, kInf);
  // Warm runs mostly censored: the ratio is infinite and so is the upper bound.
  const RatioInterval b = bootstrap_median_ratio(cold, warm, rng, 2000);
  EXPECT_EQ(b.ratio, kInf);
  EXPECT_EQ(b.upper, kInf);
  // Both censored: undefined, read conservatively as infinite.
  const RatioInterval c = bootstrap_median_ratio(V{kInf}, V{kInf}, rng, 100);
  EXPECT_EQ(c.ratio, kInf);
  EXPECT_EQ(c.lower, kInf);
}

TEST(RankMetrics, MannWhitneyByHand) {
  // a = {3, 5, 7, 9}, b = {1, 2, 4, 5}. Joint ranks: 1(b) 2(b) 3(a) 4(b) 5.5(a) 5.5(b) 7(a) 8(a);
  // R_a = 23.5, U = 23.5 - 10 = 13.5, mean 8, one tie of size 2:
  // var = 16/12 * (9 - 6/56) = 11.857142857..., z = (13.5 - 8 - 0.5) / sqrt(var) = 1.4520446739,
  // p = 1 - Phi(z) = 0.0732445920 (math.erfc in Python).
  const MannWhitney t = mann_whitney_greater(V{3, 5, 7, 9}, V{1, 2, 4, 5});
  EXPECT_DOUBLE_EQ(t.u, 13.5);
  EXPECT_NEAR(t.z, 1.452044673878789, 1e-12);
  EXPECT_NEAR(t.p_value, 0.07324459196760427, 1e-12);
  // The other direction is far from significant.
  EXPECT_GT(mann_whitney_greater(V{1, 2, 4, 5}, V{3, 5, 7, 9}).p_value, 0.9);
  // Clear separation, including censored (infinite) values in the larger sample.
  const MannWhitney sep = mann_whitney_greater(V{10, 11, 12, 13, 14, kInf, kInf}, V{1, 2, 3, 4, 5, 6, 7});
  EXPECT_DOUBLE_EQ(sep.u, 49.0);
  EXPECT_LT(sep.p_value, 0.01);
  EXPECT_DOUBLE_EQ(mann_whitney_greater(V{2, 2}, V{2, 2, 2}).p_value, 1.0);
}

}  // namespace
}  // namespace ptxevo::search::prior
