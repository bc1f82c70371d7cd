#include <gtest/gtest.h>

#include "search/genome.hpp"
#include "search/population.hpp"

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
