// One search loop (search/search_loop.hpp) for a campaign and the prior study: given the same builds
// and the same measurements, a campaign (NVRTC builds in the background, the trace database, a
// measurement thread) and the study's simulated campaign over the universe those builds and
// measurements were recorded in measure the same genomes in the same order.
#include "search/search_loop.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <mutex>
#include <sstream>

#include "campaign_fixture.hpp"
#include "search/campaign.hpp"
#include "search/prior_study.hpp"
#include "search/universe.hpp"

namespace ptxevo::search {
namespace {

namespace fs = std::filesystem;

// The knob model's figures, with the fitness the evaluator computes (the geometric mean of the
// benchmark shapes' speedups), and every genome it measured, in order.
class RecordingMeasurer : public Measurer {
 public:
  std::string mode() const override { return inner_.mode(); }
  tracedb::Environment environment() const override { return inner_.environment(); }
  std::vector<evaluator::EvalReport> measure(const evaluator::EvalRequest& common,
                                             const std::vector<MeasureItem>& items) override {
    auto reports = inner_.measure(common, items);
    for (auto& r : reports) {
      if (!r.fitness) continue;
      double log_sum = 0;
      int n = 0;
      for (const auto& s : r.shapes)
        if (s.speedup) {
          log_sum += std::log(s.speedup->ratio);
          ++n;
        }
      r.fitness = std::exp(log_sum / n);
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& it : items) order_.push_back(it.genome_hash);
    return reports;
  }
  std::vector<std::string> order() const {
    std::lock_guard<std::mutex> lock(mu_);
    return order_;
  }

 private:
  testing::KnobModelMeasurer inner_;
  mutable std::mutex mu_;
  std::vector<std::string> order_;
};

class SearchLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ptxevo_search_loop_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    registry_.add(std::make_unique<testing::ScaleOp>());
    spec_ = testing::write_scale_spec(dir_, registry_);
    cache_.emplace(dir_ / "cache");
    builder_.emplace(&*cache_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Every knob assignment of the scale spec, built, screened and measured as `ptxevo universe`
  // does it.
  Universe measured_universe() {
    std::string why;
    Universe u;
    u.op = spec_.op;
    u.arch = spec_.arch;
    u.seed = spec_.seeds.front().name;
    u.spec_hash = "test";
    u.grid = make_grid(spec_.seeds.front(), {}, &why);
    EXPECT_EQ(why, "");
    u.benchmark_shapes = spec_.benchmark_shapes;
    for (auto& g : universe_genomes(u.seed, grid_assignments(restrict_seed(spec_.seeds.front(), u.grid)), {}, -1)) {
      UniverseMember m;
      m.genome = std::move(g);
      m.genome_hash = m.genome.hash();
      u.members.push_back(std::move(m));
    }
    RecordingMeasurer m;
    std::ostringstream log;
    std::atomic<bool> stop{false};
    const auto r = run_universe(u, spec_, op(), *builder_, {&m}, UniverseRunOptions{}, log, [](const Universe&) {}, stop);
    EXPECT_EQ(r.stop_reason, "done") << log.str();
    return u;
  }

  const evaluator::Op& op() const { return *registry_.find("test_scale"); }

  fs::path dir_;
  evaluator::OpRegistry registry_;
  evaluator::Spec spec_;
  std::optional<evaluator::BuildCache> cache_;
  std::optional<evaluator::Builder> builder_;
};

TEST_F(SearchLoopTest, CampaignAndPriorStudyMakeTheSameChoicesFromTheSameMeasurements) {
  const Universe u = measured_universe();
  ASSERT_GT(u.passing_count(), 40u);
  const std::int64_t budget = 36;
  for (const std::uint64_t seed : {1u, 7u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    StudyOptions so;
    so.batch = 5;
    so.islands = 3;
    so.island_size = 4;
    so.initial = 6;
    so.noise = false;         // the measurements a campaign gets: the recorded ones
    so.random_edits.share = 0;  // the universe holds knob assignments only
    const SimulatedCampaign sim = simulate_campaign(u, spec_, op(), so, seed, budget);

    CampaignOptions co;
    co.batch = so.batch;
    co.islands = so.islands;
    co.island_size = so.island_size;
    co.initial = so.initial;
    co.random_edits.share = 0;
    co.ptx_passes = std::vector<std::string>{};  // knob moves only, as the universe
    co.max_evaluations = budget;
    co.seed = seed;
    co.final_check = false;  // the study has none
    auto db = tracedb::TraceDb::open(dir_ / ("campaign_" + std::to_string(seed) + ".db"));
    RecordingMeasurer measurer;
    std::ostringstream log;
    std::atomic<bool> stop{false};
    CampaignEngine engine(spec_, op(), *builder_, db, {&measurer}, co, log, stop);
    const CampaignResult r = engine.run();
    ASSERT_EQ(r.stop_reason, "budget") << log.str();

    std::vector<std::string> simulated;
    for (const auto& g : sim.measured) simulated.push_back(g.hash());
    const auto campaign = measurer.order();
    // Candidates up to the budget, and the re-measurements of the best among them.
    EXPECT_EQ(sim.run.evaluations, budget);
    EXPECT_EQ(r.evaluations_this_run, budget);
    EXPECT_GT(sim.run.remeasures, 0);
    ASSERT_EQ(campaign.size(), simulated.size());
    for (std::size_t i = 0; i < campaign.size(); ++i) EXPECT_EQ(campaign[i], simulated[i]) << "measurement " << i;
  }
}

}  // namespace
}  // namespace ptxevo::search
