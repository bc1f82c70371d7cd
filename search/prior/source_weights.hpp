// Evidence from earlier campaigns and other environments (docs/prior_study.md 5.9): such rows enter
// the cost model with a weight that depends on how comparable their environment is and fades as
// the new campaign's own rows arrive, and a guard drops them when they demonstrably hurt the
// ranking of the new campaign's data (negative transfer).
#pragma once

#include <Eigen/Dense>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "search/prior/bayes_linear.hpp"
#include "search/prior/group_centering.hpp"

namespace ptxevo::search::prior {

// What makes timings comparable: a driver or toolchain change is treated like another GPU.
struct Environment {
  std::string gpu, driver, toolchain;
  bool operator==(const Environment&) const = default;
};

struct SourceWeightOptions {
  double same_environment = 1.0;   // same GPU, driver and toolchain
  double other_environment = 0.3;  // any of the three differs
  double fade_rows = 64.0;         // n0 of the fade n0 / (n0 + n_new)
};

double environment_weight(const Environment& source, const Environment& target, const SourceWeightOptions& o = {});
// n0 / (n0 + n_new): an old row counts fully before the campaign has data and fades as it grows.
double fade(double new_rows, double fade_rows);
// environment_weight * fade(new_rows): the weight of one old row.
double source_row_weight(const Environment& source, const Environment& target, std::size_t new_rows,
                         const SourceWeightOptions& o = {});

// Rows for the cost model: features, target (log time / roofline), weights, groups.
struct RowSet {
  Eigen::MatrixXd X;
  Eigen::VectorXd y, w;
  std::vector<GroupId> groups;
};

struct GuardOptions {
  std::size_t folds = 5;
  // Old rows are dropped when their score is below new-only - margin. The out-of-fold rho of a
  // few dozen rows is noisy: on synthetic data (6 features, 40-100 new rows, 600 old rows of the
  // same relation) a zero margin dropped good old rows in 16-19% of seeds, 0.02 in 2-12%, while
  // old rows of a permuted relation were still dropped in >= 99%.
  double margin = 0.02;
  BayesLinearOptions model;
};

struct GuardDecision {
  bool keep_old = true;
  bool evaluated = false;     // false: too few new rows to judge; old rows are kept
  double rho_with_old = 0;    // mean within-group Spearman, out-of-fold, model on old + new rows
  double rho_new_only = 0;    // the same, model on the new rows alone
  std::size_t groups_scored = 0;
};

// K-fold cross-validation on the new rows (folds spread each group's rows, assigned in a
// shuffled order from rng): for each fold, one model is fitted on the other new rows and one on
// those plus all old rows (with their weights), both with per-group fixed effects; their
// out-of-fold predictions are pooled and scored by Spearman's rho within the new rows' groups.
// Pooling scores every group once with all its rows, where per-fold scores would rank two or
// three rows at a time. Both models are scored on the same groups; a model whose predictions
// are constant within a group scores 0 there. Needs at least 2 * folds new rows and a group
// with 3 or more; otherwise nothing is evaluated and the old rows are kept.
GuardDecision guard_old_rows(const RowSet& old_rows, const RowSet& new_rows, std::mt19937_64& rng,
                             const GuardOptions& o = {});

}  // namespace ptxevo::search::prior
