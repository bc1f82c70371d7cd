// `ptxevo build SPEC --out DIR`: build one candidate exactly as `ptxevo eval` does and write
// what an outside harness needs to launch it without ptxevo: the cubin, its PTX, the resources
// and launch.json (tensors and launch plans per shape). bench/rmsnorm/torch_bench.py reads it.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "evaluator/op.hpp"

namespace ptxevo::cli {

struct BuildOptions {
  std::string spec;
  std::string arch;    // --arch (default: the spec's)
  std::string source;  // --source FILE.cu (default: the baseline seed's template)
  std::string ptx;     // --ptx FILE.ptx
  std::string knobs;   // --knobs k=v,...
  std::string db;                 // with `candidate`: a campaign's trace database
  std::int64_t candidate = 0;     // a campaign candidate (its knobs and PTX edits) instead of --knobs
  std::string out_dir;
  std::string shapes = "benchmark";  // benchmark, correctness, heldout or all
  bool no_cache = false;
};

// Exit codes: 0 written; 1 spec, knob, build, static-check or write failure (the reason on `err`).
int run_build(const BuildOptions& o, std::ostream& out, std::ostream& err);

// "VEC=8,THREADS=256,LOADER=plain": integers where they parse, strings otherwise. False with
// `*error` set for an item without NAME=.
bool parse_knob_list(const std::string& text, evaluator::Knobs& knobs, std::string* error);

// One launch plan as launch.json lists it. Throws std::invalid_argument for arguments the format
// cannot describe yet (TMA tensor maps).
nlohmann::ordered_json launch_plan_json(const evaluator::LaunchPlan& plan);

}  // namespace ptxevo::cli
