#include "mutators/fast_math.hpp"

#include <set>

#include "mutators/pass_util.hpp"

namespace ptxevo::mutators {
namespace {

const std::set<std::string> kOps = {"div", "sqrt", "rcp", "rsqrt", "ex2", "lg2", "sin", "cos"};
const std::set<std::string> kRounding = {".rn", ".rz", ".rm", ".rp", ".full", ".approx", ".ftz"};

}  // namespace

std::string FastMathPass::name() const { return "fast_math"; }
std::string FastMathPass::description() const {
  return "f32 div/sqrt/rcp (IEEE or .full) and rsqrt/ex2/lg2/sin/cos (.approx) -> .approx.ftz.f32 "
         "(div_form=full gives div.full.ftz.f32 instead)";
}
std::string FastMathPass::legality() const {
  return "syntactically always legal for scalar .f32 forms (f16/bf16/f64 and .f32x2 forms are left alone: "
         "their approximate variants differ or do not exist). The rewrite changes results (flush of "
         "subnormals to zero, ulp error of the approximations): numerical acceptance is the correctness gate's job";
}
std::map<std::string, std::string> FastMathPass::param_defaults() const {
  return {{"targets", ""}, {"ops", "div,sqrt,rcp,rsqrt,ex2,lg2,sin,cos"}, {"div_form", "approx"}};
}

PassResult FastMathPass::apply(ir::Module& m, const PassParams& params) const {
  CommonParams p;
  if (auto err = prepare(*this, params, &p)) return finish(0, *err);
  std::set<std::string> ops;
  for (const auto& o : split_list(p.values.at("ops"))) {
    if (!kOps.count(o)) return finish(0, "unknown op '" + o + "' in ops (known: div,sqrt,rcp,rsqrt,ex2,lg2,sin,cos)");
    ops.insert(o);
  }
  const std::string div_form = p.values.at("div_form");
  if (div_form != "approx" && div_form != "full")
    return finish(0, "div_form must be approx or full (got '" + div_form + "')");

  int changes = 0, seen = 0;
  for (auto* f : m.functions()) {
    for (auto& st : f->body) {
      auto* ins = std::get_if<ir::Instruction>(&st.node);
      if (!ins || !ops.count(ins->opcode) || !p.selected(*ins)) continue;
      if (ins->modifiers.empty() || ins->modifiers.back() != ".f32") continue;
      ++seen;
      // Only rounding / approximation / ftz modifiers may precede the type.
      bool plain = true;
      for (std::size_t i = 0; i + 1 < ins->modifiers.size(); ++i) plain = plain && kRounding.count(ins->modifiers[i]);
      if (!plain) continue;
      const std::string form = ins->opcode == "div" && div_form == "full" ? ".full" : ".approx";
      std::vector<std::string> mods = {form, ".ftz", ".f32"};
      if (mods == ins->modifiers) continue;
      ins->modifiers = std::move(mods);
      ++changes;
    }
  }
  return finish(changes, seen == 0 ? "no scalar f32 instruction among the selected ops" +
                                         std::string(p.targets ? " and targets" : "")
                                   : "every selected f32 instruction already has its fast form");
}

}  // namespace ptxevo::mutators
