#include <gtest/gtest.h>

#include "search/genome.hpp"
#include "search/population.hpp"
#include "search/replay.hpp"
#include "campaign_fixture.hpp"

namespace ptxevo::search {
namespace {

Genome g(std::int64_t vec) {
  Genome x;
  x.seed = "s";
  x.knobs = {{"VEC", vec}, {"MODE", std::string("plain")}};
  return x;
}

TEST(Genome, HashIsCanonicalAndRoundTrips) {
  Genome a = g(8);
  a.edits.push_back({"max_registers", {{"n", "64"}}});
  const Genome b = genome_from_json(nlohmann::json::parse(a.canonical()));
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_NE(a.hash(), g(8).hash());
  EXPECT_NE(g(4).hash(), g(8).hash());
  EXPECT_EQ(a.describe(), "MODE=plain VEC=8 +max_registers:n=64");
}

TEST(Genome, MalformedJsonNamesTheField) {
  EXPECT_THROW(genome_from_json(nlohmann::json::parse("[]")), std::invalid_argument);
  try {
    genome_from_json(nlohmann::json::parse(R"({"seed": "s", "edits": [{"params": {}}]})"));
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("pass"), std::string::npos);
  }
}

// The test op with its knob BLOCK once called B.
class RenamedScaleOp : public testing::ScaleOp {
 public:
  evaluator::KnobAliases knob_aliases() const override { return {{"B", "BLOCK"}}; }
};

TEST(Genome, ReadBackUnderTheOpsCurrentKnobNames) {
  const RenamedScaleOp op;
  const auto j = nlohmann::json::parse(R"({"seed": "s", "knobs": {"B": 128, "UNROLL": 2}, "edits": []})");
  const evaluator::Knobs current = {{"BLOCK", std::int64_t{128}}, {"UNROLL", std::int64_t{2}}};
  EXPECT_EQ(genome_from_json(j, op).knobs, current);
  EXPECT_EQ(genome_from_json(j).knobs.count("B"), 1u);  // without the op: as recorded
  EXPECT_THROW(genome_from_json(nlohmann::json::parse(R"({"seed": "s", "knobs": {"B": 1, "BLOCK": 2}})"), op),
               std::invalid_argument);
}

// A replay record written under an old knob name answers for the genome with the current name.
TEST(Replay, RecordsUnderOldKnobNamesAnswerForTheCurrentOnes) {
  const RenamedScaleOp op;
  Genome old, current, other;
  old.seed = current.seed = other.seed = "s";
  old.knobs = {{"B", std::int64_t{128}}};
  current.knobs = {{"BLOCK", std::int64_t{128}}};
  other.knobs = {{"UNROLL", std::int64_t{4}}};
  ReplayData d;
  for (const Genome* g : {&old, &other}) {
    ReplayRecord r;
    r.genome_hash = g->hash();
    r.genome = g->to_json();
    r.ptx_hash = g->seed + g->describe();
    d.records[r.genome_hash] = r;
  }
  ReplayRecord stray;  // keyed by another hash than its genome's: it answers for that key only
  stray.genome_hash = "x";
  stray.genome = old.to_json();
  d.records["x"] = stray;
  canonicalize_replay(d, op);
  EXPECT_EQ(d.records.size(), 3u);
  EXPECT_EQ(d.records.count(old.hash()), 0u);
  ASSERT_EQ(d.records.count(current.hash()), 1u);
  EXPECT_EQ(d.records.at(current.hash()).genome, current.to_json());
  EXPECT_EQ(d.records.at(current.hash()).genome_hash, current.hash());
  EXPECT_EQ(d.records.at(current.hash()).ptx_hash, "sB=128");
  EXPECT_EQ(d.records.count(other.hash()), 1u);
  EXPECT_EQ(d.records.count("x"), 1u);
}

Member m(std::int64_t id, double f, double spread = 0.005) {
  Member x;
  x.candidate_id = id;
  x.genome = g(id);
  x.fitness = f;
  x.fitness_low = f * (1 - spread);
  x.fitness_high = f * (1 + spread);
  return x;
}

TEST(Population, ChildDisplacesParentOnlyWhenSignificantlyBetter) {
  Population p({1, 2, 2, 0.01});
  EXPECT_EQ(p.offer(0, m(1, 1.0), std::nullopt), "joined");
  EXPECT_EQ(p.offer(0, m(2, 1.1), std::nullopt), "joined");
  // Within noise of its parent: rejected even though its point estimate is higher.
  EXPECT_EQ(p.offer(0, m(3, 1.005), 1).rfind("rejected", 0), 0u);
  // A wide interval: the estimate is higher, the lower bound is not.
  EXPECT_EQ(p.offer(0, m(4, 1.05, 0.1), 1).rfind("rejected", 0), 0u);
  EXPECT_EQ(p.offer(0, m(5, 1.05), 1), "displaced-parent");
  EXPECT_TRUE(p.contains(5));
  EXPECT_FALSE(p.contains(1));
  // The elite (1.1) is never the one replaced.
  EXPECT_EQ(p.offer(0, m(6, 1.08), std::nullopt), "replaced-worst");
  EXPECT_TRUE(p.contains(2));
  EXPECT_EQ(p.best()->candidate_id, 2);
}

TEST(Population, TournamentPrefersFitterMembersAndMigrationMovesTheBest) {
  Population p({2, 4, 3, 0.01});
  for (int i = 0; i < 4; ++i) p.offer(0, m(i + 1, 1.0 + 0.1 * i), std::nullopt);
  std::mt19937_64 rng(1);
  int best_picks = 0;
  for (int i = 0; i < 400; ++i) best_picks += p.select(0, rng)->candidate_id == 4;
  EXPECT_GT(best_picks, 400 / 4 + 60);  // tournament of 3 from 4: 1 - (3/4)^3 = 58%
  EXPECT_EQ(p.select(1, rng), nullptr);
  EXPECT_EQ(p.migrate(), 1);
  EXPECT_EQ(p.members(1).front().candidate_id, 4);
}

TEST(Population, RemeasurementAveragesTheFitness) {
  Population p({1, 2, 2, 0.01});
  p.offer(0, m(1, 1.2), std::nullopt);
  p.remeasured(1, 1.0, 0.99, 1.01);
  EXPECT_NEAR(p.best()->fitness, std::sqrt(1.2), 1e-12);
  EXPECT_EQ(p.best()->measurements, 2);
}

}  // namespace
}  // namespace ptxevo::search
