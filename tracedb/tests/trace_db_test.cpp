#include "tracedb/trace_db.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tracedb/tests/sample_reports.hpp"

namespace ptxevo::tracedb {
namespace {

using testing::sample_report;
using testing::TempDbPath;

CampaignKey key() { return {"specs/rmsnorm.toml", "abc123", "rmsnorm", "sm_90a", R"({"population":16})"}; }
Environment env() { return {"NVIDIA H200", "580.65", "13.0", R"({"ptxas":"13.0"})", R"({"sm_mhz":1980})"}; }
NewCandidate genome(int i, std::optional<std::int64_t> parent = std::nullopt) {
  return {"hash-" + std::to_string(i), R"({"knobs":{"BLOCK":)" + std::to_string(i) + "}}", parent, "knob-step"};
}
BuildRecord built() { return {true, "ptxhash", "done", "", R"({"registers":32})", ""}; }

TEST(TraceDbTest, CreatesSchemaAtLatestVersion) {
  TempDbPath tmp;
  auto db = TraceDb::open(tmp.db());
  EXPECT_EQ(db.schema_version(), TraceDb::latest_version());
  EXPECT_GE(TraceDb::latest_version(), 1);
  auto& c = db.connection();
  EXPECT_EQ(c.query_text("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(c.query_int("PRAGMA synchronous"), 2);  // FULL
  EXPECT_EQ(c.query_int("PRAGMA foreign_keys"), 1);
  EXPECT_EQ(c.query_int("PRAGMA busy_timeout"), 10000);
  for (const char* table : {"campaigns", "environments", "candidates", "evaluations", "shape_results"}) {
    auto s = c.prepare("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?");
    s.bind(1, table);
    ASSERT_TRUE(s.step());
    EXPECT_EQ(s.column_int(0), 1) << table;
  }
  EXPECT_TRUE(db.integrity_ok());
}

TEST(TraceDbTest, MigratesAnEmptyVersionZeroFile) {
  TempDbPath tmp;
  { std::ofstream(tmp.db()); }  // zero bytes: SQLite reads it as an empty database, version 0
  ASSERT_EQ(std::filesystem::file_size(tmp.db()), 0u);
  auto db = TraceDb::open(tmp.db());
  EXPECT_EQ(db.schema_version(), TraceDb::latest_version());
}

TEST(TraceDbTest, MigratesAnExistingVersionZeroDatabase) {
  TempDbPath tmp;
  {
    auto raw = tracedb::sqlite::Connection::open(tmp.db().string());
    raw.exec("CREATE TABLE notes (x TEXT); INSERT INTO notes VALUES ('kept')");
  }
  auto db = TraceDb::open(tmp.db());
  EXPECT_EQ(db.schema_version(), TraceDb::latest_version());
  EXPECT_EQ(db.connection().query_text("SELECT x FROM notes"), "kept");
}

TEST(TraceDbTest, ReopeningDoesNotMigrateAgain) {
  TempDbPath tmp;
  { auto db = TraceDb::open(tmp.db()); }
  auto db = TraceDb::open(tmp.db());  // would fail on "table campaigns already exists"
  EXPECT_EQ(db.schema_version(), TraceDb::latest_version());
}

TEST(TraceDbTest, RefusesADatabaseFromANewerVersion) {
  TempDbPath tmp;
  const int newer = TraceDb::latest_version() + 1;
  {
    auto raw = tracedb::sqlite::Connection::open(tmp.db().string());
    raw.exec("PRAGMA user_version = " + std::to_string(newer));
  }
  try {
    (void)TraceDb::open(tmp.db());
    FAIL() << "opened a newer database";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("newer"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(newer)), std::string::npos) << what;
  }
  auto raw = tracedb::sqlite::Connection::open(tmp.db().string());
  EXPECT_EQ(raw.query_int("PRAGMA user_version"), newer);  // left untouched
  EXPECT_EQ(raw.query_text("PRAGMA journal_mode"), "delete");
}

TEST(TraceDbTest, RejectsAFileThatIsNotADatabase) {
  TempDbPath tmp;
  { std::ofstream(tmp.db()) << "not a database, just a text file that happens to be long enough\n"; }
  try {
    (void)TraceDb::open(tmp.db());
    FAIL() << "opened a text file";
  } catch (const tracedb::sqlite::SqliteError& e) {
    EXPECT_NE(std::string(e.what()).find("not a database"), std::string::npos) << e.what();
  }
}

TEST(TraceDbTest, ResumesTheSameCampaign) {
  TempDbPath tmp;
  std::int64_t campaign = 0, first = 0;
  {
    auto db = TraceDb::open(tmp.db());
    const auto c = db.open_campaign(key());
    EXPECT_FALSE(c.resumed);
    EXPECT_EQ(c.status, "running");
    EXPECT_EQ(c.key.arch, "sm_90a");
    campaign = c.id;
    const auto e = db.record_environment(env());
    first = db.record_candidate(campaign, genome(1)).id;
    db.record_build(first, built());
    db.record_evaluation(first, e, sample_report(1.5));
    const auto second = db.record_candidate(campaign, genome(2, first)).id;
    db.record_build(second, built());  // in flight when the engine stopped
    db.record_candidate(campaign, genome(3, first));  // proposed, never built
  }
  auto db = TraceDb::open(tmp.db());
  const auto c = db.open_campaign(key());
  EXPECT_TRUE(c.resumed);
  EXPECT_EQ(c.id, campaign);
  EXPECT_EQ(c.key.config_json, R"({"population":16})");
  EXPECT_EQ(db.count_evaluations(campaign), 1);
  EXPECT_EQ(db.count_candidates(campaign), 3);
  const auto pending = db.pending_candidates(campaign);
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending[0].genome_hash, "hash-2");
  EXPECT_EQ(pending[0].state, CandidateState::Built);
  EXPECT_EQ(pending[0].parent_id, first);
  EXPECT_EQ(pending[1].state, CandidateState::Proposed);
  const auto best = db.best_candidates(campaign, 5);
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0].candidate.id, first);
  EXPECT_DOUBLE_EQ(best[0].fitness, 1.5);

  // Another spec content is another campaign.
  auto other = key();
  other.spec_hash = "def456";
  EXPECT_NE(db.open_campaign(other).id, campaign);
  EXPECT_FALSE(db.find_campaign("specs/rmsnorm.toml", "nope"));
}

TEST(TraceDbTest, DuplicateGenomeReturnsTheSameId) {
  TempDbPath tmp;
  auto db = TraceDb::open(tmp.db());
  const auto campaign = db.open_campaign(key()).id;
  const auto a = db.record_candidate(campaign, genome(7));
  EXPECT_TRUE(a.inserted);
  EXPECT_FALSE(a.done());
  const auto b = db.record_candidate(campaign, genome(7));
  EXPECT_FALSE(b.inserted);
  EXPECT_EQ(a.id, b.id);
  db.record_build(a.id, built());
  db.record_evaluation(a.id, db.record_environment(env()), sample_report(1.1));
  const auto c = db.record_candidate(campaign, genome(7));
  EXPECT_EQ(c.id, a.id);
  EXPECT_EQ(c.state, CandidateState::Measured);
  EXPECT_TRUE(c.done());
  EXPECT_EQ(db.count_candidates(campaign), 1);
  // The same genome in another campaign is another candidate.
  auto other = key();
  other.spec_path = "specs/other.toml";
  EXPECT_NE(db.record_candidate(db.open_campaign(other).id, genome(7)).id, a.id);
}

TEST(TraceDbTest, EnvironmentsAreShared) {
  TempDbPath tmp;
  auto db = TraceDb::open(tmp.db());
  const auto a = db.record_environment(env());
  EXPECT_EQ(db.record_environment(env()), a);
  auto hot = env();
  hot.clocks_json = R"({"sm_mhz":1755})";
  EXPECT_NE(db.record_environment(hot), a);
}

TEST(TraceDbTest, FailedBuildIsDoneAndNotPending) {
  TempDbPath tmp;
  auto db = TraceDb::open(tmp.db());
  const auto campaign = db.open_campaign(key()).id;
  const auto id = db.record_candidate(campaign, genome(1)).id;
  db.record_build(id, {false, "", "nvrtc", "error: identifier \"x\" is undefined", "{}", ""});
  EXPECT_TRUE(db.pending_candidates(campaign).empty());
  EXPECT_TRUE(db.record_candidate(campaign, genome(1)).done());
  auto s = db.connection().prepare("SELECT build_ok, build_stage, build_log, ptx_hash FROM candidates WHERE id = ?");
  s.bind(1, id);
  ASSERT_TRUE(s.step());
  EXPECT_EQ(s.column_int(0), 0);
  EXPECT_EQ(s.column_text(1), "nvrtc");
  EXPECT_NE(s.column_text(2).find("undefined"), std::string::npos);
  EXPECT_TRUE(s.is_null(3));
  EXPECT_THROW(db.record_build(9999, built()), std::invalid_argument);
}

// Schema v6: the PTX profile is stored with the build; a later record without one (a rebuild
// for export) keeps it; a build recorded without any leaves NULL (the cost model's "no profile").
TEST(TraceDbTest, BuildsKeepTheirPtxProfile) {
  TempDbPath tmp;
  auto db = TraceDb::open(tmp.db());
  const auto campaign = db.open_campaign(key()).id;
  const auto a = db.record_candidate(campaign, genome(1)).id;
  const auto b = db.record_candidate(campaign, genome(2)).id;
  BuildRecord with = built();
  with.ptx_profile_json = R"([{"function":"k","instructions":10}])";
  db.record_build(a, with);
  db.record_build(a, built());
  db.record_build(b, built());
  auto s = db.connection().prepare("SELECT ptx_profile_json FROM candidates WHERE id = ?");
  s.bind(1, a);
  ASSERT_TRUE(s.step());
  EXPECT_EQ(s.column_text(0), with.ptx_profile_json);
  auto t = db.connection().prepare("SELECT ptx_profile_json FROM candidates WHERE id = ?");
  t.bind(1, b);
  ASSERT_TRUE(t.step());
  EXPECT_TRUE(t.is_null(0));
}

TEST(TraceDbTest, EvaluationStoresEveryShape) {
  TempDbPath tmp;
  auto db = TraceDb::open(tmp.db());
  const auto campaign = db.open_campaign(key()).id;
  const auto id = db.record_candidate(campaign, genome(1)).id;
  db.record_build(id, built());
  auto report = sample_report(1.25);
  report.shapes[0].rel_l2["y"] = NAN;  // a NaN output: stored as JSON null, not as invalid JSON
  const auto eval = db.record_evaluation(id, db.record_environment(env()), report);

  auto& c = db.connection();
  auto e = c.prepare("SELECT verdict, fitness, seconds, report_json, shape_count FROM evaluations WHERE id = ?");
  e.bind(1, eval);
  ASSERT_TRUE(e.step());
  EXPECT_EQ(e.column_text(0), "pass");
  EXPECT_DOUBLE_EQ(e.column_double(1), 1.25);
  EXPECT_DOUBLE_EQ(e.column_double(2), 1.25);
  const auto back = evaluator::report_from_json(nlohmann::json::parse(e.column_text(3)));
  EXPECT_EQ(back.shapes.size(), 3u);
  EXPECT_TRUE(std::isnan(back.shapes[0].rel_l2.at("y")));
  EXPECT_EQ(e.column_int(4), 3);

  auto s = c.prepare(
      "SELECT shape_index, class, passed, rel_l2_json, cand_median, speedup, speedup_ci_low, timing_json "
      "FROM shape_results WHERE evaluation_id = ? ORDER BY shape_index");
  s.bind(1, eval);
  ASSERT_TRUE(s.step());
  EXPECT_EQ(s.column_text(1), "correctness");
  EXPECT_EQ(s.column_text(3), R"({"y":null})");
  EXPECT_TRUE(s.is_null(4));
  EXPECT_TRUE(s.is_null(7));
  ASSERT_TRUE(s.step());
  ASSERT_TRUE(s.step());
  EXPECT_EQ(s.column_int(0), 2);
  EXPECT_EQ(s.column_text(1), "benchmark");
  EXPECT_EQ(s.column_int(2), 1);
  EXPECT_DOUBLE_EQ(s.column_double(4), 0.5);
  EXPECT_DOUBLE_EQ(s.column_double(5), 1.25);
  EXPECT_DOUBLE_EQ(s.column_double(6), 1.25 * 0.98);
  const auto timing = nlohmann::json::parse(s.column_text(7));
  EXPECT_EQ(timing.at("pool_sets"), 8);
  EXPECT_EQ(timing.at("candidate_ms").at("n"), 30);
  EXPECT_FALSE(s.step());
  EXPECT_EQ(db.candidate(id)->state, CandidateState::Measured);
}

TEST(TraceDbTest, FailureMidEvaluationLeavesNothingPartial) {
  TempDbPath tmp;
  auto db = TraceDb::open(tmp.db());
  const auto campaign = db.open_campaign(key()).id;
  const auto id = db.record_candidate(campaign, genome(1)).id;
  db.record_build(id, built());
  const auto environment = db.record_environment(env());
  auto& c = db.connection();
  // A failure after the evaluation row and the first shape row are written (a TEMP trigger
  // lives only in this connection, so the file's schema stays as it was).
  c.exec(
      "CREATE TEMP TRIGGER fail_second_shape BEFORE INSERT ON shape_results WHEN NEW.shape_index = 1 "
      "BEGIN SELECT RAISE(ABORT, 'injected failure'); END");
  try {
    db.record_evaluation(id, environment, sample_report(1.5));
    FAIL() << "the injected failure did not surface";
  } catch (const tracedb::sqlite::SqliteError& e) {
    EXPECT_NE(std::string(e.what()).find("injected failure"), std::string::npos) << e.what();
    EXPECT_NE(e.sql().find("INSERT INTO shape_results"), std::string::npos);
  }
  EXPECT_EQ(c.query_int("SELECT count(*) FROM evaluations"), 0);
  EXPECT_EQ(c.query_int("SELECT count(*) FROM shape_results"), 0);
  EXPECT_EQ(db.candidate(id)->state, CandidateState::Built);
  EXPECT_EQ(db.pending_candidates(campaign).size(), 1u);

  c.exec("DROP TRIGGER fail_second_shape");
  db.record_evaluation(id, environment, sample_report(1.5));
  EXPECT_EQ(c.query_int("SELECT count(*) FROM shape_results"), 3);
  EXPECT_TRUE(db.integrity_ok());
}

TEST(TraceDbTest, ForeignKeysAreEnforced) {
  TempDbPath tmp;
  auto db = TraceDb::open(tmp.db());
  const auto campaign = db.open_campaign(key()).id;
  const auto id = db.record_candidate(campaign, genome(1)).id;
  EXPECT_THROW(db.record_evaluation(id, 4242, sample_report(1.0)), tracedb::sqlite::SqliteError);
  EXPECT_THROW(db.record_candidate(campaign, genome(2, 777)), tracedb::sqlite::SqliteError);
  EXPECT_EQ(db.connection().query_int("SELECT count(*) FROM evaluations"), 0);
}

TEST(TraceDbTest, BestCandidatesUseTheLatestPassingEvaluation) {
  TempDbPath tmp;
  auto db = TraceDb::open(tmp.db());
  const auto campaign = db.open_campaign(key()).id;
  const auto environment = db.record_environment(env());
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(db.record_candidate(campaign, genome(i)).id);
    db.record_build(ids.back(), built());
  }
  db.record_evaluation(ids[0], environment, sample_report(1.2));
  db.record_evaluation(ids[1], environment, sample_report(2.0));
  db.record_evaluation(ids[2], environment, sample_report(1.0, "fail"));  // rejected: never ranked
  db.record_evaluation(ids[3], environment, sample_report(3.0));
  db.record_evaluation(ids[3], environment, sample_report(1.1));  // elite re-measured: slower
  const auto best = db.best_candidates(campaign, 2);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].candidate.id, ids[1]);
  EXPECT_DOUBLE_EQ(best[0].fitness, 2.0);
  EXPECT_EQ(best[1].candidate.id, ids[0]);
  EXPECT_EQ(db.best_candidates(campaign, 10).size(), 3u);
  EXPECT_EQ(db.count_evaluations(campaign), 5);
  EXPECT_TRUE(db.pending_candidates(campaign).empty());
}

TEST(SqliteHandleTest, ErrorsCarryTheSqlAndTheMessage) {
  TempDbPath tmp;
  auto c = tracedb::sqlite::Connection::open(tmp.db().string());
  try {
    c.exec("SELECT * FROM no_such_table");
    FAIL();
  } catch (const tracedb::sqlite::SqliteError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no such table"), std::string::npos) << what;
    EXPECT_NE(what.find("SELECT * FROM no_such_table"), std::string::npos) << what;
  }
  EXPECT_THROW(c.prepare("SELEC 1"), tracedb::sqlite::SqliteError);
  EXPECT_THROW(tracedb::sqlite::Connection::open((tmp.db() / "missing-dir" / "x.db").string()), tracedb::sqlite::SqliteError);
}

TEST(SqliteHandleTest, TransactionRollsBackUnlessCommitted) {
  TempDbPath tmp;
  auto c = tracedb::sqlite::Connection::open(tmp.db().string());
  c.exec("CREATE TABLE t (x INTEGER)");
  {
    tracedb::sqlite::Transaction tx(c);
    c.exec("INSERT INTO t VALUES (1)");
  }
  EXPECT_EQ(c.query_int("SELECT count(*) FROM t"), 0);
  {
    tracedb::sqlite::Transaction tx(c);
    c.exec("INSERT INTO t VALUES (2)");
    tx.commit();
  }
  EXPECT_EQ(c.query_int("SELECT count(*) FROM t"), 1);
}

}  // namespace
}  // namespace ptxevo::tracedb
