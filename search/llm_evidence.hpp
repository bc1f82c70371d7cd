// What the LLM agents are shown, gathered from the trace database and the spec: the spec and
// the ABI the engine owns, the parent's source and knobs, its measured per-shape speedups and
// fraction of the roofline floor, its PTX resources and instruction mix, the campaign's recent
// build and gate failures, recent attempts with their outcomes, and lessons (which operators
// paid off on this op). Read-only; the result is plain data (agents::PromptContext).
#pragma once

#include <cstdint>
#include <string>

#include "agents/prompt_context.hpp"
#include "evaluator/spec.hpp"
#include "ir/module.hpp"
#include "search/population.hpp"
#include "tracedb/trace_db.hpp"

namespace ptxevo::search {

struct EvidenceInput {
  std::int64_t campaign_id = 0;
  std::string arch;
  const Member* parent = nullptr;
  std::string parent_source;
  std::string instruction_mix;  // from the parent's PTX; "" when it could not be built
};

agents::PromptContext gather_evidence(tracedb::TraceDb& db, const evaluator::Spec& spec, const evaluator::Op& op,
                                      const EvidenceInput& in);

// "fp32 96, global_load 12, ...; memory accesses by width: 128-bit 8" over every function,
// most frequent first, in ir::categorize's categories.
std::string instruction_mix_line(const ir::Module& m);

// The allowed values of a seed's knobs as text (what a <KNOBS> reply may choose).
agents::KnobDomains knob_domains(const evaluator::SeedTemplate& seed);
std::string knob_text(const evaluator::KnobValue& v);

// A candidate's fate in words for a prompt, from its state, build stage and outcome columns:
// "failed at nvrtc", "built; not measured (...)", "measured (new best)".
std::string outcome_text(const std::string& state, const std::string& build_stage, const std::string& outcome);

}  // namespace ptxevo::search
