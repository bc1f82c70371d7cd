#include "search/prior/selection.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace ptxevo::search::prior {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Index of the highest score among candidates not yet taken; ties go to the lower index.
std::size_t best_open(const Eigen::VectorXd& score, const std::vector<bool>& taken) {
  std::size_t best = taken.size();
  for (std::size_t i = 0; i < taken.size(); ++i) {
    if (taken[i]) continue;
    if (best == taken.size() || score(static_cast<Eigen::Index>(i)) > score(static_cast<Eigen::Index>(best))) best = i;
  }
  return best;
}

}  // namespace

double selection_score(double predicted_log_time, double p_valid) {
  if (std::isnan(predicted_log_time) || std::isnan(p_valid) || !(p_valid > 0)) return kNegInf;
  const double s = std::log(std::min(p_valid, 1.0)) - predicted_log_time;
  return std::isnan(s) ? kNegInf : s;
}

bool is_cold_start(const BayesLinear& model, const SelectionOptions& o) {
  return !model.fitted() ||
         static_cast<double>(model.n_rows()) < o.rows_per_feature * static_cast<double>(model.n_features());
}

std::vector<Pick> select_batch(const BayesLinear& model, const Eigen::MatrixXd& X, const Eigen::VectorXd& p_valid,
                               const Eigen::VectorXd& analytic_log_time, std::size_t slots, std::mt19937_64& rng,
                               const SelectionOptions& o) {
  const auto n = static_cast<std::size_t>(p_valid.size());
  if (analytic_log_time.size() != p_valid.size()) throw std::invalid_argument("select_batch: input sizes differ");
  if (!(o.epsilon >= 0 && o.epsilon <= 1)) throw std::invalid_argument("select_batch: epsilon outside [0, 1]");
  const bool cold = is_cold_start(model, o);
  if (!cold && static_cast<std::size_t>(X.rows()) != n) throw std::invalid_argument("select_batch: X rows differ");

  slots = std::min(slots, n);
  std::vector<Pick> picks;
  picks.reserve(slots);
  std::vector<bool> taken(n, false);

  // Number of random slots by stochastic rounding of epsilon * slots.
  const double expected = o.epsilon * static_cast<double>(slots);
  auto random_slots = static_cast<std::size_t>(std::floor(expected));
  if (std::uniform_real_distribution<double>(0.0, 1.0)(rng) < expected - std::floor(expected)) ++random_slots;
  random_slots = std::min(random_slots, slots);
  const std::size_t ranked_slots = slots - random_slots;

  if (cold) {
    Eigen::VectorXd score(static_cast<Eigen::Index>(n));
    for (Eigen::Index i = 0; i < score.size(); ++i) score(i) = selection_score(analytic_log_time(i), p_valid(i));
    for (std::size_t s = 0; s < ranked_slots; ++s) {
      const std::size_t i = best_open(score, taken);
      taken[i] = true;
      picks.push_back({i, PickReason::Analytic});
    }
  } else {
    // Features in model coordinates once; each slot is then one matrix-vector product.
    const Eigen::MatrixXd phi = model.model_features_rows(X);
    const Eigen::ArrayXd log_valid =
        p_valid.array().unaryExpr([](double p) { return selection_score(0.0, p); });
    for (std::size_t s = 0; s < ranked_slots; ++s) {
      const Eigen::VectorXd w = model.draw_weights(rng);
      // The model's offset is common to all candidates, so phi * w ranks like the prediction.
      Eigen::VectorXd score = (log_valid - (phi * w).array()).matrix();
      for (Eigen::Index i = 0; i < score.size(); ++i)
        if (std::isnan(score(i))) score(i) = kNegInf;
      const std::size_t i = best_open(score, taken);
      taken[i] = true;
      picks.push_back({i, PickReason::Thompson});
    }
  }

  std::vector<std::size_t> open;
  for (std::size_t i = 0; i < n; ++i)
    if (!taken[i]) open.push_back(i);
  for (std::size_t s = 0; s < random_slots; ++s) {
    const std::size_t k = std::uniform_int_distribution<std::size_t>(0, open.size() - 1)(rng);
    picks.push_back({open[k], PickReason::Random});
    open[k] = open.back();
    open.pop_back();
  }
  return picks;
}

}  // namespace ptxevo::search::prior
