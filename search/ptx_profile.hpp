// What the cost model reads from a candidate's PTX (issue "Learned prior": instruction mix by
// width and kind, cache hints, bytes in flight): per entry function, static instruction counts by
// category (ir::categorize, the same rule the mutators use), global accesses with their widths
// and cache hints, and how much of the code sits in loops. Computed once at build time from the
// IR, stored beside the ptxas resources (trace database column ptx_profile_json, universe
// members' "ptx_profile"), so rows of the database and fresh builds get the same columns.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ir/analysis/instruction_mix.hpp"

namespace ptxevo::search {

struct PtxProfile {
  std::string function;  // the .entry name
  double instructions = 0;
  std::array<double, ir::kInstrCategoryCount> by_category{};
  double global_loads = 0, global_stores = 0;  // accesses, static
  double global_load_bytes = 0;                // per thread, static sum of the accesses' widths
  double global_store_bytes = 0;
  double async_copies = 0;     // cp.async* (any width; bulk copies have none per thread)
  double cache_hinted = 0;     // global accesses carrying a cache operator or eviction hint
  double in_loops = 0;         // instructions inside a loop
  int max_loop_depth = 0;

  double category(ir::InstrCategory c) const { return by_category[static_cast<std::size_t>(c)]; }
};

// One profile per entry function of the module. Throws std::invalid_argument with the parser's
// line and message when the PTX does not parse (a built candidate's always does).
std::vector<PtxProfile> profile_ptx(std::string_view ptx);

// JSON text (an array, one object per entry) and back; "" or malformed text gives none, which
// cost_features treats as "no IR columns" (rows recorded before the column existed).
std::string ptx_profile_json(const std::vector<PtxProfile>& p);
std::vector<PtxProfile> ptx_profile_from_json(const std::string& text);

}  // namespace ptxevo::search
