// `ptxevo report`'s data, text and HTML, from databases written through the tracedb::TraceDb API.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "report/data.hpp"
#include "report/html.hpp"
#include "report/text.hpp"
#include "tracedb/tests/sample_reports.hpp"
#include "tracedb/trace_db.hpp"
#include "tracedb/trace_schema.hpp"

namespace ptxevo::report {
namespace {

// The reports read what campaigns recorded: the trace database's types are the tests' vocabulary.
using namespace ptxevo::tracedb;  // NOLINT(google-build-using-namespace)

using tracedb::testing::sample_report;
using tracedb::testing::TempDbPath;

tracedb::CampaignKey key(const std::string& path = "specs/rmsnorm.toml", const std::string& config = R"({"population":16})") {
  return {path, "abc123def4567890", "rmsnorm", "sm_90a", config};
}
tracedb::Environment env(const std::string& driver = "580.65") {
  return {"NVIDIA H200", driver, "13.0", R"({"ptxas":"13.0"})", R"({"sm_mhz":1980})"};
}
tracedb::BuildRecord built() { return {true, "ptxhash", "done", "", R"({"registers":32})", ""}; }

// Evaluation `id` happened `seconds` after 2026-01-01T00:00:00Z.
void set_time(tracedb::TraceDb& db, std::int64_t id, int seconds, const char* table = "evaluations") {
  char stamp[64];
  std::snprintf(stamp, sizeof stamp, "2026-01-01T%02d:%02d:%02d.000Z", seconds / 3600, seconds / 60 % 60, seconds % 60);
  db.connection()
      .prepare(std::string("UPDATE ") + table + " SET created_at = ? WHERE id = ?")
      .bind(1, std::string(stamp))
      .bind(2, id)
      .run();
}

// The winner's report: the sample's benchmark shape plus a second one where it is slower.
evaluator::EvalReport winner_report(double fitness) {
  auto r = sample_report(fitness);
  evaluator::ShapeReport s = r.shapes.back();
  s.shape = {{"M", 4096}, {"N", 8192}};
  s.speedup = evaluator::PairedRatio{30, 0.95, 0.90, 0.99};
  s.fraction_of_floor = 0.4;
  r.shapes.push_back(s);
  return r;
}

struct Ids {
  std::int64_t campaign = 0;
  std::vector<std::int64_t> candidates;
  std::vector<std::int64_t> evaluations;
};

// A campaign with every kind of outcome: passes (1.05, 1.20 the winner, 1.10), a tolerance
// failure, a timeout without reasons, a fault with two reason codes, a build failure and a
// candidate still proposed. Evaluations are 30 s apart.
Ids build_campaign(tracedb::TraceDb& db, const tracedb::CampaignKey& k = key(), const std::string& op = "knob-step") {
  Ids ids;
  ids.campaign = db.open_campaign(k).id;
  const auto env_a = db.record_environment(env());
  const auto env_b = db.record_environment(env("590.10"));
  auto candidate = [&](int i) {
    const auto c = db.record_candidate(ids.campaign, {k.spec_path + "-hash-" + std::to_string(i),
                                                      R"({"knobs":{"BLOCK":)" + std::to_string(i) + "}}", std::nullopt, op});
    ids.candidates.push_back(c.id);
    return c.id;
  };
  auto evaluate = [&](std::int64_t cand, const evaluator::EvalReport& r, std::int64_t e) {
    db.record_build(cand, built());
    ids.evaluations.push_back(db.record_evaluation(cand, e, r));
    set_time(db, ids.evaluations.back(), 30 * static_cast<int>(ids.evaluations.size() - 1));
  };
  evaluate(candidate(1), sample_report(1.05), env_a);
  evaluate(candidate(2), sample_report(1.0, "fail"), env_a);
  evaluate(candidate(3), winner_report(1.20), env_a);
  auto timeout = sample_report(1.0, "timeout");
  timeout.reasons.clear();
  evaluate(candidate(4), timeout, env_b);
  auto fault = sample_report(1.0, "fault");
  fault.reasons = {"unwritten-output: 12 of 4096 elements", "tolerance: rel_l2 inf"};
  evaluate(candidate(5), fault, env_b);
  evaluate(candidate(6), sample_report(1.10), env_b);
  db.record_build(candidate(7), {false, "", "ptxas", "ptxas error: too many registers", "{}", ""});
  candidate(8);
  return ids;
}

std::int64_t count_of(const std::vector<NamedCount>& counts, const std::string& name) {
  for (const auto& n : counts)
    if (n.name == name) return n.count;
  return -1;
}

std::string text_of(const ReportData& r) {
  std::ostringstream o;
  write_report_text(r, o);
  return o.str();
}

std::string html_of(const ReportData& r) {
  std::ostringstream o;
  write_report_html(r, o);
  return o.str();
}

std::size_t occurrences(const std::string& s, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = s.find(needle); p != std::string::npos; p = s.find(needle, p + needle.size())) ++n;
  return n;
}

TEST(ReportDataTest, CountsStatesVerdictsAndReasonCodes) {
  TempDbPath tmp;
  auto db = tracedb::TraceDb::open(tmp.db());
  const auto ids = build_campaign(db);
  const auto r = load_report(tmp.db());  // the writer's connection stays open: WAL readers coexist

  EXPECT_EQ(r.schema_version, tracedb::TraceDb::latest_version());
  EXPECT_EQ(r.campaign.id, ids.campaign);
  EXPECT_EQ(r.campaign.op, "rmsnorm");
  EXPECT_FALSE(r.campaign.replay);
  EXPECT_EQ(r.candidates, 8);
  EXPECT_EQ(count_of(r.candidates_by_state, "measured"), 6);
  EXPECT_EQ(count_of(r.candidates_by_state, "failed"), 1);
  EXPECT_EQ(count_of(r.candidates_by_state, "proposed"), 1);
  EXPECT_EQ(r.evaluations, 6);
  EXPECT_EQ(count_of(r.evaluations_by_verdict, "pass"), 3);
  EXPECT_EQ(count_of(r.evaluations_by_verdict, "fail"), 1);
  EXPECT_EQ(count_of(r.evaluations_by_verdict, "timeout"), 1);
  EXPECT_EQ(count_of(r.evaluations_by_verdict, "fault"), 1);
  // Once per evaluation and code; a failure without reasons counts by its verdict.
  EXPECT_EQ(count_of(r.failures_by_reason, "tolerance"), 2);
  EXPECT_EQ(count_of(r.failures_by_reason, "unwritten-output"), 1);
  EXPECT_EQ(count_of(r.failures_by_reason, "timeout"), 1);
  EXPECT_EQ(count_of(r.failures_by_reason, "build:ptxas"), 1);
  ASSERT_FALSE(r.failures_by_reason.empty());
  EXPECT_EQ(r.failures_by_reason.front().name, "tolerance");  // largest first
}

TEST(ReportDataTest, BestSoFarSeriesByIndexAndElapsedTime) {
  TempDbPath tmp;
  auto db = tracedb::TraceDb::open(tmp.db());
  const auto ids = build_campaign(db);
  const auto r = load_report(tmp.db(), ids.campaign);
  ASSERT_EQ(r.series.size(), 6u);
  const std::vector<std::optional<double>> fitness = {1.05, std::nullopt, 1.20, std::nullopt, std::nullopt, 1.10};
  const std::vector<double> best = {1.05, 1.05, 1.20, 1.20, 1.20, 1.20};
  for (std::size_t i = 0; i < r.series.size(); ++i) {
    const auto& p = r.series[i];
    EXPECT_EQ(p.index, static_cast<std::int64_t>(i + 1));
    EXPECT_EQ(p.evaluation_id, ids.evaluations[i]);
    EXPECT_NEAR(p.elapsed_s, 30.0 * static_cast<double>(i), 1e-3) << i;
    EXPECT_EQ(p.fitness.has_value(), fitness[i].has_value()) << i;
    if (p.fitness) {
      EXPECT_DOUBLE_EQ(*p.fitness, *fitness[i]);
    }
    ASSERT_TRUE(p.best) << i;
    EXPECT_DOUBLE_EQ(*p.best, best[i]) << i;
  }
  EXPECT_NEAR(r.elapsed_s, 150, 1e-3);
  EXPECT_EQ(r.first_evaluation_at, "2026-01-01T00:00:00.000Z");
  EXPECT_EQ(r.last_evaluation_at, "2026-01-01T00:02:30.000Z");
}

TEST(ReportDataTest, WinnerShapesAndEnvironments) {
  TempDbPath tmp;
  auto db = tracedb::TraceDb::open(tmp.db());
  const auto ids = build_campaign(db);
  const auto r = load_report(tmp.db());
  ASSERT_TRUE(r.winner);
  EXPECT_EQ(r.winner->candidate_id, ids.candidates[2]);
  EXPECT_EQ(r.winner->evaluation_id, ids.evaluations[2]);
  EXPECT_DOUBLE_EQ(r.winner->fitness, 1.20);
  EXPECT_EQ(r.winner->operator_name, "knob-step");
  ASSERT_EQ(r.winner->shapes.size(), 2u);  // the timed shapes only
  const auto& a = r.winner->shapes[0];
  EXPECT_EQ(a.shape, "M=32768,N=4096");
  EXPECT_DOUBLE_EQ(a.speedup, 1.20);
  EXPECT_DOUBLE_EQ(*a.ci_low, 1.20 * 0.98);
  EXPECT_DOUBLE_EQ(*a.ci_high, 1.20 * 1.02);
  EXPECT_DOUBLE_EQ(*a.candidate_ms, 0.5);
  EXPECT_DOUBLE_EQ(*a.baseline_ms, 0.6);
  EXPECT_DOUBLE_EQ(*a.fraction_of_floor, 0.6);
  const auto& b = r.winner->shapes[1];
  EXPECT_EQ(b.shape, "M=4096,N=8192");
  EXPECT_DOUBLE_EQ(b.speedup, 0.95);
  EXPECT_DOUBLE_EQ(*b.fraction_of_floor, 0.4);

  ASSERT_EQ(r.environments.size(), 2u);
  EXPECT_EQ(r.environments[0].driver, "580.65");
  EXPECT_EQ(r.environments[0].evaluations, 3);
  EXPECT_EQ(r.environments[1].driver, "590.10");
  EXPECT_EQ(r.environments[1].evaluations, 3);
}

TEST(ReportDataTest, WinnerIsRankedByItsLatestPassingEvaluation) {
  TempDbPath tmp;
  auto db = tracedb::TraceDb::open(tmp.db());
  const auto ids = build_campaign(db);
  // The elite re-measured next to a fresh baseline comes out at 1.08, below candidate 6's 1.10.
  const auto again = db.record_evaluation(ids.candidates[2], db.record_environment(env()), sample_report(1.08));
  const auto r = load_report(tmp.db());
  ASSERT_TRUE(r.winner);
  EXPECT_EQ(r.winner->candidate_id, ids.candidates[5]);
  EXPECT_DOUBLE_EQ(r.winner->fitness, 1.10);
  EXPECT_EQ(db.best_candidates(ids.campaign, 1).at(0).candidate.id, r.winner->candidate_id);
  ASSERT_EQ(r.series.size(), 7u);
  EXPECT_EQ(r.series.back().evaluation_id, again);
  EXPECT_DOUBLE_EQ(*r.series.back().best, 1.20);  // the best ever seen stays in the series
}

TEST(ReportDataTest, DefaultCampaignIsTheMostRecentlyActive) {
  TempDbPath tmp;
  auto db = tracedb::TraceDb::open(tmp.db());
  const auto old_ids = build_campaign(db, key("specs/old.toml"));
  const auto new_ids = build_campaign(db, key("specs/new.toml"));
  // The newer campaign was created later, but the old one measured something after it.
  db.connection().exec("UPDATE campaigns SET created_at = '2025-01-01T00:00:00.000Z'");
  db.connection().exec("UPDATE candidates SET created_at = '2025-01-01T00:00:00.000Z'");
  db.connection().exec("UPDATE evaluations SET created_at = '2025-06-01T00:00:00.000Z'");
  const auto late = db.record_evaluation(old_ids.candidates[0], db.record_environment(env()), sample_report(1.01));
  set_time(db, late, 60);
  EXPECT_EQ(load_report(tmp.db()).campaign.id, old_ids.campaign);
  EXPECT_EQ(load_report(tmp.db(), new_ids.campaign).campaign.spec_path, "specs/new.toml");
}

TEST(ReportDataTest, UnknownCampaignListsTheOnesThere) {
  TempDbPath tmp;
  auto db = tracedb::TraceDb::open(tmp.db());
  const auto ids = build_campaign(db);
  try {
    (void)load_report(tmp.db(), ids.campaign + 41);
    FAIL() << "reported a campaign that does not exist";
  } catch (const ReportError& e) {
    EXPECT_EQ(e.kind(), ReportError::Kind::Usage);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("no campaign " + std::to_string(ids.campaign + 41)), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(ids.campaign) + " (rmsnorm sm_90a, specs/rmsnorm.toml)"), std::string::npos)
        << msg;
  }
}

// A report error's kind and message, or a failure when the report loaded.
std::pair<ReportError::Kind, std::string> load_error(const std::filesystem::path& p) {
  try {
    (void)load_report(p);
  } catch (const ReportError& e) {
    return {e.kind(), e.what()};
  }
  ADD_FAILURE() << "loaded a report from " << p;
  return {ReportError::Kind::Data, ""};
}

TEST(ReportDataTest, MissingFileIsAUsageErrorAndIsNotCreated) {
  TempDbPath tmp;
  const auto [kind, msg] = load_error(tmp.db());
  EXPECT_EQ(kind, ReportError::Kind::Usage);
  EXPECT_NE(msg.find("no trace database at"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--db"), std::string::npos) << msg;
  EXPECT_FALSE(std::filesystem::exists(tmp.db()));
  const auto [dir_kind, dir_msg] = load_error(tmp.db().parent_path());
  EXPECT_EQ(dir_kind, ReportError::Kind::Usage);
  EXPECT_NE(dir_msg.find("is a directory"), std::string::npos) << dir_msg;
}

TEST(ReportDataTest, NewerSchemaIsRefusedWithAClearMessage) {
  TempDbPath tmp;
  { auto db = tracedb::TraceDb::open(tmp.db()); build_campaign(db); }
  {
    auto raw = tracedb::sqlite::Connection::open(tmp.db().string());
    raw.exec("PRAGMA user_version = " + std::to_string(tracedb::TraceDb::latest_version() + 1));
  }
  const auto [kind, msg] = load_error(tmp.db());
  EXPECT_EQ(kind, ReportError::Kind::Data);
  EXPECT_NE(msg.find("newer than this ptxevo understands"), std::string::npos) << msg;
}

TEST(ReportDataTest, FilesThatAreNotTraceDatabasesAreRefused) {
  TempDbPath tmp;
  { std::ofstream(tmp.db()) << "this is a text file, not SQLite, and it is long enough to have a header page\n"; }
  auto [kind, msg] = load_error(tmp.db());
  EXPECT_EQ(kind, ReportError::Kind::Data);
  EXPECT_NE(msg.find("not a readable SQLite database"), std::string::npos) << msg;

  std::filesystem::remove(tmp.db());
  { tracedb::sqlite::Connection::open(tmp.db().string()).exec("CREATE TABLE notes (x TEXT)"); }
  std::tie(kind, msg) = load_error(tmp.db());
  EXPECT_EQ(kind, ReportError::Kind::Data);
  EXPECT_NE(msg.find("not a ptxevo trace database"), std::string::npos) << msg;

  std::filesystem::remove(tmp.db());
  { auto db = tracedb::TraceDb::open(tmp.db()); }
  std::tie(kind, msg) = load_error(tmp.db());
  EXPECT_EQ(kind, ReportError::Kind::Data);
  EXPECT_NE(msg.find("holds no campaigns yet"), std::string::npos) << msg;
}

TEST(ReportDataTest, EmptyCampaignSaysNoEvaluationsYet) {
  TempDbPath tmp;
  auto db = tracedb::TraceDb::open(tmp.db());
  const auto c = db.open_campaign(key());
  db.record_candidate(c.id, {"h1", "{}", std::nullopt, "seed"});
  const auto r = load_report(tmp.db());
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.candidates, 1);
  EXPECT_TRUE(r.series.empty());
  EXPECT_FALSE(r.winner);
  EXPECT_NE(text_of(r).find("no evaluations yet"), std::string::npos) << text_of(r);
  const auto html = html_of(r);
  EXPECT_NE(html.find("no evaluations yet"), std::string::npos);
  for (const char* id : {"plot-fitness-evals", "plot-fitness-time", "plot-winner-shapes", "plot-failures"})
    EXPECT_EQ(occurrences(html, std::string("id=\"") + id + "\""), 1u) << id;
}

TEST(ReportDataTest, ReplayFromConfigJsonOrModeColumn) {
  TempDbPath tmp;
  auto db = tracedb::TraceDb::open(tmp.db());
  build_campaign(db, key("specs/replayed.toml", R"({"mode":"replay","population":16})"));
  auto r = load_report(tmp.db());
  EXPECT_TRUE(r.campaign.replay);
  EXPECT_EQ(r.campaign.mode, "replay");
  const auto text = text_of(r);
  EXPECT_EQ(text.rfind(std::string("*** ") + kReplayBanner + " ***\n", 0), 0u) << text;  // the first line
  const auto html = html_of(r);
  EXPECT_NE(html.find(std::string("<div class=\"replay\" id=\"replay-banner\">") + kReplayBanner), std::string::npos);
  EXPECT_LT(html.find("id=\"replay-banner\""), html.find("<h1>"));  // above everything else

  // A later schema's campaigns.mode column takes precedence over config_json.
  db.connection().exec("ALTER TABLE campaigns ADD COLUMN mode TEXT");
  db.connection().exec("UPDATE campaigns SET mode = 'gpu'");
  r = load_report(tmp.db());
  EXPECT_FALSE(r.campaign.replay);
  EXPECT_EQ(r.campaign.mode, "gpu");
  EXPECT_EQ(text_of(r).find(kReplayBanner), std::string::npos);
  EXPECT_EQ(html_of(r).find(kReplayBanner), std::string::npos);
  db.connection().exec("UPDATE campaigns SET mode = 'replay', config_json = '{}'");
  EXPECT_TRUE(load_report(tmp.db()).campaign.replay);
}

// Written by hand at schema v1, as a ptxevo from before the campaign loop left it: it must read
// the same, fall back to report_json for fraction_of_floor, and not be migrated by reading.
TEST(ReportDataTest, ReadsAVersionOneFileWithoutMigratingIt) {
  TempDbPath tmp;
  {
    auto raw = tracedb::sqlite::Connection::open(tmp.db().string());
    raw.exec(tracedb::trace_migrations()[0]);
    raw.exec("PRAGMA user_version = 1");
    raw.exec(R"sql(
INSERT INTO campaigns (id, spec_path, spec_hash, op, arch, config_json)
  VALUES (1, 'specs/v1.toml', 'h', 'rmsnorm', 'sm_90a', '{"mode":"replay"}');
INSERT INTO environments (id, gpu, driver, cuda, toolchain_json, clocks_json)
  VALUES (1, 'NVIDIA H200', '580.65', '13.0', '{}', '{}');
INSERT INTO candidates (id, campaign_id, genome_hash, genome_json, operator, state, build_stage)
  VALUES (1, 1, 'a', '{}', 'seed', 'measured', 'done'), (2, 1, 'b', '{}', 'knob-step', 'failed', 'nvrtc');
INSERT INTO evaluations (id, candidate_id, environment_id, verdict, reasons_json, fitness, seconds, report_json,
                         shape_count, created_at)
  VALUES (1, 1, 1, 'pass', '[]', 1.25, 1.0, '{"shapes":[{"fraction_of_floor":0.7}]}', 1, '2026-01-01T00:00:00.000Z');
INSERT INTO shape_results (evaluation_id, shape_index, shape_json, class, passed, reasons_json, rel_l2_json,
                           max_abs_json, speedup, speedup_ci_low, speedup_ci_high)
  VALUES (1, 0, '{"M":8}', 'benchmark', 1, '[]', '{}', '{}', 1.25, 1.2, 1.3);
)sql");
  }
  const auto r = load_report(tmp.db());
  EXPECT_EQ(r.schema_version, 1);
  EXPECT_TRUE(r.campaign.replay);
  EXPECT_EQ(count_of(r.candidates_by_state, "measured"), 1);
  EXPECT_EQ(count_of(r.candidates_by_state, "failed"), 1);
  EXPECT_EQ(count_of(r.failures_by_reason, "build:nvrtc"), 1);
  ASSERT_TRUE(r.winner);
  EXPECT_DOUBLE_EQ(r.winner->fitness, 1.25);
  EXPECT_FALSE(r.winner->fitness_low);
  ASSERT_EQ(r.winner->shapes.size(), 1u);
  EXPECT_EQ(r.winner->shapes[0].shape, "M=8");
  EXPECT_DOUBLE_EQ(*r.winner->shapes[0].fraction_of_floor, 0.7);
  EXPECT_FALSE(r.winner->shapes[0].candidate_ms);
  EXPECT_NE(html_of(r).find("class=\"bar faster\""), std::string::npos);
  EXPECT_EQ(tracedb::sqlite::Connection::open(tmp.db().string()).query_int("PRAGMA user_version"), 1);
}

// Schema v2 columns, when this build has them: replayed evaluations, settled candidates and the
// fitness bounds show up in the report.
TEST(ReportDataTest, UsesVersionTwoColumnsWhenPresent) {
  TempDbPath tmp;
  auto db = tracedb::TraceDb::open(tmp.db());
  const auto ids = build_campaign(db);
  auto& c = db.connection();
  const auto columns = c.query_int(
      "SELECT count(*) FROM pragma_table_info('evaluations') WHERE name IN ('mode', 'fitness_low', 'fitness_high')");
  ASSERT_EQ(columns, 3) << "schema v2 adds evaluations.mode and the fitness bounds";
  ASSERT_EQ(c.query_int("SELECT count(*) FROM pragma_table_info('candidates') WHERE name = 'outcome'"), 1);
  EXPECT_FALSE(load_report(tmp.db()).campaign.replay);
  c.prepare("UPDATE evaluations SET mode = 'replay' WHERE id = ?").bind(1, ids.evaluations[0]).run();
  c.prepare("UPDATE evaluations SET fitness_low = 1.15, fitness_high = 1.25 WHERE id = ?")
      .bind(1, ids.evaluations[2])
      .run();
  c.prepare("UPDATE candidates SET state = 'measured', outcome = 'duplicate' WHERE id = ?")
      .bind(1, ids.candidates[7])
      .run();
  const auto r = load_report(tmp.db());
  EXPECT_TRUE(r.campaign.replay);
  EXPECT_EQ(r.campaign.replayed_evaluations, 1);
  EXPECT_EQ(r.campaign.mode, "replay");
  EXPECT_EQ(count_of(r.candidates_by_state, "duplicate"), 1);
  EXPECT_EQ(count_of(r.candidates_by_state, "measured"), 6);
  EXPECT_EQ(count_of(r.candidates_by_state, "proposed"), -1);
  ASSERT_TRUE(r.winner);
  EXPECT_DOUBLE_EQ(*r.winner->fitness_low, 1.15);
  EXPECT_NE(text_of(r).find("best         1.200x [1.150, 1.250] (replayed)"), std::string::npos) << text_of(r);
  EXPECT_NE(html_of(r).find("id=\"replay-banner\""), std::string::npos);
}

TEST(ReportTextTest, SummarisesTheCampaign) {
  TempDbPath tmp;
  auto db = tracedb::TraceDb::open(tmp.db());
  const auto ids = build_campaign(db);
  const auto text = text_of(load_report(tmp.db()));
  for (const std::string& want :
       {"campaign " + std::to_string(ids.campaign) + ": rmsnorm on sm_90a (running)", std::string("specs/rmsnorm.toml"),
        std::string("candidates   8: 6 measured, 1 failed, 1 proposed"),
        std::string("evaluations  6 in 2 min 30 s: 3 pass, 1 fail, 1 fault, 1 timeout"),
        "best         1.200x  candidate " + std::to_string(ids.candidates[2]) + " (knob-step)",
        std::string("tolerance"), std::string("build:ptxas"), std::string("M=32768,N=4096"),
        std::string("[1.176, 1.224]"), std::string("floor 0.60"), std::string("NVIDIA H200, driver 590.10")})
    EXPECT_NE(text.find(want), std::string::npos) << "missing '" << want << "' in:\n" << text;
}

TEST(ReportTextTest, ControlCharactersFromTheDatabaseAreNotPrinted) {
  TempDbPath tmp;
  auto db = tracedb::TraceDb::open(tmp.db());
  build_campaign(db, key("specs/\x1b[31mred.toml"));
  const auto text = text_of(load_report(tmp.db()));
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_NE(text.find("specs/?[31mred.toml"), std::string::npos) << text;
}

TEST(ReportHtmlTest, HasTheFourPlotsWithDataAndEscapesDatabaseText) {
  TempDbPath tmp;
  auto db = tracedb::TraceDb::open(tmp.db());
  build_campaign(db, key("specs/<script>alert('x')</script>&.toml"), "agent \"<b>\"");
  const auto html = html_of(load_report(tmp.db()));
  for (const char* id : {"plot-fitness-evals", "plot-fitness-time", "plot-winner-shapes", "plot-failures"})
    EXPECT_EQ(occurrences(html, std::string("<svg id=\"") + id + "\""), 1u) << id;
  EXPECT_EQ(occurrences(html, "<svg "), 4u);
  EXPECT_EQ(occurrences(html, "class=\"best\""), 2u);                // a step line in each fitness plot
  EXPECT_EQ(occurrences(html, "<circle class=\"eval\""), 6u);         // 3 passes, twice
  EXPECT_EQ(occurrences(html, "<rect class=\"bar faster\""), 1u);    // 1.20x
  EXPECT_EQ(occurrences(html, "<rect class=\"bar slower\""), 1u);    // 0.95x
  EXPECT_EQ(occurrences(html, "class=\"whisker\""), 2u);
  EXPECT_EQ(occurrences(html, "<rect class=\"bar fail\""), 3u);      // tolerance, timeout, unwritten-output
  EXPECT_EQ(occurrences(html, "<rect class=\"bar build\""), 1u);
  EXPECT_GT(occurrences(html, "class=\"tick\""), 10u);                // tick labels on the axes
  EXPECT_NE(html.find(">minutes since the first evaluation<"), std::string::npos);

  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("specs/&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;.toml"), std::string::npos);
  EXPECT_NE(html.find("agent &quot;&lt;b&gt;&quot;"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  // Self-contained: nothing fetched from elsewhere.
  for (const char* external : {"src=", "href=", "@import", "url("}) EXPECT_EQ(html.find(external), std::string::npos) << external;
  // No coordinate came out of a NaN or an infinity.
  for (const char* bad : {"nan", "inf\"", "inf ", "n/a\""}) EXPECT_EQ(html.find(bad), std::string::npos) << bad;
}

TEST(ReportHtmlTest, EscapesMarkupAndControlCharacters) {
  EXPECT_EQ(html_escape("a<b>&\"c'\x01\n"), "a&lt;b&gt;&amp;&quot;c&#39;?\n");
}

}  // namespace
}  // namespace ptxevo::report
