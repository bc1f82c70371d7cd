// What kind of work a function does: instructions counted by category (memory by state space,
// tensor core, warp-level, floating point by precision, ...) and memory accesses by width.
// `categorize` is the single place that decides an instruction's category; mutators and the
// cost model call it too, so every tool agrees on what "a global load" is.
#pragma once

#include <array>
#include <cstddef>
#include <map>

#include "ir/module.hpp"

namespace ptxevo::ir {

enum class InstrCategory {
  GlobalLoad,      // ld/ldu .global (incl .nc), multimem.ld_reduce
  GlobalStore,     // st .global, multimem.st
  SharedLoad,      // ld .shared / .shared::cta / .shared::cluster
  SharedStore,     // st .shared*, st.async
  GenericMemory,   // ld/st without a state space: the address decides at run time
  Local,           // ld/st .local (stack, spills)
  Param,           // ld/st .param
  Const,           // ld .const
  Atomic,          // atom, red, red.async, multimem.red
  AsyncCopy,       // cp.async*, cp.async.bulk*, cp.reduce.async.bulk*, TMA (tensor copies, tensormap)
  Mbarrier,        // mbarrier.*
  BarrierFence,    // bar, barrier, membar, fence, griddepcontrol
  TensorCore,      // mma, wmma, wgmma, tcgen05, ldmatrix, stmatrix, movmatrix
  Warp,            // shfl, vote, redux, match, elect, activemask, bar.warp.sync
  Fp32,            // float arithmetic on .f32 / .f32x2
  Fp16,            // float arithmetic on .f16 / .f16x2 / .bf16 / .bf16x2
  Fp64,            // float arithmetic on .f64
  SpecialFunction, // rsqrt sqrt ex2 lg2 sin cos rcp tanh
  IntArith,        // add/sub/mul/mad/div/rem/min/max/abs/neg/sad/dp4a/video SIMD ... on integer types
  Logic,           // and or xor not cnot lop3 shl shr shf prmt bfe bfi brev popc clz bfind fns
  CompareSelect,   // setp set selp slct
  Conversion,      // cvt cvta cvt.pack
  Move,            // mov
  Control,         // bra brx call ret exit trap
  Other,
};
inline constexpr std::size_t kInstrCategoryCount = static_cast<std::size_t>(InstrCategory::Other) + 1;

const char* to_string(InstrCategory c);  // "global_load", "fp32", ...
InstrCategory categorize(const Instruction& ins);

// True for instructions that read or write memory through an address (ld, ldu, st, atom, red,
// cp.async*, cp.reduce.async.bulk*, ldmatrix, stmatrix, wmma.load/store, st.async, multimem):
// the ones memory_summary lists. Synchronisation (mbarrier, cp.async.wait_group) is not.
bool is_memory_access(const Instruction& ins);

struct InstructionMix {
  std::size_t total = 0;
  std::array<std::size_t, kInstrCategoryCount> by_category{};
  std::map<int, std::size_t> access_width;  // bits per memory access -> count (0: unknown)

  void add(const Instruction& ins);
  std::size_t count(InstrCategory c) const { return by_category[static_cast<std::size_t>(c)]; }
};

InstructionMix instruction_mix(const Function& f);

}  // namespace ptxevo::ir
