#include "evaluator/timer_stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace ptxevo::evaluator {
namespace {

// 1-based ranks (j, k) of the order statistics bounding a 95% CI of the median. The number of
// samples below the median is Binomial(n, 1/2): exact tail sums for small n, the normal
// approximation (j = n/2 - 1.96 sqrt(n)/2) above. For n <= 5 no pair reaches 95%, so the
// interval is the whole range [min, max].
std::pair<std::size_t, std::size_t> median_ci_ranks(std::size_t n) {
  if (n < 30) {
    // Largest j with P(X <= j - 1) <= 0.025; the interval is [x_(j), x_(n+1-j)].
    double p = std::ldexp(1.0, -static_cast<int>(n));  // P(X = 0)
    double cdf = p;
    std::size_t j = 1;
    for (std::size_t i = 1; cdf <= 0.025 && i < n; ++i) {
      j = i;  // P(X <= i - 1) <= 0.025 holds
      p = p * static_cast<double>(n - i + 1) / static_cast<double>(i);
      cdf += p;
    }
    return {j, n + 1 - j};
  }
  const double h = 0.98 * std::sqrt(static_cast<double>(n));
  const double half = static_cast<double>(n) / 2;
  const auto j = static_cast<std::size_t>(std::max(1.0, std::floor(half - h)));
  const auto k = static_cast<std::size_t>(std::min(static_cast<double>(n), std::ceil(half + h)));
  return {j, k};
}

// Median and CI of `v` (NaNs dropped: they have no rank). Sorts `v` in place.
struct Ordered {
  std::size_t n = 0;
  double median = 0, lo = 0, hi = 0;
};
Ordered order_stats(std::vector<double>& v) {
  std::erase_if(v, [](double x) { return std::isnan(x); });
  Ordered o;
  o.n = v.size();
  if (v.empty()) return o;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  o.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  const auto [j, k] = median_ci_ranks(n);
  o.lo = v[j - 1];
  o.hi = v[k - 1];
  return o;
}

}  // namespace

SampleStats summarize(std::vector<double> samples) {
  SampleStats s;
  const Ordered o = order_stats(samples);
  s.n = o.n;
  if (o.n == 0) return s;
  s.median = o.median;
  s.ci_low = o.lo;
  s.ci_high = o.hi;
  s.min = samples.front();
  s.max = samples.back();
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(o.n);
  return s;
}

PairedRatio paired_ratio(const std::vector<double>& baseline, const std::vector<double>& candidate) {
  if (baseline.size() != candidate.size())
    throw std::invalid_argument("paired_ratio: " + std::to_string(baseline.size()) + " baseline samples but " +
                                std::to_string(candidate.size()) + " candidate samples");
  std::vector<double> r(baseline.size());
  for (std::size_t i = 0; i < r.size(); ++i) r[i] = baseline[i] / candidate[i];
  PairedRatio p;
  const Ordered o = order_stats(r);
  p.n = o.n;
  if (o.n == 0) return p;
  p.ratio = o.median;
  p.ci_low = o.lo;
  p.ci_high = o.hi;
  return p;
}

bool timing_done(const std::vector<double>& baseline, const std::vector<double>& candidate, int min_samples,
                 int max_samples, double stop_rel_ci) {
  const auto n = static_cast<int>(std::min(baseline.size(), candidate.size()));
  if (n >= max_samples) return true;
  if (stop_rel_ci <= 0 || n < std::min(min_samples, max_samples) || n % 2 != 0) return false;
  const PairedRatio p = paired_ratio(baseline, candidate);
  return p.ci_high - p.ci_low <= stop_rel_ci * p.ratio;
}

}  // namespace ptxevo::evaluator
