#include "search/universe.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <set>
#include <sstream>

#include "campaign_fixture.hpp"

namespace ptxevo::search {
namespace {

namespace fs = std::filesystem;
using testing::KnobModelMeasurer;

class UniverseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ptxevo_universe_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    registry_.add(std::make_unique<testing::ScaleOp>());
    spec_ = testing::write_scale_spec(dir_, registry_);
    cache_.emplace(dir_ / "cache");
    builder_.emplace(&*cache_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The universe skeleton over `vary`, as `ptxevo universe` makes it.
  Universe skeleton(const std::vector<std::string>& vary) {
    std::string why;
    Universe u;
    u.op = spec_.op;
    u.arch = spec_.arch;
    u.seed = spec_.seeds.front().name;
    u.spec_hash = "test";
    u.grid = make_grid(spec_.seeds.front(), vary, &why);
    EXPECT_EQ(why, "");
    u.benchmark_shapes = spec_.benchmark_shapes;
    for (const auto& k : grid_assignments(restrict_seed(spec_.seeds.front(), u.grid))) {
      UniverseMember m;
      m.genome.seed = u.seed;
      m.genome.knobs = k;
      m.genome_hash = m.genome.hash();
      u.members.push_back(std::move(m));
    }
    return u;
  }

  UniverseRunResult run(Universe& u, std::vector<Measurer*> m, UniverseRunOptions o, int* flushes = nullptr) {
    std::ostringstream log;
    std::atomic<bool> stop{false};
    auto r = run_universe(u, spec_, *registry_.find("test_scale"), *builder_, m, o, log,
                          [&](const Universe& x) {
                            if (flushes) ++*flushes;
                            write_universe(dir_ / "u.json", x);
                          },
                          stop);
    log_ = log.str();
    return r;
  }

  fs::path dir_;
  evaluator::OpRegistry registry_;
  evaluator::Spec spec_;
  std::optional<evaluator::BuildCache> cache_;
  std::optional<evaluator::Builder> builder_;
  std::string log_;
};

TEST_F(UniverseTest, GridKeepsTheSpecOrderAndTheDefaultsAndMeetsTheConstraints) {
  const auto& seed = spec_.seeds.front();
  std::string why;
  // BLOCK's default (64) is kept although not named; UNROLL in the spec's order, not the argument's.
  const auto grid = make_grid(seed, {"BLOCK=256,32", "UNROLL=8,1,4"}, &why);
  ASSERT_EQ(why, "");
  ASSERT_EQ(grid.size(), 3u);
  EXPECT_EQ(grid[0].values, (std::vector<evaluator::KnobValue>{std::int64_t{32}, std::int64_t{64}, std::int64_t{256}}));
  EXPECT_EQ(grid[1].values, (std::vector<evaluator::KnobValue>{std::int64_t{1}, std::int64_t{4}, std::int64_t{8}}));
  EXPECT_EQ(grid[2].values, (std::vector<evaluator::KnobValue>{std::int64_t{0}}));  // PAD: default only
  const auto all = grid_assignments(restrict_seed(seed, grid));
  // 3 x 3 assignments minus BLOCK 256 x UNROLL 8 (BLOCK * UNROLL <= 1024).
  EXPECT_EQ(all.size(), 8u);
  std::set<evaluator::Knobs> distinct(all.begin(), all.end());
  EXPECT_EQ(distinct.size(), all.size());

  const auto thin = thin_assignments(all, evaluator::default_knobs(seed), 1, 3);
  ASSERT_EQ(thin.size(), 3u);
  EXPECT_EQ(thin.front(), evaluator::default_knobs(seed));

  EXPECT_TRUE(make_grid(seed, {"NOPE=1"}, &why).empty());
  EXPECT_NE(why.find("no knob NOPE"), std::string::npos) << why;
  why.clear();
  EXPECT_TRUE(make_grid(seed, {"UNROLL=5"}, &why).empty());
  EXPECT_NE(why.find("5 is not a value of UNROLL"), std::string::npos) << why;
  why.clear();
  EXPECT_EQ(make_grid(seed, {"PAD"}, &why)[2].values.size(), 4u);  // a bare name: every value
}

TEST_F(UniverseTest, MeasuresEveryScreenedMemberInBatchesAndTheFileRoundTrips) {
  Universe u = skeleton({"BLOCK=32,64,128", "UNROLL=1,2,3"});
  ASSERT_EQ(u.members.size(), 9u);
  KnobModelMeasurer a, b;
  UniverseRunOptions o;
  o.batch = 2;
  o.commit = "abc";
  int flushes = 0;
  const auto r = run(u, {&a, &b}, o, &flushes);
  EXPECT_EQ(r.stop_reason, "done") << log_;
  EXPECT_EQ(r.built, 9u);
  EXPECT_EQ(r.measured, 9u);
  EXPECT_EQ(r.passed, 6u);  // UNROLL = 3 fails the model's gate
  EXPECT_EQ(r.left, 0u);
  EXPECT_GE(flushes, 5);  // after each measured batch (and at the end)
  EXPECT_EQ(a.total() + b.total(), 9);
  for (const auto& m : u.members) {
    EXPECT_EQ(m.build, "ok");
    EXPECT_FALSE(m.resources.empty());
    if (evaluator::knob_int(m.genome.knobs, "UNROLL", 1) == 3) {
      EXPECT_EQ(m.verdict, "fail");
      continue;
    }
    EXPECT_EQ(m.verdict, "pass");
    ASSERT_TRUE(m.fitness);
    EXPECT_DOUBLE_EQ(*m.fitness, KnobModelMeasurer::speedup_of(m.genome.knobs));
    ASSERT_EQ(m.shapes.size(), spec_.benchmark_shapes.size());  // benchmark shapes only
    EXPECT_DOUBLE_EQ(m.shapes[0].speedup, *m.fitness);
    EXPECT_GT(m.shapes[0].speedup_high, m.shapes[0].speedup_low);
  }
  const Universe back = load_universe(dir_ / "u.json");
  EXPECT_EQ(back.commit, "abc");
  EXPECT_EQ(back.toolchain, "test");  // the measurer's environment says what built and ran it
  ASSERT_EQ(back.members.size(), u.members.size());
  for (std::size_t i = 0; i < u.members.size(); ++i) {
    EXPECT_EQ(back.members[i].genome, u.members[i].genome);
    EXPECT_EQ(back.members[i].verdict, u.members[i].verdict);
    EXPECT_EQ(back.members[i].fitness, u.members[i].fitness);
    EXPECT_EQ(back.members[i].resources.size(), u.members[i].resources.size());
    EXPECT_EQ(back.members[i].shapes.size(), u.members[i].shapes.size());
  }
  EXPECT_EQ(back.grid.size(), u.grid.size());
  EXPECT_EQ(back.grid[1].values, u.grid[1].values);
  EXPECT_EQ(back.passing_count(), 6u);

  // Again: nothing is measured twice.
  Universe again = back;
  KnobModelMeasurer c;
  const auto r2 = run(again, {&c}, o);
  EXPECT_EQ(r2.measured, 0u);
  EXPECT_EQ(c.total(), 0);
  EXPECT_EQ(r2.stop_reason, "done");
}

TEST_F(UniverseTest, ATimeLimitLeavesTheRestForTheNextRun) {
  Universe u = skeleton({"BLOCK=32,64,128,256", "UNROLL=1,2"});
  ASSERT_EQ(u.members.size(), 8u);
  KnobModelMeasurer slow(300);
  UniverseRunOptions o;
  o.batch = 2;
  o.max_minutes = 0.1 / 60;  // 0.1 s: the first batch starts, later ones do not
  const auto r = run(u, {&slow}, o);
  EXPECT_EQ(r.stop_reason, "time") << log_;
  EXPECT_GT(r.left, 0u);
  EXPECT_LT(r.measured, 8u);
  Universe rest = load_universe(dir_ / "u.json");
  KnobModelMeasurer fast;
  o.max_minutes = 0;
  const auto r2 = run(rest, {&fast}, o);
  EXPECT_EQ(r2.stop_reason, "done");
  EXPECT_EQ(r.measured + r2.measured, 8u);
  EXPECT_EQ(rest.measured_count(), 8u);
}

TEST_F(UniverseTest, WithoutAMeasurerItBuildsAndScreensOnly) {
  Universe u = skeleton({"BLOCK=64,128", "UNROLL=1,2"});
  const auto r = run(u, {}, UniverseRunOptions{});
  EXPECT_EQ(r.stop_reason, "static");
  EXPECT_EQ(r.built, 4u);
  EXPECT_EQ(r.measured, 0u);
  for (const auto& m : u.members) {
    EXPECT_EQ(m.build, "ok");
    EXPECT_FALSE(m.measured());
  }
  EXPECT_EQ(load_universe(dir_ / "u.json").measured_count(), 0u);
}

TEST_F(UniverseTest, EditsMultiplyTheGridAndTheirOrderIsCanonical) {
  const auto passes = mutators::builtin_passes();
  std::string why;
  const auto hint = parse_edit("l2_evict_hint:priority=evict_last", passes, &why);
  ASSERT_TRUE(hint) << why;
  EXPECT_EQ(hint->params.at("priority"), "evict_last");
  const auto plain = parse_edit("fast_math", passes, &why);
  ASSERT_TRUE(plain) << why;
  EXPECT_TRUE(plain->params.empty());
  EXPECT_FALSE(parse_edit("no_such_pass", passes, &why));
  EXPECT_NE(why.find("no PTX pass named 'no_such_pass'"), std::string::npos) << why;
  EXPECT_FALSE(parse_edit("fast_math:oops", passes, &why));
  EXPECT_NE(why.find("'oops' is not key=value"), std::string::npos) << why;

  const std::vector<evaluator::Knobs> two = {evaluator::default_knobs(spec_.seeds.front()),
                                             {{"BLOCK", std::int64_t{128}}, {"UNROLL", std::int64_t{1}}, {"PAD", std::int64_t{0}}}};
  const auto all = universe_genomes("scale", two, {*hint, *plain}, -1);
  ASSERT_EQ(all.size(), 8u);  // 2 assignments x 4 subsets
  EXPECT_TRUE(all[0].edits.empty());  // each assignment's empty subset first
  EXPECT_EQ(all[3].edits.size(), 2u);
  EXPECT_EQ(all[3].edits[0].pass, "l2_evict_hint");  // in the given order
  EXPECT_EQ(universe_genomes("scale", two, {*hint, *plain}, 1).size(), 6u);
  Genome swapped = all[3];
  std::swap(swapped.edits[0], swapped.edits[1]);
  EXPECT_NE(swapped.hash(), all[3].hash());
  EXPECT_EQ(canonical_edits(swapped).hash(), canonical_edits(all[3]).hash());
}

TEST_F(UniverseTest, ABadFileIsAnErrorNamingIt) {
  std::ofstream(dir_ / "bad.json") << "{\"format\": \"other\"}";
  try {
    load_universe(dir_ / "bad.json");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ptxevo-universe-1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ptxevo::search
