// The validity model (docs/prior_study.md 5.7): P(a candidate passes build, gate and run) from its
// features. Two estimators: L2-regularized logistic regression fitted by IRLS (Newton's method)
// once enough failures are known, and before that a Beta-Bernoulli rate per category (the
// operator that produced the candidate). choose_validity_model() picks between them.
#pragma once

#include <Eigen/Dense>
#include <map>
#include <string>
#include <utility>
#include <vector>

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
// (docs/prior_study.md 5.7: ~50 failures; failures are normally the rarer class, and a model with
// almost no passes would be as starved as one with almost no failures).
ValidityModel choose_validity_model(double failures, double successes, double min_per_class = 50.0);

// What the campaign's choice multiplies its Thompson draws by (docs/prior_study.md 5.7): P(a built,
// screened candidate passes the gate). Until both classes have min_per_class outcomes with
// features, the Beta rates of its categories (a knob value, a pass;
// EvolutionStrategy::validity_categories), the weakest counting; then a logistic regression on its
// features (the cost model's columns: knob values in log2, pass counts, registers, spills,
// occupancy ...), which sees what the rates per category cannot: two knob values that pass alone
// and fail together (THREADS x ITEMS over a register or size limit is a line in log2 knob space).
// Outcomes without features count for the rates only.
class ValidityEstimator {
 public:
  explicit ValidityEstimator(double a0 = 2.0, double b0 = 0.25, double min_per_class = 50.0, LogisticOptions o = {});
  void add(const std::vector<std::string>& categories, const std::vector<double>& features, bool valid);
  // Refits the logistic model first when outcomes arrived since the last fit and it is in use.
  double probability(const std::vector<std::string>& categories, const std::vector<double>& features);
  // The Beta rates' estimate alone (the weakest category).
  double category_probability(const std::vector<std::string>& categories) const;
  ValidityModel model() const;
  std::size_t rows() const { return y_.size(); }
  double failures() const { return failures_; }

 private:
  CategoryValidity rates_;
  double min_per_class_;
  LogisticValidity logistic_;
  std::vector<std::vector<double>> x_;
  std::vector<double> y_;
  double failures_ = 0, successes_ = 0;
  bool dirty_ = true;
};

}  // namespace ptxevo::search::prior
