#include "ir/analysis/type_width.hpp"

#include <charconv>
#include <cstddef>

namespace ptxevo::ir {

int type_bits(std::string_view m) {
  // Packed small floats first: their names end in digits that are not a bit count.
  struct Packed {
    std::string_view name;
    int bits;
  };
  static constexpr Packed kPacked[] = {
      {".f16x2", 32}, {".bf16x2", 32}, {".f32x2", 64},  {".e4m3x2", 16}, {".e5m2x2", 16},
      {".e4m3x4", 32}, {".e5m2x4", 32}, {".e2m3x2", 16}, {".e3m2x2", 16}, {".e2m1x2", 8},
      {".e4m3", 8},    {".e5m2", 8},    {".tf32", 32},   {".e2m1x4", 16}, {".ue8m0x2", 16},
      {".s16x2", 32},  {".u16x2", 32}};
  for (const auto& p : kPacked)
    if (m == p.name) return p.bits;
  std::string_view digits;
  if (m.size() >= 3 && m[0] == '.' && (m[1] == 'b' || m[1] == 'u' || m[1] == 's' || m[1] == 'f'))
    digits = m.substr(2);
  if (m.size() >= 4 && m.substr(0, 3) == ".bf") digits = m.substr(3);
  int bits = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), bits);
  if (ec != std::errc() || ptr != digits.data() + digits.size()) return 0;
  switch (bits) {
    case 8: case 16: case 32: case 64: case 128: return bits;
    default: return 0;
  }
}

std::string_view data_type(const Instruction& ins) {
  for (auto it = ins.modifiers.rbegin(); it != ins.modifiers.rend(); ++it)
    if (type_bits(*it) > 0) return *it;
  return "";
}

int vector_lanes(const Instruction& ins) {
  for (const auto& m : ins.modifiers) {
    if (m == ".v2") return 2;
    if (m == ".v4") return 4;
    if (m == ".v8") return 8;
  }
  return 1;
}

namespace {

int registers_in(const Operand& op) {
  if (op.kind != OperandKind::Vector) return 1;
  return static_cast<int>(op.items.size());
}

// An immediate byte count such as 16 or 0x10; 0 for anything else (a register, a symbol).
int immediate_bytes(const Instruction& ins, std::size_t i) {
  if (i >= ins.operands.size() || ins.operands[i].kind != OperandKind::Immediate) return 0;
  std::string_view t = ins.operands[i].text;
  int base = 10;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
    t.remove_prefix(2);
    base = 16;
  }
  int v = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v, base);
  return ec == std::errc() && ptr == t.data() + t.size() && v > 0 ? v : 0;
}

}  // namespace

int access_width_bits(const Instruction& ins) {
  if (ins.opcode == "cp") {
    // cp.async.ca.shared.global [dst], [src], cp-size{, src-size}: 4, 8 or 16 bytes per thread.
    // Bulk copies: the byte count when it is an immediate ([dst], [src], size or, for the L2
    // prefetch, [src], size). Tensor copies move a box described by the tensor map: unknown.
    if (ins.has_modifier(".tensor")) return 0;
    const std::size_t size_at = ins.has_modifier(".prefetch") ? 1 : 2;
    return 8 * immediate_bytes(ins, size_at);
  }
  // One 32-bit register per fragment element pair / matrix row chunk (64 for .f64 fragments).
  const int reg_bits = data_type(ins) == ".f64" ? 64 : 32;
  if ((ins.opcode == "ldmatrix" || (ins.opcode == "wmma" && ins.has_modifier(".load"))) && !ins.operands.empty())
    return reg_bits * registers_in(ins.operands[0]);
  if ((ins.opcode == "stmatrix" || (ins.opcode == "wmma" && ins.has_modifier(".store"))) && ins.operands.size() >= 2)
    return reg_bits * registers_in(ins.operands[1]);
  return vector_lanes(ins) * type_bits(data_type(ins));
}

}  // namespace ptxevo::ir
