#include "search/operator_posterior.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tracedb/trace_db.hpp"

namespace ptxevo::search {
namespace {

TEST(OperatorPosterior, LearnsWhichOperatorPaysOff) {
  OperatorPosterior p("rmsnorm", "sm_90a");
  std::mt19937_64 rng(3);
  const std::vector<std::string> ops = {"good", "bad1", "bad2", "bad3"};
  std::map<std::string, int> picks;
  for (int i = 0; i < 400; ++i) {
    const std::string op = p.choose(ops, rng);
    ++picks[op];
    if (op == "good") p.credit(op, std::uniform_int_distribution<int>(0, 1)(rng) ? Outcome::Faster : Outcome::NotFaster, 1.05);
    else p.credit(op, Outcome::Failed);
  }
  EXPECT_GT(picks["good"], 250);
  EXPECT_GT(p.mean("good"), p.mean("bad1"));
  // The floor keeps every applicable operator alive.
  for (const auto& op : ops) EXPECT_GT(picks[op], 0) << op;
}

TEST(OperatorPosterior, UnchargedReleasesLeaveNoEvidence) {
  OperatorPosterior p("rmsnorm", "sm_90a");
  std::mt19937_64 rng(1);
  for (int i = 0; i < 20; ++i) p.release(p.choose({"a"}, rng));
  EXPECT_DOUBLE_EQ(p.mean("a"), 0.5);
  EXPECT_TRUE(p.counts().empty());
}

TEST(OperatorPosterior, PullsInFlightSpreadABatch) {
  OperatorPosterior p("rmsnorm", "sm_90a", PosteriorOptions{0.98, 0.0, 2.0, 1.1, 20});
  std::mt19937_64 rng(5);
  // Equal evidence: without feedback, pending pulls push the sampler to the other operator.
  std::map<std::string, int> picks;
  for (int i = 0; i < 40; ++i) ++picks[p.choose({"a", "b"}, rng)];
  EXPECT_GT(picks["a"], 10);
  EXPECT_GT(picks["b"], 10);
}

TEST(OperatorPosterior, FallsBackToWiderKeysAndDecays) {
  const auto path = std::filesystem::temp_directory_path() / ("ptxevo_fallback_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  auto db = tracedb::TraceDb::open(path);
  OperatorPosterior kda("kda", "sm_90a");
  for (int i = 0; i < 30; ++i) kda.credit("x", Outcome::NewBest);
  kda.save(db);
  // Another family on the same arch sees the (arch, op) evidence through the fallback.
  OperatorPosterior rms("rmsnorm", "sm_90a");
  rms.load(db);
  EXPECT_GT(rms.mean("x"), 0.8);
  std::filesystem::remove(path);
  // Decay bounds the evidence of one key: 30 updates at 0.98 keep less than 1 / (1 - 0.98).
  const auto& c = kda.counts().at(OperatorPosterior::key("kda", "sm_90a", "x"));
  EXPECT_LT(c.hits + c.misses, 2.0 / (1 - 0.98));
}

TEST(OperatorPosterior, PersistsWithACapOnCarriedEvidence) {
  const auto path = std::filesystem::temp_directory_path() / ("ptxevo_posterior_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    auto db = tracedb::TraceDb::open(path);
    OperatorPosterior p("rmsnorm", "sm_90a", PosteriorOptions{1.0, 0.05, 0.5, 1.1, 20});
    for (int i = 0; i < 100; ++i) p.credit("y", Outcome::NotFaster);
    p.save(db);
  }
  auto db = tracedb::TraceDb::open(path);
  OperatorPosterior q("rmsnorm", "sm_90a", PosteriorOptions{1.0, 0.05, 0.5, 1.1, 20});
  q.load(db);
  const auto& c = q.counts().at(OperatorPosterior::key("rmsnorm", "sm_90a", "y"));
  EXPECT_NEAR(c.hits + c.misses, 20, 1e-9);
  EXPECT_LT(q.mean("y"), 0.1);
  std::filesystem::remove(path);
}

TEST(OperatorPosterior, FamilyIsTheOpNamesFirstPart) {
  EXPECT_EQ(op_family("rmsnorm_fwd"), "rmsnorm");
  EXPECT_EQ(op_family("kda"), "kda");
}

}  // namespace
}  // namespace ptxevo::search
