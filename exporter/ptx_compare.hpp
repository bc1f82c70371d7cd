// Is the PTX that nvcc makes from an exported .cu the candidate's program? Each entry's
// instruction sequence is compared modulo names: registers, labels and shared variables are
// numbered in order of first use, and parameters by position. In a lowered entry (one asm
// block, see inline_ptx.hpp) the part compared is the asm's scope, where a `mov` from a register
// the compiler loaded from parameter i stands for the candidate's `ld.param` of parameter i.
// Performance directives (.maxntid, .minnctapersm, .maxnreg, cluster ones) must match too.
#pragma once

#include <string>

#include "ir/module.hpp"

namespace ptxevo::exporter {

struct PtxComparison {
  bool same = false;
  std::size_t entries = 0;       // entries compared
  std::size_t instructions = 0;  // candidate instructions compared, over all entries
  std::string difference;        // first difference: entry, position, both instructions
};

// Every entry of `candidate` must be in `exported` with the same instruction sequence.
PtxComparison compare_modules(const ir::Module& candidate, const ir::Module& exported);

// One instruction (or label) as the comparison sees it; for messages and tests.
std::vector<std::string> normalized_sequence(const ir::Function& f);

}  // namespace ptxevo::exporter
