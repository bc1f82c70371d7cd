// Statistics for timings: median with a distribution-free 95% confidence interval, and the
// paired ratio of interleaved baseline / candidate samples.
#pragma once

#include <vector>

namespace ptxevo::evaluator {

struct SampleStats {
  std::size_t n = 0;
  double median = 0, ci_low = 0, ci_high = 0;  // 95% CI of the median (order statistics)
  double mean = 0, min = 0, max = 0;
  double rel_ci_width() const { return median > 0 ? (ci_high - ci_low) / median : 0; }
};
SampleStats summarize(std::vector<double> samples);

struct PairedRatio {
  std::size_t n = 0;
  double ratio = 1;  // median over pairs of baseline_i / candidate_i (> 1: candidate faster)
  double ci_low = 1, ci_high = 1;
  bool significant() const { return ci_low > 1 || ci_high < 1; }
};
// baseline[i] and candidate[i] were measured back to back; sizes must match.
PairedRatio paired_ratio(const std::vector<double>& baseline, const std::vector<double>& candidate);

}  // namespace ptxevo::evaluator
