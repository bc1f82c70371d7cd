// What an LLM agent sees of the campaign: a plain, fully materialized snapshot with no database
// handle, so prompt rendering is a pure function and byte-stable under test. search/ fills it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agents/reply_parser.hpp"

namespace ptxevo::agents {

struct ShapeFigure {
  std::string shape;                        // e.g. "M=4096 N=8192"
  std::optional<double> speedup;            // over the baseline
  std::optional<double> fraction_of_floor;  // roofline floor time / measured time
  std::optional<double> candidate_ms;
};

struct FunctionResources {
  std::string function;
  std::int64_t registers = 0;
  std::int64_t spill_stores = 0;
  std::int64_t spill_loads = 0;
  std::int64_t shared_bytes = 0;
};

struct PastAttempt {
  std::string description;  // operator and what it changed
  std::string outcome;      // "pass 1.04x", "build failed: ...", "gate failed: ..."
};

struct PromptContext {
  std::string arch;          // e.g. "sm_90a"
  std::string op;            // e.g. "rmsnorm_fwd"
  std::string spec_text;     // the spec file as written
  std::string abi;           // entry names, parameter lists and the launch contract the engine owns
  std::string parent_label;  // "candidate 12" or "the baseline seed"
  std::string parent_source;
  std::map<std::string, std::string> parent_knobs;
  KnobDomains knob_domains;
  std::vector<std::string> knob_constraints;  // the seed's constraints, as the spec writes them
  // Judges a knob reply (the parent's knobs with the reply's applied): "" when the seed's
  // constraints hold, else which one does not. Empty function: no check.
  std::function<std::string(const std::map<std::string, std::string>&)> knob_check;
  std::optional<double> parent_fitness;
  std::vector<ShapeFigure> shapes;
  std::vector<FunctionResources> resources;
  std::string instruction_mix;        // one line, e.g. "ld.global 12, st.global 4, fma 96"
  std::vector<std::string> failures;  // recent gate and build failures, newest first
  std::vector<PastAttempt> attempts;  // a few recent ones, with outcomes
  std::vector<std::string> lessons;   // mined from the trace database
};

}  // namespace ptxevo::agents
