#include "tracedb/report_queries.hpp"

namespace ptxevo::tracedb {

namespace {

constexpr const char* kCampaignEvaluations =
    " FROM evaluations e JOIN candidates c ON c.id = e.candidate_id WHERE c.campaign_id = ? ";

Counts counts(sqlite::Connection& db, const std::string& sql, std::int64_t campaign_id) {
  Counts out;
  auto q = db.prepare(sql);
  q.bind(1, campaign_id);
  while (q.step()) out.emplace_back(q.column_text(0), q.column_int(1));
  return out;
}

}  // namespace

sqlite::Connection open_for_reading(const std::string& path) {
  auto db = sqlite::Connection::open(path);
  db.exec("PRAGMA busy_timeout = 10000");
  return db;
}

void begin_read(sqlite::Connection& db) { db.exec("BEGIN"); }
void end_read(sqlite::Connection& db) { db.exec("COMMIT"); }

std::int64_t user_version(sqlite::Connection& db) { return db.query_int("PRAGMA user_version"); }

bool has_table(sqlite::Connection& db, const std::string& table) {
  auto q = db.prepare("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?");
  q.bind(1, table);
  return q.step() && q.column_int(0) > 0;
}

bool has_column(sqlite::Connection& db, const std::string& table, const std::string& column) {
  auto q = db.prepare("SELECT count(*) FROM pragma_table_info(?) WHERE name = ?");
  q.bind(1, table).bind(2, column);
  return q.step() && q.column_int(0) > 0;
}

std::vector<CampaignListing> campaign_listing(sqlite::Connection& db, int n) {
  std::vector<CampaignListing> out;
  auto q = db.prepare("SELECT id, op, arch, spec_path FROM campaigns ORDER BY id LIMIT ?");
  q.bind(1, std::int64_t{n});
  while (q.step()) out.push_back({q.column_int(0), q.column_text(1), q.column_text(2), q.column_text(3)});
  return out;
}

std::optional<std::int64_t> most_active_campaign(sqlite::Connection& db) {
  auto q = db.prepare(
      "SELECT c.id FROM campaigns c ORDER BY max(c.created_at, "
      "coalesce((SELECT max(k.created_at) FROM candidates k WHERE k.campaign_id = c.id), ''), "
      "coalesce((SELECT max(e.created_at) FROM evaluations e JOIN candidates k ON k.id = e.candidate_id "
      "WHERE k.campaign_id = c.id), '')) DESC, c.id DESC LIMIT 1");
  if (!q.step()) return std::nullopt;
  return q.column_int(0);
}

std::optional<CampaignRow> campaign_row(sqlite::Connection& db, std::int64_t campaign_id) {
  // campaigns.mode arrives with a later schema; until then the mode lives in config_json.
  const bool mode_column = has_column(db, "campaigns", "mode");
  auto q = db.prepare(std::string("SELECT id, spec_path, spec_hash, op, arch, status, created_at, config_json") +
                      (mode_column ? ", mode" : ", NULL") + " FROM campaigns WHERE id = ?");
  q.bind(1, campaign_id);
  if (!q.step()) return std::nullopt;
  return CampaignRow{q.column_int(0),  q.column_text(1), q.column_text(2), q.column_text(3), q.column_text(4),
                     q.column_text(5), q.column_text(6), q.column_text(7), q.column_text(8)};
}

std::int64_t count_replayed_evaluations(sqlite::Connection& db, std::int64_t campaign_id) {
  if (!has_column(db, "evaluations", "mode")) return 0;
  auto q = db.prepare(std::string("SELECT count(*)") + kCampaignEvaluations + "AND e.mode = 'replay'");
  q.bind(1, campaign_id);
  return q.step() ? q.column_int(0) : 0;
}

Counts candidates_by_outcome(sqlite::Connection& db, std::int64_t campaign_id) {
  const char* state = has_column(db, "candidates", "outcome") ? "coalesce(outcome, state)" : "state";
  return counts(db, std::string("SELECT ") + state + ", count(*) FROM candidates WHERE campaign_id = ? GROUP BY 1",
                campaign_id);
}

Counts evaluations_by_verdict(sqlite::Connection& db, std::int64_t campaign_id) {
  return counts(db, std::string("SELECT e.verdict, count(*)") + kCampaignEvaluations + "GROUP BY e.verdict", campaign_id);
}

Counts failed_builds_by_stage(sqlite::Connection& db, std::int64_t campaign_id) {
  return counts(db,
                "SELECT coalesce(nullif(build_stage, ''), 'unknown'), count(*) FROM candidates "
                "WHERE campaign_id = ? AND state = 'failed' GROUP BY 1",
                campaign_id);
}

std::vector<FailedEvaluation> failed_evaluations(sqlite::Connection& db, std::int64_t campaign_id) {
  std::vector<FailedEvaluation> out;
  auto q = db.prepare(std::string("SELECT e.verdict, e.reasons_json") + kCampaignEvaluations +
                      "AND e.verdict <> 'pass' ORDER BY e.id");
  q.bind(1, campaign_id);
  while (q.step()) out.push_back({q.column_text(0), q.column_text(1)});
  return out;
}

std::vector<std::string> heldout_failures(sqlite::Connection& db, std::int64_t campaign_id) {
  std::vector<std::string> out;
  if (!has_table(db, "heldout_results")) return out;
  auto q = db.prepare(
      "SELECT h.detail_json FROM heldout_results h JOIN evaluations e ON e.id = h.evaluation_id "
      "JOIN candidates k ON k.id = e.candidate_id WHERE k.campaign_id = ? AND h.failed = 1 ORDER BY h.evaluation_id");
  q.bind(1, campaign_id);
  while (q.step()) out.push_back(q.column_text(0));
  return out;
}

std::vector<SeriesPoint> evaluation_series(sqlite::Connection& db, std::int64_t campaign_id) {
  std::vector<SeriesPoint> out;
  auto q = db.prepare(std::string("SELECT e.id, e.verdict, e.fitness, julianday(e.created_at), e.created_at") +
                      kCampaignEvaluations + "ORDER BY e.id");
  q.bind(1, campaign_id);
  while (q.step())
    out.push_back({q.column_int(0), q.column_text(1), q.column_opt_double(2), q.column_opt_double(3), q.column_text(4)});
  return out;
}

std::optional<WinnerRow> winner_row(sqlite::Connection& db, std::int64_t campaign_id) {
  const bool bounds = has_column(db, "evaluations", "fitness_low") && has_column(db, "evaluations", "fitness_high");
  auto q = db.prepare(
      std::string("SELECT k.id, e.id, e.fitness, k.operator, k.genome_hash, k.genome_json, ") +
      (bounds ? "e.fitness_low, e.fitness_high" : "NULL, NULL") +
      " FROM candidates k JOIN evaluations e ON e.id = (SELECT max(id) FROM evaluations WHERE candidate_id = k.id "
      "AND verdict = 'pass' AND fitness IS NOT NULL) "
      "WHERE k.campaign_id = ? ORDER BY e.fitness DESC, k.id LIMIT 1");
  q.bind(1, campaign_id);
  if (!q.step()) return std::nullopt;
  return WinnerRow{q.column_int(0),  q.column_int(1),  q.column_double(2),     q.column_text(3),
                   q.column_text(4), q.column_text(5), q.column_opt_double(6), q.column_opt_double(7)};
}

std::optional<std::string> evaluation_report_json(sqlite::Connection& db, std::int64_t evaluation_id) {
  auto q = db.prepare("SELECT report_json FROM evaluations WHERE id = ?");
  q.bind(1, evaluation_id);
  if (!q.step()) return std::nullopt;
  return q.column_text(0);
}

std::vector<SpeedupRow> speedup_rows(sqlite::Connection& db, std::int64_t evaluation_id) {
  std::vector<SpeedupRow> out;
  auto q = db.prepare(
      "SELECT shape_index, shape_json, speedup, speedup_ci_low, speedup_ci_high, cand_median, base_median, "
      "timing_json FROM shape_results WHERE evaluation_id = ? AND speedup IS NOT NULL ORDER BY shape_index");
  q.bind(1, evaluation_id);
  while (q.step())
    out.push_back({static_cast<int>(q.column_int(0)), q.column_text(1), q.column_opt_double(2), q.column_opt_double(3),
                   q.column_opt_double(4), q.column_opt_double(5), q.column_opt_double(6), q.column_text(7)});
  return out;
}

std::vector<EnvironmentUse> campaign_environments(sqlite::Connection& db, std::int64_t campaign_id) {
  std::vector<EnvironmentUse> out;
  auto q = db.prepare(
      "SELECT v.id, v.gpu, v.driver, v.cuda, v.toolchain_json, v.clocks_json, count(*) FROM evaluations e "
      "JOIN candidates c ON c.id = e.candidate_id JOIN environments v ON v.id = e.environment_id "
      "WHERE c.campaign_id = ? GROUP BY v.id ORDER BY v.id");
  q.bind(1, campaign_id);
  while (q.step())
    out.push_back({q.column_int(0), q.column_text(1), q.column_text(2), q.column_text(3), q.column_text(4),
                   q.column_text(5), q.column_int(6)});
  return out;
}

}  // namespace ptxevo::tracedb
