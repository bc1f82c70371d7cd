#include "ir/analysis/instruction_mix.hpp"

#include <initializer_list>
#include <string_view>
#include <variant>

#include "ir/analysis/state_space.hpp"
#include "ir/analysis/type_width.hpp"

namespace ptxevo::ir {
namespace {

bool one_of(std::string_view op, std::initializer_list<std::string_view> names) {
  for (auto n : names)
    if (op == n) return true;
  return false;
}

MemSpace first_space(const Instruction& ins) {
  const auto spaces = state_spaces(ins);
  return spaces.empty() ? MemSpace::Generic : spaces.front();
}

InstrCategory load_category(MemSpace s) {
  switch (s) {
    case MemSpace::Global: return InstrCategory::GlobalLoad;
    case MemSpace::Shared:
    case MemSpace::SharedCluster: return InstrCategory::SharedLoad;
    case MemSpace::Local: return InstrCategory::Local;
    case MemSpace::Param: return InstrCategory::Param;
    case MemSpace::Const: return InstrCategory::Const;
    case MemSpace::Generic: return InstrCategory::GenericMemory;
  }
  return InstrCategory::Other;
}

InstrCategory store_category(MemSpace s) {
  switch (s) {
    case MemSpace::Global: return InstrCategory::GlobalStore;
    case MemSpace::Shared:
    case MemSpace::SharedCluster: return InstrCategory::SharedStore;
    case MemSpace::Local: return InstrCategory::Local;
    case MemSpace::Param: return InstrCategory::Param;
    case MemSpace::Const: return InstrCategory::Const;
    case MemSpace::Generic: return InstrCategory::GenericMemory;
  }
  return InstrCategory::Other;
}

// "vabsdiff4" -> "vabsdiff": the SIMD width suffix of video instructions.
std::string_view video_base(std::string_view op) {
  if (!op.empty() && (op.back() == '2' || op.back() == '4')) op.remove_suffix(1);
  return op;
}

// Arithmetic opcodes shared by integer and floating point: the operation type decides.
InstrCategory arithmetic_category(const Instruction& ins) {
  const std::string_view t = data_type(ins);
  if (t == ".f32" || t == ".f32x2") return InstrCategory::Fp32;
  if (t == ".f16" || t == ".f16x2" || t == ".bf16" || t == ".bf16x2") return InstrCategory::Fp16;
  if (t == ".f64") return InstrCategory::Fp64;
  return InstrCategory::IntArith;
}

}  // namespace

const char* to_string(InstrCategory c) {
  switch (c) {
    case InstrCategory::GlobalLoad: return "global_load";
    case InstrCategory::GlobalStore: return "global_store";
    case InstrCategory::SharedLoad: return "shared_load";
    case InstrCategory::SharedStore: return "shared_store";
    case InstrCategory::GenericMemory: return "generic_memory";
    case InstrCategory::Local: return "local";
    case InstrCategory::Param: return "param";
    case InstrCategory::Const: return "const";
    case InstrCategory::Atomic: return "atomic";
    case InstrCategory::AsyncCopy: return "async_copy";
    case InstrCategory::Mbarrier: return "mbarrier";
    case InstrCategory::BarrierFence: return "barrier_fence";
    case InstrCategory::TensorCore: return "tensor_core";
    case InstrCategory::Warp: return "warp";
    case InstrCategory::Fp32: return "fp32";
    case InstrCategory::Fp16: return "fp16";
    case InstrCategory::Fp64: return "fp64";
    case InstrCategory::SpecialFunction: return "special_function";
    case InstrCategory::IntArith: return "int_arith";
    case InstrCategory::Logic: return "logic";
    case InstrCategory::CompareSelect: return "compare_select";
    case InstrCategory::Conversion: return "conversion";
    case InstrCategory::Move: return "move";
    case InstrCategory::Control: return "control";
    case InstrCategory::Other: return "other";
  }
  return "?";
}

InstrCategory categorize(const Instruction& ins) {
  const std::string_view op = ins.opcode;
  if (op == "ld" || op == "ldu") return load_category(first_space(ins));
  if (op == "st") return ins.has_modifier(".async") ? InstrCategory::SharedStore : store_category(first_space(ins));
  if (op == "atom" || op == "red") return InstrCategory::Atomic;
  if (op == "multimem") {
    if (ins.has_modifier(".ld_reduce")) return InstrCategory::GlobalLoad;
    if (ins.has_modifier(".st")) return InstrCategory::GlobalStore;
    if (ins.has_modifier(".red")) return InstrCategory::Atomic;
    return InstrCategory::Other;
  }
  if (op == "cp" || op == "tensormap") return InstrCategory::AsyncCopy;
  if (op == "prefetch" && ins.has_modifier(".tensormap")) return InstrCategory::AsyncCopy;
  if (op == "mbarrier") return InstrCategory::Mbarrier;
  if (op == "bar" && ins.has_modifier(".warp")) return InstrCategory::Warp;  // bar.warp.sync
  if (one_of(op, {"bar", "barrier", "membar", "fence", "griddepcontrol"})) return InstrCategory::BarrierFence;
  if (one_of(op, {"mma", "wmma", "wgmma", "tcgen05", "ldmatrix", "stmatrix", "movmatrix"}))
    return InstrCategory::TensorCore;
  if (one_of(op, {"shfl", "vote", "redux", "match", "elect", "activemask"})) return InstrCategory::Warp;
  if (one_of(op, {"rsqrt", "sqrt", "ex2", "lg2", "sin", "cos", "rcp", "tanh"})) return InstrCategory::SpecialFunction;
  if (one_of(op, {"setp", "set", "selp", "slct"})) return InstrCategory::CompareSelect;
  if (op == "cvt" || op == "cvta") return InstrCategory::Conversion;
  if (op == "mov") return InstrCategory::Move;
  if (one_of(op, {"bra", "brx", "call", "ret", "exit", "trap"})) return InstrCategory::Control;
  if (one_of(op, {"and", "or", "xor", "not", "cnot", "lop3", "shl", "shr", "shf", "prmt", "bfe", "bfi", "brev",
                  "popc", "clz", "bfind", "fns", "bmsk", "szext"}))
    return InstrCategory::Logic;
  if (one_of(op, {"add", "sub", "mul", "mad", "fma", "div", "rem", "min", "max", "abs", "neg", "sad", "mul24",
                  "mad24", "dp4a", "dp2a", "addc", "subc", "madc", "copysign", "testp"}))
    return arithmetic_category(ins);
  // SIMD video instructions (vadd, vabsdiff4, vmin2, ...): integer work on packed bytes/halves.
  if (one_of(video_base(op), {"vadd", "vsub", "vabsdiff", "vmin", "vmax", "vavrg", "vmad"})) return InstrCategory::IntArith;
  if (one_of(video_base(op), {"vshl", "vshr"})) return InstrCategory::Logic;
  if (video_base(op) == "vset") return InstrCategory::CompareSelect;
  return InstrCategory::Other;
}

bool is_memory_access(const Instruction& ins) {
  const std::string_view op = ins.opcode;
  if (one_of(op, {"ld", "ldu", "st", "atom", "red", "ldmatrix", "stmatrix"})) return true;
  if (op == "wmma") return ins.has_modifier(".load") || ins.has_modifier(".store");
  if (op == "multimem") return ins.has_modifier(".ld_reduce") || ins.has_modifier(".st") || ins.has_modifier(".red");
  if (op == "cp") {
    // cp.async.commit_group / wait_group / wait_all / mbarrier.arrive only synchronise.
    for (const char* sync : {".commit_group", ".wait_group", ".wait_all", ".mbarrier"})
      if (ins.has_modifier(sync)) return false;
    return true;
  }
  return false;
}

void InstructionMix::add(const Instruction& ins) {
  ++total;
  ++by_category[static_cast<std::size_t>(categorize(ins))];
  if (is_memory_access(ins)) ++access_width[access_width_bits(ins)];
}

InstructionMix instruction_mix(const Function& f) {
  InstructionMix mix;
  for (const auto& st : f.body)
    if (const auto* ins = std::get_if<Instruction>(&st.node)) mix.add(*ins);
  return mix;
}

}  // namespace ptxevo::ir
