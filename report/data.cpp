#include "report/data.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "evaluator/eval_types.hpp"
#include "tracedb/sqlite_handle.hpp"
#include "tracedb/trace_db.hpp"

namespace ptxevo::report {

namespace sqlite = tracedb::sqlite;

namespace {

using nlohmann::json;
using Kind = ReportError::Kind;

// JSON from the database is data, not code we control: a malformed value reads as "absent"
// instead of ending the report.
json parse_or_null(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? json() : j;
}

std::optional<double> finite(std::optional<double> v) {
  if (v && std::isfinite(*v)) return v;
  return std::nullopt;
}

std::optional<double> json_number(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::nullopt;
  return finite(j[key].get<double>());
}

bool has_column(tracedb::sqlite::Connection& c, const std::string& table, const std::string& column) {
  auto s = c.prepare("SELECT count(*) FROM pragma_table_info(?) WHERE name = ?");
  s.bind(1, table).bind(2, column);
  return s.step() && s.column_int(0) > 0;
}

bool has_table(tracedb::sqlite::Connection& c, const std::string& table) {
  auto s = c.prepare("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?");
  s.bind(1, table);
  return s.step() && s.column_int(0) > 0;
}

// "{"M":32768,"N":4096}" -> "M=32768,N=4096" (keys sorted, as evaluator::shape_to_string).
std::string shape_label(const std::string& shape_json) {
  const json j = parse_or_null(shape_json);
  if (!j.is_object()) return shape_json;
  std::string out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!out.empty()) out += ',';
    out += it.key() + '=' + (it->is_string() ? it->get<std::string>() : it->dump());
  }
  return out;
}

std::vector<NamedCount> sorted_counts(const std::map<std::string, std::int64_t>& counts) {
  std::vector<NamedCount> out;
  for (const auto& [name, n] : counts) out.push_back({name, n});
  // Largest first, then by name. (std::sort with a total order: clang flags libstdc++ 12's
  // stable_sort, which uses the deprecated get_temporary_buffer.)
  std::sort(out.begin(), out.end(), [](const NamedCount& a, const NamedCount& b) {
    return a.count != b.count ? a.count > b.count : a.name < b.name;
  });
  return out;
}

std::vector<NamedCount> grouped_counts(tracedb::sqlite::Connection& c, const std::string& sql, std::int64_t campaign) {
  auto s = c.prepare(sql);
  s.bind(1, campaign);
  std::map<std::string, std::int64_t> counts;
  while (s.step()) counts[s.column_text(0)] += s.column_int(1);
  return sorted_counts(counts);
}

// Opens the file without creating or migrating it: a report only reads.
tracedb::sqlite::Connection open_existing(const std::filesystem::path& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(st))
    throw ReportError(Kind::Usage, "no trace database at " + path.string() +
                                       "; pass --db with the file the campaign wrote (default: ptxevo-runs/<spec stem>/campaign.db)");
  if (std::filesystem::is_directory(st))
    throw ReportError(Kind::Usage, path.string() + " is a directory; pass --db with the trace database file");
  try {
    auto c = tracedb::sqlite::Connection::open(path.string());
    // The engine may be writing right now; in WAL mode reading rarely waits, but never fail on it.
    c.exec("PRAGMA busy_timeout = 10000");
    return c;
  } catch (const tracedb::sqlite::SqliteError& e) {
    throw ReportError(Kind::Data, "cannot open trace database " + path.string() + ": " + e.what());
  }
}

int checked_version(tracedb::sqlite::Connection& c, const std::filesystem::path& path) {
  int version = 0;
  try {
    version = static_cast<int>(c.query_int("PRAGMA user_version"));
  } catch (const tracedb::sqlite::SqliteError& e) {
    throw ReportError(Kind::Data, path.string() + " is not a readable SQLite database (" + e.what() + ")");
  }
  const int latest = tracedb::TraceDb::latest_version();
  if (version > latest)
    throw ReportError(Kind::Data, "trace database " + path.string() + " has schema version " + std::to_string(version) +
                                      ", newer than this ptxevo understands (" + std::to_string(latest) +
                                      "); use a newer ptxevo to report on it");
  if (version < 1 || !has_table(c, "campaigns"))
    throw ReportError(Kind::Data, path.string() + " is not a ptxevo trace database (schema version " +
                                      std::to_string(version) + ", no campaigns table)");
  return version;
}

std::string campaign_list(tracedb::sqlite::Connection& c) {
  auto s = c.prepare("SELECT id, op, arch, spec_path FROM campaigns ORDER BY id LIMIT 11");
  std::string out;
  int n = 0;
  while (s.step()) {
    if (++n > 10) {
      out += ", ...";
      break;
    }
    out += (n > 1 ? ", " : "") + std::to_string(s.column_int(0)) + " (" + s.column_text(1) + " " + s.column_text(2) +
           ", " + s.column_text(3) + ")";
  }
  return out;
}

std::int64_t pick_campaign(tracedb::sqlite::Connection& c, const std::filesystem::path& path, std::optional<std::int64_t> id) {
  if (id) {
    auto s = c.prepare("SELECT count(*) FROM campaigns WHERE id = ?");
    s.bind(1, *id);
    if (s.step() && s.column_int(0) == 1) return *id;
    const std::string list = campaign_list(c);
    throw ReportError(Kind::Usage, "trace database " + path.string() + " has no campaign " + std::to_string(*id) +
                                       (list.empty() ? "; it holds no campaigns yet" : "; its campaigns: " + list));
  }
  // Most recent activity, not most recent creation: a resumed old campaign is the live one.
  auto s = c.prepare(
      "SELECT c.id FROM campaigns c ORDER BY max(c.created_at, "
      "coalesce((SELECT max(k.created_at) FROM candidates k WHERE k.campaign_id = c.id), ''), "
      "coalesce((SELECT max(e.created_at) FROM evaluations e JOIN candidates k ON k.id = e.candidate_id "
      "WHERE k.campaign_id = c.id), '')) DESC, c.id DESC LIMIT 1");
  if (!s.step())
    throw ReportError(Kind::Data, "trace database " + path.string() + " holds no campaigns yet; start one first");
  return s.column_int(0);
}

ReportCampaign read_campaign(tracedb::sqlite::Connection& c, std::int64_t id) {
  // campaigns.mode arrives with a later schema; until then the mode lives in config_json.
  const bool mode_column = has_column(c, "campaigns", "mode");
  auto s = c.prepare(std::string("SELECT id, spec_path, spec_hash, op, arch, status, created_at, config_json") +
                     (mode_column ? ", mode" : ", NULL") + " FROM campaigns WHERE id = ?");
  s.bind(1, id);
  if (!s.step()) throw ReportError(Kind::Data, "campaign " + std::to_string(id) + " vanished while reading");
  ReportCampaign r;
  r.id = s.column_int(0);
  r.spec_path = s.column_text(1);
  r.spec_hash = s.column_text(2);
  r.op = s.column_text(3);
  r.arch = s.column_text(4);
  r.status = s.column_text(5);
  r.created_at = s.column_text(6);
  r.config_json = s.column_text(7);
  r.mode = s.column_text(8);
  if (r.mode.empty()) {
    const json config = parse_or_null(r.config_json);
    if (config.is_object() && config.contains("mode") && config["mode"].is_string())
      r.mode = config["mode"].get<std::string>();
  }
  // Schema v2 records the mode per evaluation: one replayed evaluation makes its figures recorded data.
  if (has_column(c, "evaluations", "mode")) {
    auto e = c.prepare(
        "SELECT count(*) FROM evaluations e JOIN candidates k ON k.id = e.candidate_id "
        "WHERE k.campaign_id = ? AND e.mode = 'replay'");
    e.bind(1, id);
    if (e.step()) r.replayed_evaluations = e.column_int(0);
    if (r.replayed_evaluations > 0) r.mode = "replay";  // what happened outweighs what was configured
  }
  r.replay = r.mode == "replay";
  return r;
}

constexpr const char* kCampaignEvaluations =
    " FROM evaluations e JOIN candidates c ON c.id = e.candidate_id WHERE c.campaign_id = ? ";

// Each failing evaluation counts once per reason code; one without reasons counts by verdict.
void read_heldout(tracedb::sqlite::Connection& c, std::int64_t campaign, ReportData& r) {
  if (!has_table(c, "heldout_results")) return;
  auto s = c.prepare(
      "SELECT h.detail_json FROM heldout_results h JOIN evaluations e ON e.id = h.evaluation_id "
      "JOIN candidates k ON k.id = e.candidate_id WHERE k.campaign_id = ? AND h.failed = 1 ORDER BY h.evaluation_id");
  s.bind(1, campaign);
  std::set<std::string> seen;
  while (s.step()) {
    ++r.heldout_failed;
    const json j = json::parse(s.column_text(0), nullptr, false);
    if (!j.is_object()) continue;
    std::vector<std::string> reasons;
    if (j.contains("reasons") && j["reasons"].is_array())
      for (const auto& x : j["reasons"])
        if (x.is_string()) reasons.push_back(x.get<std::string>());
    for (const auto& x : reasons)
      if (r.heldout_reasons.size() < 5 && seen.insert(x).second) r.heldout_reasons.push_back(x);
  }
}

std::vector<NamedCount> failure_reasons(tracedb::sqlite::Connection& c, std::int64_t campaign) {
  std::map<std::string, std::int64_t> counts;
  auto s = c.prepare(std::string("SELECT e.verdict, e.reasons_json") + kCampaignEvaluations + "AND e.verdict <> 'pass'");
  s.bind(1, campaign);
  while (s.step()) {
    std::set<std::string> codes;
    const json reasons = parse_or_null(s.column_text(1));
    if (reasons.is_array())
      for (const auto& r : reasons) {
        if (!r.is_string()) continue;
        std::string code = evaluator::reason_code(r.get<std::string>());
        code.erase(code.find_last_not_of(" \t") + 1);
        if (!code.empty()) codes.insert(code);
      }
    if (codes.empty()) codes.insert(s.column_text(0));
    for (const auto& code : codes) ++counts[code];
  }
  auto b = c.prepare(
      "SELECT coalesce(nullif(build_stage, ''), 'unknown'), count(*) FROM candidates "
      "WHERE campaign_id = ? AND state = 'failed' GROUP BY 1");
  b.bind(1, campaign);
  while (b.step()) counts["build:" + b.column_text(0)] += b.column_int(1);
  return sorted_counts(counts);
}

void read_series(tracedb::sqlite::Connection& c, std::int64_t campaign, ReportData& r) {
  auto s = c.prepare(std::string("SELECT e.id, e.verdict, e.fitness, julianday(e.created_at), e.created_at") +
                     kCampaignEvaluations + "ORDER BY e.id");
  s.bind(1, campaign);
  std::optional<double> first_day, best;
  double last_elapsed = 0;
  while (s.step()) {
    FitnessPoint p;
    p.index = static_cast<std::int64_t>(r.series.size()) + 1;
    p.evaluation_id = s.column_int(0);
    if (s.column_text(1) == "pass") p.fitness = finite(s.column_opt_double(2));
    if (p.fitness && (!best || *p.fitness > *best)) best = p.fitness;
    p.best = best;
    // A malformed timestamp keeps the previous time; a clock stepped backwards clamps at zero.
    if (const auto day = s.column_opt_double(3)) {
      if (!first_day) first_day = day;
      last_elapsed = std::max(0.0, (*day - *first_day) * 86400.0);
    }
    p.elapsed_s = last_elapsed;
    if (r.series.empty()) r.first_evaluation_at = s.column_text(4);
    r.last_evaluation_at = s.column_text(4);
    r.series.push_back(p);
  }
  r.elapsed_s = r.series.empty() ? 0 : r.series.back().elapsed_s;
}

std::vector<ShapeSpeedup> winner_shapes(tracedb::sqlite::Connection& c, std::int64_t evaluation_id) {
  // Older rows may lack fraction_of_floor in timing_json; the whole report has it too.
  json report_shapes;
  {
    auto s = c.prepare("SELECT report_json FROM evaluations WHERE id = ?");
    s.bind(1, evaluation_id);
    if (s.step()) {
      const json report = parse_or_null(s.column_text(0));
      if (report.is_object() && report.contains("shapes")) report_shapes = report["shapes"];
    }
  }
  auto s = c.prepare(
      "SELECT shape_index, shape_json, speedup, speedup_ci_low, speedup_ci_high, cand_median, base_median, "
      "timing_json FROM shape_results WHERE evaluation_id = ? AND speedup IS NOT NULL ORDER BY shape_index");
  s.bind(1, evaluation_id);
  std::vector<ShapeSpeedup> out;
  while (s.step()) {
    const auto speedup = finite(s.column_opt_double(2));
    if (!speedup) continue;
    ShapeSpeedup sh;
    sh.shape_index = static_cast<int>(s.column_int(0));
    sh.shape = shape_label(s.column_text(1));
    sh.speedup = *speedup;
    sh.ci_low = finite(s.column_opt_double(3));
    sh.ci_high = finite(s.column_opt_double(4));
    sh.candidate_ms = finite(s.column_opt_double(5));
    sh.baseline_ms = finite(s.column_opt_double(6));
    auto fraction = json_number(parse_or_null(s.column_text(7)), "fraction_of_floor");
    const auto i = static_cast<std::size_t>(sh.shape_index);
    if (!fraction && report_shapes.is_array() && i < report_shapes.size())
      fraction = json_number(report_shapes[i], "fraction_of_floor");
    // 0 means the floor was not known (no copy bandwidth), not "infinitely slow".
    if (fraction && *fraction > 0) sh.fraction_of_floor = fraction;
    out.push_back(std::move(sh));
  }
  return out;
}

std::optional<ReportWinner> read_winner(tracedb::sqlite::Connection& c, std::int64_t campaign) {
  // Same ranking as tracedb::TraceDb::best_candidates: a candidate's latest passing evaluation counts.
  const bool bounds = has_column(c, "evaluations", "fitness_low") && has_column(c, "evaluations", "fitness_high");
  auto s = c.prepare(
      std::string("SELECT k.id, e.id, e.fitness, k.operator, k.genome_hash, k.genome_json, ") +
      (bounds ? "e.fitness_low, e.fitness_high" : "NULL, NULL") +
      " FROM candidates k JOIN evaluations e ON e.id = (SELECT max(id) FROM evaluations WHERE candidate_id = k.id "
      "AND verdict = 'pass' AND fitness IS NOT NULL) "
      "WHERE k.campaign_id = ? ORDER BY e.fitness DESC, k.id LIMIT 1");
  s.bind(1, campaign);
  if (!s.step()) return std::nullopt;
  ReportWinner w;
  w.candidate_id = s.column_int(0);
  w.evaluation_id = s.column_int(1);
  w.fitness = s.column_double(2);
  w.operator_name = s.column_text(3);
  w.genome_hash = s.column_text(4);
  w.genome_json = s.column_text(5);
  w.fitness_low = finite(s.column_opt_double(6));
  w.fitness_high = finite(s.column_opt_double(7));
  w.shapes = winner_shapes(c, w.evaluation_id);
  return w;
}

std::vector<ReportEnvironment> read_environments(tracedb::sqlite::Connection& c, std::int64_t campaign) {
  auto s = c.prepare(
      "SELECT v.id, v.gpu, v.driver, v.cuda, v.toolchain_json, v.clocks_json, count(*) FROM evaluations e "
      "JOIN candidates c ON c.id = e.candidate_id JOIN environments v ON v.id = e.environment_id "
      "WHERE c.campaign_id = ? GROUP BY v.id ORDER BY v.id");
  s.bind(1, campaign);
  std::vector<ReportEnvironment> out;
  while (s.step())
    out.push_back({s.column_int(0), s.column_text(1), s.column_text(2), s.column_text(3), s.column_text(4),
                   s.column_text(5), s.column_int(6)});
  return out;
}

}  // namespace

ReportData load_report(const std::filesystem::path& db, std::optional<std::int64_t> campaign_id) {
  auto c = open_existing(db);
  ReportData r;
  r.db_path = db.string();
  try {
    r.schema_version = checked_version(c, db);
    // One read transaction: a consistent snapshot while a running campaign keeps writing.
    c.exec("BEGIN");
    const std::int64_t id = pick_campaign(c, db, campaign_id);
    r.campaign = read_campaign(c, id);
    const char* state = has_column(c, "candidates", "outcome") ? "coalesce(outcome, state)" : "state";
    r.candidates_by_state = grouped_counts(
        c, std::string("SELECT ") + state + ", count(*) FROM candidates WHERE campaign_id = ? GROUP BY 1", id);
    for (const auto& n : r.candidates_by_state) r.candidates += n.count;
    r.evaluations_by_verdict =
        grouped_counts(c, std::string("SELECT e.verdict, count(*)") + kCampaignEvaluations + "GROUP BY e.verdict", id);
    for (const auto& n : r.evaluations_by_verdict) r.evaluations += n.count;
    r.failures_by_reason = failure_reasons(c, id);
    read_heldout(c, id, r);
    read_series(c, id, r);
    r.winner = read_winner(c, id);
    r.environments = read_environments(c, id);
    c.exec("COMMIT");
  } catch (const tracedb::sqlite::SqliteError& e) {
    throw ReportError(Kind::Data, "cannot read trace database " + db.string() + ": " + e.what());
  }
  return r;
}

}  // namespace ptxevo::report
