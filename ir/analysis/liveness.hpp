// Register liveness: a backward dataflow over the CFG giving the registers live on entry to and
// exit from each block, then a walk over every instruction for the peak register pressure
// (liveness.cpp holds the dataflow, register_pressure.cpp the walk and the estimate).
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "ir/analysis/cfg.hpp"
#include "ir/analysis/register_set.hpp"
#include "ir/module.hpp"

namespace ptxevo::ir {

// What one instruction does to the live set: live_before = (live_after - kills) + uses.
// Only unconditional whole-register writes kill: a guarded write, or a write to one component
// (%v.x) of a vector register, leaves the previous value live when it is still needed.
struct LiveTransfer {
  std::vector<int> defs;   // every register written (kills or not)
  std::vector<int> kills;  // the defs that end the previous value's life
  std::vector<int> uses;
};
LiveTransfer live_transfer(const Function& f, const Instruction& ins);

struct Liveness {
  std::vector<RegisterSet> live_in, live_out;  // per block
};

Liveness compute_liveness(const Function& f, const Cfg& g);

inline constexpr std::size_t kRegClassCount = 5;  // Pred, B16, B32, B64, B128
inline std::size_t class_index(RegClass c) { return static_cast<std::size_t>(c); }

// ptxas keeps a couple of registers for itself (the stack pointer and scratch for address
// arithmetic in practice), so a kernel whose virtual registers peak at N 32-bit slots is
// reported with roughly N + 2. The estimate ignores rematerialisation and spilling; it is a
// relative signal for comparing variants, not ptxas's exact number.
inline constexpr int kReservedRegisters = 2;

// 32-bit register slots a register of this class and width needs; predicates need none (they
// live in the separate P register file).
int register_slots(const RegisterInfo& r);

struct RegisterPressure {
  std::array<int, kRegClassCount> max_live{};  // peak simultaneously live registers, per RegClass
  int max_slots = 0;                           // peak sum of register_slots over live registers
  std::size_t peak_statement = 0;              // body index of an instruction where max_slots occurs
  int estimated_registers = 0;                 // max_slots + kReservedRegisters
};

// At each instruction the registers counted are those live after it plus everything it writes
// (a def that is never read still occupies a register at its definition), and separately
// those live before it (operands that die there); block boundaries are covered by these.
RegisterPressure register_pressure(const Function& f, const Cfg& g, const Liveness& lv);

// build_cfg + compute_liveness + register_pressure, for callers that want just the number.
int estimate_registers(const Function& f);

}  // namespace ptxevo::ir
