// Basic blocks and control-flow edges derived from a function's flat statement list.
// A block starts at a label or after a terminator (bra, brx.idx, ret, exit, trap). Scope markers
// of inline-asm `{ }` blocks do not split blocks: labels inside them are ordinary targets.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ir/module.hpp"

namespace ptxevo::ir {

struct BasicBlock {
  int id = 0;
  std::string label;                      // first label naming the block; "" for none
  std::vector<std::string> aliases;       // further labels that name the same (still empty) block
  std::vector<std::size_t> instructions;  // indices into Function::body, in order
  std::vector<int> succs, preds;          // block ids, without duplicates
  bool exits = false;                     // some path leaves the function here (ret/exit/trap)
};

struct Cfg {
  std::vector<BasicBlock> blocks;
  int entry = -1;  // -1 only for a function without a body

  // Block holding body[statement], or -1 for declarations, directives and scope markers that
  // sit outside any block (before the first instruction or label).
  std::vector<int> statement_block;

  std::size_t edge_count() const;
  int block_of_statement(std::size_t statement) const;
};

// True for the opcodes that end a basic block: bra, brx, ret, exit, trap. A guarded one still
// ends its block; the block then also falls through to the next one.
bool ends_block(const Instruction& ins);

Cfg build_cfg(const Function& f);

}  // namespace ptxevo::ir
