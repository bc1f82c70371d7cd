#include "search/campaign.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>
#include <sstream>

#include "campaign_fixture.hpp"
#include "search/replay.hpp"
#include "report/data.hpp"
#include "report/html.hpp"
#include "report/text.hpp"

namespace ptxevo::search {
namespace {

namespace fs = std::filesystem;
using testing::KnobModelMeasurer;

class CampaignTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ptxevo_campaign_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    registry_.add(std::make_unique<testing::ScaleOp>());
    spec_ = testing::write_scale_spec(dir_, registry_);
    cache_.emplace(dir_ / "cache");
    builder_.emplace(&*cache_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  CampaignResult run(tracedb::TraceDb& db, std::vector<Measurer*> m, CampaignOptions o, const std::atomic<bool>* stop = nullptr,
                     std::shared_ptr<const ReplayProjection> projection = nullptr) {
    std::ostringstream log;
    std::atomic<bool> never{false};
    CampaignEngine e(spec_, *registry_.find("test_scale"), *builder_, db, std::move(m), o, log, stop ? *stop : never);
    if (projection) e.restrict_to(std::move(projection));
    auto r = e.run();
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

CampaignOptions small() {
  CampaignOptions o;
  o.islands = 2;
  o.island_size = 4;
  o.batch = 4;
  o.initial = 4;
  o.max_evaluations = 30;
  o.final_check = true;
  return o;
}

// The scale spec with other benchmark shapes and UNROLL limited to {1, 2, 4}: a different
// campaign on the same op, where some of the first campaign's genomes are not legal.
std::string variant_spec(const std::string& shapes) {
  std::string t = testing::kScaleSpec;
  auto swap = [&](const std::string& from, const std::string& to) { t.replace(t.find(from), from.size(), to); };
  swap("benchmark = [ { N = 1048576 }, { N = 4096 } ]", "benchmark = " + shapes);
  swap("UNROLL = { values = [1, 2, 3, 4, 8], default = 1 }", "UNROLL = { values = [1, 2, 4], default = 1 }");
  return t;
}

std::vector<Genome> genomes_by_operator(tracedb::TraceDb& db, std::int64_t campaign_id, const std::string& op) {
  auto q = db.connection().prepare("SELECT genome_json FROM candidates WHERE campaign_id = ? AND operator = ?");
  q.bind(1, campaign_id).bind(2, op);
  std::vector<Genome> out;
  while (q.step()) out.push_back(genome_from_json(nlohmann::json::parse(q.column_text(0))));
  return out;
}

TEST_F(CampaignTest, WarmStartSeedsAFreshCampaignWithTheBestLegalGenomesOfEarlierOnes) {
  auto db = tracedb::TraceDb::open(dir_ / "c.db");
  KnobModelMeasurer m;
  const auto a = run(db, {&m}, small());
  ASSERT_TRUE(a.best.has_value());
  // The best fitness of campaign A among genomes campaign B's space admits.
  double best_legal = 0;
  {
    auto q = db.connection().prepare(
        "SELECT c.genome_json FROM candidates c JOIN evaluations e ON e.candidate_id = c.id "
        "WHERE c.campaign_id = ? AND e.verdict = 'pass' AND e.fitness IS NOT NULL");
    q.bind(1, a.campaign_id);
    while (q.step()) {
      const Genome g = genome_from_json(nlohmann::json::parse(q.column_text(0)));
      const auto u = evaluator::knob_int(g.knobs, "UNROLL", 1);
      if (u == 1 || u == 2 || u == 4) best_legal = std::max(best_legal, KnobModelMeasurer::speedup_of(g.knobs));
    }
  }
  ASSERT_GT(best_legal, 1.0);

  std::ofstream(dir_ / "scale_b.spec") << variant_spec("[ { N = 65536 } ]");
  auto b_spec = evaluator::load_spec((dir_ / "scale_b.spec").string(), registry_);
  ASSERT_TRUE(b_spec.spec) << b_spec.error->format();
  spec_ = *b_spec.spec;
  auto o = small();
  o.max_evaluations = 5;  // the first population only: the seed and 4 more
  const auto b = run(db, {&m}, o);
  ASSERT_NE(b.campaign_id, a.campaign_id);
  const auto warm = genomes_by_operator(db, b.campaign_id, "warm_start");
  // At most half the first population (5 / 2), every one legal here, none the seed itself.
  ASSERT_GE(warm.size(), 1u);
  EXPECT_LE(warm.size(), 2u);
  for (const auto& g : warm) {
    const auto u = evaluator::knob_int(g.knobs, "UNROLL", 1);
    EXPECT_TRUE(u == 1 || u == 2 || u == 4) << g.describe();
  }
  // The earlier best legal genome is measured again here, in the first population.
  ASSERT_TRUE(b.best.has_value());
  EXPECT_DOUBLE_EQ(b.best->fitness, best_legal);
  EXPECT_NE(log_.find("warm_start"), std::string::npos);

  // Cold control: warm start off, nothing taken from earlier campaigns.
  std::ofstream(dir_ / "scale_c.spec") << variant_spec("[ { N = 32768 } ]");
  auto c_spec = evaluator::load_spec((dir_ / "scale_c.spec").string(), registry_);
  ASSERT_TRUE(c_spec.spec);
  spec_ = *c_spec.spec;
  o.warm_start = 0;
  const auto c = run(db, {&m}, o);
  EXPECT_TRUE(genomes_by_operator(db, c.campaign_id, "warm_start").empty());
  EXPECT_EQ(genomes_by_operator(db, c.campaign_id, "random").size(), 4u);
}

TEST_F(CampaignTest, ImprovesOverTheSeedAndNeverMeasuresAGenomeTwice) {
  auto db = tracedb::TraceDb::open(dir_ / "c.db");
  KnobModelMeasurer m;
  auto r = run(db, {&m}, small());
  EXPECT_EQ(r.mode, "gpu");
  EXPECT_EQ(r.stop_reason, "budget");
  EXPECT_EQ(r.evaluations, 30);
  ASSERT_TRUE(r.best.has_value());
  // The seed (BLOCK=64, UNROLL=1, PAD=0) has fitness 1.0; the model's optimum is 1.2 * 1.16.
  EXPECT_GT(r.best->fitness, 1.1);
  EXPECT_DOUBLE_EQ(r.best->fitness, KnobModelMeasurer::speedup_of(r.best->genome.knobs));
  ASSERT_TRUE(r.final_report.has_value());
  EXPECT_EQ(r.final_report->verdict, "pass");
  // Re-measurements of elites and the final check aside, every candidate was measured once.
  {
    auto q = db.connection().prepare(
        "SELECT max(n) FROM (SELECT count(*) AS n FROM evaluations WHERE purpose = 'candidate' GROUP BY candidate_id)");
    q.step();
    EXPECT_EQ(q.column_int(0), 1);
    auto e = db.connection().prepare("SELECT count(*) FROM evaluations");
    e.step();
    int remeasures = 0;
    for (const auto& [hash, n] : m.all_calls()) remeasures += n - 1;
    EXPECT_EQ(e.column_int(0), 30 + remeasures);
  }
  EXPECT_TRUE(db.integrity_ok());
  // Failures are recorded with their reason, and the failing genomes never enter the population.
  auto s = db.connection().prepare(
      "SELECT count(*), sum(e.verdict = 'pass') FROM evaluations e JOIN candidates c ON c.id = e.candidate_id "
      "WHERE c.genome_json LIKE '%\"UNROLL\":3%'");
  ASSERT_TRUE(s.step());
  EXPECT_EQ(s.column_int(1), 0);
  EXPECT_NE(log_.find("evaluations"), std::string::npos);
}

TEST_F(CampaignTest, ALoweredGateReachesTheCandidatesButNotTheFinalCheck) {
  auto db = tracedb::TraceDb::open(dir_ / "c.db");
  KnobModelMeasurer m;
  auto opt = small();
  opt.determinism_runs = 1;
  opt.guard_pages = false;
  opt.degenerate_rows = false;
  auto r = run(db, {&m}, opt);
  ASSERT_TRUE(r.final_report.has_value());
  const auto gates = m.gates();
  ASSERT_GE(gates.size(), 2u);
  for (std::size_t i = 0; i + 1 < gates.size(); ++i) {
    EXPECT_EQ(gates[i].determinism_runs, 1);
    EXPECT_FALSE(gates[i].guard_pages);
    EXPECT_FALSE(gates[i].degenerate_rows);
  }
  const evaluator::GateOptions full;
  EXPECT_EQ(gates.back().determinism_runs, full.determinism_runs);
  EXPECT_TRUE(gates.back().guard_pages);
  EXPECT_TRUE(gates.back().degenerate_rows);
  EXPECT_NE(log_.find("gate lowered for the candidates"), std::string::npos);
}

TEST_F(CampaignTest, TopsBatchesUpAndRemeasuresTheBestOnlyAFewTimes) {
  // UNROLL = 3 genomes fail the gate and half the knob space is quickly seen: many children are
  // duplicates, so without top-up batches shrink to one or two candidates.
  auto db = tracedb::TraceDb::open(dir_ / "c.db");
  KnobModelMeasurer m;
  CampaignOptions o = small();
  o.max_evaluations = 60;
  o.remeasure_every = 1;  // a re-measurement offered with every batch ...
  o.max_measurements = 3; // ... but the best gets at most three passing evaluations
  o.final_check = false;
  o.cost_model = false;   // its reserve fills batches too; this test is about topping up
  auto r = run(db, {&m}, o);
  EXPECT_EQ(r.stop_reason, "budget");
  auto q = db.connection().prepare(
      "SELECT max(n) FROM (SELECT count(*) AS n FROM evaluations WHERE verdict = 'pass' GROUP BY candidate_id)");
  q.step();
  EXPECT_LE(q.column_int(0), 3);
  EXPECT_GE(q.column_int(0), 2);  // the best was re-measured at least once
  // Topped up, batches are fuller than without: this small knob space soon yields mostly
  // duplicates, so a batch of `batch` children alone shrinks.
  auto mean_size = [](const std::vector<int>& v) {
    double s = 0;
    for (std::size_t i = 0; i + 1 < v.size(); ++i) s += v[i];
    return v.size() > 1 ? s / static_cast<double>(v.size() - 1) : 0.0;
  };
  const double topped = mean_size(m.batch_sizes());
  auto db2 = tracedb::TraceDb::open(dir_ / "c2.db");
  KnobModelMeasurer m2;
  o.top_up_rounds = 0;
  run(db2, {&m2}, o);
  const double plain = mean_size(m2.batch_sizes());
  EXPECT_GE(topped, 0.9 * o.batch);
  EXPECT_GT(topped, plain) << "topped up " << topped << " vs plain " << plain;
}

TEST_F(CampaignTest, ResumesWhereItStopped) {
  KnobModelMeasurer m1, m2;
  std::int64_t id = 0;
  {
    auto db = tracedb::TraceDb::open(dir_ / "c.db");
    auto o = small();
    o.max_evaluations = 12;
    auto r = run(db, {&m1}, o);
    EXPECT_FALSE(r.resumed);
    EXPECT_EQ(r.evaluations, 12);
    id = r.campaign_id;
  }
  // Moved away and back: the campaign is found by the spec, not by the file's location.
  fs::rename(dir_ / "c.db", dir_ / "moved.db");
  fs::rename(dir_ / "moved.db", dir_ / "c.db");
  auto db = tracedb::TraceDb::open(dir_ / "c.db");
  auto o = small();
  o.max_evaluations = 30;
  auto r = run(db, {&m2}, o);
  EXPECT_TRUE(r.resumed);
  EXPECT_EQ(r.campaign_id, id);
  EXPECT_EQ(r.evaluations, 30);
  EXPECT_EQ(r.evaluations_this_run, 18);
  EXPECT_NE(log_.find("resuming campaign"), std::string::npos);
  // Nothing measured in the first run was evaluated as a candidate again.
  auto q = db.connection().prepare(
      "SELECT max(n) FROM (SELECT count(*) AS n FROM evaluations WHERE purpose = 'candidate' GROUP BY candidate_id)");
  q.step();
  EXPECT_EQ(q.column_int(0), 1);
}

TEST_F(CampaignTest, StopsWhenAskedAndKeepsWhatWasMeasured) {
  auto db = tracedb::TraceDb::open(dir_ / "c.db");
  std::atomic<bool> stop{true};
  KnobModelMeasurer m;
  auto r = run(db, {&m}, small(), &stop);
  EXPECT_EQ(r.stop_reason, "interrupted");
  EXPECT_EQ(r.evaluations, 0);
  auto s = db.connection().prepare("SELECT status FROM campaigns");
  ASSERT_TRUE(s.step());
  EXPECT_EQ(s.column_text(0), "stopped");
}

// Pass children whose pass refused the parent: how many, and whether any (parent, pass) pair
// refused twice.
std::pair<int, int> refusals(tracedb::TraceDb& db, std::int64_t campaign_id) {
  auto q = db.connection().prepare(
      "SELECT count(*), count(*) - count(DISTINCT coalesce(parent_id, -1) || operator) FROM candidates "
      "WHERE campaign_id = ? AND build_stage = 'pass' AND build_log LIKE 'pass-refused%'");
  q.bind(1, campaign_id);
  q.step();
  return {static_cast<int>(q.column_int(0)), static_cast<int>(q.column_int(1))};
}

TEST_F(CampaignTest, PassesThatRefuseEveryParentAreRarelyProposedAgain) {
  auto o = small();
  o.max_evaluations = 60;
  o.final_check = false;
  auto db_off = tracedb::TraceDb::open(dir_ / "off.db");
  KnobModelMeasurer m_off;
  o.refusals_before_rare = 0;  // off: refusals are free to the posterior, so they recur
  const auto off = run(db_off, {&m_off}, o);
  const auto [refused_off, repeats_off] = refusals(db_off, off.campaign_id);
  ASSERT_GE(refused_off, 8) << "the toy kernel should have passes that cannot apply";
  (void)repeats_off;

  auto db_on = tracedb::TraceDb::open(dir_ / "on.db");
  KnobModelMeasurer m_on;
  o.refusals_before_rare = 3;
  // One build round at a time: with more, a round proposed before an earlier one's refusal was
  // known may ask the same parent again.
  o.build_rounds = 1;
  const auto on = run(db_on, {&m_on}, o);
  const auto [refused_on, repeats_on] = refusals(db_on, on.campaign_id);
  EXPECT_EQ(repeats_on, 0) << "a pass proposed again for a parent it refused";
  EXPECT_LT(refused_on, refused_off);
  EXPECT_NE(log_.find("proposed only rarely"), std::string::npos);
  std::printf("refused pass builds: %d with the rule, %d without (budget %lld)\n", refused_on, refused_off,
              static_cast<long long>(o.max_evaluations));
}

// The first population's random genomes: about half carry PTX edits (CampaignOptions::random_edits),
// only of passes that apply to the baseline's PTX, so a cold campaign explores edits from its
// first batch; share 0 gives knob assignments only.
TEST_F(CampaignTest, RandomGenomesOfTheFirstPopulationCarryEditsOfPassesThatApply) {
  auto first_population = [&](const std::string& name, double share) {
    auto db = tracedb::TraceDb::open(dir_ / name);
    KnobModelMeasurer m;
    auto o = small();
    o.initial = 16;
    o.batch = 17;           // the seed and 16 random genomes in the first batch
    o.max_evaluations = 17;  // the first population only (no more than the budget is proposed)
    o.final_check = false;
    o.random_edits.share = share;
    const auto r = run(db, {&m}, o);
    return genomes_by_operator(db, r.campaign_id, "random");
  };
  const auto with = first_population("with.db", 0.5);
  const std::string log = log_;
  ASSERT_GE(with.size(), 12u);  // 16 drawn; a duplicate is one candidate
  // The passes that refuse the baseline are named in the log and never drawn.
  const auto at = log.find("random genomes: 50% carry 1-2 PTX edits of ");
  ASSERT_NE(at, std::string::npos) << log;
  const std::string line = log.substr(at, log.find('\n', at) - at);
  const auto refusing_at = line.find("refusing it:");
  const std::string refusing = refusing_at == std::string::npos ? "" : line.substr(refusing_at) + " ";
  int edited = 0;
  for (const auto& g : with) {
    if (!g.edits.empty()) ++edited;
    EXPECT_LE(g.edits.size(), 2u) << g.describe();
    for (const auto& e : g.edits) {
      EXPECT_EQ(refusing.find(" " + e.pass + " "), std::string::npos) << e.pass << " refuses the baseline: " << line;
      EXPECT_NE(e.pass, "launch_bounds");
    }
    if (g.edits.size() == 2) {
      EXPECT_NE(g.edits[0].pass, g.edits[1].pass);
    }
  }
  // Half of 16 in expectation: both kinds are there (deterministic for this seed).
  EXPECT_GE(edited, 3) << line;
  EXPECT_LE(edited, 13) << line;
  std::printf("%d of %zu random genomes carry edits; %s\n", edited, with.size(), line.c_str());

  // The same seed draws the same genomes; share 0 draws knob assignments only.
  const auto again = first_population("again.db", 0.5);
  ASSERT_EQ(again.size(), with.size());
  for (std::size_t i = 0; i < with.size(); ++i) EXPECT_EQ(again[i], with[i]);
  for (const auto& g : first_population("without.db", 0.0)) EXPECT_TRUE(g.edits.empty()) << g.describe();
}

// Builds run ahead of the GPU in several rounds at once, yet only counts decide what happens
// next: with one measurer, the same seed gives the same campaign.
TEST_F(CampaignTest, BuildRoundsRunAheadAndTheCampaignStaysDeterministic) {
  auto snapshot = [&](const std::string& name, int rounds) {
    auto db = tracedb::TraceDb::open(dir_ / name);
    KnobModelMeasurer m;
    auto o = small();
    o.max_evaluations = 40;
    o.build_rounds = rounds;
    const auto r = run(db, {&m}, o);
    EXPECT_EQ(r.evaluations, 40);
    std::string out;
    auto q = db.connection().prepare("SELECT id || ' ' || genome_hash || ' ' || operator || ' ' || state FROM candidates ORDER BY id");
    while (q.step()) out += q.column_text(0) + "\n";
    return out;
  };
  const std::string a = snapshot("a.db", 3);
  EXPECT_EQ(a, snapshot("b.db", 3));
  EXPECT_FALSE(a.empty());
}

TEST_F(CampaignTest, StaticModeBuildsAndRecordsNoFitness) {
  auto db = tracedb::TraceDb::open(dir_ / "c.db");
  auto o = small();
  o.max_evaluations = 6;
  auto r = run(db, {}, o);
  EXPECT_EQ(r.mode, "static");
  EXPECT_EQ(r.evaluations, 0);
  EXPECT_GE(r.built_this_run, 6);
  EXPECT_FALSE(r.final_report.has_value());
  auto s = db.connection().prepare("SELECT count(*) FROM evaluations");
  s.step();
  EXPECT_EQ(s.column_int(0), 0);
}

TEST_F(CampaignTest, ReplayReproducesRecordedFitnessAndMarksTheRestUnmeasured) {
  ReplayData data;
  {
    auto db = tracedb::TraceDb::open(dir_ / "gpu.db");
    KnobModelMeasurer m;
    auto o = small();
    o.max_evaluations = 16;
    auto r = run(db, {&m}, o);
    data = export_replay(db, r.campaign_id, spec_, "test");
  }
  ASSERT_GE(data.records.size(), 16u);
  EXPECT_EQ(replay_mismatch(data, spec_, "sm_90a"), "");
  EXPECT_NE(replay_mismatch(data, spec_, "sm_100a"), "");
  write_replay(dir_ / "scale.replay.json", data);
  auto loaded = load_replay(dir_ / "scale.replay.json");
  EXPECT_EQ(loaded.records.size(), data.records.size());

  auto db = tracedb::TraceDb::open(dir_ / "replay.db");
  ReplayMeasurer rm(std::move(loaded));
  auto o = small();
  o.max_evaluations = 16;
  o.seed = 7;  // another search path: some genomes are not in the record
  auto r = run(db, {&rm}, o);
  EXPECT_EQ(r.mode, "replay");
  EXPECT_EQ(r.stop_reason, "budget");
  EXPECT_EQ(r.evaluations_this_run + r.unmeasured_this_run, 16);
  ASSERT_TRUE(r.best.has_value());
  EXPECT_DOUBLE_EQ(r.best->fitness, KnobModelMeasurer::speedup_of(r.best->genome.knobs));
  auto s = db.connection().prepare("SELECT count(*) FROM evaluations WHERE mode != 'replay'");
  s.step();
  EXPECT_EQ(s.column_int(0), 0);
  EXPECT_FALSE(r.final_report.has_value());  // nothing is re-measured from a record
}

// With the projection the CLI sets in replay mode, the same search from another seed proposes
// only what the record holds: every build is scored, nothing is unmeasured, and the search can
// take the whole record.
TEST_F(CampaignTest, ReplayProjectedOntoTheRecordScoresEveryBuild) {
  ReplayData data;
  {
    auto db = tracedb::TraceDb::open(dir_ / "gpu.db");
    KnobModelMeasurer m;
    auto o = small();
    o.max_evaluations = 16;
    auto r = run(db, {&m}, o);
    data = export_replay(db, r.campaign_id, spec_, "test");
  }
  const auto projection = std::make_shared<const ReplayProjection>(data, spec_);
  ASSERT_EQ(projection->size(), data.records.size());
  auto db = tracedb::TraceDb::open(dir_ / "replay.db");
  ReplayMeasurer rm(data);
  auto o = small();
  o.max_evaluations = 12;
  o.seed = 7;
  auto r = run(db, {&rm}, o, nullptr, projection);
  EXPECT_EQ(r.mode, "replay");
  EXPECT_EQ(r.unmeasured_this_run, 0);
  EXPECT_GE(r.evaluations_this_run, 10);
  auto q = db.connection().prepare("SELECT genome_hash, coalesce(outcome, '') FROM candidates WHERE campaign_id = ?");
  q.bind(1, r.campaign_id);
  int rows = 0;
  while (q.step()) {
    ++rows;
    EXPECT_TRUE(data.records.count(q.column_text(0))) << "proposed outside the record";
    EXPECT_NE(q.column_text(1), "unmeasured");
  }
  EXPECT_GE(rows, 10);
  EXPECT_NE(log_.find("projected onto the"), std::string::npos) << log_;
  // A budget beyond the record: the search runs out of recorded genomes and stops, having
  // taken each one at most once.
  auto db2 = tracedb::TraceDb::open(dir_ / "replay2.db");
  o.max_evaluations = 1000;
  auto all = run(db2, {&rm}, o, nullptr, projection);
  EXPECT_EQ(all.unmeasured_this_run, 0);
  EXPECT_EQ(all.stop_reason, "no-proposals");
  EXPECT_EQ(db2.count_candidates(all.campaign_id), static_cast<std::int64_t>(data.records.size()));
}

// The nearest untaken recorded genome: fewest knob steps, then edits; the record's own genomes
// as they are; nothing once all are taken.
TEST_F(CampaignTest, ReplayProjectionPicksTheNearestUntakenGenome) {
  auto genome = [](std::int64_t block, std::int64_t unroll, bool edit) {
    Genome g;
    g.seed = "scale";
    g.knobs = {{"BLOCK", block}, {"UNROLL", unroll}, {"PAD", std::int64_t{0}}};
    if (edit) g.edits.push_back({"store_streaming", {}});
    return g;
  };
  ReplayData data;
  for (const Genome& g : {genome(64, 1, false), genome(256, 4, false), genome(256, 4, true)}) {
    ReplayRecord rec;
    rec.genome_hash = g.hash();
    rec.genome = g.to_json();
    data.records[rec.genome_hash] = rec;
  }
  const ReplayProjection p(data, spec_);
  ASSERT_EQ(p.size(), 3u);
  std::set<std::string> taken;
  EXPECT_EQ(p.project(genome(64, 1, false), taken), genome(64, 1, false));          // recorded: itself
  EXPECT_EQ(p.project(genome(128, 1, false), taken), genome(64, 1, false));         // one BLOCK step away
  EXPECT_EQ(p.project(genome(256, 8, true), taken), genome(256, 4, true));          // one UNROLL step, same edits
  taken.insert(genome(256, 4, true).hash());
  EXPECT_EQ(p.project(genome(256, 8, true), taken), genome(256, 4, false));         // the next nearest
  taken.insert(genome(256, 4, false).hash());
  taken.insert(genome(64, 1, false).hash());
  EXPECT_FALSE(p.project(genome(256, 8, true), taken).has_value());
}

// A measurer whose first call takes `first` seconds a candidate and every later one `later`
// (so a batch sized on the first overruns the deadline), and that gives up at once when
// abandoned, as the GPU runner does at a campaign's deadline.
class SlowMeasurer : public KnobModelMeasurer {
 public:
  SlowMeasurer(double first, double later) : first_(first), later_(later) {}
  std::vector<evaluator::EvalReport> measure(const evaluator::EvalRequest& common,
                                             const std::vector<MeasureItem>& items) override {
    const double per_item = calls_++ == 0 ? first_ : later_;
    const auto end = std::chrono::steady_clock::now() +
                     std::chrono::duration<double>(per_item * static_cast<double>(items.size()));
    while (std::chrono::steady_clock::now() < end) {
      if (abandoned_.load()) {
        evaluator::EvalReport r;
        r.verdict = "not-run";
        r.reasons.push_back("abandoned: the campaign reached its deadline");
        return std::vector<evaluator::EvalReport>(items.size(), r);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return KnobModelMeasurer::measure(common, items);
  }
  void abandon() override { abandoned_.store(true); }

 private:
  double first_, later_;
  std::atomic<int> calls_{0};
  std::atomic<bool> abandoned_{false};
};

// --minutes: the campaign ends within 10% of its deadline although a batch in flight would run
// far past it; what was in flight stays built, and a resumed campaign measures it.
TEST_F(CampaignTest, DeadlineEndsTheCampaignOnTimeAndKeepsWhatWasInFlight) {
  auto db = tracedb::TraceDb::open(dir_ / "deadline.db");
  SlowMeasurer m(0.3, 5.0);  // after the first batch, a batch of 4 takes 20 s
  auto o = small();
  o.max_evaluations = 100;
  o.max_minutes = 0.2;  // 12 s
  const auto r = run(db, {&m}, o);
  EXPECT_EQ(r.stop_reason, "time");
  EXPECT_LE(r.wall_s, 12 * 1.1) << log_;
  EXPECT_GT(r.evaluations_this_run, 0);
  EXPECT_GT(r.abandoned_this_run, 0) << log_;
  EXPECT_NE(log_.find("deadline: abandoning"), std::string::npos) << log_;
  const auto pending = db.pending_candidates(r.campaign_id);
  EXPECT_GE(static_cast<std::int64_t>(pending.size()), r.abandoned_this_run);
  // Resumed without a deadline: the abandoned candidates are measured, none twice.
  KnobModelMeasurer fast;
  auto o2 = small();
  o2.max_evaluations = r.evaluations + static_cast<std::int64_t>(pending.size()) + 8;
  o2.remeasure_every = 0;
  o2.final_check = false;
  const auto resumed = run(db, {&fast}, o2);
  EXPECT_TRUE(resumed.resumed);
  std::set<std::int64_t> still;
  for (const auto& c : db.pending_candidates(r.campaign_id)) still.insert(c.id);
  for (const auto& c : pending) EXPECT_FALSE(still.count(c.id)) << "candidate " << c.id << " was left pending";
  for (const auto& [hash, n] : fast.all_calls()) EXPECT_EQ(n, 1) << hash;
}

// A measurer at a steady `per_item` seconds a candidate that counts what it was given and had
// to give up at the deadline.
class SteadyMeasurer : public KnobModelMeasurer {
 public:
  explicit SteadyMeasurer(double per_item) : per_item_(per_item) {}
  std::vector<evaluator::EvalReport> measure(const evaluator::EvalRequest& common,
                                             const std::vector<MeasureItem>& items) override {
    const auto end = std::chrono::steady_clock::now() +
                     std::chrono::duration<double>(per_item_ * static_cast<double>(items.size()));
    while (std::chrono::steady_clock::now() < end) {
      if (abandoned_.load()) {
        given_up_ += static_cast<int>(items.size());
        evaluator::EvalReport r;
        r.verdict = "not-run";
        r.reasons.push_back("abandoned: the campaign reached its deadline");
        return std::vector<evaluator::EvalReport>(items.size(), r);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return KnobModelMeasurer::measure(common, items);
  }
  void abandon() override { abandoned_.store(true); }
  int given_up() const { return given_up_.load(); }

 private:
  double per_item_;
  std::atomic<bool> abandoned_{false};
  std::atomic<int> given_up_{0};
};

// Near the deadline a batch is sized on what the measurers can finish before it, counting the
// batch queued ahead of it: a batch that waits behind a running one and could only run past the
// deadline is not sent (it was, and was abandoned with its measurement half done).
TEST_F(CampaignTest, NearTheDeadlineNoBatchIsSentThatCannotFinish) {
  auto db = tracedb::TraceDb::open(dir_ / "deadline_sizing.db");
  SteadyMeasurer m(0.4);  // a batch of 4: 1.6 s
  auto o = small();
  o.max_evaluations = 200;
  o.max_minutes = 0.15;  // 9 s
  o.remeasure_every = 0;
  o.final_check = false;
  const auto r = run(db, {&m}, o);
  EXPECT_EQ(r.stop_reason, "time");
  EXPECT_GT(r.evaluations_this_run, 4);
  // One batch at most was caught at the deadline by the estimate's error, not one queued behind it.
  EXPECT_LE(m.given_up(), 4) << log_;
}

// A measurer that throws from its third call on (a GPU worker pool or an MPI rank gone).
class FailingMeasurer : public KnobModelMeasurer {
 public:
  std::vector<evaluator::EvalReport> measure(const evaluator::EvalRequest& common,
                                             const std::vector<MeasureItem>& items) override {
    if (++calls_ > 2) throw std::runtime_error("every measuring rank is lost");
    return KnobModelMeasurer::measure(common, items);
  }
  int calls() const { return calls_.load(); }

 private:
  std::atomic<int> calls_{0};
};

// A failed measurer stops the campaign at once (it used to be overwritten by the next budget
// check, and the loop sent batch after batch to the dead measurer); a resume completes it.
TEST_F(CampaignTest, AFailedMeasurerStopsTheCampaignAndAResumeCompletesIt) {
  auto db = tracedb::TraceDb::open(dir_ / "failed.db");
  FailingMeasurer m;
  auto o = small();
  o.final_check = false;
  const auto r = run(db, {&m}, o);
  EXPECT_EQ(r.stop_reason, "measurer-failed") << log_;
  EXPECT_LE(m.calls(), 4) << log_;  // the failed call and at most the batch queued behind it
  EXPECT_LT(r.evaluations, o.max_evaluations);
  KnobModelMeasurer fast;
  const auto resumed = run(db, {&fast}, o);
  EXPECT_TRUE(resumed.resumed);
  EXPECT_EQ(resumed.stop_reason, "budget");
  EXPECT_GE(resumed.evaluations, o.max_evaluations);
}

// A measurer whose reports fail a held-out shape for UNROLL 2, naming it as the gate does.
class HeldoutFailingMeasurer : public KnobModelMeasurer {
 public:
  std::vector<evaluator::EvalReport> measure(const evaluator::EvalRequest& common,
                                             const std::vector<MeasureItem>& items) override {
    auto reports = KnobModelMeasurer::measure(common, items);
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (evaluator::knob_int(items[i].knobs, "UNROLL", 1) != 2) continue;
      auto& r = reports[i];
      const std::string why = "tolerance: rel_l2 0.3 > 1e-06 (output 'y') [heldout shape N=777, normal inputs]";
      for (auto& sh : r.shapes)
        if (sh.cls == evaluator::ShapeClass::Heldout) {
          sh.passed = false;
          sh.reasons.push_back(why);
        }
      r.reasons.push_back(why);
      r.verdict = "fail";
      r.fitness.reset();
    }
    return reports;
  }
};

// Held-out shapes leave no trace the search reads: evaluations and shape_results hold neither the
// shape nor the reason, only "heldout: a held-out shape failed"; heldout_results keeps the rest.
TEST_F(CampaignTest, HeldOutShapesLeaveNoTraceTheSearchReads) {
  std::string text = testing::kScaleSpec;
  const std::string corr = "correctness = [ { N = 1 }, { N = 1000 } ]";
  text.replace(text.find(corr), corr.size(), corr + "\nheldout = [ { N = 777 } ]");
  std::ofstream(dir_ / "scale_heldout.spec") << text;
  auto sr = evaluator::load_spec((dir_ / "scale_heldout.spec").string(), registry_);
  ASSERT_TRUE(sr.spec) << sr.error->format();
  spec_ = *sr.spec;
  auto db = tracedb::TraceDb::open(dir_ / "heldout.db");
  HeldoutFailingMeasurer m;
  auto o = small();
  o.max_evaluations = 24;
  const auto r = run(db, {&m}, o);
  int failed = 0;
  auto q = db.connection().prepare("SELECT verdict, reasons_json, report_json FROM evaluations");
  while (q.step()) {
    const std::string reasons = q.column_text(1), report = q.column_text(2);
    EXPECT_EQ(report.find("777"), std::string::npos) << report;
    EXPECT_EQ(reasons.find("heldout shape"), std::string::npos) << reasons;
    if (q.column_text(0) == "fail") {
      ++failed;
      EXPECT_NE(reasons.find("heldout: a held-out shape failed"), std::string::npos) << reasons;
    }
  }
  ASSERT_GT(failed, 0) << "no candidate with UNROLL 2 was measured";
  EXPECT_EQ(db.connection().query_int("SELECT count(*) FROM shape_results WHERE class = 'heldout'"), 0);
  EXPECT_EQ(db.connection().query_int("SELECT count(*) FROM heldout_results WHERE failed = 1"), failed);
  auto h = db.connection().prepare("SELECT detail_json FROM heldout_results WHERE failed = 1 LIMIT 1");
  ASSERT_TRUE(h.step());
  EXPECT_NE(h.column_text(0).find("[heldout shape N=777, normal inputs]"), std::string::npos);
  EXPECT_GT(db.connection().query_int("SELECT count(*) FROM heldout_results WHERE failed = 0"), 0);
  // The user's report shows them.
  const report::ReportData rep = report::load_report(dir_ / "heldout.db", r.campaign_id);
  EXPECT_EQ(rep.heldout_failed, failed);
  ASSERT_FALSE(rep.heldout_reasons.empty());
  EXPECT_NE(rep.heldout_reasons[0].find("[heldout shape N=777"), std::string::npos);
  std::ostringstream page;
  report::write_report_text(rep, page);
  EXPECT_NE(page.str().find("held-out shapes (never shown to the search): " + std::to_string(failed)), std::string::npos)
      << page.str();
  std::ostringstream html;
  report::write_report_html(rep, html);
  EXPECT_NE(html.str().find("<p id=\"heldout\">" + std::to_string(failed) + " evaluations failed a held-out shape"),
            std::string::npos);
  EXPECT_NE(html.str().find("[heldout shape N=777"), std::string::npos);
}

TEST_F(CampaignTest, ReplayRefusesAMalformedFile) {
  std::ofstream(dir_ / "bad.json") << "{\"format\": \"something-else\"}";
  try {
    load_replay(dir_ / "bad.json");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("ptxevo-replay-1"), std::string::npos);
  }
}

// kill -9 at a random moment of a running campaign: the database stays sound, and resuming
// reaches the budget with no genome measured twice across the runs.
TEST_F(CampaignTest, SurvivesKillNineAndResumes) {
  const fs::path db_path = dir_ / "kill.db";
  std::mt19937 rng(12345);
  for (int round = 0; round < 3; ++round) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        auto db = tracedb::TraceDb::open(db_path);
        KnobModelMeasurer m(30);
        auto o = small();
        o.max_evaluations = 40;
        std::ostringstream log;
        std::atomic<bool> never{false};
        CampaignEngine e(spec_, *registry_.find("test_scale"), *builder_, db, {&m}, o, log, never);
        e.run();
      } catch (...) {
        _exit(2);
      }
      _exit(0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(300, 1500)(rng)));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    auto db = tracedb::TraceDb::open(db_path);
    EXPECT_TRUE(db.integrity_ok()) << "round " << round;
  }
  auto db = tracedb::TraceDb::open(db_path);
  KnobModelMeasurer m;
  auto o = small();
  o.max_evaluations = 40;
  auto r = run(db, {&m}, o);
  EXPECT_TRUE(r.resumed);
  EXPECT_EQ(r.evaluations, 40);
  EXPECT_TRUE(db.integrity_ok());
  // One candidate evaluation per candidate: nothing measured twice across the killed runs.
  auto s = db.connection().prepare(
      "SELECT max(n) FROM (SELECT count(*) AS n FROM evaluations WHERE purpose = 'candidate' GROUP BY candidate_id)");
  s.step();
  EXPECT_EQ(s.column_int(0), 1);
}

}  // namespace
}  // namespace ptxevo::search
