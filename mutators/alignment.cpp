#include "mutators/alignment.hpp"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string_view>

#include "ir/analysis/type_width.hpp"
#include "ir/def_use.hpp"

namespace ptxevo::mutators {
namespace {

bool is_component(const ir::Operand& op) { return op.text.find('.') != std::string::npos; }  // %v.x

// An integer literal as written (42, -8, 0x10, 16U); nullopt for floats and anything else.
std::optional<std::int64_t> integer_literal(std::string_view t) {
  bool neg = false;
  if (!t.empty() && t[0] == '-') {
    neg = true;
    t.remove_prefix(1);
  }
  if (!t.empty() && (t.back() == 'U' || t.back() == 'u')) t.remove_suffix(1);
  int base = 10;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
    base = 16;
    t.remove_prefix(2);
  } else if (t.size() > 2 && t[0] == '0' && (t[1] == 'b' || t[1] == 'B')) {
    base = 2;
    t.remove_prefix(2);
  }
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v, base);
  if (t.empty() || ec != std::errc() || p != t.data() + t.size()) return std::nullopt;
  return static_cast<std::int64_t>(neg ? ~v + 1 : v);  // modular: "-9223372036854775808" stays defined
}

bool integer_type(std::string_view t) {
  return t.size() >= 3 && (t[1] == 'u' || t[1] == 's' || t[1] == 'b') && t.substr(0, 3) != ".bf";
}

std::uint64_t mul_align(std::uint64_t a, std::uint64_t b) {
  return (a >= kMaxKnownAlign || b >= kMaxKnownAlign) ? kMaxKnownAlign : std::min(a * b, kMaxKnownAlign);
}

}  // namespace

std::uint64_t low_bit(std::int64_t v) {
  if (v == 0) return kMaxKnownAlign;
  const auto u = static_cast<std::uint64_t>(v);
  return std::min(u & (~u + 1), kMaxKnownAlign);
}

AlignmentInfo::AlignmentInfo(const ir::Module& m, const ir::Function& f) : m_(m), f_(f) {
  regs_.assign(f.registers.size(), 1);
  for (const auto& st : f.body)
    if (const auto* ins = std::get_if<ir::Instruction>(&st.node))
      for (int d : ir::def_use(*ins).defs)
        if (d >= 0 && static_cast<std::size_t>(d) < regs_.size()) regs_[static_cast<std::size_t>(d)] = kMaxKnownAlign;
  // Greatest fixed point: start from "unbounded" for every defined register and lower each to
  // the minimum over its definitions until nothing changes (values only decrease).
  bool changed = true;
  while (changed) {
    changed = false;
    for (const auto& st : f.body) {
      const auto* ins = std::get_if<ir::Instruction>(&st.node);
      if (!ins) continue;
      const ir::DefUse du = ir::def_use(*ins);
      if (du.defs.empty()) continue;
      std::uint64_t v = 1;
      if (du.defs.size() == 1 && !ins->operands.empty() && ins->operands[0].kind == ir::OperandKind::Register &&
          ins->operands[0].reg == du.defs[0] && !is_component(ins->operands[0]))
        v = value_of(*ins);
      for (int d : du.defs) {
        if (d < 0 || static_cast<std::size_t>(d) >= regs_.size()) continue;
        auto& r = regs_[static_cast<std::size_t>(d)];
        if (v < r) {
          r = v;
          changed = true;
        }
      }
    }
  }
}

std::uint64_t AlignmentInfo::of_symbol(const std::string& name) const {
  auto from_decl = [](const ir::VarDecl& v) -> std::uint64_t {
    for (std::size_t i = 0; i + 1 < v.attrs.size(); ++i)
      if (v.attrs[i] == ".align") {
        const auto n = integer_literal(v.attrs[i + 1]);
        return n && *n > 0 ? low_bit(*n) : 1;
      }
    std::uint64_t lanes = 1, bytes = 0;
    for (const auto& a : v.attrs) {
      if (a == ".v2") lanes = 2;
      if (a == ".v4") lanes = 4;
      if (const int b = ir::type_bits(a); b > 0) bytes = static_cast<std::uint64_t>(b) / 8;
    }
    return bytes == 0 ? 1 : low_bit(static_cast<std::int64_t>(lanes * bytes));
  };
  for (const auto& st : f_.body)
    if (const auto* v = std::get_if<ir::VarDecl>(&st.node); v && v->name == name) return from_decl(*v);
  for (const auto* v : m_.globals())
    if (v->name == name) return from_decl(*v);
  return 1;
}

std::uint64_t AlignmentInfo::of(const ir::Operand& op) const {
  switch (op.kind) {
    case ir::OperandKind::Register:
      if (op.reg < 0 || static_cast<std::size_t>(op.reg) >= regs_.size() || is_component(op)) return 1;
      return regs_[static_cast<std::size_t>(op.reg)];
    case ir::OperandKind::Symbol: {
      const std::uint64_t a = of_symbol(op.text);
      return op.has_offset ? std::min(a, low_bit(op.offset)) : a;
    }
    case ir::OperandKind::Immediate: {
      const auto v = integer_literal(op.text);
      return v ? low_bit(*v) : 1;
    }
    default:
      return 1;
  }
}

std::uint64_t AlignmentInfo::of_address(const ir::Operand& addr) const {
  if (addr.kind != ir::OperandKind::Address || addr.items.size() != 1) return 1;
  const std::uint64_t a = of(addr.items[0]);
  return addr.has_offset ? std::min(a, low_bit(addr.offset)) : a;
}

std::uint64_t AlignmentInfo::value_of(const ir::Instruction& ins) const {
  const auto& ops = ins.operands;
  auto src = [&](std::size_t i) -> std::uint64_t { return i < ops.size() ? of(ops[i]) : 1; };
  const std::string_view type = ir::data_type(ins);
  const std::string& op = ins.opcode;
  const bool plain_int = integer_type(type) && !ins.has_modifier(".cc") && !ins.has_modifier(".sat");

  if (op == "ld") {
    // ld.param of a kernel pointer parameter declared .ptr [.space] .align N.
    if (!f_.is_entry || !ins.has_modifier(".param") || ops.size() != 2 || ops[1].kind != ir::OperandKind::Address ||
        ops[1].items.size() != 1 || ops[1].has_offset || ops[1].items[0].kind != ir::OperandKind::Symbol ||
        ops[1].items[0].has_offset)
      return 1;
    for (const auto& p : f_.params) {
      if (p.name != ops[1].items[0].text) continue;
      const bool ptr = std::find(p.attrs.begin(), p.attrs.end(), ".ptr") != p.attrs.end();
      for (std::size_t i = 0; ptr && i + 1 < p.attrs.size(); ++i)
        if (p.attrs[i] == ".align") {
          const auto n = integer_literal(p.attrs[i + 1]);
          return n && *n > 0 ? low_bit(*n) : 1;
        }
    }
    return 1;
  }
  if (op == "mov") return ops.size() == 2 ? src(1) : 1;
  if (op == "cvta") return ops.size() == 2 ? src(1) : 1;
  if (op == "cvt") {
    // Integer to integer (zero or sign extension, truncation) keeps the low bits.
    int ints = 0;
    for (const auto& mod : ins.modifiers) ints += ir::type_bits(mod) > 0 && integer_type(mod) ? 1 : 0;
    return ints == 2 && !ins.has_modifier(".sat") && ops.size() == 2 ? src(1) : 1;
  }
  if (!plain_int) return 1;
  if ((op == "add" || op == "sub" || op == "or" || op == "xor" || op == "min" || op == "max") && ops.size() == 3)
    return std::min(src(1), src(2));
  if (op == "selp" && ops.size() == 4) return std::min(src(1), src(2));
  if (op == "and" && ops.size() == 3) return std::max(src(1), src(2));
  if (op == "neg" && ops.size() == 2) return src(1);
  if (op == "mul" && (ins.has_modifier(".lo") || ins.has_modifier(".wide")) && ops.size() == 3)
    return mul_align(src(1), src(2));
  if (op == "mad" && (ins.has_modifier(".lo") || ins.has_modifier(".wide")) && ops.size() == 4)
    return std::min(mul_align(src(1), src(2)), src(3));
  if (op == "shl" && ops.size() == 3) {
    const std::uint64_t a = src(1);
    if (ops[2].kind == ir::OperandKind::Immediate)
      if (const auto k = integer_literal(ops[2].text); k && *k >= 0 && *k < 32)
        return mul_align(a, std::uint64_t{1} << *k);
    return a;  // shifting left by any amount never clears low zero bits
  }
  return 1;
}

}  // namespace ptxevo::mutators
