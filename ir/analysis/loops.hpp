// Natural loops: each back edge t->h (h dominates t) contributes h plus every block that reaches
// t without passing through h; back edges sharing a header form one loop. Irreducible cycles
// (no dominating header) are not reported as loops.
#pragma once

#include <vector>

#include "ir/analysis/cfg.hpp"
#include "ir/analysis/dominators.hpp"

namespace ptxevo::ir {

struct Loop {
  int header = -1;
  std::vector<int> blocks;   // sorted block ids, header included
  std::vector<int> latches;  // sources of the back edges into the header
  int parent = -1;           // index of the enclosing loop in LoopInfo::loops; -1 for outermost
  int depth = 1;             // 1 for an outermost loop
};

struct LoopInfo {
  std::vector<Loop> loops;
  std::vector<int> innermost;  // per block: index of the innermost loop containing it, or -1

  int loop_depth(int block) const;  // 0 outside every loop
  int max_depth() const;
};

LoopInfo find_loops(const Cfg& g, const Dominators& dom);

}  // namespace ptxevo::ir
