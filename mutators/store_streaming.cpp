#include "mutators/store_streaming.hpp"

#include "ir/analysis/memory_summary.hpp"
#include "mutators/pass_util.hpp"

namespace ptxevo::mutators {

std::string StoreStreamingPass::name() const { return "store_streaming"; }
std::string StoreStreamingPass::description() const {
  return "st.global without a cache operator or hint -> st.global.cs (streaming store, likely accessed once)";
}
std::string StoreStreamingPass::legality() const {
  return "always legal for st.global without a cache operator (.wb/.cg/.cs/.wt), without .L1::/.L2:: "
         "hints and without .volatile/.relaxed/.release/.mmio or a scope: .cs only changes the cache "
         "policy, never the value stored or its visibility";
}
std::map<std::string, std::string> StoreStreamingPass::param_defaults() const { return {{"targets", ""}}; }

PassResult StoreStreamingPass::apply(ir::Module& m, const PassParams& params) const {
  CommonParams p;
  if (auto err = prepare(*this, params, &p)) return finish(0, *err);
  int changes = 0, seen = 0;
  for (auto* f : m.functions()) {
    for (auto& st : f->body) {
      auto* ins = std::get_if<ir::Instruction>(&st.node);
      if (!ins || !is_global_store(*ins) || !p.selected(*ins)) continue;
      ++seen;
      if (has_ordering_qualifier(*ins)) continue;
      bool cached = false;
      for (const auto& mod : ins->modifiers) cached = cached || ir::is_cache_modifier(mod);
      if (cached) continue;
      insert_modifier_after(*ins, {".weak", ".global"}, ".cs");
      ++changes;
    }
  }
  return finish(changes, seen == 0 ? "no st.global instruction" + std::string(p.targets ? " among the targets" : "")
                                   : "every st.global already has a cache operator or an ordering qualifier");
}

}  // namespace ptxevo::mutators
