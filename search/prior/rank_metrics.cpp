#include "search/prior/rank_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

namespace ptxevo::search::prior {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

void check_pair(std::span<const double> a, std::span<const double> b) {
  if (a.size() != b.size()) throw std::invalid_argument("rank metric: inputs differ in size");
}

// Indices 0..n-1 sorted by value, ties by index, so every selection is deterministic.
std::vector<std::size_t> order_by(std::span<const double> v) {
  std::vector<std::size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  // std::sort with the index as tie-break: libstdc++ 12's stable_sort trips clang's deprecation
  // of get_temporary_buffer under -Werror.
  std::sort(idx.begin(), idx.end(), [&](std::size_t i, std::size_t j) { return v[i] != v[j] ? v[i] < v[j] : i < j; });
  return idx;
}

template <class Metric>
GroupedMetric within_groups(std::span<const double> predicted, std::span<const double> truth,
                            std::span<const GroupId> groups, Metric metric) {
  check_pair(predicted, truth);
  if (groups.size() != truth.size()) throw std::invalid_argument("rank metric: groups differ in size");
  std::unordered_map<GroupId, std::size_t> index;
  std::vector<std::vector<std::size_t>> members;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto [it, inserted] = index.try_emplace(groups[i], members.size());
    if (inserted) members.emplace_back();
    members[it->second].push_back(i);
  }
  GroupedMetric out;
  double sum = 0;
  std::vector<double> p, t;
  for (const auto& rows : members) {
    p.clear();
    t.clear();
    for (const std::size_t i : rows) {
      p.push_back(predicted[i]);
      t.push_back(truth[i]);
    }
    const double value = metric(std::span<const double>(p), std::span<const double>(t));
    if (std::isnan(value)) continue;
    sum += value;
    ++out.groups;
  }
  out.mean = out.groups ? sum / static_cast<double>(out.groups) : kNaN;
  return out;
}

}  // namespace

std::vector<double> average_ranks(std::span<const double> v) {
  for (const double x : v)
    if (std::isnan(x)) throw std::invalid_argument("average_ranks: NaN");
  const std::vector<std::size_t> idx = order_by(v);
  std::vector<double> ranks(v.size());
  for (std::size_t start = 0; start < idx.size();) {
    std::size_t end = start + 1;
    while (end < idx.size() && v[idx[end]] == v[idx[start]]) ++end;
    const double rank = 0.5 * static_cast<double>(start + 1 + end);  // mean of start+1 .. end
    for (std::size_t k = start; k < end; ++k) ranks[idx[k]] = rank;
    start = end;
  }
  return ranks;
}

double spearman(std::span<const double> predicted, std::span<const double> truth) {
  check_pair(predicted, truth);
  const std::size_t n = predicted.size();
  if (n < 2) return kNaN;
  const std::vector<double> a = average_ranks(predicted), b = average_ranks(truth);
  const double mean = 0.5 * static_cast<double>(n + 1);  // the mean of average ranks is always this
  double sab = 0, saa = 0, sbb = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sab += (a[i] - mean) * (b[i] - mean);
    saa += (a[i] - mean) * (a[i] - mean);
    sbb += (b[i] - mean) * (b[i] - mean);
  }
  if (saa <= 0 || sbb <= 0) return kNaN;
  return sab / std::sqrt(saa * sbb);
}

double pairwise_accuracy(std::span<const double> predicted, std::span<const double> truth) {
  check_pair(predicted, truth);
  double correct = 0;
  std::size_t pairs = 0;
  for (std::size_t i = 0; i < truth.size(); ++i)
    for (std::size_t j = i + 1; j < truth.size(); ++j) {
      if (truth[i] == truth[j]) continue;
      ++pairs;
      if (predicted[i] == predicted[j]) correct += 0.5;
      else if ((predicted[i] < predicted[j]) == (truth[i] < truth[j])) correct += 1.0;
    }
  return pairs ? correct / static_cast<double>(pairs) : kNaN;
}

double top_k_recall(std::span<const double> predicted, std::span<const double> truth, std::size_t k) {
  check_pair(predicted, truth);
  k = std::min(k, truth.size());
  if (k == 0) return kNaN;
  std::vector<std::size_t> by_pred = order_by(predicted), by_truth = order_by(truth);
  by_pred.resize(k);
  by_truth.resize(k);
  std::sort(by_pred.begin(), by_pred.end());
  std::sort(by_truth.begin(), by_truth.end());
  std::vector<std::size_t> common;
  std::set_intersection(by_pred.begin(), by_pred.end(), by_truth.begin(), by_truth.end(), std::back_inserter(common));
  return static_cast<double>(common.size()) / static_cast<double>(k);
}

GroupedMetric spearman_within_groups(std::span<const double> predicted, std::span<const double> truth,
                                     std::span<const GroupId> groups) {
  return within_groups(predicted, truth, groups, [](auto p, auto t) { return spearman(p, t); });
}

GroupedMetric pairwise_accuracy_within_groups(std::span<const double> predicted, std::span<const double> truth,
                                              std::span<const GroupId> groups) {
  return within_groups(predicted, truth, groups, [](auto p, auto t) { return pairwise_accuracy(p, t); });
}

GroupedMetric top_k_recall_within_groups(std::span<const double> predicted, std::span<const double> truth,
                                         std::span<const GroupId> groups, std::size_t k) {
  return within_groups(predicted, truth, groups, [k](auto p, auto t) { return top_k_recall(p, t, k); });
}

namespace {

// The median of s, reordering s (the bootstrap calls this 20,000 times on scratch buffers).
double median_in_place(std::vector<double>& s) {
  const std::size_t mid = s.size() / 2;
  std::nth_element(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(mid), s.end());
  const double upper = s[mid];
  if (s.size() % 2) return upper;
  const double lower = *std::max_element(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(mid));
  // (finite + inf) / 2 is inf, as wanted; only -inf beside +inf is undefined, read as +inf.
  const double m = 0.5 * (lower + upper);
  return std::isnan(m) ? kInf : m;
}

}  // namespace

double median(std::span<const double> v) {
  if (v.empty()) throw std::invalid_argument("median: empty sample");
  std::vector<double> s(v.begin(), v.end());
  for (const double x : s)
    if (std::isnan(x)) throw std::invalid_argument("median: NaN");
  return median_in_place(s);
}

namespace {

// See bootstrap_median_ratio: an infinite or undefined ratio is +infinity.
double median_ratio(double num, double den) {
  if (std::isinf(num) && num > 0) return kInf;
  const double r = num / den;
  return std::isnan(r) ? kInf : r;
}

}  // namespace

RatioInterval bootstrap_median_ratio(std::span<const double> numerator, std::span<const double> denominator,
                                     std::mt19937_64& rng, std::size_t resamples, double confidence) {
  if (numerator.empty() || denominator.empty()) throw std::invalid_argument("bootstrap_median_ratio: empty sample");
  if (resamples == 0 || !(confidence > 0 && confidence < 1))
    throw std::invalid_argument("bootstrap_median_ratio: bad resample count or confidence");
  RatioInterval out;
  out.ratio = median_ratio(median(numerator), median(denominator));
  out.resamples = resamples;

  std::vector<double> ratios(resamples), a(numerator.size()), b(denominator.size());
  std::uniform_int_distribution<std::size_t> pick_a(0, numerator.size() - 1), pick_b(0, denominator.size() - 1);
  for (double& r : ratios) {
    for (double& x : a) x = numerator[pick_a(rng)];
    for (double& x : b) x = denominator[pick_b(rng)];
    r = median_ratio(median_in_place(a), median_in_place(b));
  }
  std::sort(ratios.begin(), ratios.end());
  const double tail = 0.5 * (1.0 - confidence);
  const double last = static_cast<double>(resamples - 1);
  out.lower = ratios[static_cast<std::size_t>(std::floor(tail * last))];
  out.upper = ratios[static_cast<std::size_t>(std::ceil((1.0 - tail) * last))];
  return out;
}

MannWhitney mann_whitney_greater(std::span<const double> a, std::span<const double> b) {
  if (a.empty() || b.empty()) throw std::invalid_argument("mann_whitney_greater: empty sample");
  std::vector<double> all(a.begin(), a.end());
  all.insert(all.end(), b.begin(), b.end());
  const std::vector<double> ranks = average_ranks(all);
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size()), n = na + nb;
  double rank_sum_a = 0;
  for (std::size_t i = 0; i < a.size(); ++i) rank_sum_a += ranks[i];

  // Tie term sum(t^3 - t) over groups of equal values.
  std::sort(all.begin(), all.end());
  double ties = 0;
  for (std::size_t i = 0; i < all.size();) {
    std::size_t j = i + 1;
    while (j < all.size() && all[j] == all[i]) ++j;
    const double t = static_cast<double>(j - i);
    ties += t * t * t - t;
    i = j;
  }

  MannWhitney out;
  out.u = rank_sum_a - na * (na + 1) / 2;
  const double mean = na * nb / 2;
  const double var = na * nb / 12 * ((n + 1) - ties / (n * (n - 1)));
  if (!(var > 0)) return out;  // every value tied: no evidence either way
  out.z = (out.u - mean - 0.5) / std::sqrt(var);
  out.p_value = 0.5 * std::erfc(out.z / std::sqrt(2.0));
  return out;
}

}  // namespace ptxevo::search::prior
