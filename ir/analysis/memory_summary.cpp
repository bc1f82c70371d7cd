#include "ir/analysis/memory_summary.hpp"

#include <variant>

#include "ir/analysis/dominators.hpp"
#include "ir/analysis/instruction_mix.hpp"
#include "ir/analysis/type_width.hpp"

namespace ptxevo::ir {
namespace {

MemDirection direction_of(const Instruction& ins) {
  const std::string& op = ins.opcode;
  if (op == "cp" || (op == "st" && ins.has_modifier(".async"))) return MemDirection::Async;
  if (op == "atom" || op == "red") return MemDirection::Atomic;
  if (op == "multimem") {
    if (ins.has_modifier(".ld_reduce")) return MemDirection::Load;
    if (ins.has_modifier(".st")) return MemDirection::Store;
    return MemDirection::Atomic;
  }
  if (op == "st" || op == "stmatrix" || (op == "wmma" && ins.has_modifier(".store"))) return MemDirection::Store;
  return MemDirection::Load;
}

}  // namespace

const char* to_string(MemDirection d) {
  switch (d) {
    case MemDirection::Load: return "load";
    case MemDirection::Store: return "store";
    case MemDirection::Atomic: return "atomic";
    case MemDirection::Async: return "async";
  }
  return "?";
}

bool is_cache_modifier(const std::string& m) {
  static const char* kOps[] = {".ca", ".cg", ".cs", ".lu", ".cv", ".wb", ".wt", ".nc"};
  for (const char* k : kOps)
    if (m == k) return true;
  return m.rfind(".L1::", 0) == 0 || m.rfind(".L2::", 0) == 0;
}

MemoryAccess describe_access(const Instruction& ins) {
  MemoryAccess a;
  const std::vector<MemSpace> spaces = state_spaces(ins);
  if (!spaces.empty()) a.space = spaces[0];
  else if (ins.opcode == "multimem") a.space = MemSpace::Global;  // multicast addresses are global
  if (spaces.size() >= 2) a.source = spaces[1];
  a.direction = direction_of(ins);
  a.width_bits = access_width_bits(ins);
  for (const auto& m : ins.modifiers)
    if (is_cache_modifier(m)) a.cache += m;
  return a;
}

MemorySummary summarize_memory(const Function& f, const Cfg& g, const LoopInfo& loops) {
  MemorySummary s;
  for (std::size_t i = 0; i < f.body.size(); ++i) {
    const auto* ins = std::get_if<Instruction>(&f.body[i].node);
    if (!ins || !is_memory_access(*ins)) continue;
    MemoryAccess a = describe_access(*ins);
    a.statement = i;
    const int block = g.block_of_statement(i);
    if (block >= 0 && static_cast<std::size_t>(block) < loops.innermost.size()) {
      a.loop = loops.innermost[block];
      a.loop_depth = loops.loop_depth(block);
    }
    ++s.groups[MemoryAccessKey{a.space, a.source, a.direction, a.width_bits, a.cache, a.loop_depth}];
    s.accesses.push_back(std::move(a));
  }
  return s;
}

MemorySummary summarize_memory(const Function& f) {
  const Cfg g = build_cfg(f);
  return summarize_memory(f, g, find_loops(g, compute_dominators(g)));
}

}  // namespace ptxevo::ir
