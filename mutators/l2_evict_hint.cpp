#include "mutators/l2_evict_hint.hpp"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>

#include "mutators/pass_util.hpp"

namespace ptxevo::mutators {
namespace {

const std::set<std::string> kPriorities = {"evict_first", "evict_last", "evict_normal", "evict_unchanged"};

// 0fXXXXXXXX spelling of a float, the form PTX printers use for f32 immediates.
std::string f32_literal(float v) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  char buf[16];
  std::snprintf(buf, sizeof buf, "0f%08X", static_cast<unsigned>(bits));
  return buf;
}

ir::Operand reg_operand(const std::string& name, int id) {
  ir::Operand o;
  o.kind = ir::OperandKind::Register;
  o.text = name;
  o.reg = id;
  return o;
}

}  // namespace

std::string L2EvictHintPass::name() const { return "l2_evict_hint"; }
std::string L2EvictHintPass::description() const {
  return "global loads get an L2 eviction priority: one createpolicy.fractional.L2::<priority>.b64 per function "
         "and .L2::cache_hint with that policy on each ld.global(.nc)";
}
std::string L2EvictHintPass::legality() const {
  return "PTX ISA 7.4 and sm_80 or later; the load is ld.global(.nc) without .L2::cache_hint, not .v8, "
         "without .volatile/.relaxed/.acquire/.mmio or a scope. ld accepts only .L1:: eviction priorities "
         "directly, so the L2 priority travels as a cache policy; a hint never changes the value loaded";
}
std::map<std::string, std::string> L2EvictHintPass::param_defaults() const {
  return {{"targets", ""}, {"priority", "evict_last"}, {"fraction", "1.0"}};
}

PassResult L2EvictHintPass::apply(ir::Module& m, const PassParams& params) const {
  CommonParams p;
  if (auto err = prepare(*this, params, &p)) return finish(0, *err);
  const std::string prio = p.values.at("priority");
  if (!kPriorities.count(prio))
    return finish(0, "priority must be evict_first, evict_last, evict_normal or evict_unchanged (got '" + prio + "')");
  float fraction = 0;
  {
    const std::string& s = p.values.at("fraction");
    char* end = nullptr;
    fraction = std::strtof(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !(fraction > 0.0f) || fraction > 1.0f)
      return finish(0, "fraction must be a number in (0, 1] (got '" + s + "')");
  }
  if (auto err = require_isa(m, 74, 80, ".L2::cache_hint")) return finish(0, *err);

  int changes = 0, seen = 0;
  for (auto* f : m.functions()) {
    if (!f->has_body) continue;
    std::vector<ir::Instruction*> picked;
    for (auto& st : f->body) {
      auto* ins = std::get_if<ir::Instruction>(&st.node);
      if (!ins || !is_global_load(*ins) || !p.selected(*ins)) continue;
      ++seen;
      if (has_ordering_qualifier(*ins) || ins->has_modifier(".v8") || ins->has_modifier(".L2::cache_hint")) continue;
      picked.push_back(ins);
    }
    if (picked.empty()) continue;
    // A fresh .b64 register for the policy, named so it cannot clash with the function's own.
    std::string reg = "%ptxevo_l2pol";
    for (int k = 0;; ++k) {
      bool clash = false;
      for (const auto& r : f->registers) clash = clash || r.name == reg;
      if (!clash) break;
      reg = "%ptxevo_l2pol" + std::to_string(k);
    }
    const int reg_id = static_cast<int>(f->registers.size());
    f->registers.push_back({reg, ir::RegClass::B64, 64});
    for (auto* ins : picked) {
      insert_modifier_after(*ins,
                            {".weak", ".global", ".nc", ".ca", ".cg", ".cs", ".lu", ".cv", ".L1::evict_normal",
                             ".L1::evict_unchanged", ".L1::evict_first", ".L1::evict_last", ".L1::no_allocate"},
                            ".L2::cache_hint");
      ins->operands.push_back(reg_operand(reg, reg_id));
      ++changes;
    }
    ir::Instruction pol;
    pol.id = m.next_instruction_id++;
    pol.opcode = "createpolicy";
    pol.modifiers = {".fractional", ".L2::" + prio, ".b64"};
    pol.operands.push_back(reg_operand(reg, reg_id));
    ir::Operand frac;
    frac.kind = ir::OperandKind::Immediate;
    frac.text = f32_literal(fraction);
    pol.operands.push_back(frac);
    // The policy is computed before the first instruction, which every path runs first.
    std::size_t first = 0;
    while (first < f->body.size() && !std::holds_alternative<ir::Instruction>(f->body[first].node)) ++first;
    ir::RegDecl decl;
    decl.type = {".b64"};
    decl.names.push_back({reg, -1});
    f->body.insert(f->body.begin() + static_cast<std::ptrdiff_t>(first), ir::Statement{{}, std::move(pol)});
    f->body.insert(f->body.begin(), ir::Statement{{}, std::move(decl)});
  }
  return finish(changes, seen == 0 ? "no ld.global instruction" + std::string(p.targets ? " among the targets" : "")
                                   : "every ld.global already has a cache hint, is .v8 or has an ordering qualifier");
}

}  // namespace ptxevo::mutators
