// The learned prior's replay proof (search/prior_study.hpp): cold against warm simulated campaigns
// over a closed universe. On the shipped H200 universe when it exists; always on the synthetic
// fixture (real builds of the RMSNorm forward grid, SYNTHETIC timings), so the harness itself
// is tested before and after the data arrives. Only what must hold is asserted: budgets are
// respected and warm-start seeds are charged to them, the harness is deterministic, and the
// shuffled-label control shows no gain. The tables are printed, never checked against numbers.
#include "search/prior_study.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include <unistd.h>

#include "kernels/builtin_ops.hpp"
#include "synthetic_universe.hpp"

namespace ptxevo::search {
namespace {

namespace fs = std::filesystem;

const std::string kRoot = PTXEVO_SOURCE_DIR;
const std::string kSpec = kRoot + "/kernels/rmsnorm/rmsnorm_fwd.spec";
const std::string kShipped = kRoot + "/data/universes/rmsnorm_fwd.universe.json";
const std::string kShippedEdits = kRoot + "/data/universes/rmsnorm_fwd.edits.universe.json";
const std::string kBuilds = kRoot + "/search/tests/data/rmsnorm_fwd.universe.builds.json";
const std::string kEditBuilds = kRoot + "/search/tests/data/rmsnorm_fwd.edits.universe.builds.json";

struct Loaded {
  evaluator::OpRegistry registry = kernels::builtin_ops();
  evaluator::Spec spec;
  const evaluator::Op* op = nullptr;
};

Loaded load() {
  Loaded l;
  auto r = evaluator::load_spec(kSpec, l.registry);
  if (!r.spec) throw std::runtime_error(r.error->format());
  l.spec = *r.spec;
  l.op = l.registry.find(l.spec.op);
  return l;
}

// What must hold for any universe, synthetic or measured, the shuffled-label control's showing no
// significant gain included (it has none by construction: search/prior_study.cpp).
void expect_sound(const StudyResult& r) {
  ASSERT_EQ(r.directions.size(), 2u);
  for (const auto& d : r.directions) {
    SCOPED_TRACE("target set " + d.target_name);
    ASSERT_EQ(d.arms.size(), kStudyArms.size());
    for (const auto& a : d.arms) {
      SCOPED_TRACE(a.arm);
      ASSERT_EQ(a.runs.size(), static_cast<std::size_t>(r.seeds));
      for (const auto& run : a.runs) {
        // Every evaluation, warm-start seeds included, is charged; none beyond the budget.
        EXPECT_LE(run.evaluations, r.budget);
        EXPECT_EQ(run.best_true.size(), static_cast<std::size_t>(run.evaluations));
        EXPECT_TRUE(std::is_sorted(run.best_true.begin(), run.best_true.end()));
        EXPECT_LE(run.final_best, d.optimum * (1 + 1e-12));
        if (a.arm == "warm" || a.arm == "seeds" || a.arm == "shuffled") EXPECT_GT(run.warm_seeds, 0);
        else EXPECT_EQ(run.warm_seeds, 0);
      }
    }
    // The shuffled-label control: an earlier campaign whose figures were permuted across the
    // candidates, its warm-start genomes drawn by those labels from the random genomes it drew
    // before seeing any: it carries no information, so it must not show a significant gain.
    const ArmSummary* shuffled = d.arm("shuffled");
    ASSERT_NE(shuffled, nullptr);
    EXPECT_GE(shuffled->r100.upper, 1.0) << "the shuffled-label control reaches the cold result significantly sooner";
    EXPECT_GE(shuffled->r95.upper, 1.0) << "the shuffled-label control reaches 95% of it significantly sooner";
  }
}

TEST(PriorStudy, OnTheSyntheticFixtureTheHarnessIsSoundAndDeterministic) {
  const Loaded l = load();
  const Universe u = testing::synthetic_universe(load_universe(kBuilds), l.spec, *l.op);
  ASSERT_TRUE(u.synthetic);
  ASSERT_GE(u.passing_count(), 150u);
  {
    // The mark survives the file, so a synthetic universe can never pass for a measured one.
    const fs::path tmp = fs::temp_directory_path() / ("ptxevo_synthetic_universe_" + std::to_string(::getpid()) + ".json");
    write_universe(tmp, u);
    const Universe back = load_universe(tmp);
    fs::remove(tmp);
    EXPECT_TRUE(back.synthetic);
    EXPECT_EQ(back.passing_count(), u.passing_count());
  }
  StudyOptions o;
  o.resamples = 2000;
  const auto r = run_prior_study(u, l.spec, *l.op, o);
  std::printf("%s", format_study(r).c_str());
  EXPECT_TRUE(r.synthetic);
  EXPECT_NE(format_study(r).find("SYNTHETIC"), std::string::npos);
  expect_sound(r);

  // Deterministic given the options (a smaller study: the same code path).
  StudyOptions small = o;
  small.seeds = 3;
  small.arms = {"cold", "warm", "shuffled"};
  small.both_directions = false;
  const auto a = run_prior_study(u, l.spec, *l.op, small);
  const auto b = run_prior_study(u, l.spec, *l.op, small);
  ASSERT_EQ(a.directions.size(), 1u);
  for (std::size_t k = 0; k < a.directions[0].arms.size(); ++k) {
    const auto& x = a.directions[0].arms[k];
    const auto& y = b.directions[0].arms[k];
    EXPECT_EQ(x.e95, y.e95) << x.arm;
    EXPECT_EQ(x.e100, y.e100) << x.arm;
    for (std::size_t s = 0; s < x.runs.size(); ++s) EXPECT_EQ(x.runs[s].best_true, y.runs[s].best_true) << x.arm;
  }
  // And the first seeds of the full study are those runs: a seed's campaign does not depend on
  // how many seeds or arms run beside it.
  EXPECT_EQ(a.directions[0].arm("cold")->runs[0].best_true, r.directions[0].arm("cold")->runs[0].best_true);
  EXPECT_EQ(a.directions[0].arm("warm")->runs[2].best_true, r.directions[0].arm("warm")->runs[2].best_true);
}

// PTX edits in the universe: the passes are operators, a refused pass (STORE_HINT 1 already
// streams the stores store_streaming would) is not charged, edit orders are one candidate.
TEST(PriorStudy, OnASyntheticUniverseWithPtxEdits) {
  const Loaded l = load();
  const Universe u = testing::synthetic_universe(load_universe(kEditBuilds), l.spec, *l.op);
  ASSERT_EQ(u.edits.size(), 4u);
  ASSERT_GE(u.passing_count(), 20u);
  StudyOptions o;
  o.batch = 4;
  o.initial = 3;  // the first population (the seed and 3) fits one batch, as 1 + 12 fits 16
  o.islands = 2;
  o.island_size = 4;
  o.budget = 12;
  o.resamples = 2000;
  const auto r = run_prior_study(u, l.spec, *l.op, o);
  std::printf("%s", format_study(r).c_str());
  expect_sound(r);
}

// Transfer between two universes (run_prior_study_transfer), here the synthetic grid as both: the
// earlier campaigns search the very landscape the new ones do, on every shape. The harness rules
// hold, warm-start genomes reach the target, and the shuffled control still shows no gain.
TEST(PriorStudy, TransferBetweenTwoUniversesOfTheSameGrid) {
  const Loaded l = load();
  const Universe u = testing::synthetic_universe(load_universe(kBuilds), l.spec, *l.op);
  StudyOptions o;
  o.seeds = 6;
  o.resamples = 2000;
  const auto r = run_prior_study_transfer(u, l.spec, u, l.spec, *l.op, o);
  std::printf("%s", format_study(r).c_str());
  expect_sound(r);
  EXPECT_EQ(r.directions[0].target_shapes.size(), u.benchmark_shapes.size());
  EXPECT_EQ(r.directions[0].source_shapes.size(), u.benchmark_shapes.size());
  // The same landscape: warm's best at the budget is at least cold's median.
  EXPECT_GE(r.directions[0].arm("warm")->median_final, r.directions[0].arm("cold")->median_final);
  Universe other = u;
  other.seed = "another_seed";
  EXPECT_THROW(run_prior_study_transfer(other, l.spec, u, l.spec, *l.op, o), std::invalid_argument);
}

// The study on a universe measured on the H200 and shipped in data/universes/, at the defaults.
void study_shipped(const std::string& path) {
  ASSERT_TRUE(fs::exists(path)) << path << " is shipped with the repository (measured on the H200: docs/prior_study.md)";
  const Loaded l = load();
  const Universe u = load_universe(path);
  ASSERT_GT(u.measured_count(), 0u) << path << " holds builds only (it was made without a GPU)";
  ASSERT_FALSE(u.synthetic) << path << " must hold measurements, not synthetic timings";
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_prior_study(u, l.spec, *l.op, StudyOptions{});
  std::printf("%s\n%s", path.c_str(), format_study(r).c_str());
  expect_sound(r);
  std::printf("study took %.1f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

TEST(PriorStudy, OnTheShippedH200KnobGrid) { study_shipped(kShipped); }
// 8 knob assignments (TPR 8/16, CLUSTER 4/8, LOAD_HINT 0/2) x every subset of 4 PTX edits, all
// 128 measured and passing. (Before the shuffled control drew its warm-start genomes from random
// genomes, it was not asserted here: the best of a permuted database are genomes a campaign
// reached by stacking edits, and the gains of this universe are edits.)
TEST(PriorStudy, OnTheShippedH200KnobGridWithPtxEdits) {
  if (fs::exists(kShippedEdits)) {
    const Universe u = load_universe(kShippedEdits);
    EXPECT_EQ(u.members.size(), 128u);
    EXPECT_EQ(u.edits.size(), 4u);
    EXPECT_TRUE(u.closed);
    EXPECT_EQ(u.passing_count(), 128u);
  }
  study_shipped(kShippedEdits);
}

// Transfer across dtypes on the shipped H200 data: earlier campaigns on the bf16 edits universe,
// new ones on its fp16 twin (the same 128 members under rmsnorm_fwd_fp16.spec). What holds there
// over seed lists (docs/prior_study.md, "Transfer across dtypes"): warm reaches 95% of cold's gain
// significantly sooner and ends with a better best at the budget, and the shuffled-label control
// shows no gain. R(1.00) <= 0.25 is printed, not asserted: it holds for some seed lists only.
TEST(PriorStudy, AcrossDtypesOnTheShippedH200Universes) {
  const std::string fp16_universe = kRoot + "/data/universes/rmsnorm_fwd_fp16.edits.universe.json";
  ASSERT_TRUE(fs::exists(fp16_universe)) << "shipped with the repository (measured on the H200)";
  Loaded l = load();
  auto fp16 = evaluator::load_spec(kRoot + "/kernels/rmsnorm/rmsnorm_fwd_fp16.spec", l.registry);
  ASSERT_TRUE(fp16.spec.has_value()) << fp16.error->format();
  const Universe source = load_universe(kShippedEdits), target = load_universe(fp16_universe);
  ASSERT_EQ(target.passing_count(), 128u);
  StudyOptions o;
  o.seeds = 30;
  o.seed = 101;
  o.resamples = 2000;
  o.both_directions = false;
  o.arms = {"cold", "warm", "shuffled"};
  const auto r = run_prior_study_transfer(source, l.spec, target, *fp16.spec, *l.op, o);
  std::printf("%s", format_study(r).c_str());
  ASSERT_EQ(r.directions.size(), 1u);
  const auto& d = r.directions[0];
  const ArmSummary* warm = d.arm("warm");
  const ArmSummary* shuffled = d.arm("shuffled");
  ASSERT_NE(warm, nullptr);
  ASSERT_NE(shuffled, nullptr);
  EXPECT_LT(warm->r95.upper, 1.0) << "warm does not reach 95% of cold's gain significantly sooner";
  EXPECT_LT(warm->final_vs_cold.p_value, 0.05) << "warm's best at the budget is not better than cold's";
  EXPECT_GE(shuffled->r100.upper, 1.0) << "the shuffled-label control shows a gain";
  EXPECT_GE(shuffled->r95.upper, 1.0) << "the shuffled-label control shows a gain";
  for (const auto& a : d.arms)
    for (const auto& run : a.runs) EXPECT_LE(run.evaluations, r.budget);
}

// The 384-member universe (VEC x TPR x CLUSTER x LOAD_HINT x the four edits' subsets, measured
// on the H200 by bench/gpu/run_prior_universe_h200.sh): closed, every member passing; the
// cost model ranks held-out members within a shape; the shuffled-label control shows no gain.
// What warm start is worth here is printed (docs/prior_study.md, "The larger universe"), not
// asserted: over 10 seeds its CIs reach 1.
TEST(PriorStudy, OnTheShippedH200WideUniverse) {
  const std::string wide = kRoot + "/data/universes/rmsnorm_fwd.wide.universe.json";
  ASSERT_TRUE(fs::exists(wide)) << "shipped with the repository (measured on the H200)";
  const Loaded l = load();
  const Universe u = load_universe(wide);
  EXPECT_EQ(u.members.size(), 384u);
  EXPECT_EQ(u.passing_count(), 384u);
  EXPECT_TRUE(u.closed);
  for (const auto& m : u.members) EXPECT_FALSE(m.ptx_profile.empty()) << m.genome.describe();
  StudyOptions o;
  o.arms = {"cold", "warm", "shuffled"};
  o.resamples = 2000;
  const auto r = run_prior_study(u, l.spec, *l.op, o);
  std::printf("%s", format_study(r).c_str());
  EXPECT_EQ(r.cost_check.rows, 384u * 11u);
  EXPECT_EQ(r.cost_check.profiled_rows, 384u * 11u);
  EXPECT_GT(r.cost_check.spearman_without_ptx, 0.3);
  ASSERT_EQ(r.directions.size(), 2u);
  for (const auto& d : r.directions) {
    const ArmSummary* shuffled = d.arm("shuffled");
    ASSERT_NE(shuffled, nullptr);
    EXPECT_GE(shuffled->r100.upper, 1.0) << "set " << d.target_name << ": the shuffled-label control shows a gain";
    for (const auto& a : d.arms)
      for (const auto& run : a.runs) EXPECT_LE(run.evaluations, r.budget);
  }
}

TEST(PriorStudy, RejectsAUniverseWithoutMeasurements) {
  const Loaded l = load();
  Universe u = load_universe(kBuilds);
  EXPECT_THROW(run_prior_study(u, l.spec, *l.op, StudyOptions{}), std::invalid_argument);
}

}  // namespace
}  // namespace ptxevo::search
