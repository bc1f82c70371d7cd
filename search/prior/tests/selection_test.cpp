#include "search/prior/selection.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "search/prior/tests/synthetic.hpp"

namespace ptxevo::search::prior {
namespace {

using testing::linear_target;
using testing::normal_matrix;
using testing::normal_vector;

struct Scenario {
  BayesLinear model;
  Eigen::MatrixXd candidates;
  Eigen::VectorXd true_log_time;
};

// A model fitted on `rows` rows of y = X w + noise, and 50 fresh candidates.
Scenario make(Eigen::Index rows, double sigma, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const Eigen::VectorXd w = (Eigen::VectorXd(3) << 1.0, -0.5, 0.8).finished();
  const Eigen::MatrixXd X = normal_matrix(rows, 3, rng);
  Scenario s;
  s.model.fit(X, linear_target(X, w, 0.0, sigma, rng), Eigen::VectorXd::Ones(rows));
  s.candidates = normal_matrix(50, 3, rng);
  s.true_log_time = s.candidates * w;
  return s;
}

std::size_t true_best(const Scenario& s) {
  Eigen::Index best = 0;
  s.true_log_time.minCoeff(&best);
  return static_cast<std::size_t>(best);
}

TEST(Selection, ScoreIsLogOfValidSpeed) {
  EXPECT_DOUBLE_EQ(selection_score(0.5, 1.0), -0.5);
  EXPECT_NEAR(selection_score(0.5, 0.5), std::log(0.5) - 0.5, 1e-15);
  EXPECT_EQ(selection_score(-3.0, 0.0), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(selection_score(std::nan(""), 1.0), -std::numeric_limits<double>::infinity());
  // A likely-invalid fast candidate loses to a sure one slightly slower.
  EXPECT_LT(selection_score(-1.0, 0.2), selection_score(-0.5, 1.0));
}

TEST(Selection, ConfidentModelPicksTheTrueBest) {
  const Scenario s = make(2000, 0.05, 1);
  const Eigen::VectorXd ones = Eigen::VectorXd::Ones(50);
  SelectionOptions o;
  o.epsilon = 0;
  int hits = 0;
  std::set<std::size_t> winners;
  for (std::uint64_t seed = 0; seed < 100; ++seed) {
    std::mt19937_64 rng(seed);
    const auto picks = select_batch(s.model, s.candidates, ones, ones, 1, rng, o);
    ASSERT_EQ(picks.size(), 1u);
    EXPECT_EQ(picks[0].reason, PickReason::Thompson);
    hits += picks[0].index == true_best(s);
    winners.insert(picks[0].index);
  }
  EXPECT_GE(hits, 95);
  EXPECT_LE(winners.size(), 2u);
}

TEST(Selection, InvalidCandidatesAreAvoided) {
  const Scenario s = make(2000, 0.05, 1);
  Eigen::VectorXd p_valid = Eigen::VectorXd::Ones(50);
  p_valid(static_cast<Eigen::Index>(true_best(s))) = 0.0;
  SelectionOptions o;
  o.epsilon = 0;
  std::mt19937_64 rng(3);
  const auto picks = select_batch(s.model, s.candidates, p_valid, Eigen::VectorXd::Zero(50), 10, rng, o);
  for (const Pick& p : picks) EXPECT_NE(p.index, true_best(s));
}

TEST(Selection, UncertainModelSpreadsPicks) {
  // Just above the cold-start threshold (3 d = 9 rows) with heavy noise: the posterior is wide.
  const Scenario s = make(10, 3.0, 2);
  ASSERT_FALSE(is_cold_start(s.model));
  const Eigen::VectorXd ones = Eigen::VectorXd::Ones(50);
  SelectionOptions o;
  o.epsilon = 0;
  std::set<std::size_t> winners;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    std::mt19937_64 rng(seed);
    winners.insert(select_batch(s.model, s.candidates, ones, ones, 1, rng, o)[0].index);
  }
  EXPECT_GE(winners.size(), 6u);
  // One batch never picks a candidate twice.
  std::mt19937_64 rng(1);
  const auto batch = select_batch(s.model, s.candidates, ones, ones, 20, rng, o);
  std::set<std::size_t> distinct;
  for (const Pick& p : batch) distinct.insert(p.index);
  EXPECT_EQ(distinct.size(), 20u);
}

TEST(Selection, EpsilonSlotsArePickedAtRandom) {
  const Scenario s = make(2000, 0.05, 1);
  const Eigen::VectorXd ones = Eigen::VectorXd::Ones(50);
  SelectionOptions o;
  o.epsilon = 0.25;
  std::mt19937_64 rng(4);
  const auto picks = select_batch(s.model, s.candidates, ones, ones, 20, rng, o);
  ASSERT_EQ(picks.size(), 20u);
  const auto random = std::count_if(picks.begin(), picks.end(), [](const Pick& p) { return p.reason == PickReason::Random; });
  EXPECT_EQ(random, 5);
  std::set<std::size_t> distinct;
  for (const Pick& p : picks) distinct.insert(p.index);
  EXPECT_EQ(distinct.size(), 20u);

  // The default epsilon with small batches: a random slot in about epsilon * B of the batches.
  long total = 0;
  for (std::uint64_t seed = 0; seed < 1000; ++seed) {
    std::mt19937_64 r(seed);
    const auto b = select_batch(s.model, s.candidates, ones, ones, 4, r);
    total += std::count_if(b.begin(), b.end(), [](const Pick& p) { return p.reason == PickReason::Random; });
  }
  EXPECT_NEAR(static_cast<double>(total) / 1000.0, 0.2, 0.05);
}

TEST(Selection, DeterministicForASeed) {
  const Scenario s = make(10, 3.0, 2);
  const Eigen::VectorXd ones = Eigen::VectorXd::Ones(50);
  SelectionOptions o;
  o.epsilon = 0.2;
  std::mt19937_64 a(99), b(99), c(100);
  const auto pa = select_batch(s.model, s.candidates, ones, ones, 10, a, o);
  const auto pb = select_batch(s.model, s.candidates, ones, ones, 10, b, o);
  const auto pc = select_batch(s.model, s.candidates, ones, ones, 10, c, o);
  ASSERT_EQ(pa.size(), pb.size());
  bool differs = false;
  for (std::size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].index, pb[i].index);
    EXPECT_EQ(pa[i].reason, pb[i].reason);
    differs = differs || pa[i].index != pc[i].index;
  }
  EXPECT_TRUE(differs);
}

TEST(Selection, ColdStartRanksByTheAnalyticScore) {
  std::mt19937_64 rng(6);
  const Eigen::VectorXd analytic = normal_vector(50, rng);
  Eigen::VectorXd p_valid = Eigen::VectorXd::Ones(50);
  p_valid(7) = 0.01;  // would otherwise be a top pick: the validity factor applies here too
  Eigen::VectorXd scores(50);
  for (Eigen::Index i = 0; i < 50; ++i) scores(i) = selection_score(analytic(i), p_valid(i));
  std::vector<std::size_t> order(50);
  for (std::size_t i = 0; i < 50; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return scores(static_cast<Eigen::Index>(a)) > scores(static_cast<Eigen::Index>(b));
  });

  SelectionOptions o;
  o.epsilon = 0;
  for (const Eigen::Index rows : {0, 8}) {  // unfitted, and fitted below 3 d rows
    BayesLinear model;
    if (rows > 0) {
      const Eigen::MatrixXd X = normal_matrix(rows, 3, rng);
      model.fit(X, normal_vector(rows, rng), Eigen::VectorXd::Ones(rows));
    }
    ASSERT_TRUE(is_cold_start(model));
    std::mt19937_64 r(1);
    const auto picks = select_batch(model, Eigen::MatrixXd(0, 3), p_valid, analytic, 5, r, o);
    ASSERT_EQ(picks.size(), 5u);
    for (std::size_t k = 0; k < 5; ++k) {
      EXPECT_EQ(picks[k].index, order[k]);
      EXPECT_EQ(picks[k].reason, PickReason::Analytic);
    }
  }
}

TEST(Selection, MoreSlotsThanCandidatesTakesAll) {
  const Scenario s = make(2000, 0.05, 1);
  std::mt19937_64 rng(8);
  const auto picks = select_batch(s.model, s.candidates.topRows(4), Eigen::VectorXd::Ones(4),
                                  Eigen::VectorXd::Ones(4), 10, rng);
  std::set<std::size_t> distinct;
  for (const Pick& p : picks) distinct.insert(p.index);
  EXPECT_EQ(distinct.size(), 4u);
  EXPECT_EQ(picks.size(), 4u);
}

}  // namespace
}  // namespace ptxevo::search::prior
