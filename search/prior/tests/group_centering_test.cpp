#include "search/prior/group_centering.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace ptxevo::search::prior {
namespace {

TEST(GroupCentering, WeightedMeansPerGroupByHand) {
  const std::vector<GroupId> g = {7, 7, 3, 3, 3};
  const Eigen::VectorXd w = (Eigen::VectorXd(5) << 1, 3, 1, 1, 2).finished();
  const Eigen::VectorXd y = (Eigen::VectorXd(5) << 2, 6, 1, 2, 5).finished();
  const GroupCentering gc(g, w);
  ASSERT_EQ(gc.n_groups(), 2u);
  EXPECT_EQ(gc.ids()[0], 7);
  EXPECT_EQ(gc.ids()[1], 3);
  const Eigen::VectorXd means = gc.target_means(y);
  EXPECT_DOUBLE_EQ(means(0), (2.0 + 18.0) / 4.0);       // group 7: 5
  EXPECT_DOUBLE_EQ(means(1), (1.0 + 2.0 + 10.0) / 4.0);  // group 3: 3.25
  const Eigen::VectorXd c = gc.center_target(y);
  EXPECT_DOUBLE_EQ(c(0), -3.0);
  EXPECT_DOUBLE_EQ(c(4), 1.75);
  // Weighted sums of the centred values vanish in every group.
  EXPECT_NEAR(w(0) * c(0) + w(1) * c(1), 0.0, 1e-12);
  EXPECT_NEAR(w(2) * c(2) + w(3) * c(3) + w(4) * c(4), 0.0, 1e-12);
}

TEST(GroupCentering, CentresEveryFeatureColumn) {
  const std::vector<GroupId> g = {1, 2, 1, 2};
  const Eigen::VectorXd w = Eigen::VectorXd::Ones(4);
  Eigen::MatrixXd X(4, 2);
  X << 1, 10, 100, 1000, 3, 30, 300, 3000;
  const Eigen::MatrixXd C = GroupCentering(g, w).center_features(X);
  Eigen::MatrixXd expected(4, 2);
  expected << -1, -10, -100, -1000, 1, 10, 100, 1000;
  EXPECT_TRUE(C.isApprox(expected));
}

TEST(GroupCentering, ZeroWeightGroupUsesPlainMean) {
  const std::vector<GroupId> g = {1, 1, 2, 2};
  const Eigen::VectorXd w = (Eigen::VectorXd(4) << 1, 1, 0, 0).finished();
  const Eigen::VectorXd y = (Eigen::VectorXd(4) << 1, 3, 10, 20).finished();
  const GroupCentering gc(g, w);
  EXPECT_EQ(gc.n_weighted_groups(), 1u);
  const Eigen::VectorXd c = gc.center_target(y);
  EXPECT_TRUE(c.allFinite());
  EXPECT_DOUBLE_EQ(c(2), -5.0);
  EXPECT_DOUBLE_EQ(c(3), 5.0);
}

}  // namespace
}  // namespace ptxevo::search::prior
