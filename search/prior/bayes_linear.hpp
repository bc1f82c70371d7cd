// Bayesian linear regression, the cost model's v1 (docs/prior_study.md 5.4): y = phi(x)^T w + noise
// with prior w ~ N(0, alpha^-1 I) and noise precision beta * w_i for row i; alpha and beta are
// re-estimated by evidence maximization (Bishop, PRML 3.5.2). Row weights are frequency
// weights: in the posterior a weight multiplies the row's precision, and in the evidence a row
// counts as w_i observations, so an integer weight k is exactly the row repeated k times.
//
// Offsets: with groups, each group gets its own unpenalized level (fixed effects, by group
// centring; see group_centering.hpp) and predictions are relative scores, comparable within a
// group only. Without groups, an optional unpenalized intercept (centring with one group).
// A flat prior on a level leaves the other weights' posterior exactly that of the centred fit,
// and costs one degree of freedom in the noise estimate.
//
// Everything goes through the normal equations X^T W X (d x d) and one symmetric
// eigendecomposition per fit, so n = 20,000 rows cost one pass over the data, n < d is fine
// (alpha > 0 keeps the posterior proper), and the evidence iterations are O(d) each.
#pragma once

#include <Eigen/Dense>
#include <cstddef>
#include <random>
#include <span>

#include "search/prior/group_centering.hpp"

namespace ptxevo::search::prior {

struct BayesLinearOptions {
  bool intercept = true;    // unpenalized intercept when fitted without groups
  bool standardize = true;  // unit weighted spread per column, so one alpha suits every column
  bool reestimate = true;   // evidence maximization of alpha and beta; false keeps them fixed
  double alpha = 1.0;       // initial (or fixed) prior precision of the weights
  double beta = 0.0;        // initial (or fixed) noise precision; <= 0: 1 / variance of centred y
  int max_iterations = 200;
  double tolerance = 1e-7;  // relative change of alpha and beta that ends re-estimation
};

class BayesLinear {
 public:
  explicit BayesLinear(BayesLinearOptions o = {});

  // X: rows are samples. w >= 0 (a zero-weight row is ignored). Throws std::invalid_argument on
  // a size mismatch, a non-finite value, a negative weight or zero total weight.
  void fit(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, const Eigen::VectorXd& w);
  // Per-group fixed effects (the intercept option is then irrelevant).
  void fit(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, const Eigen::VectorXd& w,
           std::span<const GroupId> groups);

  // Posterior mean prediction for raw features x. With groups it is the relative score
  // phi(x)^T m; differences within a group are the model's predicted log-time differences.
  double mean(const Eigen::VectorXd& x) const;
  // Posterior variance of the mean function at x (epistemic; with an intercept it includes the
  // intercept's 1 / (beta * sum w); with groups it is that of the relative score), and the
  // predictive variance that adds the noise 1 / beta.
  double variance(const Eigen::VectorXd& x) const;
  double predictive_variance(const Eigen::VectorXd& x) const;
  Eigen::VectorXd means(const Eigen::MatrixXd& X) const;      // one per row
  Eigen::VectorXd variances(const Eigen::MatrixXd& X) const;  // epistemic, one per row

  // A Thompson sample from the exact Gaussian posterior of the weights (model coordinates).
  // Drawn in the eigenbasis of the posterior precision: z ~ N(0, I) scaled by
  // 1 / sqrt(alpha + beta * lambda_i), which stays exact where the covariance is nearly
  // singular (lambda spanning many decades), where a Cholesky factor of the precision can fail.
  Eigen::VectorXd draw_weights(std::mt19937_64& rng) const;
  // Prediction with given weights (e.g. a draw): the same offset as mean(), phi(x)^T weights.
  double predict_with(const Eigen::VectorXd& weights, const Eigen::VectorXd& x) const;
  Eigen::VectorXd predict_rows_with(const Eigen::VectorXd& weights, const Eigen::MatrixXd& X) const;

  // Model coordinates: phi(x) = (x - intercept centre) / scale; the posterior lives here.
  Eigen::VectorXd model_features(const Eigen::VectorXd& x) const;
  Eigen::MatrixXd model_features_rows(const Eigen::MatrixXd& X) const;
  const Eigen::VectorXd& posterior_mean() const { return m_; }
  Eigen::MatrixXd posterior_covariance() const;

  bool fitted() const { return fitted_; }
  double alpha() const { return alpha_; }
  double beta() const { return beta_; }
  // log p(y | alpha, beta); with offsets, up to the constant of their flat priors.
  double log_evidence() const { return log_evidence_; }
  std::size_t n_rows() const { return n_rows_; }  // rows of positive weight
  double weight_sum() const { return weight_sum_; }
  std::size_t n_features() const { return static_cast<std::size_t>(m_.size()); }
  double effective_parameters() const { return gamma_; }  // PRML's gamma
  int iterations() const { return iterations_; }
  bool converged() const { return converged_; }
  const BayesLinearOptions& options() const { return o_; }

 private:
  void fit_centred(const Eigen::MatrixXd& Xc, const Eigen::VectorXd& yc, const Eigen::VectorXd& w,
                   const GroupCentering* groups);
  void require_fitted(Eigen::Index columns) const;

  BayesLinearOptions o_;
  bool fitted_ = false;
  bool with_offset_ = false;  // one intercept (not groups): mean() adds y_offset_
  Eigen::VectorXd x_offset_, scale_;
  double y_offset_ = 0;
  // Posterior: precision A = alpha I + beta V diag(lambda) V^T, mean m_.
  Eigen::MatrixXd V_;
  Eigen::VectorXd lambda_, m_;
  double alpha_ = 0, beta_ = 0, log_evidence_ = 0, weight_sum_ = 0, gamma_ = 0;
  std::size_t n_rows_ = 0;
  int iterations_ = 0;
  bool converged_ = false;
};

}  // namespace ptxevo::search::prior
