#include "ir/def_use.hpp"

#include <string_view>

namespace ptxevo::ir {
namespace {

// Opcodes whose first operand is read, never written, even when it is a register.
bool first_operand_is_use(const Instruction& ins) {
  static constexpr std::string_view kUseFirst[] = {
      "bar", "barrier", "bra", "brx", "nanosleep", "stackrestore", "pmevent", "setmaxnreg",
      "prefetch", "prefetchu", "applypriority", "discard", "trap", "membar", "fence",
      "griddepcontrol", "ret", "exit", "st", "red", "sust", "sured", "stmatrix", "tensormap",
      "multimem", "wgmma", "tcgen05", "cp", "brkpt", "dealloc", "mbarrier"};
  for (auto op : kUseFirst)
    if (ins.opcode == op) {
      // Exceptions inside these families that do write their first operand.
      if (ins.opcode == "wgmma" && ins.has_modifier(".mma_async")) return false;
      if (ins.opcode == "tcgen05" && ins.has_modifier(".ld")) return false;
      if (ins.opcode == "mbarrier" && !ins.has_modifier(".init") && !ins.has_modifier(".inval") &&
          !ins.has_modifier(".expect_tx") && !ins.has_modifier(".complete_tx"))
        return false;
      if (ins.opcode == "multimem" && ins.has_modifier(".ld_reduce")) return false;
      return true;
    }
  return false;
}

// wgmma.mma_async accumulates into its first operand: it is read and written.
bool first_operand_is_inout(const Instruction& ins) {
  return ins.opcode == "wgmma" && ins.has_modifier(".mma_async");
}

void collect_regs(const Operand& op, std::vector<int>& out) {
  for_each_leaf(op, [&](const Operand& leaf) {
    if (leaf.kind == OperandKind::Register && leaf.reg >= 0) out.push_back(leaf.reg);
  });
}

}  // namespace

DefUse def_use(const Instruction& ins) {
  DefUse du;
  if (ins.guard && ins.guard->pred.reg >= 0) du.uses.push_back(ins.guard->pred.reg);
  if (ins.operands.empty()) return du;

  if (ins.opcode == "call") {
    // call (ret...), callee, (args...)[, proto]: the first list, when it precedes the callee, is written.
    std::size_t i = 0;
    if (ins.operands[0].kind == OperandKind::List && ins.operands.size() > 1) {
      collect_regs(ins.operands[0], du.defs);
      i = 1;
    }
    for (; i < ins.operands.size(); ++i) collect_regs(ins.operands[i], du.uses);
    return du;
  }

  const Operand& first = ins.operands[0];
  const bool writable = first.kind == OperandKind::Register || first.kind == OperandKind::Vector ||
                        first.kind == OperandKind::PredPair || first.kind == OperandKind::Sink;
  std::size_t start = 0;
  if (writable && !first_operand_is_use(ins)) {
    collect_regs(first, du.defs);
    if (first_operand_is_inout(ins)) collect_regs(first, du.uses);
    start = 1;
  }
  for (std::size_t i = start; i < ins.operands.size(); ++i) collect_regs(ins.operands[i], du.uses);
  return du;
}

}  // namespace ptxevo::ir
