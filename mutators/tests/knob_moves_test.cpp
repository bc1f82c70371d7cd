#include <gtest/gtest.h>

#include <set>

#include "evaluator/knob_constraints.hpp"
#include "mutators/knob_moves.hpp"

namespace ptxevo::mutators {
namespace {

using evaluator::KnobSpace;
using evaluator::Knobs;
using evaluator::SeedTemplate;

SeedTemplate seed() {
  SeedTemplate s;
  s.name = "t";
  s.knobs = {KnobSpace{"THREADS", {std::int64_t{64}, std::int64_t{128}, std::int64_t{256}}, std::int64_t{128}},
             KnobSpace{"TPR", {std::int64_t{32}, std::int64_t{128}, std::int64_t{512}}, std::int64_t{32}},
             KnobSpace{"LOADER", {std::string("plain"), std::string("cp_async")}, std::string("plain")}};
  s.constraints = {"THREADS % TPR == 0", "TPR <= THREADS"};
  return s;
}

Knobs k(std::int64_t threads, std::int64_t tpr, const std::string& loader) {
  return {{"THREADS", threads}, {"TPR", tpr}, {"LOADER", loader}};
}

TEST(KnobMoves, ValidityFollowsValuesAndConstraints) {
  const SeedTemplate s = seed();
  EXPECT_TRUE(knobs_valid(s, k(128, 32, "plain")));
  EXPECT_FALSE(knobs_valid(s, k(64, 128, "plain")));   // TPR > THREADS
  EXPECT_FALSE(knobs_valid(s, k(96, 32, "plain")));    // 96 is not a listed value
  EXPECT_FALSE(knobs_valid(s, {{"THREADS", std::int64_t{128}}}));  // knobs missing
}

TEST(KnobMoves, StepMovesOneKnobToANeighbourAndStaysValid) {
  const SeedTemplate s = seed();
  const Knobs parent = k(128, 32, "plain");
  std::set<std::string> seen;
  for (std::uint64_t sd = 0; sd < 200; ++sd) {
    std::mt19937_64 rng(sd);
    KnobMoveResult r = knob_step(s, parent, rng);
    ASSERT_TRUE(r.knobs.has_value()) << r.detail;
    EXPECT_EQ(r.operator_id, "knob_step");
    EXPECT_TRUE(knobs_valid(s, *r.knobs));
    int changed = 0;
    for (const auto& [name, v] : parent) changed += r.knobs->at(name) != v;
    EXPECT_EQ(changed, 1) << r.detail;
    seen.insert(r.detail);
  }
  // From (128, 32, plain): THREADS to 64 or 256, TPR to 128, LOADER to cp_async.
  EXPECT_EQ(seen, (std::set<std::string>{"THREADS 128 -> 64", "THREADS 128 -> 256", "TPR 32 -> 128",
                                         "LOADER plain -> cp_async"}));
}

TEST(KnobMoves, StepReportsWhenNoNeighbourIsValid) {
  SeedTemplate s;
  s.knobs = {KnobSpace{"A", {std::int64_t{1}, std::int64_t{2}}, std::int64_t{1}}};
  s.constraints = {"A == 1"};
  std::mt19937_64 rng(1);
  KnobMoveResult r = knob_step(s, {{"A", std::int64_t{1}}}, rng);
  EXPECT_FALSE(r.knobs.has_value());
  EXPECT_NE(r.detail.find("no neighbour"), std::string::npos);
}

TEST(KnobMoves, ResetChangesExactlyOneKnob) {
  const SeedTemplate s = seed();
  const Knobs parent = k(256, 128, "cp_async");
  for (std::uint64_t sd = 0; sd < 100; ++sd) {
    std::mt19937_64 rng(sd);
    KnobMoveResult r = knob_reset(s, parent, rng);
    ASSERT_TRUE(r.knobs.has_value()) << r.detail;
    EXPECT_TRUE(knobs_valid(s, *r.knobs));
    EXPECT_NE(*r.knobs, parent);
  }
}

TEST(KnobMoves, CrossoverTakesEachKnobFromAParent) {
  const SeedTemplate s = seed();
  const Knobs a = k(64, 32, "plain"), b = k(256, 128, "cp_async");
  for (std::uint64_t sd = 0; sd < 100; ++sd) {
    std::mt19937_64 rng(sd);
    KnobMoveResult r = knob_crossover(s, a, b, rng);
    ASSERT_TRUE(r.knobs.has_value()) << r.detail;
    EXPECT_TRUE(knobs_valid(s, *r.knobs));
    EXPECT_NE(*r.knobs, a);
    EXPECT_NE(*r.knobs, b);
    for (const auto& [name, v] : *r.knobs) EXPECT_TRUE(v == a.at(name) || v == b.at(name)) << name;
  }
}

TEST(KnobMoves, SameSeedSameMove) {
  const SeedTemplate s = seed();
  std::mt19937_64 r1(7), r2(7);
  EXPECT_EQ(knob_step(s, k(128, 32, "plain"), r1).detail, knob_step(s, k(128, 32, "plain"), r2).detail);
}

}  // namespace
}  // namespace ptxevo::mutators
