#include "mutators/max_registers.hpp"

#include <charconv>
#include <set>

#include "ir/def_use.hpp"

#include "mutators/pass_util.hpp"

namespace ptxevo::mutators {

namespace {
constexpr int kMinRegs = 24;   // ptxas raises anything lower to 24 (with a warning)
constexpr int kMaxRegs = 255;  // ptxas ignores anything higher (with a warning)
constexpr int kOperandSlack = 32;  // registers beyond one instruction's operands ptxas may need
}  // namespace

std::string MaxRegistersPass::name() const { return "max_registers"; }
std::string MaxRegistersPass::description() const {
  return "set .maxnreg N on kernel entries (add it, or replace the value there)";
}
std::string MaxRegistersPass::legality() const {
  return "24 <= n <= 255 (ptxas raises lower values to 24 and ignores higher ones, both with a warning); "
         "only .entry functions (ptxas takes .maxnreg on kernels); .maxnreg may coexist with "
         ".maxntid/.reqntid/.minnctapersm; n is at least the distinct registers of the widest instruction + 32 "
         "(a wgmma with 128 accumulators cannot be assembled under 154). Spilling that a low budget causes is the cost model's concern";
}
std::map<std::string, std::string> MaxRegistersPass::param_defaults() const {
  return {{"n", "128"}, {"function", ""}};
}

PassResult MaxRegistersPass::apply(ir::Module& m, const PassParams& params) const {
  PassParams v;
  if (auto err = merge_params(*this, params, &v)) return finish(0, *err);
  const std::string& s = v.at("n");
  int n = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || ptr != s.data() + s.size()) return finish(0, "n must be an integer (got '" + s + "')");
  if (n < kMinRegs || n > kMaxRegs)
    return finish(0, "n must be between " + std::to_string(kMinRegs) + " and " + std::to_string(kMaxRegs) +
                         " (got " + s + ")");
  const std::string& only = v.at("function");
  // Register demand of the widest single instruction (wgmma accumulators, vector operands) plus
  // ptxas's addressing overhead: below that, ptxas stops with "Insufficient registers".
  for (const auto* f : m.functions()) {
    if (!f->is_entry || (!only.empty() && f->name != only)) continue;
    for (const auto& st : f->body) {
      const auto* ins = std::get_if<ir::Instruction>(&st.node);
      if (!ins) continue;
      std::set<int> regs;
      ir::for_each_leaf(*ins, [&](const ir::Operand& o) {
        if (o.kind == ir::OperandKind::Register && o.reg >= 0) regs.insert(o.reg);
      });
      const int need = static_cast<int>(regs.size()) + kOperandSlack;
      if (n < need)
        return finish(0, "n = " + std::to_string(n) + " is below the " + std::to_string(need) + " registers that " +
                             ins->full_opcode() + " (id " + std::to_string(ins->id) + ") in " + f->name +
                             " needs (" + std::to_string(regs.size()) + " operands + " +
                             std::to_string(kOperandSlack) + ")");
    }
  }
  int changes = 0, entries = 0;
  for (auto* f : m.functions()) {
    if (!f->is_entry || !f->has_body || (!only.empty() && f->name != only)) continue;
    ++entries;
    bool found = false;
    for (auto& d : f->perf) {
      if (d.name != ".maxnreg") continue;
      found = true;
      if (d.args != std::vector<std::string>{std::to_string(n)}) {
        d.args = {std::to_string(n)};
        ++changes;
      }
    }
    if (!found) {
      f->perf.push_back({".maxnreg", {std::to_string(n)}});
      ++changes;
    }
  }
  return finish(changes, entries == 0 ? (only.empty() ? "no .entry function with a body" : "no .entry named " + only)
                                      : ".maxnreg is already " + std::to_string(n));
}

}  // namespace ptxevo::mutators
