#include "search/prior/bayes_linear.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "search/prior/tests/synthetic.hpp"

namespace ptxevo::search::prior {
namespace {

using testing::linear_target;
using testing::normal_matrix;
using testing::normal_vector;

// Slope j of the fitted model in raw units: the model is affine, so mean(e_j) - mean(0).
double raw_slope(const BayesLinear& m, Eigen::Index j) {
  const Eigen::Index d = static_cast<Eigen::Index>(m.n_features());
  return m.mean(Eigen::VectorXd::Unit(d, j)) - m.mean(Eigen::VectorXd::Zero(d));
}

TEST(BayesLinear, RecoversKnownWeightsAndIntercept) {
  std::mt19937_64 rng(11);
  Eigen::MatrixXd X = normal_matrix(500, 5, rng);
  X.col(2) *= 40.0;  // columns on very different scales
  X.col(2).array() += 7.0;
  const Eigen::VectorXd w_raw = (Eigen::VectorXd(5) << 1.5, -2.0, 0.5 / 40.0, 0.0, 3.0).finished();
  const Eigen::VectorXd y = linear_target(X, w_raw, 2.0, 0.1, rng);
  BayesLinear m;
  m.fit(X, y, Eigen::VectorXd::Ones(500));
  ASSERT_TRUE(m.converged());
  for (Eigen::Index j = 0; j < 5; ++j) EXPECT_NEAR(raw_slope(m, j), w_raw(j), 0.02) << j;
  EXPECT_NEAR(m.mean(Eigen::VectorXd::Zero(5)), 2.0, 0.05);
  EXPECT_EQ(m.n_rows(), 500u);
}

TEST(BayesLinear, PosteriorVarianceShrinksWithData) {
  const Eigen::VectorXd w = (Eigen::VectorXd(4) << 1, -1, 0.5, 2).finished();
  const Eigen::VectorXd probe = (Eigen::VectorXd(4) << 0.3, -1.2, 0.8, 0.1).finished();
  double previous = std::numeric_limits<double>::infinity();
  for (const Eigen::Index n : {8, 40, 200, 1000, 5000}) {
    std::mt19937_64 rng(5);
    const Eigen::MatrixXd X = normal_matrix(n, 4, rng);
    BayesLinear m;
    m.fit(X, linear_target(X, w, 0.0, 0.5, rng), Eigen::VectorXd::Ones(n));
    const double v = m.variance(probe);
    EXPECT_GT(v, 0.0);
    EXPECT_LT(v, previous) << n;
    EXPECT_NEAR(m.predictive_variance(probe), v + 1.0 / m.beta(), 1e-12);
    previous = v;
  }
  EXPECT_LT(previous, 1e-3);
}

TEST(BayesLinear, EvidenceFindsTheNoisePrecision) {
  std::mt19937_64 rng(17);
  const Eigen::VectorXd w = normal_vector(8, rng);
  const Eigen::MatrixXd X = normal_matrix(4000, 8, rng);
  const double sigma = 0.5;  // beta = 4
  BayesLinear m;
  m.fit(X, linear_target(X, w, 1.0, sigma, rng), Eigen::VectorXd::Ones(4000));
  EXPECT_TRUE(m.converged());
  EXPECT_NEAR(m.beta(), 4.0, 0.07 * 4.0);
  EXPECT_NEAR(m.effective_parameters(), 8.0, 0.05);  // all 8 weights well determined
}

TEST(BayesLinear, GroupLevelsCostDegreesOfFreedom) {
  // 400 groups of 10 rows with large random levels: the fixed effects absorb the levels, and the
  // noise estimate uses N - G degrees of freedom (without the correction beta would be ~11% high).
  std::mt19937_64 rng(23);
  const Eigen::Index groups = 400, per = 10, n = groups * per;
  const Eigen::VectorXd w = normal_vector(6, rng);
  const Eigen::MatrixXd X = normal_matrix(n, 6, rng);
  const Eigen::VectorXd level = 10.0 * normal_vector(groups, rng);
  std::vector<GroupId> g(static_cast<std::size_t>(n));
  Eigen::VectorXd y = linear_target(X, w, 0.0, 0.5, rng);
  for (Eigen::Index i = 0; i < n; ++i) {
    g[static_cast<std::size_t>(i)] = 1000 + i / per;
    y(i) += level(i / per);
  }
  BayesLinear m;
  m.fit(X, y, Eigen::VectorXd::Ones(n), g);
  EXPECT_NEAR(m.beta(), 4.0, 0.07 * 4.0);
  // Relative scores: differences between candidates match the true relation.
  const Eigen::VectorXd a = normal_vector(6, rng), b = normal_vector(6, rng);
  EXPECT_NEAR(m.mean(a) - m.mean(b), (a - b).dot(w), 0.05);
}

TEST(BayesLinear, ThompsonDrawsHaveThePosteriorMoments) {
  std::mt19937_64 rng(29);
  const Eigen::MatrixXd X = normal_matrix(30, 3, rng);
  const Eigen::VectorXd w = (Eigen::VectorXd(3) << 0.4, -0.2, 0.1).finished();
  BayesLinearOptions o;
  o.intercept = false;
  o.standardize = false;
  BayesLinear m(o);
  m.fit(X, linear_target(X, w, 0.0, 1.0, rng), Eigen::VectorXd::Ones(30));
  const Eigen::VectorXd mu = m.posterior_mean();
  const Eigen::MatrixXd S = m.posterior_covariance();

  const int draws = 40000;
  Eigen::MatrixXd D(draws, 3);
  for (int k = 0; k < draws; ++k) D.row(k) = m.draw_weights(rng).transpose();
  const Eigen::VectorXd sample_mean = D.colwise().mean().transpose();
  const Eigen::MatrixXd centred = D.rowwise() - sample_mean.transpose();
  const Eigen::MatrixXd sample_cov = centred.transpose() * centred / (draws - 1);
  for (Eigen::Index j = 0; j < 3; ++j)
    EXPECT_NEAR(sample_mean(j), mu(j), 4.0 * std::sqrt(S(j, j) / draws)) << j;
  EXPECT_LT((sample_cov - S).norm() / S.norm(), 0.03);
  // The draws are what predict_with consumes: same value as mean() at the posterior mean.
  const Eigen::VectorXd x = (Eigen::VectorXd(3) << 1, 2, 3).finished();
  EXPECT_NEAR(m.predict_with(mu, x), m.mean(x), 1e-12);
}

TEST(BayesLinear, WeightedRowsEqualDuplicatedRows) {
  std::mt19937_64 rng(31);
  const Eigen::Index n = 40;
  const Eigen::MatrixXd X = normal_matrix(n, 4, rng);
  const Eigen::VectorXd y = linear_target(X, normal_vector(4, rng), 0.5, 0.3, rng);
  Eigen::VectorXd w(n);
  std::vector<GroupId> g(static_cast<std::size_t>(n));
  Eigen::Index total = 0;
  for (Eigen::Index i = 0; i < n; ++i) {
    w(i) = static_cast<double>(1 + i % 3);
    g[static_cast<std::size_t>(i)] = i % 4;
    total += 1 + i % 3;
  }
  Eigen::MatrixXd Xd(total, 4);
  Eigen::VectorXd yd(total);
  std::vector<GroupId> gd;
  Eigen::Index r = 0;
  for (Eigen::Index i = 0; i < n; ++i)
    for (int k = 0; k < 1 + i % 3; ++k, ++r) {
      Xd.row(r) = X.row(i);
      yd(r) = y(i);
      gd.push_back(g[static_cast<std::size_t>(i)]);
    }
  const Eigen::MatrixXd probes = normal_matrix(5, 4, rng);
  for (const bool grouped : {false, true}) {
    BayesLinear a, b;
    if (grouped) {
      a.fit(X, y, w, g);
      b.fit(Xd, yd, Eigen::VectorXd::Ones(total), gd);
    } else {
      a.fit(X, y, w);
      b.fit(Xd, yd, Eigen::VectorXd::Ones(total));
    }
    EXPECT_NEAR(a.alpha(), b.alpha(), 1e-8 * b.alpha()) << grouped;
    EXPECT_NEAR(a.beta(), b.beta(), 1e-8 * b.beta()) << grouped;
    EXPECT_NEAR(a.log_evidence(), b.log_evidence(), 1e-8 * std::abs(b.log_evidence())) << grouped;
    EXPECT_TRUE(a.means(probes).isApprox(b.means(probes), 1e-9)) << grouped;
    EXPECT_TRUE(a.variances(probes).isApprox(b.variances(probes), 1e-9)) << grouped;
  }
}

TEST(BayesLinear, LogEvidenceIsTheMarginalLikelihood) {
  // Without offsets or scaling, the evidence is the Gaussian density of y under
  // N(0, beta^-1 W^-1 + alpha^-1 X X^T) (W: the row weights as precision multipliers), up to the
  // weights' determinant, which duplicated-row counting leaves out: sum(log w) / 2.
  std::mt19937_64 rng(53);
  const Eigen::Index n = 25;
  const Eigen::MatrixXd X = normal_matrix(n, 3, rng);
  const Eigen::VectorXd y = linear_target(X, Eigen::VectorXd::Ones(3), 0.0, 0.7, rng);
  Eigen::VectorXd w(n);
  for (Eigen::Index i = 0; i < n; ++i) w(i) = 0.5 + 0.1 * static_cast<double>(i % 4);
  BayesLinearOptions o;
  o.intercept = false;
  o.standardize = false;
  BayesLinear m(o);
  m.fit(X, y, w);
  Eigen::MatrixXd C = X * X.transpose() / m.alpha();
  C.diagonal() += (w.array() * m.beta()).inverse().matrix();
  const Eigen::LLT<Eigen::MatrixXd> llt(C);
  const double log_det = 2.0 * llt.matrixL().toDenseMatrix().diagonal().array().log().sum();
  const double quad = y.dot(llt.solve(y));
  const double gaussian = -0.5 * (quad + log_det + static_cast<double>(n) * std::log(2.0 * std::acos(-1.0)));
  // Frequency weights: each row's density is raised to the power w_i, i.e. N(y | ., (beta w)^-1)
  // differs from p(y)^w by 0.5 log w + 0.5 (1 - w) log(beta / 2 pi).
  double correction = 0;
  for (Eigen::Index i = 0; i < n; ++i)
    correction += -0.5 * std::log(w(i)) - 0.5 * (1.0 - w(i)) * std::log(m.beta() / (2.0 * std::acos(-1.0)));
  EXPECT_NEAR(m.log_evidence(), gaussian + correction, 1e-9 * std::abs(gaussian));
}

TEST(BayesLinear, InterceptUncertaintyAtTheDataCentre) {
  // At the weighted mean of the features only the intercept is uncertain: 1 / (beta * sum w).
  std::mt19937_64 rng(59);
  const Eigen::MatrixXd X = normal_matrix(50, 2, rng);
  const Eigen::VectorXd y = linear_target(X, Eigen::VectorXd::Ones(2), 3.0, 0.4, rng);
  const Eigen::VectorXd w = Eigen::VectorXd::LinSpaced(50, 0.5, 1.5);
  BayesLinear m;
  m.fit(X, y, w);
  const Eigen::VectorXd centre = X.transpose() * w / w.sum();
  EXPECT_NEAR(m.variance(centre), 1.0 / (m.beta() * w.sum()), 1e-12);
  EXPECT_NEAR(m.mean(centre), y.dot(w) / w.sum(), 1e-12);
  EXPECT_GT(m.variance(centre + Eigen::VectorXd::Ones(2)), m.variance(centre));
}

TEST(BayesLinear, FewerRowsThanFeatures) {
  std::mt19937_64 rng(37);
  const Eigen::MatrixXd X = normal_matrix(5, 60, rng);
  const Eigen::VectorXd y = normal_vector(5, rng);
  BayesLinear m;
  m.fit(X, y, Eigen::VectorXd::Ones(5));
  EXPECT_TRUE(std::isfinite(m.alpha()) && m.alpha() > 0);
  EXPECT_TRUE(std::isfinite(m.beta()) && m.beta() > 0);
  EXPECT_TRUE(std::isfinite(m.log_evidence()));
  const Eigen::MatrixXd probes = normal_matrix(10, 60, rng);
  const Eigen::VectorXd v = m.variances(probes);
  EXPECT_TRUE(v.allFinite());
  EXPECT_GT(v.minCoeff(), 0.0);
  EXPECT_TRUE(m.draw_weights(rng).allFinite());
}

TEST(BayesLinear, NearSingularPosteriorStillDraws) {
  // Duplicated and nearly duplicated columns plus a constant column: the data precision has
  // eigenvalues from 0 to ~1e5 and the posterior covariance is near-singular in some directions.
  std::mt19937_64 rng(41);
  Eigen::MatrixXd X = normal_matrix(20000, 6, rng);
  X.col(1) = X.col(0);
  X.col(2) = X.col(0) + 1e-9 * X.col(3);
  X.col(5).setConstant(3.0);
  const Eigen::VectorXd y = linear_target(X.leftCols(1), Eigen::VectorXd::Ones(1), 0.0, 1e-4, rng);
  BayesLinear m;
  m.fit(X, y, Eigen::VectorXd::Ones(20000));
  for (int k = 0; k < 100; ++k) ASSERT_TRUE(m.draw_weights(rng).allFinite());
  const Eigen::MatrixXd S = m.posterior_covariance();
  EXPECT_GE(Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(S).eigenvalues().minCoeff(), -1e-12);
  // The relation is still recovered through the collinear columns.
  EXPECT_NEAR(raw_slope(m, 0) + raw_slope(m, 1) + raw_slope(m, 2), 1.0, 1e-3);
}

TEST(BayesLinear, EvidencePrefersInformativeFeatures) {
  std::mt19937_64 rng(43);
  const Eigen::MatrixXd X = normal_matrix(200, 3, rng);
  const Eigen::VectorXd y = linear_target(X, Eigen::VectorXd::Ones(3), 0.0, 0.5, rng);
  BayesLinear good, noise;
  good.fit(X, y, Eigen::VectorXd::Ones(200));
  noise.fit(normal_matrix(200, 3, rng), y, Eigen::VectorXd::Ones(200));
  EXPECT_GT(good.log_evidence(), noise.log_evidence() + 50.0);
  EXPECT_GT(noise.alpha(), good.alpha());  // no signal: the prior shrinks the weights harder
}

TEST(BayesLinear, LargeFitIsFast) {
  std::mt19937_64 rng(47);
#ifdef NDEBUG
  const Eigen::Index n = 20000, d = 60;
#else
  // Unoptimized Eigen under the sanitizers is ~50x slower; the memory checks need no full size.
  const Eigen::Index n = 4000, d = 60;
#endif
  const Eigen::MatrixXd X = normal_matrix(n, d, rng);
  const Eigen::VectorXd w = normal_vector(d, rng);
  const Eigen::VectorXd y = linear_target(X, w, 0.0, 1.0, rng);
  const auto start = std::chrono::steady_clock::now();
  BayesLinear m;
  m.fit(X, y, Eigen::VectorXd::Ones(n));
  const Eigen::VectorXd mu = m.means(X.topRows(n / 2));  // scoring 10,000 candidates
  const Eigen::VectorXd var = m.variances(X.topRows(n / 2));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("fit_and_score_seconds", std::to_string(seconds));
  EXPECT_TRUE(mu.allFinite() && var.allFinite());
  EXPECT_NEAR(m.beta(), 1.0, 0.06);
  for (Eigen::Index j = 0; j < d; ++j) ASSERT_NEAR(raw_slope(m, j), w(j), 0.08) << j;
#ifdef NDEBUG
  EXPECT_LT(seconds, 1.0);  // optimized builds only; sanitizer builds are far slower
#endif
}

TEST(BayesLinear, RejectsBadInput) {
  BayesLinear m;
  const Eigen::MatrixXd X = Eigen::MatrixXd::Ones(3, 2);
  EXPECT_THROW(m.mean(Eigen::VectorXd::Zero(2)), std::logic_error);
  EXPECT_THROW(m.fit(X, Eigen::VectorXd::Zero(2), Eigen::VectorXd::Ones(3)), std::invalid_argument);
  EXPECT_THROW(m.fit(X, Eigen::VectorXd::Zero(3), Eigen::VectorXd::Zero(3)), std::invalid_argument);
  EXPECT_THROW(m.fit(X, Eigen::VectorXd::Zero(3), -Eigen::VectorXd::Ones(3)), std::invalid_argument);
}

}  // namespace
}  // namespace ptxevo::search::prior
