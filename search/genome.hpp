// A genome: what a campaign evolves and records (docs/design.md, "Genome and identity"). A seed
// template, a knob assignment, an ordered list of PTX edits (mutator pass + parameters), and,
// for LLM agents, optionally a device-code source of their own. Its identity is the SHA-256 of
// its canonical JSON, so the same genome is never proposed, built or measured twice in a campaign.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/op.hpp"
#include "mutators/pass.hpp"

namespace ptxevo::search {

struct PtxEdit {
  std::string pass;
  mutators::PassParams params;
  bool operator==(const PtxEdit&) const = default;
};

struct Genome {
  std::string seed;  // seed template name from the spec
  evaluator::Knobs knobs;
  std::vector<PtxEdit> edits;
  std::string source;  // agent-written device code replacing the template; empty: the seed's

  nlohmann::json to_json() const;
  std::string canonical() const;  // compact JSON with sorted keys
  std::string hash() const;       // sha256 of canonical()
  std::string describe() const;   // one line for logs: "VEC=8 THREADS=256 ... +ld_global_nc"
  bool operator==(const Genome&) const = default;
};

// Throws std::invalid_argument naming the field for malformed JSON.
Genome genome_from_json(const nlohmann::json& j);
// The same with the knobs under the op's current names (evaluator::canonical_knobs), for genomes
// read back from a trace database or a file that may predate a knob's rename; also throws
// std::invalid_argument when a knob is given under both its old and its current name.
Genome genome_from_json(const nlohmann::json& j, const evaluator::Op& op);

}  // namespace ptxevo::search
