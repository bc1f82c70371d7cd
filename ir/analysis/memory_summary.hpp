// Every memory access of a function described by what the cost of memory traffic depends on:
// state space, direction, width per thread, cache operators / eviction hints, and the loop it
// runs in; then grouped and counted by those properties.
#pragma once

#include <compare>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/analysis/cfg.hpp"
#include "ir/analysis/loops.hpp"
#include "ir/analysis/state_space.hpp"
#include "ir/module.hpp"

namespace ptxevo::ir {

enum class MemDirection { Load, Store, Atomic, Async };
const char* to_string(MemDirection d);  // "load", "store", "atomic", "async"

// True for modifiers that steer caching: .ca .cg .cs .lu .cv .wb .wt .nc and .L1::* / .L2::*
// (eviction priorities, no_allocate, cache_hint, prefetch sizes such as .L2::256B).
bool is_cache_modifier(const std::string& m);

struct MemoryAccess {
  std::size_t statement = 0;        // index into Function::body
  MemSpace space = MemSpace::Generic;  // for copies: the destination
  std::optional<MemSpace> source;   // for copies naming two spaces: where the data comes from
  MemDirection direction = MemDirection::Load;
  int width_bits = 0;               // per thread; 0 when only known at run time
  std::string cache;                // cache modifiers joined in order (".nc.L1::no_allocate"); "" for none
  int loop = -1;                    // innermost loop (index into LoopInfo::loops); -1 outside loops
  int loop_depth = 0;
};

// Space, direction, width and cache hints of one instruction; loop fields left empty.
// Only meaningful when is_memory_access(ins).
MemoryAccess describe_access(const Instruction& ins);

struct MemoryAccessKey {
  MemSpace space = MemSpace::Generic;
  std::optional<MemSpace> source;
  MemDirection direction = MemDirection::Load;
  int width_bits = 0;
  std::string cache;
  int loop_depth = 0;
  auto operator<=>(const MemoryAccessKey&) const = default;
};

struct MemorySummary {
  std::vector<MemoryAccess> accesses;             // in body order
  std::map<MemoryAccessKey, std::size_t> groups;  // accesses counted per key
};

MemorySummary summarize_memory(const Function& f, const Cfg& g, const LoopInfo& loops);
MemorySummary summarize_memory(const Function& f);  // builds the CFG and loops itself

}  // namespace ptxevo::ir
