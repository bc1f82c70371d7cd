// What a campaign's report reads (report/data.*): read-only, from any schema version since 1, so
// each query copes with the columns and tables a file of that version lacks. Throws
// sqlite::SqliteError as the connection does; the report turns that into its own error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tracedb/sqlite_handle.hpp"

namespace ptxevo::tracedb {

// Opens a file without creating or migrating it, willing to wait for a running campaign's write.
sqlite::Connection open_for_reading(const std::string& path);
// A consistent snapshot while a campaign keeps writing: begin, then end once everything is read.
void begin_read(sqlite::Connection& db);
void end_read(sqlite::Connection& db);

std::int64_t user_version(sqlite::Connection& db);
bool has_table(sqlite::Connection& db, const std::string& table);
bool has_column(sqlite::Connection& db, const std::string& table, const std::string& column);

struct CampaignListing {
  std::int64_t id = 0;
  std::string op, arch, spec_path;
};
std::vector<CampaignListing> campaign_listing(sqlite::Connection& db, int n);  // by id
// The campaign with the most recent activity (a resumed old campaign is the live one).
std::optional<std::int64_t> most_active_campaign(sqlite::Connection& db);

struct CampaignRow {
  std::int64_t id = 0;
  std::string spec_path, spec_hash, op, arch, status, created_at, config_json;
  std::string mode;  // empty before the column existed
};
std::optional<CampaignRow> campaign_row(sqlite::Connection& db, std::int64_t campaign_id);
// Evaluations recorded from a replay (0 before schema v2 recorded the mode).
std::int64_t count_replayed_evaluations(sqlite::Connection& db, std::int64_t campaign_id);

using Counts = std::vector<std::pair<std::string, std::int64_t>>;
Counts candidates_by_outcome(sqlite::Connection& db, std::int64_t campaign_id);  // outcome, else state
Counts evaluations_by_verdict(sqlite::Connection& db, std::int64_t campaign_id);
Counts failed_builds_by_stage(sqlite::Connection& db, std::int64_t campaign_id);  // "unknown" when unrecorded
struct FailedEvaluation {
  std::string verdict, reasons_json;
};
std::vector<FailedEvaluation> failed_evaluations(sqlite::Connection& db, std::int64_t campaign_id);
// The detail (JSON) of each failed held-out shape, by evaluation; empty before the table existed.
std::vector<std::string> heldout_failures(sqlite::Connection& db, std::int64_t campaign_id);

struct SeriesPoint {
  std::int64_t evaluation_id = 0;
  std::string verdict;
  std::optional<double> fitness;
  std::optional<double> julian_day;  // of created_at; none when it does not parse
  std::string created_at;
};
std::vector<SeriesPoint> evaluation_series(sqlite::Connection& db, std::int64_t campaign_id);  // in order

struct WinnerRow {
  std::int64_t candidate_id = 0, evaluation_id = 0;
  double fitness = 0;
  std::string operator_name, genome_hash, genome_json;
  std::optional<double> fitness_low, fitness_high;  // none before schema v2
};
// The best candidate by its latest passing evaluation (as TraceDb::best_candidates ranks them).
std::optional<WinnerRow> winner_row(sqlite::Connection& db, std::int64_t campaign_id);
std::optional<std::string> evaluation_report_json(sqlite::Connection& db, std::int64_t evaluation_id);
struct SpeedupRow {
  int shape_index = 0;
  std::string shape_json;
  std::optional<double> speedup, ci_low, ci_high, cand_median, base_median;
  std::string timing_json;
};
std::vector<SpeedupRow> speedup_rows(sqlite::Connection& db, std::int64_t evaluation_id);  // shapes with a speedup

struct EnvironmentUse {
  std::int64_t id = 0;
  std::string gpu, driver, cuda, toolchain_json, clocks_json;
  std::int64_t evaluations = 0;
};
std::vector<EnvironmentUse> campaign_environments(sqlite::Connection& db, std::int64_t campaign_id);

}  // namespace ptxevo::tracedb
