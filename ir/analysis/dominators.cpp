#include "ir/analysis/dominators.hpp"

#include <cstddef>
#include <utility>

namespace ptxevo::ir {
namespace {

// Iterative DFS (deep CFGs must not overflow the stack); returns blocks in post-order.
std::vector<int> post_order(const Cfg& g) {
  std::vector<int> order;
  if (g.entry < 0) return order;
  std::vector<char> seen(g.blocks.size(), 0);
  std::vector<std::pair<int, std::size_t>> stack;  // block, next successor to visit
  stack.emplace_back(g.entry, 0);
  seen[g.entry] = 1;
  while (!stack.empty()) {
    auto& [b, next] = stack.back();
    const auto& succs = g.blocks[b].succs;
    if (next < succs.size()) {
      const int s = succs[next++];
      if (!seen[s]) {
        seen[s] = 1;
        stack.emplace_back(s, 0);  // invalidates b/next, which are not used again this round
      }
    } else {
      order.push_back(b);
      stack.pop_back();
    }
  }
  return order;
}

}  // namespace

bool Dominators::reachable(int block) const {
  return block >= 0 && static_cast<std::size_t>(block) < rpo_index.size() &&
         rpo_index[block] >= 0;
}

bool Dominators::dominates(int a, int b) const {
  if (!reachable(a) || !reachable(b)) return false;
  for (int x = b; x >= 0; x = idom[x])
    if (x == a) return true;
  return false;
}

Dominators compute_dominators(const Cfg& g) {
  Dominators d;
  const std::size_t n = g.blocks.size();
  d.idom.assign(n, -1);
  d.rpo_index.assign(n, -1);
  std::vector<int> order = post_order(g);
  d.rpo.assign(order.rbegin(), order.rend());
  for (std::size_t i = 0; i < d.rpo.size(); ++i) d.rpo_index[d.rpo[i]] = static_cast<int>(i);
  if (d.rpo.empty()) return d;

  // The algorithm wants idom(entry) = entry while iterating; it is reset to -1 at the end.
  const int entry = g.entry;
  d.idom[entry] = entry;
  auto intersect = [&](int a, int b) {
    while (a != b) {
      while (d.rpo_index[a] > d.rpo_index[b]) a = d.idom[a];
      while (d.rpo_index[b] > d.rpo_index[a]) b = d.idom[b];
    }
    return a;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t i = 1; i < d.rpo.size(); ++i) {
      const int b = d.rpo[i];
      int new_idom = -1;
      for (int p : g.blocks[b].preds) {
        if (d.idom[p] < 0) continue;  // unreachable or not processed yet
        new_idom = new_idom < 0 ? p : intersect(p, new_idom);
      }
      if (new_idom >= 0 && d.idom[b] != new_idom) {
        d.idom[b] = new_idom;
        changed = true;
      }
    }
  }
  d.idom[entry] = -1;
  return d;
}

}  // namespace ptxevo::ir
