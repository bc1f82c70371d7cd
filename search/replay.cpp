#include "search/replay.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "search/trace_db.hpp"

namespace ptxevo::search {

using nlohmann::json;

namespace {
constexpr const char* kFormat = "ptxevo-replay-1";
}

ReplayData load_replay(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("replay data " + path.string() + ": cannot open the file");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    throw std::runtime_error("replay data " + path.string() + ": not valid JSON: " + e.what());
  }
  try {
    if (j.value("format", std::string()) != kFormat)
      throw std::runtime_error("format is '" + j.value("format", std::string()) + "', expected '" + kFormat + "'");
    ReplayData d;
    d.op = j.at("op").get<std::string>();
    d.arch = j.at("arch").get<std::string>();
    for (const auto& s : j.at("benchmark_shapes")) d.benchmark_shapes.push_back(s.get<evaluator::Shape>());
    const json& prov = j.at("provenance");
    d.gpu = prov.at("gpu").get<std::string>();
    d.driver = prov.value("driver", std::string());
    d.toolchain = prov.value("toolchain", std::string());
    d.commit = prov.value("commit", std::string());
    d.recorded_at = prov.value("recorded_at", std::string());
    for (const auto& r : j.at("records")) {
      ReplayRecord rec;
      rec.genome_hash = r.at("genome_hash").get<std::string>();
      rec.ptx_hash = r.value("ptx_hash", std::string());
      rec.genome = r.value("genome", json::object());
      rec.report = evaluator::report_from_json(r.at("report"));
      d.records[rec.genome_hash] = std::move(rec);
    }
    return d;
  } catch (const std::exception& e) {
    throw std::runtime_error("replay data " + path.string() + ": " + e.what());
  }
}

void write_replay(const std::filesystem::path& path, const ReplayData& d) {
  json records = json::array();
  for (const auto& [hash, r] : d.records)
    records.push_back({{"genome_hash", hash}, {"ptx_hash", r.ptx_hash}, {"genome", r.genome},
                       {"report", evaluator::to_json(r.report)}});
  json j = {{"format", kFormat},
            {"op", d.op},
            {"arch", d.arch},
            {"benchmark_shapes", d.benchmark_shapes},
            {"provenance",
             {{"gpu", d.gpu}, {"driver", d.driver}, {"toolchain", d.toolchain}, {"commit", d.commit},
              {"recorded_at", d.recorded_at}}},
            {"records", records}};
  const auto tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) throw std::runtime_error("replay data: cannot write " + tmp);
    out << j.dump(1) << "\n";
    if (!out) throw std::runtime_error("replay data: writing " + tmp + " failed");
  }
  std::filesystem::rename(tmp, path);
}

ReplayData export_replay(TraceDb& db, std::int64_t campaign_id, const evaluator::Spec& spec, const std::string& commit) {
  ReplayData d;
  d.op = spec.op;
  d.arch = spec.arch;
  d.benchmark_shapes = spec.benchmark_shapes;
  d.commit = commit;
  auto s = db.connection().prepare(
      "SELECT c.genome_hash, coalesce(c.ptx_hash, ''), c.genome_json, e.report_json, v.gpu, v.driver, v.cuda, "
      "e.created_at FROM candidates c JOIN evaluations e ON e.id = (SELECT max(id) FROM evaluations WHERE "
      "candidate_id = c.id AND purpose = 'candidate' AND mode = 'gpu') JOIN environments v ON v.id = e.environment_id "
      "WHERE c.campaign_id = ? ORDER BY c.id");
  s.bind(1, campaign_id);
  while (s.step()) {
    ReplayRecord r;
    r.genome_hash = s.column_text(0);
    r.ptx_hash = s.column_text(1);
    r.genome = json::parse(s.column_text(2));
    r.report = evaluator::report_from_json(json::parse(s.column_text(3)));
    d.gpu = s.column_text(4);
    d.driver = s.column_text(5);
    d.toolchain = s.column_text(6);
    if (d.recorded_at.empty() || s.column_text(7) > d.recorded_at) d.recorded_at = s.column_text(7);
    d.records[r.genome_hash] = std::move(r);
  }
  return d;
}

std::string replay_mismatch(const ReplayData& d, const evaluator::Spec& spec, const std::string& arch) {
  if (d.op != spec.op) return "it was recorded for op '" + d.op + "', the spec is for '" + spec.op + "'";
  if (d.arch != arch) return "it was recorded for " + d.arch + ", the campaign targets " + arch;
  if (d.benchmark_shapes != spec.benchmark_shapes)
    return "its benchmark shapes differ from the spec's (fitness would not be comparable)";
  return "";
}

}  // namespace ptxevo::search
