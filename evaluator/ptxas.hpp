// PTX -> cubin through the toolkit's ptxas, with the resource report it prints under -v.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ptxevo::evaluator {

struct FunctionResources {
  std::string name;
  bool is_entry = false;
  int registers = -1;  // -1 when ptxas did not report them (non-entry functions)
  int stack_frame = 0;
  int spill_stores = 0;
  int spill_loads = 0;
  int shared_bytes = 0;
};

struct PtxasResult {
  bool ok = false;
  std::string log;
  std::vector<std::uint8_t> cubin;
  std::vector<FunctionResources> functions;
};

// Assembles `ptx` for `arch` (e.g. "sm_90a") with -v plus `options`.
PtxasResult run_ptxas(const std::string& ptx, const std::string& arch, const std::vector<std::string>& options = {});

// Parses ptxas -v output into per-function resources.
std::vector<FunctionResources> parse_ptxas_resources(const std::string& log);

std::string ptxas_version();

}  // namespace ptxevo::evaluator
