// Where an exported kernel comes from, read from the trace database (read-only: the file is not
// migrated or written): the campaign's spec and its hash, the candidate's lineage of operators,
// its latest passing evaluation (gate errors and per-shape times) and the environment it ran on.
// Rendered as the header comment of the exported .cu and as export.json.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ptxevo::exporter {

struct LineageStep {
  std::int64_t candidate_id = 0;
  std::string operator_name;  // what made it from its parent ("seed", "init", a pass, a knob move)
};

struct ShapeEvidence {
  std::string shape;  // "M=32768,N=4096"
  std::string cls;    // "benchmark", "correctness", "heldout"
  bool passed = false;
  std::string rel_l2, max_abs;  // per output, as recorded (JSON)
  std::optional<double> candidate_ms, baseline_ms, speedup;
};

struct EvaluationEvidence {
  std::int64_t id = 0;
  std::string verdict;
  std::optional<double> fitness;
  std::string created_at;
  std::string gpu, driver, cuda, toolchain_json;
  std::vector<ShapeEvidence> shapes;
};

struct Provenance {
  std::string db_path;
  std::optional<std::int64_t> campaign_id, candidate_id;
  std::string spec_path, spec_hash;  // as the campaign recorded them
  std::string genome_json, genome_hash;
  std::vector<LineageStep> lineage;  // the candidate first, back to its root
  std::optional<EvaluationEvidence> evaluation;  // latest passing one
};

// The winner of `campaign` (best latest passing fitness), or of the most recently created
// campaign when none is given. Throws ExportError naming the file and what is missing.
std::int64_t campaign_winner(const std::filesystem::path& db, std::optional<std::int64_t> campaign);

// Throws ExportError for a missing file or candidate.
Provenance read_provenance(const std::filesystem::path& db, std::int64_t candidate_id);

// Comment lines ("// ...") for the top of an exported file.
std::string provenance_comment(const Provenance& p);
nlohmann::ordered_json provenance_json(const Provenance& p);

}  // namespace ptxevo::exporter
