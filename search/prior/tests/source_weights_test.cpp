#include "search/prior/source_weights.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "search/prior/tests/synthetic.hpp"

namespace ptxevo::search::prior {
namespace {

using testing::linear_target;
using testing::normal_matrix;

TEST(SourceWeights, KindTimesFade) {
  const Environment h200{"H200", "580.65", "cuda-13.0"};
  Environment new_driver = h200;
  new_driver.driver = "580.82";
  EXPECT_DOUBLE_EQ(environment_weight(h200, h200), 1.0);
  EXPECT_DOUBLE_EQ(environment_weight(new_driver, h200), 0.3);
  EXPECT_DOUBLE_EQ(environment_weight(Environment{"B200", "580.65", "cuda-13.0"}, h200), 0.3);
  EXPECT_DOUBLE_EQ(fade(0, 64), 1.0);
  EXPECT_DOUBLE_EQ(fade(64, 64), 0.5);
  EXPECT_DOUBLE_EQ(source_row_weight(h200, h200, 0), 1.0);
  EXPECT_DOUBLE_EQ(source_row_weight(new_driver, h200, 64), 0.15);
  SourceWeightOptions o;
  o.other_environment = 0.1;
  o.fade_rows = 100;
  EXPECT_DOUBLE_EQ(source_row_weight(new_driver, h200, 300, o), 0.1 * 0.25);
}

// Rows of y = X w + group level + noise, `groups` groups of `per` rows with ids from `first_id`.
RowSet rows(const Eigen::VectorXd& w, Eigen::Index groups, Eigen::Index per, GroupId first_id, double sigma,
            std::mt19937_64& rng) {
  const Eigen::Index n = groups * per;
  RowSet r;
  r.X = normal_matrix(n, w.size(), rng);
  r.y = linear_target(r.X, w, 0.0, sigma, rng);
  r.w = Eigen::VectorXd::Ones(n);
  std::normal_distribution<double> level(0.0, 5.0);
  for (Eigen::Index g = 0; g < groups; ++g) {
    const double l = level(rng);
    for (Eigen::Index k = 0; k < per; ++k) {
      r.y(g * per + k) += l;
      r.groups.push_back(first_id + g);
    }
  }
  return r;
}

// The guard's comparison is a noisy cross-validation on 60 new rows, so each relation is judged
// over 20 data sets: rows of the same relation are kept in most, rows of a relation with its
// coefficients permuted are dropped in (nearly) all.
TEST(SourceWeights, GuardKeepsRowsFromTheSameRelation) {
  const Eigen::VectorXd w = (Eigen::VectorXd(6) << 1.0, -0.8, 0.6, 0.3, -0.2, 0.1).finished();
  int kept = 0;
  double gain = 0;
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    std::mt19937_64 rng(seed);
    const RowSet old_rows = rows(w, 10, 60, 100, 1.0, rng);
    const RowSet new_rows = rows(w, 4, 15, 900, 1.0, rng);
    const GuardDecision d = guard_old_rows(old_rows, new_rows, rng);
    ASSERT_TRUE(d.evaluated);
    EXPECT_EQ(d.groups_scored, 4u);
    EXPECT_GT(d.rho_with_old, 0.5);
    kept += d.keep_old;
    gain += d.rho_with_old - d.rho_new_only;
  }
  EXPECT_GE(kept, 17);
  EXPECT_GT(gain / 20, 0.0);  // on average the old rows help
}

TEST(SourceWeights, GuardDropsRowsFromAShuffledRelation) {
  const Eigen::VectorXd w = (Eigen::VectorXd(6) << 1.0, -0.8, 0.6, 0.3, -0.2, 0.1).finished();
  const Eigen::VectorXd shuffled = w.reverse();  // same magnitudes on other features
  int dropped = 0;
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    std::mt19937_64 rng(seed);
    const RowSet old_rows = rows(shuffled, 10, 60, 100, 1.0, rng);
    const RowSet new_rows = rows(w, 4, 15, 900, 1.0, rng);
    const GuardDecision d = guard_old_rows(old_rows, new_rows, rng);
    ASSERT_TRUE(d.evaluated);
    EXPECT_GT(d.rho_new_only, 0.3);  // the new rows alone do rank their data
    dropped += !d.keep_old;
  }
  EXPECT_GE(dropped, 19);
}

TEST(SourceWeights, GuardKeepsOldRowsWithoutEnoughNewOnes) {
  std::mt19937_64 rng(4);
  const Eigen::VectorXd w = Eigen::VectorXd::Ones(3);
  const RowSet old_rows = rows(w.reverse(), 5, 20, 0, 1.0, rng);
  const RowSet few = rows(w, 1, 6, 50, 1.0, rng);  // 6 < 2 * 5 folds
  const GuardDecision d = guard_old_rows(old_rows, few, rng);
  EXPECT_FALSE(d.evaluated);
  EXPECT_TRUE(d.keep_old);
}

TEST(SourceWeights, GuardIsDeterministicForASeed) {
  std::mt19937_64 data(6);
  const Eigen::VectorXd w = Eigen::VectorXd::LinSpaced(4, -1.0, 1.0);
  const RowSet old_rows = rows(w, 3, 30, 0, 0.5, data);
  const RowSet new_rows = rows(w, 3, 10, 50, 0.5, data);
  std::mt19937_64 a(1), b(1);
  const GuardDecision da = guard_old_rows(old_rows, new_rows, a);
  const GuardDecision db = guard_old_rows(old_rows, new_rows, b);
  EXPECT_EQ(da.rho_with_old, db.rho_with_old);
  EXPECT_EQ(da.rho_new_only, db.rho_new_only);
}

}  // namespace
}  // namespace ptxevo::search::prior
