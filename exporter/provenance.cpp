#include "exporter/provenance.hpp"

#include <cstdio>
#include <set>

#include "exporter/inline_ptx.hpp"
#include "tracedb/queries.hpp"
#include "tracedb/report_queries.hpp"
#include "tracedb/sqlite_handle.hpp"

namespace ptxevo::exporter {

namespace {

using nlohmann::json;

tracedb::sqlite::Connection open_existing(const std::filesystem::path& db) {
  if (!std::filesystem::exists(db)) throw ExportError("trace database " + db.string() + " does not exist");
  try {
    auto c = tracedb::sqlite::Connection::open(db.string());
    if (!tracedb::is_trace_database(c)) throw ExportError(db.string() + ": not a ptxevo trace database (no candidates table)");
    return c;
  } catch (const tracedb::sqlite::SqliteError& e) {
    throw ExportError(db.string() + ": not a readable ptxevo trace database (" + e.what() + ")");
  }
}

// "{"M":32768,"N":4096}" -> "M=32768,N=4096".
std::string shape_label(const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return text;
  std::string out;
  for (auto it = j.begin(); it != j.end(); ++it) out += (out.empty() ? "" : ",") + it.key() + "=" + it->dump();
  return out;
}

std::string fmt(std::optional<double> v, const char* f = "%.5g") {
  if (!v) return "-";
  char b[64];
  std::snprintf(b, sizeof b, f, *v);
  return b;
}

}  // namespace

std::int64_t campaign_winner(const std::filesystem::path& db, std::optional<std::int64_t> campaign) {
  auto c = open_existing(db);
  std::int64_t id = 0;
  if (campaign) {
    if (!tracedb::campaign_exists(c, *campaign)) throw ExportError(db.string() + " has no campaign " + std::to_string(*campaign));
    id = *campaign;
  } else {
    const auto latest = tracedb::latest_campaign(c);
    if (!latest) throw ExportError(db.string() + " holds no campaign");
    id = *latest;
  }
  const auto best = tracedb::winner_row(c, id);  // the ranking of TraceDb::best_candidates
  if (!best)
    throw ExportError("campaign " + std::to_string(id) + " in " + db.string() +
                      " has no candidate with a passing evaluation; export one by --candidate ID");
  return best->candidate_id;
}

Provenance read_provenance(const std::filesystem::path& db, std::int64_t candidate_id) {
  auto c = open_existing(db);
  Provenance p;
  p.db_path = db.string();
  p.candidate_id = candidate_id;
  {
    auto origin = tracedb::candidate_origin(c, candidate_id);
    if (!origin) throw ExportError(db.string() + " has no candidate " + std::to_string(candidate_id));
    p.campaign_id = origin->campaign_id;
    p.genome_json = std::move(origin->genome_json);
    p.genome_hash = std::move(origin->genome_hash);
    p.spec_path = std::move(origin->spec_path);
    p.spec_hash = std::move(origin->spec_hash);
  }
  std::set<std::int64_t> seen;  // a cycle in parent links is a broken file, not an endless loop
  for (std::optional<std::int64_t> id = candidate_id; id && seen.insert(*id).second;) {
    const auto step = tracedb::candidate_parent(c, *id);
    if (!step) break;
    p.lineage.push_back({*id, step->operator_name});
    id = step->parent_id;
  }
  if (const auto e = tracedb::latest_passing_evaluation(c, candidate_id)) {
    EvaluationEvidence ev;
    ev.id = e->id;
    ev.verdict = e->verdict;
    ev.fitness = e->fitness;
    ev.created_at = e->created_at;
    ev.gpu = e->gpu;
    ev.driver = e->driver;
    ev.cuda = e->cuda;
    ev.toolchain_json = e->toolchain_json;
    for (const auto& r : tracedb::shape_results(c, ev.id))
      ev.shapes.push_back({shape_label(r.shape_json), r.cls, r.passed, r.rel_l2_json, r.max_abs_json, r.cand_median,
                           r.base_median, r.speedup});
    p.evaluation = std::move(ev);
  }
  return p;
}

std::string provenance_comment(const Provenance& p) {
  std::string s;
  auto line = [&](const std::string& t) { s += "// " + t + "\n"; };
  if (!p.candidate_id) {
    line("Candidate: not from a trace database (exported from the spec with the knobs and edits below);");
    line("no gate evidence or measured times are attached.");
    return s;
  }
  line("Trace database: " + p.db_path + ", campaign " + std::to_string(p.campaign_id.value_or(0)) + ", candidate " +
       std::to_string(*p.candidate_id));
  line("Campaign spec: " + p.spec_path + " (sha256 " + p.spec_hash + ")");
  line("Genome " + p.genome_hash + ": " + p.genome_json);
  std::string lineage;
  for (const auto& step : p.lineage)
    lineage += (lineage.empty() ? "" : " <- ") + ("#" + std::to_string(step.candidate_id) + " " + step.operator_name);
  line("Lineage (candidate first, operator that made it): " + lineage);
  if (!p.evaluation) {
    line("Gate evidence: none (the candidate has no passing evaluation in the database).");
    return s;
  }
  const auto& ev = *p.evaluation;
  line("Gate evidence: evaluation " + std::to_string(ev.id) + " at " + ev.created_at + ", verdict " + ev.verdict +
       ", fitness (geomean speedup over the baseline) " + fmt(ev.fitness));
  line("Environment: " + ev.gpu + ", driver " + ev.driver + ", CUDA " + ev.cuda + ", toolchain " + ev.toolchain_json);
  line("  class        shape                  gate  rel_l2                 max_abs                cand ms    base ms    speedup");
  for (const auto& sh : ev.shapes) {
    char b[512];
    std::snprintf(b, sizeof b, "  %-12s %-22s %-5s %-22s %-22s %-10s %-10s %s", sh.cls.c_str(), sh.shape.c_str(),
                  sh.passed ? "pass" : "FAIL", sh.rel_l2.c_str(), sh.max_abs.c_str(), fmt(sh.candidate_ms).c_str(),
                  fmt(sh.baseline_ms).c_str(), fmt(sh.speedup, "%.3f").c_str());
    line(b);
  }
  return s;
}

nlohmann::ordered_json provenance_json(const Provenance& p) {
  nlohmann::ordered_json j;
  if (!p.candidate_id) return {{"candidate", nullptr}};
  j["db"] = p.db_path;
  j["campaign"] = p.campaign_id.value_or(0);
  j["candidate"] = *p.candidate_id;
  j["spec"] = {{"path", p.spec_path}, {"sha256", p.spec_hash}};
  j["genome_hash"] = p.genome_hash;
  j["genome"] = json::parse(p.genome_json, nullptr, false);
  nlohmann::ordered_json lineage = nlohmann::ordered_json::array();
  for (const auto& step : p.lineage) lineage.push_back({{"candidate", step.candidate_id}, {"operator", step.operator_name}});
  j["lineage"] = lineage;
  if (p.evaluation) {
    const auto& ev = *p.evaluation;
    nlohmann::ordered_json shapes = nlohmann::ordered_json::array();
    auto num = [](std::optional<double> v) { return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(); };
    for (const auto& sh : ev.shapes)
      shapes.push_back({{"shape", sh.shape}, {"class", sh.cls}, {"passed", sh.passed},
                        {"rel_l2", json::parse(sh.rel_l2, nullptr, false)}, {"max_abs", json::parse(sh.max_abs, nullptr, false)},
                        {"candidate_ms", num(sh.candidate_ms)}, {"baseline_ms", num(sh.baseline_ms)},
                        {"speedup", num(sh.speedup)}});
    j["evaluation"] = {{"id", ev.id},         {"verdict", ev.verdict},   {"fitness", num(ev.fitness)},
                       {"created_at", ev.created_at}, {"gpu", ev.gpu}, {"driver", ev.driver},
                       {"cuda", ev.cuda},     {"toolchain", json::parse(ev.toolchain_json, nullptr, false)},
                       {"shapes", shapes}};
  } else {
    j["evaluation"] = nullptr;
  }
  return j;
}

}  // namespace ptxevo::exporter
