#include <algorithm>
#include <variant>

#include "ir/analysis/liveness.hpp"

namespace ptxevo::ir {

int register_slots(const RegisterInfo& r) {
  if (r.cls == RegClass::Pred) return 0;
  return std::max(1, (r.width_bits + 31) / 32);
}

namespace {

// Running per-class counts for one program point.
struct PointCount {
  std::array<int, kRegClassCount> per_class{};
  int slots = 0;
};

PointCount count(const Function& f, const RegisterSet& live) {
  PointCount c;
  live.for_each([&](int r) {
    const RegisterInfo& info = f.registers[r];
    ++c.per_class[class_index(info.cls)];
    c.slots += register_slots(info);
  });
  return c;
}

void record(RegisterPressure& p, const PointCount& c, std::size_t statement) {
  for (std::size_t k = 0; k < kRegClassCount; ++k) p.max_live[k] = std::max(p.max_live[k], c.per_class[k]);
  if (c.slots > p.max_slots) {
    p.max_slots = c.slots;
    p.peak_statement = statement;
  }
}

}  // namespace

RegisterPressure register_pressure(const Function& f, const Cfg& g, const Liveness& lv) {
  RegisterPressure p;
  for (std::size_t b = 0; b < g.blocks.size(); ++b) {
    const auto& block = g.blocks[b];
    if (block.instructions.empty()) {
      // An empty block still holds whatever flows through it.
      record(p, count(f, lv.live_in[b]), 0);
      continue;
    }
    RegisterSet live = lv.live_out[b];
    for (auto it = block.instructions.rbegin(); it != block.instructions.rend(); ++it) {
      const LiveTransfer t = live_transfer(f, std::get<Instruction>(f.body[*it].node));
      RegisterSet across = live;  // live after the instruction, plus what it writes
      for (int d : t.defs) across.insert(d);
      record(p, count(f, across), *it);
      for (int k : t.kills) live.erase(k);
      for (int u : t.uses) live.insert(u);
      record(p, count(f, live), *it);  // live before the instruction
    }
  }
  p.estimated_registers = p.max_slots + kReservedRegisters;
  return p;
}

int estimate_registers(const Function& f) {
  const Cfg g = build_cfg(f);
  return register_pressure(f, g, compute_liveness(f, g)).estimated_registers;
}

}  // namespace ptxevo::ir
