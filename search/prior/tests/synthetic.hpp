// Synthetic data for the prior-math tests: standard normal features, a known linear relation,
// Gaussian noise; all from a seeded generator so every test is reproducible.
#pragma once

#include <Eigen/Dense>
#include <random>

namespace ptxevo::search::prior::testing {

inline Eigen::MatrixXd normal_matrix(Eigen::Index rows, Eigen::Index cols, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  Eigen::MatrixXd X(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < cols; ++j) X(i, j) = normal(rng);
  return X;
}

inline Eigen::VectorXd normal_vector(Eigen::Index n, std::mt19937_64& rng) { return normal_matrix(n, 1, rng); }

// y = X w + intercept + sigma * noise
inline Eigen::VectorXd linear_target(const Eigen::MatrixXd& X, const Eigen::VectorXd& w, double intercept,
                                     double sigma, std::mt19937_64& rng) {
  return ((X * w).array() + intercept + sigma * normal_vector(X.rows(), rng).array()).matrix();
}

}  // namespace ptxevo::search::prior::testing
