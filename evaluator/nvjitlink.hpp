// PTX -> cubin in-process through nvJitLink (the library form of ptxas + nvlink). Unlike
// run_ptxas it forks no process, so a compile farm can run one link per core cheaply.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "evaluator/ptxas.hpp"

namespace ptxevo::evaluator {

struct LinkOptions {
  std::string arch = "sm_90a";
  int opt_level = 3;                // ptxas -O0..-O3 (anything else fails the link)
  // -maxrregcount; 0: no cap. ptxas ignores it for kernels with launch bounds (.maxntid or
  // .reqntid); a .maxnreg directive on the kernel caps those.
  int max_registers = 0;
  std::vector<std::string> extra;   // passed through, e.g. "-lineinfo"
};

struct LinkResult {
  bool ok = false;
  // True when the failure is a property of the input (bad PTX, bad option) and relinking the
  // same input would fail the same way, so a cache may remember it. False for internal errors.
  bool deterministic_failure = false;
  std::vector<std::uint8_t> cubin;
  std::string error_log;  // ptxas/linker errors; on API failure also the failing call and code
  std::string info_log;   // ptxas -v resource lines and linker summary (always -verbose)
  // Per function: stack, spills and static shared memory as ptxas reports them; registers as
  // the linker reports them for each kernel (the maximum over its call graph, which is what the
  // driver launches with), else ptxas's figure.
  std::vector<FunctionResources> resources;
};

// The exact option list handed to nvJitLinkCreate (part of the build cache key).
std::vector<std::string> link_option_strings(const LinkOptions& opt);

// Thread-safe: one nvJitLink handle per call. `name` labels the input in error messages.
LinkResult link_ptx(const std::string& ptx, const LinkOptions& opt, const std::string& name = "input.ptx");

// Resources from an nvJitLink -verbose info log (ptxas lines plus the linker's summary).
std::vector<FunctionResources> parse_nvjitlink_resources(const std::string& info_log);

std::string nvjitlink_version();  // "13.0"

}  // namespace ptxevo::evaluator
