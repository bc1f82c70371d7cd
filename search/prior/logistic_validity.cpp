#include "search/prior/logistic_validity.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "search/prior/feature_scaler.hpp"

namespace ptxevo::search::prior {
namespace {

// log(1 + e^eta) without overflow for large |eta|.
double softplus(double eta) { return eta > 0 ? eta + std::log1p(std::exp(-eta)) : std::log1p(std::exp(eta)); }

double sigmoid(double eta) {
  if (eta >= 0) return 1.0 / (1.0 + std::exp(-eta));
  const double e = std::exp(eta);
  return e / (1.0 + e);
}

}  // namespace

LogisticValidity::LogisticValidity(LogisticOptions o) : o_(o) {
  if (!(o_.l2 > 0) || !(o_.intercept_l2 > 0))
    throw std::invalid_argument("LogisticValidity: penalties must be positive (they keep separable data finite)");
}

Eigen::MatrixXd LogisticValidity::design(const Eigen::MatrixXd& X) const {
  Eigen::MatrixXd Z(X.rows(), X.cols() + 1);
  Z.col(0).setOnes();
  Z.rightCols(X.cols()) = (X.rowwise() - mean_.transpose()).array().rowwise() / scale_.transpose().array();
  return Z;
}

void LogisticValidity::fit(const Eigen::MatrixXd& X, const Eigen::VectorXd& valid, const Eigen::VectorXd& w) {
  if (valid.size() != X.rows() || w.size() != X.rows())
    throw std::invalid_argument("LogisticValidity::fit: X, labels and weights differ in rows");
  if (!X.allFinite() || !valid.allFinite() || (valid.array() < 0).any() || (valid.array() > 1).any())
    throw std::invalid_argument("LogisticValidity::fit: bad data or label");
  if (!w.allFinite() || (w.array() < 0).any() || !(w.sum() > 0))
    throw std::invalid_argument("LogisticValidity::fit: bad weights");

  if (o_.standardize) {
    FeatureScaler scaler;
    scaler.fit(X, w);
    mean_ = scaler.mean();
    scale_ = scaler.scale();
  } else {
    mean_ = Eigen::VectorXd::Zero(X.cols());
    scale_ = Eigen::VectorXd::Ones(X.cols());
  }
  const Eigen::MatrixXd Z = design(X);
  const Eigen::Index p = Z.cols();
  Eigen::VectorXd penalty = Eigen::VectorXd::Constant(p, o_.l2);
  penalty(0) = o_.intercept_l2;

  const auto loss_at = [&](const Eigen::VectorXd& theta) {
    const Eigen::VectorXd eta = Z * theta;
    double l = 0;
    for (Eigen::Index i = 0; i < eta.size(); ++i) l += w(i) * (softplus(eta(i)) - valid(i) * eta(i));
    return l + 0.5 * theta.dot(penalty.cwiseProduct(theta));
  };

  Eigen::VectorXd theta = Eigen::VectorXd::Zero(p);
  double loss = loss_at(theta);
  converged_ = false;
  iterations_ = 0;
  for (int it = 0; it < o_.max_iterations; ++it) {
    const Eigen::VectorXd eta = Z * theta;
    Eigen::VectorXd prob(eta.size()), curvature(eta.size());
    for (Eigen::Index i = 0; i < eta.size(); ++i) {
      prob(i) = sigmoid(eta(i));
      curvature(i) = w(i) * prob(i) * (1.0 - prob(i));
    }
    const Eigen::VectorXd grad = Z.transpose() * w.cwiseProduct(prob - valid) + penalty.cwiseProduct(theta);
    // The penalty makes the Hessian positive definite even where every p(1 - p) underflows.
    Eigen::MatrixXd hess = Z.transpose() * (Z.array().colwise() * curvature.array()).matrix();
    hess.diagonal() += penalty;
    const Eigen::LDLT<Eigen::MatrixXd> ldlt(hess);
    if (ldlt.info() != Eigen::Success) break;
    const Eigen::VectorXd step = -ldlt.solve(grad);
    const double decrement = -grad.dot(step);  // squared Newton decrement
    iterations_ = it + 1;
    if (!(decrement >= 0) || 0.5 * decrement <= o_.tolerance) {
      converged_ = decrement >= 0;
      break;
    }
    // Backtracking (Armijo) keeps each step a descent even far from the optimum.
    double t = 1.0;
    Eigen::VectorXd next = theta + step;
    double next_loss = loss_at(next);
    while (next_loss > loss - 0.25 * t * decrement && t > 1e-12) {
      t *= 0.5;
      next = theta + t * step;
      next_loss = loss_at(next);
    }
    if (!(next_loss < loss)) {
      // No decrease possible in floating point: the iterate is as good as it gets.
      converged_ = 0.5 * decrement <= 1e3 * o_.tolerance;
      break;
    }
    theta = next;
    loss = next_loss;
  }
  theta_ = theta;
  loss_ = loss;
  fitted_ = true;
}

void LogisticValidity::require_fitted(Eigen::Index columns) const {
  if (!fitted_) throw std::logic_error("LogisticValidity: not fitted");
  if (columns != mean_.size()) throw std::invalid_argument("LogisticValidity: feature count differs from the fit");
}

double LogisticValidity::intercept() const {
  require_fitted(mean_.size());
  return theta_(0);
}

Eigen::VectorXd LogisticValidity::slopes() const {
  require_fitted(mean_.size());
  return theta_.tail(theta_.size() - 1);
}

double LogisticValidity::probability(const Eigen::VectorXd& x) const {
  require_fitted(x.size());
  const Eigen::VectorXd z = (x - mean_).array() / scale_.array();
  return sigmoid(theta_(0) + z.dot(theta_.tail(z.size())));
}

Eigen::VectorXd LogisticValidity::probabilities(const Eigen::MatrixXd& X) const {
  require_fitted(X.cols());
  const Eigen::VectorXd eta = design(X) * theta_;
  return eta.unaryExpr([](double e) { return sigmoid(e); });
}

CategoryValidity::CategoryValidity(double a0, double b0) : a0_(a0), b0_(b0) {
  if (!(a0 > 0) || !(b0 > 0)) throw std::invalid_argument("CategoryValidity: Beta prior must be positive");
}

void CategoryValidity::add(const std::string& category, bool valid, double weight) {
  if (!(weight >= 0) || !std::isfinite(weight)) throw std::invalid_argument("CategoryValidity::add: bad weight");
  auto& [passes, fails] = counts_[category];
  (valid ? passes : fails) += weight;
  (valid ? successes_ : failures_) += weight;
}

double CategoryValidity::probability(const std::string& category) const {
  const auto it = counts_.find(category);
  const double s = it == counts_.end() ? 0.0 : it->second.first;
  const double f = it == counts_.end() ? 0.0 : it->second.second;
  return (a0_ + s) / (a0_ + b0_ + s + f);
}

ValidityModel choose_validity_model(double failures, double successes, double min_per_class) {
  return failures >= min_per_class && successes >= min_per_class ? ValidityModel::Logistic
                                                                 : ValidityModel::CategoryBeta;
}

ValidityEstimator::ValidityEstimator(double a0, double b0, double min_per_class, LogisticOptions o)
    : rates_(a0, b0), min_per_class_(min_per_class), logistic_(o) {}

void ValidityEstimator::add(const std::vector<std::string>& categories, const std::vector<double>& features, bool valid) {
  for (const auto& c : categories) rates_.add(c, valid);
  if (features.empty() || (!x_.empty() && features.size() != x_.front().size())) return;
  if (!std::all_of(features.begin(), features.end(), [](double v) { return std::isfinite(v); })) return;
  x_.push_back(features);
  y_.push_back(valid ? 1.0 : 0.0);
  (valid ? successes_ : failures_) += 1;
  dirty_ = true;
}

ValidityModel ValidityEstimator::model() const { return choose_validity_model(failures_, successes_, min_per_class_); }

double ValidityEstimator::category_probability(const std::vector<std::string>& categories) const {
  double p = 1.0;
  for (const auto& c : categories) p = std::min(p, rates_.probability(c));
  return p;
}

double ValidityEstimator::probability(const std::vector<std::string>& categories, const std::vector<double>& features) {
  if (model() != ValidityModel::Logistic || x_.empty() || features.size() != x_.front().size())
    return category_probability(categories);
  if (dirty_) {
    const auto n = static_cast<Eigen::Index>(x_.size()), d = static_cast<Eigen::Index>(x_.front().size());
    Eigen::MatrixXd X(n, d);
    Eigen::VectorXd y(n);
    for (Eigen::Index i = 0; i < n; ++i) {
      for (Eigen::Index j = 0; j < d; ++j) X(i, j) = x_[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
      y(i) = y_[static_cast<std::size_t>(i)];
    }
    logistic_.fit(X, y, Eigen::VectorXd::Ones(n));
    dirty_ = false;
  }
  return logistic_.probability(Eigen::Map<const Eigen::VectorXd>(features.data(), static_cast<Eigen::Index>(features.size())));
}

}  // namespace ptxevo::search::prior
