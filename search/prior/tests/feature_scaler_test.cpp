#include "search/prior/feature_scaler.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

namespace ptxevo::search::prior {
namespace {

TEST(FeatureScaler, WeightedMeanAndSpreadByHand) {
  Eigen::MatrixXd X(3, 1);
  X << 1, 2, 3;
  const Eigen::VectorXd w = (Eigen::VectorXd(3) << 1, 1, 2).finished();
  FeatureScaler s;
  s.fit(X, w);
  // mean (1 + 2 + 6) / 4 = 2.25; variance (1.25^2 + 0.25^2 + 2 * 0.75^2) / 4 = 0.6875
  EXPECT_DOUBLE_EQ(s.mean()(0), 2.25);
  EXPECT_NEAR(s.scale()(0), std::sqrt(0.6875), 1e-15);
  EXPECT_NEAR(s.transform_row(Eigen::VectorXd::Constant(1, 3.0))(0), 0.75 / std::sqrt(0.6875), 1e-14);
}

TEST(FeatureScaler, StandardizesWeightedColumns) {
  Eigen::MatrixXd X(4, 2);
  X << 1, 100, 2, 300, 4, 200, 8, 400;
  const Eigen::VectorXd w = (Eigen::VectorXd(4) << 0.5, 1, 2, 1.5).finished();
  FeatureScaler s;
  s.fit(X, w);
  const Eigen::MatrixXd Z = s.transform(X);
  const Eigen::VectorXd wmean = Z.transpose() * w / w.sum();
  const Eigen::VectorXd wvar = Z.array().square().matrix().transpose() * w / w.sum();
  EXPECT_LT(wmean.cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_NEAR(wvar(0), 1.0, 1e-12);
  EXPECT_NEAR(wvar(1), 1.0, 1e-12);
}

TEST(FeatureScaler, ConstantColumnsGiveNoNaN) {
  Eigen::MatrixXd X(3, 2);
  X << 1, 5, 2, 5, 3, 5;  // second column constant
  FeatureScaler s;
  s.fit(X);
  EXPECT_FALSE(s.constant(0));
  EXPECT_TRUE(s.constant(1));
  EXPECT_DOUBLE_EQ(s.scale()(1), 1.0);
  const Eigen::MatrixXd Z = s.transform(X);
  EXPECT_TRUE(Z.allFinite());
  EXPECT_EQ(Z.col(1).cwiseAbs().maxCoeff(), 0.0);
  // A new row with another value is shifted, not blown up.
  EXPECT_DOUBLE_EQ(s.transform_row((Eigen::VectorXd(2) << 2, 7).finished())(1), 2.0);
}

TEST(FeatureScaler, LargeOffsetConstantColumnIsConstant) {
  // 1e9 + tiny rounding differences must not turn into a scale of ~1e-7.
  Eigen::MatrixXd X(3, 1);
  X << 1e9, 1e9, 1e9;
  FeatureScaler s;
  s.fit(X);
  EXPECT_TRUE(s.constant(0));
}

TEST(FeatureScaler, RejectsBadInput) {
  FeatureScaler s;
  const Eigen::MatrixXd X = Eigen::MatrixXd::Ones(2, 2);
  EXPECT_THROW(s.fit(X, Eigen::VectorXd::Zero(2)), std::invalid_argument);
  EXPECT_THROW(s.fit(X, Eigen::VectorXd::Ones(3)), std::invalid_argument);
  EXPECT_THROW(s.transform(X), std::logic_error);
  s.fit(X);
  EXPECT_THROW(s.transform(Eigen::MatrixXd::Ones(2, 3)), std::invalid_argument);
}

}  // namespace
}  // namespace ptxevo::search::prior
