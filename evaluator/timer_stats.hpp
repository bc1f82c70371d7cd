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

// Sequential stopping for interleaved timing: true once max_samples pairs are in, or once at
// least min_samples pairs (an even count, so both orders weigh the same) give a paired-ratio CI
// narrower than stop_rel_ci of the ratio. stop_rel_ci <= 0 never stops early.
bool timing_done(const std::vector<double>& baseline, const std::vector<double>& candidate, int min_samples,
                 int max_samples, double stop_rel_ci);

}  // namespace ptxevo::evaluator
