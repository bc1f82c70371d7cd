#include "search/prior/feature_scaler.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ptxevo::search::prior {

void FeatureScaler::fit(const Eigen::MatrixXd& X, const Eigen::VectorXd& w, double constant_tolerance) {
  if (w.size() != X.rows()) throw std::invalid_argument("FeatureScaler::fit: weights and rows differ in size");
  if (!w.allFinite() || (w.array() < 0).any()) throw std::invalid_argument("FeatureScaler::fit: bad weight");
  const double total = w.sum();
  if (!(total > 0)) throw std::invalid_argument("FeatureScaler::fit: zero total weight");

  mean_ = (X.transpose() * w) / total;
  // Two-pass variance (deviations from the mean) so large offsets do not cancel away the spread.
  const Eigen::MatrixXd dev = X.rowwise() - mean_.transpose();
  const Eigen::VectorXd var = (dev.array().square().matrix().transpose() * w) / total;
  scale_.resize(X.cols());
  constant_.assign(static_cast<std::size_t>(X.cols()), false);
  for (Eigen::Index j = 0; j < X.cols(); ++j) {
    const double sd = std::sqrt(std::max(var(j), 0.0));
    const bool flat = !(sd > constant_tolerance * std::max(1.0, std::abs(mean_(j))));
    constant_[static_cast<std::size_t>(j)] = flat;
    scale_(j) = flat ? 1.0 : sd;
  }
  fitted_ = true;
}

void FeatureScaler::fit(const Eigen::MatrixXd& X) { fit(X, Eigen::VectorXd::Ones(X.rows())); }

void FeatureScaler::require_fitted(Eigen::Index columns) const {
  if (!fitted_) throw std::logic_error("FeatureScaler: not fitted");
  if (columns != mean_.size()) throw std::invalid_argument("FeatureScaler: column count differs from the fit");
}

Eigen::MatrixXd FeatureScaler::transform(const Eigen::MatrixXd& X) const {
  require_fitted(X.cols());
  return ((X.rowwise() - mean_.transpose()).array().rowwise() / scale_.transpose().array()).matrix();
}

Eigen::VectorXd FeatureScaler::transform_row(const Eigen::VectorXd& x) const {
  require_fitted(x.size());
  return ((x - mean_).array() / scale_.array()).matrix();
}

}  // namespace ptxevo::search::prior
