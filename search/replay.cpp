#include "search/replay.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "tracedb/queries.hpp"
#include "tracedb/trace_db.hpp"

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

void canonicalize_replay(ReplayData& data, const evaluator::Op& op) {
  std::map<std::string, ReplayRecord> records;
  for (auto& [hash, r] : data.records) {
    std::string key = hash;
    try {
      // Only a record keyed by its own genome's hash: it is that genome's, under any name.
      const Genome g = genome_from_json(r.genome, op);
      if (genome_from_json(r.genome).hash() == hash && g.hash() != hash) {
        key = g.hash();
        r.genome = g.to_json();
        r.genome_hash = key;
      }
    } catch (const std::exception&) {
      // It still answers for its recorded hash.
    }
    records.emplace(key, std::move(r));
  }
  data.records = std::move(records);
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

ReplayData export_replay(tracedb::TraceDb& db, std::int64_t campaign_id, const evaluator::Spec& spec, const std::string& commit) {
  ReplayData d;
  d.op = spec.op;
  d.arch = spec.arch;
  d.benchmark_shapes = spec.benchmark_shapes;
  d.commit = commit;
  for (const auto& row : tracedb::replay_rows(db.connection(), campaign_id)) {
    ReplayRecord r;
    r.genome_hash = row.genome_hash;
    r.ptx_hash = row.ptx_hash;
    r.genome = json::parse(row.genome_json);
    r.report = evaluator::report_from_json(json::parse(row.report_json));
    d.gpu = row.gpu;
    d.driver = row.driver;
    d.toolchain = row.cuda;
    if (d.recorded_at.empty() || row.created_at > d.recorded_at) d.recorded_at = row.created_at;
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

ReplayProjection::ReplayProjection(const ReplayData& data, const evaluator::Spec& spec) {
  for (const auto& seed : spec.seeds)
    for (const auto& k : seed.knobs) values_[seed.name][k.name] = k.values;
  for (const auto& [hash, r] : data.records) {
    try {
      Genome g = genome_from_json(r.genome);
      // Keyed by the genome's own hash: the record's key is the same hash where it was written
      // by this version, and the projection must hand back genomes the record answers for.
      if (g.hash() != hash) continue;
      genome_hashes_.push_back(hash);
      hashes_.insert(hash);
      genomes_.push_back(std::move(g));
    } catch (const std::exception&) {
      // A record whose genome does not parse can still answer for its hash; it is never proposed.
    }
  }
}

double ReplayProjection::distance(const Genome& a, const Genome& b) const {
  if (a.seed != b.seed) return 1e9;
  double d = 0;
  const auto seed_values = values_.find(a.seed);
  std::set<std::string> names;
  for (const auto& [k, v] : a.knobs) names.insert(k);
  for (const auto& [k, v] : b.knobs) names.insert(k);
  for (const auto& name : names) {
    const auto ia = a.knobs.find(name), ib = b.knobs.find(name);
    if (ia == a.knobs.end() || ib == b.knobs.end()) {
      d += 100;
      continue;
    }
    if (ia->second == ib->second) continue;
    d += 1;  // unknown order: one step
    if (seed_values == values_.end()) continue;
    const auto list = seed_values->second.find(name);
    if (list == seed_values->second.end()) continue;
    const auto pa = std::find(list->second.begin(), list->second.end(), ia->second);
    const auto pb = std::find(list->second.begin(), list->second.end(), ib->second);
    if (pa != list->second.end() && pb != list->second.end())
      d += static_cast<double>(std::abs(std::distance(pa, pb))) - 1;
  }
  // Edits: each one present in only one of them; a different order of the same edits is half a step.
  std::vector<PtxEdit> only_a, only_b;
  for (const auto& e : a.edits)
    if (std::find(b.edits.begin(), b.edits.end(), e) == b.edits.end()) only_a.push_back(e);
  for (const auto& e : b.edits)
    if (std::find(a.edits.begin(), a.edits.end(), e) == a.edits.end()) only_b.push_back(e);
  d += static_cast<double>(only_a.size() + only_b.size());
  if (only_a.empty() && only_b.empty() && a.edits != b.edits) d += 0.5;
  if (a.source != b.source) d += 1000;
  return d;
}

std::optional<Genome> ReplayProjection::project(const Genome& g, const std::set<std::string>& taken) const {
  const std::string h = g.hash();
  if (hashes_.count(h) && !taken.count(h)) return g;
  const Genome* best = nullptr;
  double best_d = 0;
  for (std::size_t i = 0; i < genomes_.size(); ++i) {
    if (taken.count(genome_hashes_[i])) continue;
    const double d = distance(g, genomes_[i]);
    if (!best || d < best_d) {
      best = &genomes_[i];
      best_d = d;
    }
  }
  if (!best) return std::nullopt;
  return *best;
}

}  // namespace ptxevo::search
