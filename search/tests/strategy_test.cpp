// The search strategy alone (no builds, no database, no GPU): what it proposes, what builds and
// measurements teach it, and how it chooses from the reserve.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "mutators/pass.hpp"
#include "search/cost_features.hpp"
#include "search/strategy.hpp"
#include "campaign_fixture.hpp"

namespace ptxevo::search {
namespace {

namespace fs = std::filesystem;

class StrategyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ptxevo_strategy_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    registry_.add(std::make_unique<testing::ScaleOp>());
    spec_ = testing::write_scale_spec(dir_, registry_);
    proposer_ = std::make_unique<Proposer>(spec_, passes_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  EvolutionStrategy make(StrategyOptions o = {}) {
    const auto ops = proposer_->operators();
    return EvolutionStrategy(*proposer_, OperatorPosterior("test", "sm_90a"), std::set<std::string>(ops.begin(), ops.end()),
                             o, 7, &log_);
  }
  static Genome genome(std::int64_t block, std::int64_t unroll) {
    Genome g;
    g.seed = "scale";
    g.knobs = {{"BLOCK", block}, {"UNROLL", unroll}, {"PAD", std::int64_t{0}}};
    return g;
  }
  static Member member(std::int64_t id, const Genome& g, double fitness) {
    Member m;
    m.candidate_id = id;
    m.genome = g;
    m.fitness = fitness;
    m.fitness_low = fitness * 0.99;
    m.fitness_high = fitness * 1.01;
    return m;
  }

  fs::path dir_;
  evaluator::OpRegistry registry_;
  evaluator::Spec spec_;
  mutators::PassRegistry passes_ = mutators::builtin_passes();
  std::unique_ptr<Proposer> proposer_;
  std::ostringstream log_;
};

TEST_F(StrategyTest, FirstPopulationIsSeedsThenLegalDistinctWarmGenomesThenRandomOnes) {
  StrategyOptions o;
  o.initial = 6;
  o.random_edits.share = 0;
  auto s = make(o);
  std::vector<WarmGenome> warm = {
      {genome(64, 1), "the seed's defaults again"},  // a duplicate of the seed: skipped
      {genome(256, 8), "breaks BLOCK * UNROLL <= 1024"},
      {genome(128, 2), "a"},
      {genome(128, 2), "a twin"},
      {genome(256, 4), "b"},
      {genome(32, 4), "c"},
      {genome(32, 8), "over the cap"},
  };
  std::mt19937_64 rng(3);
  const auto props = s.first_population(warm, 100, false, rng);
  // Half the first population at most: (1 seed + 6 random) / 2 = 3 warm genomes.
  ASSERT_EQ(props.size(), 7u);
  EXPECT_EQ(props[0].operator_id, "seed");
  for (int i = 1; i <= 3; ++i) EXPECT_EQ(props[static_cast<std::size_t>(i)].operator_id, "warm_start") << i;
  EXPECT_EQ(props[1].genome, genome(128, 2));
  EXPECT_EQ(props[2].genome, genome(256, 4));
  EXPECT_EQ(props[3].genome, genome(32, 4));
  for (std::size_t i = 4; i < props.size(); ++i) {
    EXPECT_EQ(props[i].operator_id, "random");
    EXPECT_TRUE(proposer_->admits(props[i].genome).empty());
  }
  for (std::size_t i = 0; i < props.size(); ++i) EXPECT_EQ(props[i].island, static_cast<int>(i % 4));
  EXPECT_EQ(s.warm_taken(), 3);
  EXPECT_EQ(s.first_random().size(), 3u);
  EXPECT_NE(log_.str().find("warm_start: "), std::string::npos);
  // As random genomes (the study's shuffled control): taken as they come, illegal or not.
  auto t = make(o);
  const auto as_drawn = t.first_population(warm, 100, true, rng);
  EXPECT_EQ(as_drawn[1].genome, genome(64, 1));
  EXPECT_EQ(as_drawn[1].operator_id, "random");
}

TEST_F(StrategyTest, ChildrenStayInsideARestrictionAndComeFromThePopulation) {
  StrategyOptions o;
  o.batch = 32;
  auto s = make(o);
  s.recall_member(0, member(1, genome(64, 1), 1.0));
  s.recall_member(1, member(2, genome(64, 2), 1.1));
  s.restrict_proposals([](const Genome& g) { return evaluator::knob_int(g.knobs, "BLOCK", 0) == 64 && g.edits.empty(); });
  std::mt19937_64 rng(5);
  const auto kids = s.children(0, rng, nullptr);
  ASSERT_FALSE(kids.empty());
  for (const auto& k : kids) {
    EXPECT_EQ(evaluator::knob_int(k.genome.knobs, "BLOCK", 0), 64) << k.genome.describe();
    ASSERT_TRUE(k.parent_id.has_value());
    EXPECT_TRUE(*k.parent_id == 1 || *k.parent_id == 2);
  }
  EXPECT_GT(s.outside(), 0) << "no proposal was drawn again: the restriction was never tested";
}

TEST_F(StrategyTest, APassThatRefusedAParentIsNotProposedForItAgain) {
  StrategyOptions o;
  o.batch = 64;
  o.refusals_before_rare = 0;  // only the (parent, pass) rule
  auto s = make(o);
  s.recall_member(0, member(1, genome(64, 1), 1.0));
  // Every pass refuses candidate 1.
  for (const auto& pass : proposer_->ptx_passes()) {
    Proposal p;
    p.genome = genome(64, 1);
    p.genome.edits.push_back({pass, {}});
    p.parent_id = 1;
    p.operator_id = "ptx:" + pass;
    s.built(p, true, false, false, "pass-refused: " + pass + ": nothing to rewrite");
  }
  std::mt19937_64 rng(9);
  for (int round = 0; round < 5; ++round) {
    s.new_round();
    for (const auto& k : s.children(round, rng, nullptr)) EXPECT_NE(k.operator_id.rfind("ptx:", 0), 0u) << k.operator_id;
  }
}

TEST_F(StrategyTest, APassThatRefusedEveryParentIsProposedOnlyRarely) {
  StrategyOptions o;
  o.batch = 64;
  o.refusals_before_rare = 2;
  auto s = make(o);
  s.recall_member(0, member(1, genome(64, 1), 1.0));
  for (const auto& pass : proposer_->ptx_passes())
    for (int parent = 100; parent < 102; ++parent)
      s.recall_build("ptx:" + pass, parent, Genome{}, true, false, "pass-refused: " + pass + ": no");
  std::mt19937_64 rng(11);
  int ptx = 0, total = 0;
  for (int round = 0; round < 10; ++round) {
    s.new_round();
    for (const auto& k : s.children(round, rng, nullptr)) {
      ptx += k.operator_id.rfind("ptx:", 0) == 0;
      ++total;
    }
  }
  ASSERT_GT(total, 100);
  EXPECT_LT(ptx, total / 10) << ptx << " of " << total << " children were PTX edits";
  EXPECT_NE(log_.str().find("proposed only rarely"), std::string::npos);
}

TEST_F(StrategyTest, ChooseTakesAtMostTheSlotsAndEvictsTheLeastLikedOverTheCap) {
  StrategyOptions o;
  o.batch = 2;
  o.reserve_factor = 1;
  FeatureLayout layout;
  layout.knobs = {"BLOCK", "PAD", "UNROLL"};
  layout.passes = passes_.names();
  o.feature_columns = layout.size();
  auto s = make(o);
  for (int i = 0; i < 7; ++i) {
    Ready r;
    r.candidate_id = i + 1;
    r.proposal.genome = genome(64, 1);
    r.proposal.operator_id = "knob_step";
    r.features.assign(layout.size(), 0.0);
    r.features[0] = static_cast<double>(i);
    r.analytic = static_cast<double>(i);  // the analytic guess: candidate 1 fastest
    s.add_ready(std::move(r));
  }
  int refits = 0;
  const Choice c = s.choose(2, [&](CostModel&, std::mt19937_64&) { ++refits; });
  EXPECT_EQ(refits, 1);
  ASSERT_EQ(c.picked.size(), 2u);
  ASSERT_EQ(c.reasons.size(), 2u);
  ASSERT_EQ(s.reserve().size(), 2u);  // reserve_factor x batch
  ASSERT_EQ(c.evicted.size(), 3u);
  // What waits is what the guess likes best among those not picked; the evicted are slower.
  double worst_kept = 0;
  for (const auto& r : s.reserve()) worst_kept = std::max(worst_kept, r.analytic);
  for (const auto& r : c.evicted) EXPECT_GT(r.analytic, worst_kept);
  // No measurement since: no refit.
  const Choice again = s.choose(1, [&](CostModel&, std::mt19937_64&) { ++refits; });
  EXPECT_EQ(refits, 1);
  EXPECT_EQ(again.picked.size(), 1u);
  // Without the model: the oldest first.
  const auto oldest = s.take_oldest(5);
  ASSERT_EQ(oldest.size(), 1u);
  EXPECT_TRUE(s.reserve().empty());
}

TEST_F(StrategyTest, MeasurementsFeedThePopulationThePosteriorAndTheModel) {
  auto s = make();
  s.recall_member(0, member(1, genome(64, 1), 1.0));
  Ready fast;
  fast.candidate_id = 2;
  fast.proposal.genome = genome(256, 4);
  fast.proposal.operator_id = "knob_step";
  fast.proposal.parent_id = 1;
  fast.proposal.island = 0;
  s.measured(fast, Figures{1.5, 1.45, 1.55});
  EXPECT_TRUE(s.population().contains(2));
  ASSERT_NE(s.population().best(), nullptr);
  EXPECT_EQ(s.population().best()->candidate_id, 2);
  Ready failed = fast;
  failed.candidate_id = 3;
  failed.proposal.genome = genome(64, 3);
  s.measured(failed, std::nullopt);
  EXPECT_FALSE(s.population().contains(3));
  double hits = 0, misses = 0;
  for (const auto& [key, c] : s.posterior().counts())
    if (key.find("knob_step") != std::string::npos) {
      hits += c.hits;
      misses += c.misses;
    }
  EXPECT_GT(hits, 0) << "a new best was not credited";
  EXPECT_GT(misses, 0) << "a gate failure was not charged";
  // A measurement since the last choice: the next one refits the model.
  s.add_ready(fast);
  int refits = 0;
  s.choose(1, [&](CostModel&, std::mt19937_64&) { ++refits; });
  EXPECT_EQ(refits, 1);
  s.remeasured(2, Figures{1.4, 1.35, 1.45});
  EXPECT_EQ(s.population().best()->measurements, 2);
}

TEST_F(StrategyTest, ValidityCategoriesNameKnobValuesPassesAndAgentSource) {
  Genome g = genome(64, 2);
  g.edits.push_back({"max_registers", {{"n", "64"}}});
  g.source = "// agent code";
  const auto cats = EvolutionStrategy::validity_categories(g);
  EXPECT_NE(std::find(cats.begin(), cats.end(), "scale:UNROLL=2"), cats.end());
  EXPECT_NE(std::find(cats.begin(), cats.end(), "pass:max_registers"), cats.end());
  EXPECT_NE(std::find(cats.begin(), cats.end(), "agent-source"), cats.end());
}

}  // namespace
}  // namespace ptxevo::search
