// `ptxevo eval SPEC`: build one candidate, run the gate and the timer, print the verdict.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace ptxevo::cli {

struct EvalOptions {
  std::string spec;
  std::string arch;    // --arch (default: the spec's)
  std::string source;  // --source FILE.cu (default: the baseline seed's template)
  std::string ptx;     // --ptx FILE.ptx
  std::string knobs;   // --knobs k=v,...
  std::string db;                 // with `candidate`: a campaign's trace database
  std::int64_t candidate = 0;     // a campaign candidate (its knobs and PTX edits) instead of --knobs
  bool json = false;
  std::string json_out;  // also write the JSON result to this file
  int device = 0;
  double timeout_s = 600;
  int max_benchmark_shapes = -1;  // -1: all
  std::uint64_t seed = 0;         // 0: fresh from the clock
  bool no_cache = false;
  bool no_guard_pages = false;  // measure the guard pages' cost: reads outside a tensor pass then
  int determinism_runs = 3;     // GateOptions::determinism_runs
  bool no_degenerate_rows = false;  // measure the degenerate rows' cost
  int repeat = 0;               // > 0: gate only, this many times on fresh inputs, and count
  std::string self_exe;           // path of this binary, for the worker
};

int run_eval(const EvalOptions& o, std::ostream& out, std::ostream& err);

// This program's path (/proc/self/exe), for starting workers; `argv0` if that fails.
std::string self_executable(const char* argv0);

}  // namespace ptxevo::cli
