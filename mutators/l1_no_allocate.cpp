#include "mutators/l1_no_allocate.hpp"

#include "ir/analysis/memory_summary.hpp"
#include "mutators/pass_util.hpp"

namespace ptxevo::mutators {

std::string L1NoAllocatePass::name() const { return "l1_no_allocate"; }
std::string L1NoAllocatePass::description() const {
  return "ld.global / ld.global.nc without an L1 policy -> add .L1::no_allocate (do not allocate the line in L1)";
}
std::string L1NoAllocatePass::legality() const {
  return "PTX ISA 7.4 and sm_70 or later; the load is ld.global(.nc) without a cache operator "
         "(.ca/.cg/.cs/.lu/.cv), without an .L1:: qualifier, not .v8, and without "
         ".volatile/.relaxed/.acquire/.mmio or a scope. A cache-allocation hint never changes the value loaded";
}
std::map<std::string, std::string> L1NoAllocatePass::param_defaults() const { return {{"targets", ""}}; }

PassResult L1NoAllocatePass::apply(ir::Module& m, const PassParams& params) const {
  CommonParams p;
  if (auto err = prepare(*this, params, &p)) return finish(0, *err);
  if (auto err = require_isa(m, 74, 70, ".L1::no_allocate")) return finish(0, *err);
  int changes = 0, seen = 0;
  for (auto* f : m.functions()) {
    for (auto& st : f->body) {
      auto* ins = std::get_if<ir::Instruction>(&st.node);
      if (!ins || !is_global_load(*ins) || !p.selected(*ins)) continue;
      ++seen;
      if (has_ordering_qualifier(*ins) || ins->has_modifier(".v8")) continue;
      bool blocked = false;
      for (const auto& mod : ins->modifiers)
        if (ir::is_cache_modifier(mod) && mod != ".nc" && mod.rfind(".L2::", 0) != 0) blocked = true;
      if (blocked) continue;
      insert_modifier_after(*ins, {".weak", ".global", ".nc"}, ".L1::no_allocate");
      ++changes;
    }
  }
  return finish(changes, seen == 0 ? "no ld.global instruction" + std::string(p.targets ? " among the targets" : "")
                                   : "every ld.global already has an L1 policy, a cache operator or an ordering qualifier");
}

}  // namespace ptxevo::mutators
