// Column standardization for the cost model's features (docs/prior_study.md 5.2): one isotropic
// prior precision (BLR) or one L2 penalty (validity model) only makes sense when every column has a
// comparable spread, so each column becomes (x - mean) / scale with weighted statistics.
#pragma once

#include <Eigen/Dense>
#include <cstddef>
#include <vector>

namespace ptxevo::search::prior {

class FeatureScaler {
 public:
  // Weighted mean and standard deviation per column of X (rows are samples). A column whose
  // spread is at most `constant_tolerance` * max(1, |mean|) is constant: its scale is 1, so it
  // maps to x - mean (0 on the fitted rows) instead of dividing by ~0 and producing NaN or
  // huge values. Throws std::invalid_argument on a size mismatch, a negative or non-finite
  // weight, or zero total weight.
  void fit(const Eigen::MatrixXd& X, const Eigen::VectorXd& w, double constant_tolerance = 1e-12);
  void fit(const Eigen::MatrixXd& X);  // unit weights

  Eigen::MatrixXd transform(const Eigen::MatrixXd& X) const;  // row by row
  Eigen::VectorXd transform_row(const Eigen::VectorXd& x) const;

  bool fitted() const { return fitted_; }
  std::size_t n_features() const { return static_cast<std::size_t>(mean_.size()); }
  const Eigen::VectorXd& mean() const { return mean_; }
  const Eigen::VectorXd& scale() const { return scale_; }
  bool constant(std::size_t column) const { return constant_.at(column); }

 private:
  void require_fitted(Eigen::Index columns) const;

  bool fitted_ = false;
  Eigen::VectorXd mean_, scale_;
  std::vector<bool> constant_;
};

}  // namespace ptxevo::search::prior
