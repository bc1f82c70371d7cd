#include "search/prior/bayes_linear.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <vector>

#include "search/prior/feature_scaler.hpp"

namespace ptxevo::search::prior {
namespace {

// Bounds on alpha and beta: evidence maximization runs to 0 or infinity on degenerate data
// (no signal, an exact fit); clamping keeps the posterior proper and the draws finite.
constexpr double kMinPrecision = 1e-10;
constexpr double kMaxPrecision = 1e10;
// The noise estimate needs some residual degrees of freedom; below this many it keeps beta.
constexpr double kMinNoiseDof = 0.5;

void check_inputs(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, const Eigen::VectorXd& w) {
  if (y.size() != X.rows() || w.size() != X.rows())
    throw std::invalid_argument("BayesLinear::fit: X, y and w differ in rows");
  if (!X.allFinite() || !y.allFinite()) throw std::invalid_argument("BayesLinear::fit: non-finite data");
  if (!w.allFinite() || (w.array() < 0).any()) throw std::invalid_argument("BayesLinear::fit: bad weight");
  if (!(w.sum() > 0)) throw std::invalid_argument("BayesLinear::fit: zero total weight");
}

double clamp_precision(double v) { return std::clamp(v, kMinPrecision, kMaxPrecision); }

}  // namespace

BayesLinear::BayesLinear(BayesLinearOptions o) : o_(o) {}

void BayesLinear::fit(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, const Eigen::VectorXd& w) {
  check_inputs(X, y, w);
  if (o_.intercept) {
    // An intercept is one group holding every row.
    const std::vector<GroupId> one(static_cast<std::size_t>(X.rows()), 0);
    const GroupCentering gc(one, w);
    x_offset_ = gc.feature_means(X).row(0).transpose();
    y_offset_ = gc.target_means(y)(0);
    with_offset_ = true;
    fit_centred(gc.center_features(X), gc.center_target(y), w, &gc);
  } else {
    x_offset_ = Eigen::VectorXd::Zero(X.cols());
    y_offset_ = 0;
    with_offset_ = false;
    fit_centred(X, y, w, nullptr);
  }
}

void BayesLinear::fit(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, const Eigen::VectorXd& w,
                      std::span<const GroupId> groups) {
  check_inputs(X, y, w);
  const GroupCentering gc(groups, w);
  x_offset_ = Eigen::VectorXd::Zero(X.cols());
  y_offset_ = 0;
  with_offset_ = false;
  fit_centred(gc.center_features(X), gc.center_target(y), w, &gc);
}

void BayesLinear::fit_centred(const Eigen::MatrixXd& Xc, const Eigen::VectorXd& yc, const Eigen::VectorXd& w,
                              const GroupCentering* groups) {
  const Eigen::Index d = Xc.cols();
  if (o_.standardize) {
    FeatureScaler scaler;
    scaler.fit(Xc, w);
    scale_ = scaler.scale();
  } else {
    scale_ = Eigen::VectorXd::Ones(d);
  }
  const Eigen::MatrixXd phi = Xc.array().rowwise() / scale_.transpose().array();

  // Sufficient statistics: H = Phi^T W Phi, b = Phi^T W y, yy = y^T W y.
  const Eigen::MatrixXd phi_w = phi.array().colwise() * w.array().sqrt();
  Eigen::MatrixXd H = Eigen::MatrixXd::Zero(d, d);
  H.selfadjointView<Eigen::Lower>().rankUpdate(phi_w.transpose());
  H.triangularView<Eigen::StrictlyUpper>() = H.transpose();
  const Eigen::VectorXd b = phi.transpose() * w.cwiseProduct(yc);
  const double yy = w.dot(yc.cwiseAbs2());

  weight_sum_ = w.sum();
  n_rows_ = static_cast<std::size_t>((w.array() > 0).count());
  const double levels = groups ? static_cast<double>(groups->n_weighted_groups()) : 0.0;
  const double dof = weight_sum_ - levels;  // observations left after the flat-prior levels

  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(H);
  if (eig.info() != Eigen::Success) throw std::runtime_error("BayesLinear::fit: eigendecomposition failed");
  V_ = eig.eigenvectors();
  lambda_ = eig.eigenvalues().cwiseMax(0.0);  // H is PSD; rounding can leave tiny negatives
  const Eigen::VectorXd bt = V_.transpose() * b;

  double alpha = clamp_precision(o_.alpha > 0 ? o_.alpha : 1.0);
  double beta = o_.beta > 0 ? o_.beta : (yy > 0 && dof > 0 ? dof / yy : 1.0);
  beta = clamp_precision(beta);

  // Posterior in the eigenbasis: m_e = beta * bt / (alpha + beta * lambda).
  Eigen::VectorXd m_e;
  double gamma = 0, mm = 0, rss = 0;
  const auto solve = [&] {
    const Eigen::ArrayXd denom = alpha + beta * lambda_.array();
    m_e = (beta * bt.array() / denom).matrix();
    gamma = (beta * lambda_.array() / denom).sum();
    mm = m_e.squaredNorm();
    // ||y - Phi m||_W^2 from the statistics; clamped because cancellation can go below zero.
    rss = std::max(yy - 2.0 * m_e.dot(bt) + (lambda_.array() * m_e.array().square()).sum(), 0.0);
  };

  solve();
  iterations_ = 0;
  converged_ = !o_.reestimate;
  for (int it = 0; o_.reestimate && it < o_.max_iterations; ++it) {
    // PRML (3.92) and (3.95), with N the weighted row count less the levels.
    const double alpha_new = clamp_precision(mm > 0 ? gamma / mm : kMaxPrecision);
    const double noise_dof = dof - gamma;
    const double beta_new =
        noise_dof > kMinNoiseDof ? clamp_precision(noise_dof / std::max(rss, noise_dof / kMaxPrecision)) : beta;
    const bool small = std::abs(alpha_new - alpha) <= o_.tolerance * alpha &&
                       std::abs(beta_new - beta) <= o_.tolerance * beta;
    alpha = alpha_new;
    beta = beta_new;
    iterations_ = it + 1;
    solve();
    if (small) {
      converged_ = true;
      break;
    }
  }

  alpha_ = alpha;
  beta_ = beta;
  gamma_ = gamma;
  m_ = V_ * m_e;

  // PRML (3.86) for frequency weights, each flat-prior level integrated out.
  double level_term = 0;
  if (groups)
    for (Eigen::Index g = 0; g < groups->group_weight().size(); ++g)
      if (groups->group_weight()(g) > 0) level_term += std::log(groups->group_weight()(g));
  const double log_det = (alpha + beta * lambda_.array()).log().sum();
  log_evidence_ = 0.5 * static_cast<double>(d) * std::log(alpha) + 0.5 * dof * std::log(beta) -
                  (0.5 * beta * rss + 0.5 * alpha * mm) - 0.5 * log_det -
                  0.5 * dof * std::log(2.0 * std::numbers::pi) - 0.5 * level_term;
  fitted_ = true;
}

void BayesLinear::require_fitted(Eigen::Index columns) const {
  if (!fitted_) throw std::logic_error("BayesLinear: not fitted");
  if (columns != m_.size()) throw std::invalid_argument("BayesLinear: feature count differs from the fit");
}

Eigen::VectorXd BayesLinear::model_features(const Eigen::VectorXd& x) const {
  require_fitted(x.size());
  return ((x - x_offset_).array() / scale_.array()).matrix();
}

Eigen::MatrixXd BayesLinear::model_features_rows(const Eigen::MatrixXd& X) const {
  require_fitted(X.cols());
  return ((X.rowwise() - x_offset_.transpose()).array().rowwise() / scale_.transpose().array()).matrix();
}

double BayesLinear::mean(const Eigen::VectorXd& x) const { return predict_with(m_, x); }

Eigen::VectorXd BayesLinear::means(const Eigen::MatrixXd& X) const { return predict_rows_with(m_, X); }

double BayesLinear::predict_with(const Eigen::VectorXd& weights, const Eigen::VectorXd& x) const {
  if (weights.size() != m_.size()) throw std::invalid_argument("BayesLinear::predict_with: weight count differs");
  return y_offset_ + model_features(x).dot(weights);
}

Eigen::VectorXd BayesLinear::predict_rows_with(const Eigen::VectorXd& weights, const Eigen::MatrixXd& X) const {
  if (weights.size() != m_.size()) throw std::invalid_argument("BayesLinear::predict_rows_with: weight count differs");
  return (model_features_rows(X) * weights).array() + y_offset_;
}

double BayesLinear::variance(const Eigen::VectorXd& x) const {
  const Eigen::VectorXd t = V_.transpose() * model_features(x);
  const double level = with_offset_ ? 1.0 / (beta_ * weight_sum_) : 0.0;
  return (t.array().square() / (alpha_ + beta_ * lambda_.array())).sum() + level;
}

double BayesLinear::predictive_variance(const Eigen::VectorXd& x) const { return variance(x) + 1.0 / beta_; }

Eigen::VectorXd BayesLinear::variances(const Eigen::MatrixXd& X) const {
  const Eigen::MatrixXd t = model_features_rows(X) * V_;
  const Eigen::ArrayXd inv = (alpha_ + beta_ * lambda_.array()).inverse();
  const double level = with_offset_ ? 1.0 / (beta_ * weight_sum_) : 0.0;
  return ((t.array().square().matrix() * inv.matrix()).array() + level).matrix();
}

Eigen::MatrixXd BayesLinear::posterior_covariance() const {
  require_fitted(m_.size());
  return V_ * (alpha_ + beta_ * lambda_.array()).inverse().matrix().asDiagonal() * V_.transpose();
}

Eigen::VectorXd BayesLinear::draw_weights(std::mt19937_64& rng) const {
  require_fitted(m_.size());
  std::normal_distribution<double> normal;
  Eigen::VectorXd z(m_.size());
  for (Eigen::Index i = 0; i < z.size(); ++i) z(i) = normal(rng);
  return m_ + V_ * (z.array() / (alpha_ + beta_ * lambda_.array()).sqrt()).matrix();
}

}  // namespace ptxevo::search::prior
