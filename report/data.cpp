#include "report/data.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "evaluator/eval_types.hpp"
#include "tracedb/queries.hpp"
#include "tracedb/report_queries.hpp"
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

std::vector<NamedCount> summed(const tracedb::Counts& rows) {
  std::map<std::string, std::int64_t> counts;
  for (const auto& [name, n] : rows) counts[name] += n;
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
    // The engine may be writing right now; in WAL mode reading rarely waits, but never fail on it.
    return tracedb::open_for_reading(path.string());
  } catch (const tracedb::sqlite::SqliteError& e) {
    throw ReportError(Kind::Data, "cannot open trace database " + path.string() + ": " + e.what());
  }
}

int checked_version(tracedb::sqlite::Connection& c, const std::filesystem::path& path) {
  int version = 0;
  try {
    version = static_cast<int>(tracedb::user_version(c));
  } catch (const tracedb::sqlite::SqliteError& e) {
    throw ReportError(Kind::Data, path.string() + " is not a readable SQLite database (" + e.what() + ")");
  }
  const int latest = tracedb::TraceDb::latest_version();
  if (version > latest)
    throw ReportError(Kind::Data, "trace database " + path.string() + " has schema version " + std::to_string(version) +
                                      ", newer than this ptxevo understands (" + std::to_string(latest) +
                                      "); use a newer ptxevo to report on it");
  if (version < 1 || !tracedb::has_table(c, "campaigns"))
    throw ReportError(Kind::Data, path.string() + " is not a ptxevo trace database (schema version " +
                                      std::to_string(version) + ", no campaigns table)");
  return version;
}

std::string campaign_list(tracedb::sqlite::Connection& c) {
  std::string out;
  int n = 0;
  for (const auto& k : tracedb::campaign_listing(c, 11)) {
    if (++n > 10) {
      out += ", ...";
      break;
    }
    out += (n > 1 ? ", " : "") + std::to_string(k.id) + " (" + k.op + " " + k.arch + ", " + k.spec_path + ")";
  }
  return out;
}

std::int64_t pick_campaign(tracedb::sqlite::Connection& c, const std::filesystem::path& path, std::optional<std::int64_t> id) {
  if (id) {
    if (tracedb::campaign_exists(c, *id)) return *id;
    const std::string list = campaign_list(c);
    throw ReportError(Kind::Usage, "trace database " + path.string() + " has no campaign " + std::to_string(*id) +
                                       (list.empty() ? "; it holds no campaigns yet" : "; its campaigns: " + list));
  }
  // Most recent activity, not most recent creation: a resumed old campaign is the live one.
  const auto active = tracedb::most_active_campaign(c);
  if (!active)
    throw ReportError(Kind::Data, "trace database " + path.string() + " holds no campaigns yet; start one first");
  return *active;
}

ReportCampaign read_campaign(tracedb::sqlite::Connection& c, std::int64_t id) {
  const auto row = tracedb::campaign_row(c, id);
  if (!row) throw ReportError(Kind::Data, "campaign " + std::to_string(id) + " vanished while reading");
  ReportCampaign r;
  r.id = row->id;
  r.spec_path = row->spec_path;
  r.spec_hash = row->spec_hash;
  r.op = row->op;
  r.arch = row->arch;
  r.status = row->status;
  r.created_at = row->created_at;
  r.config_json = row->config_json;
  r.mode = row->mode;
  if (r.mode.empty()) {
    const json config = parse_or_null(r.config_json);
    if (config.is_object() && config.contains("mode") && config["mode"].is_string())
      r.mode = config["mode"].get<std::string>();
  }
  // Schema v2 records the mode per evaluation: one replayed evaluation makes its figures recorded data.
  r.replayed_evaluations = tracedb::count_replayed_evaluations(c, id);
  if (r.replayed_evaluations > 0) r.mode = "replay";  // what happened outweighs what was configured
  r.replay = r.mode == "replay";
  return r;
}

// Each failing evaluation counts once per reason code; one without reasons counts by verdict.
void read_heldout(tracedb::sqlite::Connection& c, std::int64_t campaign, ReportData& r) {
  std::set<std::string> seen;
  for (const auto& detail : tracedb::heldout_failures(c, campaign)) {
    ++r.heldout_failed;
    const json j = json::parse(detail, nullptr, false);
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
  for (const auto& e : tracedb::failed_evaluations(c, campaign)) {
    std::set<std::string> codes;
    const json reasons = parse_or_null(e.reasons_json);
    if (reasons.is_array())
      for (const auto& r : reasons) {
        if (!r.is_string()) continue;
        std::string code = evaluator::reason_code(r.get<std::string>());
        code.erase(code.find_last_not_of(" \t") + 1);
        if (!code.empty()) codes.insert(code);
      }
    if (codes.empty()) codes.insert(e.verdict);
    for (const auto& code : codes) ++counts[code];
  }
  for (const auto& [stage, n] : tracedb::failed_builds_by_stage(c, campaign)) counts["build:" + stage] += n;
  return sorted_counts(counts);
}

void read_series(tracedb::sqlite::Connection& c, std::int64_t campaign, ReportData& r) {
  std::optional<double> first_day, best;
  double last_elapsed = 0;
  for (const auto& e : tracedb::evaluation_series(c, campaign)) {
    FitnessPoint p;
    p.index = static_cast<std::int64_t>(r.series.size()) + 1;
    p.evaluation_id = e.evaluation_id;
    if (e.verdict == "pass") p.fitness = finite(e.fitness);
    if (p.fitness && (!best || *p.fitness > *best)) best = p.fitness;
    p.best = best;
    // A malformed timestamp keeps the previous time; a clock stepped backwards clamps at zero.
    if (const auto day = e.julian_day) {
      if (!first_day) first_day = day;
      last_elapsed = std::max(0.0, (*day - *first_day) * 86400.0);
    }
    p.elapsed_s = last_elapsed;
    if (r.series.empty()) r.first_evaluation_at = e.created_at;
    r.last_evaluation_at = e.created_at;
    r.series.push_back(p);
  }
  r.elapsed_s = r.series.empty() ? 0 : r.series.back().elapsed_s;
}

std::vector<ShapeSpeedup> winner_shapes(tracedb::sqlite::Connection& c, std::int64_t evaluation_id) {
  // Older rows may lack fraction_of_floor in timing_json; the whole report has it too.
  json report_shapes;
  if (const auto report_json = tracedb::evaluation_report_json(c, evaluation_id)) {
    const json report = parse_or_null(*report_json);
    if (report.is_object() && report.contains("shapes")) report_shapes = report["shapes"];
  }
  std::vector<ShapeSpeedup> out;
  for (const auto& row : tracedb::speedup_rows(c, evaluation_id)) {
    const auto speedup = finite(row.speedup);
    if (!speedup) continue;
    ShapeSpeedup sh;
    sh.shape_index = row.shape_index;
    sh.shape = shape_label(row.shape_json);
    sh.speedup = *speedup;
    sh.ci_low = finite(row.ci_low);
    sh.ci_high = finite(row.ci_high);
    sh.candidate_ms = finite(row.cand_median);
    sh.baseline_ms = finite(row.base_median);
    auto fraction = json_number(parse_or_null(row.timing_json), "fraction_of_floor");
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
  const auto row = tracedb::winner_row(c, campaign);
  if (!row) return std::nullopt;
  ReportWinner w;
  w.candidate_id = row->candidate_id;
  w.evaluation_id = row->evaluation_id;
  w.fitness = row->fitness;
  w.operator_name = row->operator_name;
  w.genome_hash = row->genome_hash;
  w.genome_json = row->genome_json;
  w.fitness_low = finite(row->fitness_low);
  w.fitness_high = finite(row->fitness_high);
  w.shapes = winner_shapes(c, w.evaluation_id);
  return w;
}

std::vector<ReportEnvironment> read_environments(tracedb::sqlite::Connection& c, std::int64_t campaign) {
  std::vector<ReportEnvironment> out;
  for (const auto& e : tracedb::campaign_environments(c, campaign))
    out.push_back({e.id, e.gpu, e.driver, e.cuda, e.toolchain_json, e.clocks_json, e.evaluations});
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
    tracedb::begin_read(c);
    const std::int64_t id = pick_campaign(c, db, campaign_id);
    r.campaign = read_campaign(c, id);
    r.candidates_by_state = summed(tracedb::candidates_by_outcome(c, id));
    for (const auto& n : r.candidates_by_state) r.candidates += n.count;
    r.evaluations_by_verdict = summed(tracedb::evaluations_by_verdict(c, id));
    for (const auto& n : r.evaluations_by_verdict) r.evaluations += n.count;
    r.failures_by_reason = failure_reasons(c, id);
    read_heldout(c, id, r);
    read_series(c, id, r);
    r.winner = read_winner(c, id);
    r.environments = read_environments(c, id);
    tracedb::end_read(c);
  } catch (const tracedb::sqlite::SqliteError& e) {
    throw ReportError(Kind::Data, "cannot read trace database " + db.string() + ": " + e.what());
  }
  return r;
}

}  // namespace ptxevo::report
