#include "search/prior/logistic_validity.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "search/prior/tests/synthetic.hpp"

namespace ptxevo::search::prior {
namespace {

using testing::normal_matrix;

double sigmoid(double e) { return 1.0 / (1.0 + std::exp(-e)); }

TEST(LogisticValidity, RecoversAKnownBoundary) {
  std::mt19937_64 rng(3);
  const Eigen::Index n = 20000;
  const Eigen::MatrixXd X = normal_matrix(n, 2, rng);
  const auto truth = [](double x1, double x2) { return sigmoid(0.5 + 2.0 * x1 - 1.5 * x2); };
  Eigen::VectorXd valid(n);
  std::uniform_real_distribution<double> u;
  for (Eigen::Index i = 0; i < n; ++i) valid(i) = u(rng) < truth(X(i, 0), X(i, 1)) ? 1.0 : 0.0;
  LogisticOptions o;
  o.l2 = 1e-3;
  LogisticValidity m(o);
  m.fit(X, valid, Eigen::VectorXd::Ones(n));
  EXPECT_TRUE(m.converged());
  EXPECT_LT(m.iterations(), 15);
  for (const double x1 : {-1.0, 0.0, 0.7})
    for (const double x2 : {-1.0, 0.3, 1.0}) {
      const Eigen::VectorXd x = (Eigen::VectorXd(2) << x1, x2).finished();
      EXPECT_NEAR(m.probability(x), truth(x1, x2), 0.03) << x1 << "," << x2;
    }
  // The boundary: P = 0.5 where 0.5 + 2 x1 - 1.5 x2 = 0.
  EXPECT_NEAR(m.probability((Eigen::VectorXd(2) << 0.5, 1.0).finished()), 0.5, 0.03);
  EXPECT_NEAR(m.probabilities(X.topRows(3))(2), m.probability(X.row(2).transpose()), 1e-15);
}

TEST(LogisticValidity, SeparableDataStaysFinite) {
  std::mt19937_64 rng(5);
  const Eigen::MatrixXd X = normal_matrix(400, 3, rng);
  Eigen::VectorXd valid(400);
  for (Eigen::Index i = 0; i < 400; ++i) valid(i) = X(i, 0) > 0 ? 1.0 : 0.0;  // perfectly separable
  LogisticValidity m;
  m.fit(X, valid, Eigen::VectorXd::Ones(400));
  EXPECT_TRUE(m.converged());
  EXPECT_TRUE(m.slopes().allFinite());
  EXPECT_TRUE(std::isfinite(m.intercept()));
  EXPECT_LT(m.slopes().cwiseAbs().maxCoeff(), 100.0);
  EXPECT_GT(m.probability((Eigen::VectorXd(3) << 1.5, 0, 0).finished()), 0.9);
  EXPECT_LT(m.probability((Eigen::VectorXd(3) << -1.5, 0, 0).finished()), 0.1);
  EXPECT_GT(std::abs(m.slopes()(0)), 5.0 * std::abs(m.slopes()(1)));
}

TEST(LogisticValidity, OneClassOnlyStaysFinite) {
  std::mt19937_64 rng(7);
  const Eigen::MatrixXd X = normal_matrix(100, 2, rng);
  LogisticValidity m;
  m.fit(X, Eigen::VectorXd::Ones(100), Eigen::VectorXd::Ones(100));
  EXPECT_TRUE(std::isfinite(m.intercept()));
  EXPECT_GT(m.probability(Eigen::VectorXd::Zero(2)), 0.95);
}

TEST(LogisticValidity, IterationCapIsFlagged) {
  std::mt19937_64 rng(9);
  const Eigen::MatrixXd X = normal_matrix(300, 2, rng);
  Eigen::VectorXd valid(300);
  for (Eigen::Index i = 0; i < 300; ++i) valid(i) = X(i, 0) + 0.3 * X(i, 1) > 0.2 ? 1.0 : 0.0;
  LogisticOptions o;
  o.l2 = 1e-4;
  o.max_iterations = 1;
  LogisticValidity m(o);
  m.fit(X, valid, Eigen::VectorXd::Ones(300));
  EXPECT_FALSE(m.converged());
  EXPECT_EQ(m.iterations(), 1);
  EXPECT_TRUE(m.slopes().allFinite());
}

TEST(LogisticValidity, WeightsActLikeDuplicates) {
  std::mt19937_64 rng(13);
  const Eigen::MatrixXd X = normal_matrix(60, 2, rng);
  Eigen::VectorXd valid(60), w(60);
  std::uniform_real_distribution<double> u;
  for (Eigen::Index i = 0; i < 60; ++i) {
    valid(i) = u(rng) < sigmoid(X(i, 0)) ? 1.0 : 0.0;
    w(i) = i % 2 ? 2.0 : 1.0;
  }
  Eigen::MatrixXd Xd(90, 2);
  Eigen::VectorXd vd(90);
  Eigen::Index r = 0;
  for (Eigen::Index i = 0; i < 60; ++i)
    for (int k = 0; k < (i % 2 ? 2 : 1); ++k, ++r) {
      Xd.row(r) = X.row(i);
      vd(r) = valid(i);
    }
  LogisticValidity a, b;
  a.fit(X, valid, w);
  b.fit(Xd, vd, Eigen::VectorXd::Ones(90));
  EXPECT_NEAR(a.penalized_loss(), b.penalized_loss(), 1e-9);
  EXPECT_TRUE(a.probabilities(X).isApprox(b.probabilities(X), 1e-9));
}

TEST(CategoryValidity, BetaPosteriorPerOperator) {
  CategoryValidity v;  // Beta(1, 1)
  for (int i = 0; i < 8; ++i) v.add("widen_loads", true);
  for (int i = 0; i < 2; ++i) v.add("widen_loads", false);
  v.add("unroll", false, 3.0);
  EXPECT_DOUBLE_EQ(v.probability("widen_loads"), 9.0 / 12.0);
  EXPECT_DOUBLE_EQ(v.probability("unroll"), 1.0 / 5.0);
  EXPECT_DOUBLE_EQ(v.probability("never_seen"), 0.5);
  EXPECT_DOUBLE_EQ(v.failures(), 5.0);
  EXPECT_DOUBLE_EQ(v.successes(), 8.0);
}

TEST(CategoryValidity, ModelChoiceNeedsEnoughFailures) {
  EXPECT_EQ(choose_validity_model(49, 1000), ValidityModel::CategoryBeta);
  EXPECT_EQ(choose_validity_model(50, 1000), ValidityModel::Logistic);
  EXPECT_EQ(choose_validity_model(500, 10), ValidityModel::CategoryBeta);
  EXPECT_EQ(choose_validity_model(20, 30, 20), ValidityModel::Logistic);
}

// Two knobs, each with values 1..16, that pass alone and fail together: the gate fails when
// A x B > 16 (a size or register limit), with 5% of the outcomes flipped (noise). The rates per
// knob value, the weakest counting, cannot express it (A = 16 fails with most B, so they also
// condemn A = 16, B = 1); the logistic model on the log2 knob values (the cost model's columns)
// draws the line.
TEST(ValidityEstimator, ALogisticModelSeesAnInteractionTheRatesPerCategoryCannot) {
  const std::vector<int> values = {1, 2, 4, 8, 16};
  const auto truth = [](int a, int b) { return a * b <= 16 ? 0.95 : 0.05; };
  auto categories = [](int a, int b) {
    return std::vector<std::string>{"s:A=" + std::to_string(a), "s:B=" + std::to_string(b)};
  };
  auto features = [](int a, int b) { return std::vector<double>{std::log2(a), std::log2(b)}; };
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<std::size_t> pick(0, values.size() - 1);
  std::uniform_real_distribution<double> u;
  ValidityEstimator est(2.0, 0.25, 30.0);
  EXPECT_EQ(est.model(), ValidityModel::CategoryBeta);
  int added = 0;
  while (est.model() == ValidityModel::CategoryBeta) {
    const int a = values[pick(rng)], b = values[pick(rng)];
    est.add(categories(a, b), features(a, b), u(rng) < truth(a, b));
    ++added;
    // Before the switch the estimate is the rates' (the weakest category).
    if (est.model() == ValidityModel::CategoryBeta) {
      EXPECT_DOUBLE_EQ(est.probability(categories(2, 2), features(2, 2)), est.category_probability(categories(2, 2)));
    }
  }
  for (int i = 0; i < 200; ++i) {  // a campaign's worth of gate outcomes
    const int a = values[pick(rng)], b = values[pick(rng)];
    est.add(categories(a, b), features(a, b), u(rng) < truth(a, b));
  }
  EXPECT_EQ(est.model(), ValidityModel::Logistic);
  EXPECT_GE(est.failures(), 30.0);
  // Brier score over the 25 cells (each equally likely) against the true pass probability.
  double brier_logistic = 0, brier_rates = 0;
  for (const int a : values)
    for (const int b : values) {
      const double p = truth(a, b);
      const double pl = est.probability(categories(a, b), features(a, b));
      const double pr = est.category_probability(categories(a, b));
      // Expected squared error of a forecast against a Bernoulli(p) outcome.
      brier_logistic += p * (1 - pl) * (1 - pl) + (1 - p) * pl * pl;
      brier_rates += p * (1 - pr) * (1 - pr) + (1 - p) * pr * pr;
    }
  brier_logistic /= 25;
  brier_rates /= 25;
  std::printf("validity Brier over the 25 cells after %d + 200 outcomes: logistic %.3f, Beta rates %.3f "
              "(a perfect forecast scores %.3f)\n",
              added, brier_logistic, brier_rates, 0.95 * 0.05);
  EXPECT_LT(brier_logistic, 0.7 * brier_rates);
  // The cells the rates get wrong: A = 16 with B = 1 passes, A = 4 with B = 8 fails.
  EXPECT_GT(est.probability(categories(16, 1), features(16, 1)), 0.7);
  EXPECT_LT(est.category_probability(categories(16, 1)), 0.5);
  EXPECT_LT(est.probability(categories(4, 8), features(4, 8)), 0.3);
  // And the ranking: every passing cell above every failing one (the selection multiplies by it).
  double worst_pass = 1, best_fail = 0;
  for (const int a : values)
    for (const int b : values) {
      const double pl = est.probability(categories(a, b), features(a, b));
      if (a * b <= 16) worst_pass = std::min(worst_pass, pl);
      else best_fail = std::max(best_fail, pl);
    }
  EXPECT_GT(worst_pass, best_fail);
}

TEST(ValidityEstimator, OutcomesWithoutFeaturesCountForTheRatesOnly) {
  ValidityEstimator est(1.0, 1.0, 1.0);
  est.add({"pass:x"}, {}, false);
  est.add({"pass:x"}, {}, true);
  EXPECT_EQ(est.rows(), 0u);
  EXPECT_EQ(est.model(), ValidityModel::CategoryBeta);
  EXPECT_DOUBLE_EQ(est.probability({"pass:x"}, {1.0}), 0.5);
  est.add({"pass:y"}, {1.0}, false);
  est.add({"pass:y"}, {0.0}, true);
  est.add({"pass:y"}, {0.0, 1.0}, true);  // another width: ignored by the model
  EXPECT_EQ(est.rows(), 2u);
  EXPECT_EQ(est.model(), ValidityModel::Logistic);
  EXPECT_LT(est.probability({"pass:y"}, {1.0}), est.probability({"pass:y"}, {0.0}));
  // A candidate without features (or of another width) falls back to the rates.
  EXPECT_DOUBLE_EQ(est.probability({"pass:x"}, {}), est.category_probability({"pass:x"}));
}

}  // namespace
}  // namespace ptxevo::search::prior
