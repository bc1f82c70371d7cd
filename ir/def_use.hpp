// Which registers an instruction reads and writes. PTX puts the destination first except for
// stores, branches, barriers and the like; the exceptions are listed in def_use.cpp.
#pragma once

#include <vector>

#include "ir/module.hpp"

namespace ptxevo::ir {

struct DefUse {
  std::vector<int> defs;  // register ids written
  std::vector<int> uses;  // register ids read (guard included)
};

DefUse def_use(const Instruction& ins);

// Calls `fn(const Operand&)` for every leaf operand (registers, symbols, immediates ...),
// descending into vectors, addresses, lists and predicate pairs.
template <class Fn>
void for_each_leaf(const Operand& op, Fn&& fn) {
  switch (op.kind) {
    case OperandKind::Vector:
    case OperandKind::List:
    case OperandKind::Address:
    case OperandKind::PredPair:
      for (const auto& it : op.items) for_each_leaf(it, fn);
      return;
    default:
      fn(op);
  }
}

template <class Fn>
void for_each_leaf(const Instruction& ins, Fn&& fn) {
  if (ins.guard) fn(ins.guard->pred);
  for (const auto& op : ins.operands) for_each_leaf(op, fn);
}

}  // namespace ptxevo::ir
