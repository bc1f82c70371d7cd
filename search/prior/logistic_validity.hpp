// The validity model (PRIOR.md 5.7): P(a candidate passes build, gate and run) from its
// features. Two estimators: L2-regularized logistic regression fitted by IRLS (Newton's method)
// once enough failures are known, and before that a Beta-Bernoulli rate per category (the
// operator that produced the candidate). choose_validity_model() picks between them.
#pragma once

#include <Eigen/Dense>
#include <map>
#include <string>
#include <utility>

namespace ptxevo::search::prior {

struct LogisticOptions {
  double l2 = 1.0;             // penalty on the (standardized) slopes; keeps separable data finite
  double intercept_l2 = 1e-4;  // small, so the intercept stays finite when one class is absent
  int max_iterations = 50;
  double tolerance = 1e-10;    // on half the squared Newton decrement (the predicted loss decrease)
  bool standardize = true;     // one penalty for all columns needs comparable scales
};

class LogisticValidity {
 public:
  explicit LogisticValidity(LogisticOptions o = {});

  // valid: 1 = passed, 0 = failed (fractions allowed); w >= 0: row weights. Newton steps with a
  // backtracking line search, so the penalized loss decreases monotonically; stops when the
  // Newton decrement is below the tolerance (converged() true) or after max_iterations
  // (converged() false, the coefficients are the best iterate). Throws std::invalid_argument on
  // bad sizes, non-finite values, labels outside [0, 1] or zero total weight.
  void fit(const Eigen::MatrixXd& X, const Eigen::VectorXd& valid, const Eigen::VectorXd& w);

  double probability(const Eigen::VectorXd& x) const;
  Eigen::VectorXd probabilities(const Eigen::MatrixXd& X) const;

  bool fitted() const { return fitted_; }
  bool converged() const { return converged_; }
  int iterations() const { return iterations_; }
  double intercept() const;
  Eigen::VectorXd slopes() const;  // per standardized column
  double penalized_loss() const { return loss_; }

 private:
  void require_fitted(Eigen::Index columns) const;
  Eigen::MatrixXd design(const Eigen::MatrixXd& X) const;  // [1, (X - mean) / scale]

  LogisticOptions o_;
  bool fitted_ = false, converged_ = false;
  int iterations_ = 0;
  Eigen::VectorXd mean_, scale_, theta_;
  double loss_ = 0;
};

// Beta(a0, b0) prior per category, updated with (weighted) pass/fail outcomes.
class CategoryValidity {
 public:
  explicit CategoryValidity(double a0 = 1.0, double b0 = 1.0);
  void add(const std::string& category, bool valid, double weight = 1.0);
  // Posterior mean; an unseen category gets the prior mean.
  double probability(const std::string& category) const;
  double successes() const { return successes_; }
  double failures() const { return failures_; }

 private:
  double a0_, b0_;
  std::map<std::string, std::pair<double, double>> counts_;  // category -> (passes, failures)
  double successes_ = 0, failures_ = 0;
};

enum class ValidityModel { CategoryBeta, Logistic };

// The logistic model is used once both classes have at least `min_per_class` observations
// (PRIOR.md: ~50 failures; failures are normally the rarer class, and a model with almost no
// passes would be as starved as one with almost no failures).
ValidityModel choose_validity_model(double failures, double successes, double min_per_class = 50.0);

}  // namespace ptxevo::search::prior
