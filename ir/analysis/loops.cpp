#include "ir/analysis/loops.hpp"

#include <algorithm>
#include <numeric>

namespace ptxevo::ir {

int LoopInfo::loop_depth(int block) const {
  if (block < 0 || static_cast<std::size_t>(block) >= innermost.size() || innermost[block] < 0) return 0;
  return loops[innermost[block]].depth;
}

int LoopInfo::max_depth() const {
  int d = 0;
  for (const auto& l : loops) d = std::max(d, l.depth);
  return d;
}

LoopInfo find_loops(const Cfg& g, const Dominators& dom) {
  LoopInfo info;
  const std::size_t n = g.blocks.size();
  info.innermost.assign(n, -1);

  // One loop per header, in reverse post-order of headers so the result is deterministic.
  std::vector<int> loop_of_header(n, -1);
  for (int h : dom.rpo) {
    for (int t : g.blocks[h].preds) {
      if (!dom.dominates(h, t)) continue;
      if (loop_of_header[h] < 0) {
        loop_of_header[h] = static_cast<int>(info.loops.size());
        info.loops.push_back(Loop{h, {}, {}, -1, 1});
      }
      info.loops[loop_of_header[h]].latches.push_back(t);
    }
  }

  // Body: walk predecessors backwards from the latches, stopping at the header.
  for (auto& loop : info.loops) {
    std::vector<char> in(n, 0);
    in[loop.header] = 1;
    std::vector<int> work;
    for (int t : loop.latches)
      if (!in[t]) {
        in[t] = 1;
        work.push_back(t);
      }
    while (!work.empty()) {
      const int b = work.back();
      work.pop_back();
      for (int p : g.blocks[b].preds)
        if (!in[p] && dom.reachable(p)) {
          in[p] = 1;
          work.push_back(p);
        }
    }
    for (std::size_t b = 0; b < n; ++b)
      if (in[b]) loop.blocks.push_back(static_cast<int>(b));
  }

  // Nesting: the parent is the smallest other loop containing this loop's header. Visiting
  // larger loops first means a parent's depth is final before its children are assigned.
  std::vector<int> order(info.loops.size());
  std::iota(order.begin(), order.end(), 0);
  // (std::sort with an index tie-break: libstdc++ 12's stable_sort trips clang's deprecation
  // warning for get_temporary_buffer.)
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const std::size_t sa = info.loops[a].blocks.size(), sb = info.loops[b].blocks.size();
    return sa != sb ? sa > sb : a < b;
  });
  auto contains = [&](const Loop& l, int block) {
    return std::binary_search(l.blocks.begin(), l.blocks.end(), block);
  };
  for (std::size_t i = 0; i < order.size(); ++i) {
    Loop& loop = info.loops[order[i]];
    for (std::size_t j = i; j-- > 0;) {  // candidates are earlier (not smaller) loops, smallest first
      if (contains(info.loops[order[j]], loop.header)) {
        loop.parent = order[j];
        loop.depth = info.loops[order[j]].depth + 1;
        break;
      }
    }
    // Larger loops were visited first, so later (smaller or equal) loops overwrite: innermost wins.
    for (int b : loop.blocks) info.innermost[b] = order[i];
  }
  return info;
}

}  // namespace ptxevo::ir
