#include "search/prior/source_weights.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "search/prior/rank_metrics.hpp"

namespace ptxevo::search::prior {
namespace {

void check_rows(const RowSet& r, const char* what) {
  const auto n = static_cast<std::size_t>(r.X.rows());
  if (static_cast<std::size_t>(r.y.size()) != n || static_cast<std::size_t>(r.w.size()) != n || r.groups.size() != n)
    throw std::invalid_argument(std::string("guard_old_rows: inconsistent sizes in ") + what);
}

// Rows of `r` at `idx`, optionally followed by every row of `extra`.
RowSet take(const RowSet& r, const std::vector<std::size_t>& idx, const RowSet* extra) {
  const std::size_t more = extra ? static_cast<std::size_t>(extra->X.rows()) : 0;
  const auto rows = static_cast<Eigen::Index>(idx.size() + more);
  RowSet out{Eigen::MatrixXd(rows, r.X.cols()), Eigen::VectorXd(rows), Eigen::VectorXd(rows), {}};
  out.groups.reserve(idx.size() + more);
  Eigen::Index k = 0;
  for (const std::size_t i : idx) {
    const auto s = static_cast<Eigen::Index>(i);
    out.X.row(k) = r.X.row(s);
    out.y(k) = r.y(s);
    out.w(k) = r.w(s);
    out.groups.push_back(r.groups[i]);
    ++k;
  }
  if (extra) {
    out.X.bottomRows(extra->X.rows()) = extra->X;
    out.y.tail(extra->y.size()) = extra->y;
    out.w.tail(extra->w.size()) = extra->w;
    out.groups.insert(out.groups.end(), extra->groups.begin(), extra->groups.end());
  }
  return out;
}

}  // namespace

double environment_weight(const Environment& source, const Environment& target, const SourceWeightOptions& o) {
  return source == target ? o.same_environment : o.other_environment;
}

double fade(double new_rows, double fade_rows) {
  if (!(fade_rows > 0) || !(new_rows >= 0)) throw std::invalid_argument("fade: counts must be positive");
  return fade_rows / (fade_rows + new_rows);
}

double source_row_weight(const Environment& source, const Environment& target, std::size_t new_rows,
                         const SourceWeightOptions& o) {
  return environment_weight(source, target, o) * fade(static_cast<double>(new_rows), o.fade_rows);
}

GuardDecision guard_old_rows(const RowSet& old_rows, const RowSet& new_rows, std::mt19937_64& rng,
                             const GuardOptions& o) {
  check_rows(old_rows, "old rows");
  check_rows(new_rows, "new rows");
  if (old_rows.X.rows() > 0 && old_rows.X.cols() != new_rows.X.cols())
    throw std::invalid_argument("guard_old_rows: old and new rows have different features");
  if (o.folds < 2) throw std::invalid_argument("guard_old_rows: need at least 2 folds");

  GuardDecision out;
  const std::size_t n = new_rows.groups.size();
  std::unordered_map<GroupId, std::vector<std::size_t>> by_group;
  std::vector<GroupId> order;  // first appearance, for a deterministic walk
  for (std::size_t i = 0; i < n; ++i) {
    auto& rows = by_group[new_rows.groups[i]];
    if (rows.empty()) order.push_back(new_rows.groups[i]);
    rows.push_back(i);
  }
  const bool rankable = std::any_of(order.begin(), order.end(), [&](GroupId g) { return by_group[g].size() >= 3; });
  if (n < 2 * o.folds || !rankable || old_rows.X.rows() == 0) return out;

  // Each group's rows in shuffled order, dealt round-robin into the folds (one running counter so
  // the folds also balance across groups).
  std::vector<std::size_t> fold(n);
  std::size_t deal = 0;
  for (const GroupId g : order) {
    std::vector<std::size_t> rows = by_group[g];
    std::shuffle(rows.begin(), rows.end(), rng);
    for (const std::size_t i : rows) fold[i] = deal++ % o.folds;
  }

  std::vector<double> pred_old(n), pred_new(n);
  for (std::size_t f = 0; f < o.folds; ++f) {
    std::vector<std::size_t> train, test;
    for (std::size_t i = 0; i < n; ++i) (fold[i] == f ? test : train).push_back(i);
    if (test.empty()) continue;
    const RowSet held = take(new_rows, test, nullptr);
    const auto predict = [&](const RowSet& rows, std::vector<double>& into) {
      BayesLinear model(o.model);
      model.fit(rows.X, rows.y, rows.w, rows.groups);
      const Eigen::VectorXd p = model.means(held.X);
      for (std::size_t k = 0; k < test.size(); ++k) into[test[k]] = p(static_cast<Eigen::Index>(k));
    };
    predict(take(new_rows, train, &old_rows), pred_old);
    const RowSet own = take(new_rows, train, nullptr);
    if (own.w.sum() > 0) predict(own, pred_new);
    else for (const std::size_t i : test) pred_new[i] = 0.0;  // nothing to learn from: ranks nothing
  }

  // Both models are scored on the same groups (those whose truth is not constant); a model whose
  // predictions are constant within a group ranks nothing there and scores 0, not "undefined".
  double sum_old = 0, sum_new = 0;
  std::vector<double> t, p_old, p_new;
  for (const GroupId g : order) {
    t.clear();
    p_old.clear();
    p_new.clear();
    for (const std::size_t i : by_group[g]) {
      t.push_back(new_rows.y(static_cast<Eigen::Index>(i)));
      p_old.push_back(pred_old[i]);
      p_new.push_back(pred_new[i]);
    }
    if (std::isnan(spearman(t, t))) continue;
    const double r_old = spearman(p_old, t), r_new = spearman(p_new, t);
    sum_old += std::isnan(r_old) ? 0.0 : r_old;
    sum_new += std::isnan(r_new) ? 0.0 : r_new;
    ++out.groups_scored;
  }
  if (out.groups_scored == 0) return out;
  out.rho_with_old = sum_old / static_cast<double>(out.groups_scored);
  out.rho_new_only = sum_new / static_cast<double>(out.groups_scored);
  out.evaluated = true;
  out.keep_old = !(out.rho_with_old < out.rho_new_only - o.margin);
  return out;
}

}  // namespace ptxevo::search::prior
