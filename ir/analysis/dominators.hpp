// Dominator tree of a CFG (Cooper, Harvey & Kennedy, "A Simple, Fast Dominance Algorithm":
// iterate idom intersections over reverse post-order until nothing changes).
#pragma once

#include <vector>

#include "ir/analysis/cfg.hpp"

namespace ptxevo::ir {

struct Dominators {
  std::vector<int> idom;       // immediate dominator per block; -1 for the entry and unreachable blocks
  std::vector<int> rpo;        // reachable blocks in reverse post-order (entry first)
  std::vector<int> rpo_index;  // position of each block in `rpo`; -1 when unreachable

  bool reachable(int block) const;
  // True when every path from the entry to `b` passes through `a` (a block dominates itself).
  // Unreachable blocks dominate nothing and are dominated by nothing.
  bool dominates(int a, int b) const;
};

Dominators compute_dominators(const Cfg& g);

}  // namespace ptxevo::ir
