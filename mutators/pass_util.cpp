#include "mutators/pass_util.hpp"

#include <algorithm>

namespace ptxevo::mutators {

bool is_global_load(const ir::Instruction& ins) {
  return ins.opcode == "ld" && ins.has_modifier(".global");
}

bool is_global_store(const ir::Instruction& ins) {
  return ins.opcode == "st" && ins.has_modifier(".global") && !ins.has_modifier(".async") &&
         !ins.has_modifier(".bulk");
}

bool has_ordering_qualifier(const ir::Instruction& ins) {
  static const char* kOrdering[] = {".volatile", ".relaxed", ".acquire", ".release", ".mmio",
                                    ".cta",      ".cluster", ".gpu",     ".sys"};
  for (const char* q : kOrdering)
    if (ins.has_modifier(q)) return true;
  return false;
}

void insert_modifier_after(ir::Instruction& ins, const std::set<std::string>& after, const std::string& mod) {
  std::size_t pos = 0;
  for (std::size_t i = 0; i < ins.modifiers.size(); ++i)
    if (after.count(ins.modifiers[i])) pos = i + 1;
  ins.modifiers.insert(ins.modifiers.begin() + static_cast<std::ptrdiff_t>(pos), mod);
}

std::optional<std::string> prepare(const PtxPass& pass, const PassParams& given, CommonParams* out) {
  if (auto err = merge_params(pass, given, &out->values)) return err;
  auto it = out->values.find("targets");
  if (it != out->values.end()) {
    std::string error;
    out->targets = parse_targets(it->second, &error);
    if (!error.empty()) return error;
  }
  return std::nullopt;
}

std::optional<std::string> require_isa(const ir::Module& m, int min_ptx, int min_sm, const std::string& what) {
  const int v = ptx_version(m), sm = sm_version(m);
  if (v != 0 && v < min_ptx)
    return what + " needs PTX ISA " + std::to_string(min_ptx / 10) + "." + std::to_string(min_ptx % 10) +
           " (module is " + m.version() + ")";
  if (sm != 0 && sm < min_sm)
    return what + " needs sm_" + std::to_string(min_sm) + " or later (module targets " + m.target() + ")";
  return std::nullopt;
}

PassResult finish(int changes, const std::string& why_none) {
  PassResult r;
  r.changes = changes;
  r.applied = changes > 0;
  if (!r.applied) r.refusal = why_none;
  return r;
}

}  // namespace ptxevo::mutators
