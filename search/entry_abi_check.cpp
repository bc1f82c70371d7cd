#include "search/entry_abi_check.hpp"

#include <cctype>

namespace ptxevo::search {

namespace {

// Bits of a PTX parameter's scalar type (".u64" -> 64), 0 when it has none (arrays of .b8).
int param_bits(const ir::Param& p) {
  for (const auto& a : p.attrs) {
    if (a.size() < 3 || a[0] != '.') continue;
    const char k = a[1];
    if ((k == 'u' || k == 's' || k == 'b' || k == 'f') && std::isdigit(static_cast<unsigned char>(a[2])) != 0) {
      if (!p.dims.empty()) return 0;
      return std::stoi(a.substr(2));
    }
  }
  return 0;
}

int arg_bits(const evaluator::KernelArg& a) {
  if (std::holds_alternative<evaluator::ArgTensor>(a)) return 64;
  if (std::holds_alternative<std::int32_t>(a) || std::holds_alternative<float>(a)) return 32;
  if (std::holds_alternative<std::int64_t>(a) || std::holds_alternative<double>(a)) return 64;
  return 0;  // a tensor map is an opaque 128-byte blob
}

}  // namespace

std::vector<evaluator::IrViolation> check_entry_params(const ir::Module& m, const evaluator::LaunchPlan& plan) {
  std::vector<evaluator::IrViolation> out;
  for (const auto& l : plan.kernels) {
    const ir::Function* f = m.find_function(l.entry);
    if (!f || !f->is_entry) continue;  // check_ir reports a missing entry
    if (f->params.size() != l.args.size()) {
      out.push_back({"entry-params", "entry " + l.entry + " takes " + std::to_string(f->params.size()) +
                                         " parameters; the engine launches it with " + std::to_string(l.args.size())});
      continue;
    }
    for (std::size_t i = 0; i < l.args.size(); ++i) {
      const int want = arg_bits(l.args[i]);
      const int have = param_bits(f->params[i]);
      if (want != 0 && have != 0 && want != have)
        out.push_back({"entry-params", "entry " + l.entry + " parameter " + std::to_string(i + 1) + " is " +
                                           std::to_string(have) + "-bit; the engine passes a " + std::to_string(want) +
                                           "-bit argument"});
    }
  }
  return out;
}

}  // namespace ptxevo::search
