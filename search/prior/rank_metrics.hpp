// Ranking metrics for the cost model's quality gates (docs/prior_study.md 6.5) and the statistics
// of the replay proof (docs/prior_study.md 6.4). Convention: smaller is better (log time,
// evaluations to reach a target), so "top k" means the k smallest values.
#pragma once

#include <cstddef>
#include <random>
#include <span>
#include <vector>

#include "search/prior/group_centering.hpp"

namespace ptxevo::search::prior {

// Ranks 1..n, ties get the average of the ranks they span. Infinities rank last (or first) and
// tie with each other; NaN throws std::invalid_argument.
std::vector<double> average_ranks(std::span<const double> v);

// Spearman's rho: Pearson correlation of the average ranks. NaN when fewer than 2 values or
// either side is constant (undefined).
double spearman(std::span<const double> predicted, std::span<const double> truth);
// Fraction of pairs with different truth that the prediction orders the same way; a tie in the
// prediction counts half. NaN when no pair has different truth. O(n^2) per call.
double pairwise_accuracy(std::span<const double> predicted, std::span<const double> truth);
// |k smallest by prediction  ∩  k smallest by truth| / k, k capped at n; ties broken by index.
// NaN when the input is empty or k == 0.
double top_k_recall(std::span<const double> predicted, std::span<const double> truth, std::size_t k);

// A metric computed per group and averaged (unweighted) over the groups where it is defined.
struct GroupedMetric {
  double mean = 0;         // NaN when no group has a defined value
  std::size_t groups = 0;  // groups that contributed
};
GroupedMetric spearman_within_groups(std::span<const double> predicted, std::span<const double> truth,
                                     std::span<const GroupId> groups);
GroupedMetric pairwise_accuracy_within_groups(std::span<const double> predicted, std::span<const double> truth,
                                              std::span<const GroupId> groups);
GroupedMetric top_k_recall_within_groups(std::span<const double> predicted, std::span<const double> truth,
                                         std::span<const GroupId> groups, std::size_t k);

// Median, +infinity allowed (censored runs): with an even count, the mean of the two middle
// values, so a median touching an infinity is infinite. Throws on empty input or NaN.
double median(std::span<const double> v);

// Percentile-bootstrap confidence interval of median(numerator) / median(denominator), each
// sample resampled independently with replacement (the seeds of each arm). A ratio whose
// numerator median is infinite, or that is undefined (inf/inf, 0/0), counts as +infinity: the
// conservative reading for R = median E_warm / median E_cold, which must not claim a speedup
// it cannot show. Bounds are order statistics, so they may be infinite.
struct RatioInterval {
  double ratio = 0;  // on the original samples
  double lower = 0, upper = 0;
  std::size_t resamples = 0;
};
RatioInterval bootstrap_median_ratio(std::span<const double> numerator, std::span<const double> denominator,
                                     std::mt19937_64& rng, std::size_t resamples = 10000, double confidence = 0.95);

// One-sided Mann-Whitney U test, H1: values in `a` tend to be larger than in `b`. Normal
// approximation with the tie correction of the variance and a 0.5 continuity correction.
// Infinities are ordinary (largest) ranks. With every value tied there is no evidence: p = 1.
struct MannWhitney {
  double u = 0;  // U of sample a: pairs (a_i, b_j) with a_i > b_j, ties counting half
  double z = 0;
  double p_value = 1;
};
MannWhitney mann_whitney_greater(std::span<const double> a, std::span<const double> b);

}  // namespace ptxevo::search::prior
