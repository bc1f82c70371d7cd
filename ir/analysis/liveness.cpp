#include "ir/analysis/liveness.hpp"

#include <algorithm>
#include <variant>

#include "ir/def_use.hpp"

namespace ptxevo::ir {
namespace {

// Registers written through a component name (%v.x): the parser resolves them to the whole
// vector register, so only the spelling tells a partial write apart.
std::vector<int> partial_writes(const Function& f, const Instruction& ins) {
  std::vector<int> out;
  if (ins.operands.empty()) return out;
  for_each_leaf(ins.operands[0], [&](const Operand& leaf) {
    if (leaf.kind == OperandKind::Register && leaf.reg >= 0 && static_cast<std::size_t>(leaf.reg) < f.registers.size() &&
        leaf.text != f.registers[leaf.reg].name)
      out.push_back(leaf.reg);
  });
  return out;
}

void keep_known(std::vector<int>& regs, std::size_t universe) {
  std::erase_if(regs, [&](int r) { return r < 0 || static_cast<std::size_t>(r) >= universe; });
}

}  // namespace

LiveTransfer live_transfer(const Function& f, const Instruction& ins) {
  DefUse du = def_use(ins);
  LiveTransfer t;
  t.defs = std::move(du.defs);
  t.uses = std::move(du.uses);
  keep_known(t.defs, f.registers.size());
  keep_known(t.uses, f.registers.size());
  if (!ins.guard) {
    const std::vector<int> partial = partial_writes(f, ins);
    for (int d : t.defs)
      if (std::find(partial.begin(), partial.end(), d) == partial.end()) t.kills.push_back(d);
  }
  return t;
}

Liveness compute_liveness(const Function& f, const Cfg& g) {
  const std::size_t n = g.blocks.size();
  const std::size_t universe = f.registers.size();
  Liveness lv;
  lv.live_in.assign(n, RegisterSet(universe));
  lv.live_out.assign(n, RegisterSet(universe));

  // Per block summary: upward-exposed uses (gen) and registers the block overwrites (kill).
  std::vector<RegisterSet> gen(n, RegisterSet(universe)), kill(n, RegisterSet(universe));
  for (std::size_t b = 0; b < n; ++b) {
    const auto& ins_list = g.blocks[b].instructions;
    for (auto it = ins_list.rbegin(); it != ins_list.rend(); ++it) {
      const LiveTransfer t = live_transfer(f, std::get<Instruction>(f.body[*it].node));
      for (int d : t.kills) {
        gen[b].erase(d);
        kill[b].insert(d);
      }
      for (int u : t.uses) gen[b].insert(u);
    }
  }

  // Iterate to a fixed point; visiting blocks last-to-first converges fast on forward layouts.
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t b = n; b-- > 0;) {
      RegisterSet out(universe);
      for (int s : g.blocks[b].succs) out.unite(lv.live_in[s]);
      // in = gen | (out - kill), built without a temporary difference type.
      RegisterSet in = gen[b];
      out.for_each([&](int r) {
        if (!kill[b].contains(r)) in.insert(r);
      });
      if (!(in == lv.live_in[b])) {
        lv.live_in[b] = std::move(in);
        changed = true;
      }
      lv.live_out[b] = std::move(out);
    }
  }
  return lv;
}

}  // namespace ptxevo::ir
