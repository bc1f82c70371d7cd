// Which built candidates get the B measurement slots of a GPU round (docs/prior_study.md 5.7).
//
// Ranking rule: a candidate's score is log P(valid) - y_hat, where y_hat is its predicted
// log(time / roofline) (lower is faster). That is the log of P(valid) * roofline / time: the
// expected speed relative to the roofline when an invalid kernel contributes speed 0. It is the
// "multiply by P(valid)" of the design notes applied to speed (a multiplication of the
// log-time itself would reward invalid candidates when y_hat < 0). In the log form a common
// offset of a group (the model predicts within-group relative scores) shifts every candidate
// alike and leaves the ranking unchanged. Highest score wins; P(valid) = 0 is never preferred
// to a candidate with P(valid) > 0.
//
// Per slot: one Thompson draw of the cost model's weights, the best not-yet-picked candidate
// under that draw. About epsilon * B slots (stochastic rounding, so small batches get a random
// slot with probability epsilon * B) go to candidates drawn uniformly from those not picked.
// Cold start (model unfitted or fewer than rows_per_feature * d rows): rank by the caller's
// analytic log-time estimate instead of draws, with the same epsilon slots.
// Deterministic given the rng state (and the standard library's distributions).
#pragma once

#include <Eigen/Dense>
#include <cstddef>
#include <random>
#include <vector>

#include "search/prior/bayes_linear.hpp"

namespace ptxevo::search::prior {

struct SelectionOptions {
  double epsilon = 0.05;           // share of slots picked uniformly at random
  double rows_per_feature = 3.0;   // the model is trusted from rows_per_feature * d rows on
};

enum class PickReason { Thompson, Random, Analytic };

struct Pick {
  std::size_t index = 0;  // row of the candidate matrix
  PickReason reason = PickReason::Thompson;
};

// The ranking score above; NaN inputs give -infinity (never preferred).
double selection_score(double predicted_log_time, double p_valid);

bool is_cold_start(const BayesLinear& model, const SelectionOptions& o = {});

// X: one row of raw features per candidate (the model's feature layout; unused when cold).
// p_valid and analytic_log_time: one entry per candidate. Returns min(slots, N) distinct picks in
// the order they were made. Throws std::invalid_argument on size mismatches or an epsilon
// outside [0, 1].
std::vector<Pick> select_batch(const BayesLinear& model, const Eigen::MatrixXd& X, const Eigen::VectorXd& p_valid,
                               const Eigen::VectorXd& analytic_log_time, std::size_t slots, std::mt19937_64& rng,
                               const SelectionOptions& o = {});

}  // namespace ptxevo::search::prior
