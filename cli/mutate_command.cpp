#include "cli/mutate_command.hpp"

#include <fstream>
#include <sstream>

#include "ir/parser.hpp"
#include "ir/printer.hpp"
#include "ir/verifier.hpp"
#include "mutators/pass.hpp"

namespace ptxevo::cli {

int run_mutate_list(std::ostream& out) {
  for (const auto& n : mutators::builtin_passes().names()) out << n << "\n";
  return 0;
}

int run_mutate(const std::string& file, const std::string& pass, const std::vector<std::string>& params,
               bool verify, std::ostream& out, std::ostream& err) {
  const mutators::PassRegistry registry = mutators::builtin_passes();
  const mutators::PtxPass* p = registry.find(pass);
  if (!p) {
    err << "error: unknown pass '" << pass << "'; known passes:\n";
    for (const auto& n : registry.names()) err << "  " << n << "\n";
    return 2;
  }
  mutators::PassParams kv;
  std::string error;
  if (!mutators::parse_param_list(params, &kv, &error)) {
    err << "error: " << error << "\n";
    return 2;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    err << file << ": error: cannot open file\n";
    return 1;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  ir::ParseResult r = ir::parse_ptx(ss.str());
  if (!r.ok()) {
    err << r.error->format(file) << "\n";
    return 1;
  }
  // A pass's legality rests on a well-formed input (declared registers, defined labels).
  if (verify) {
    const auto problems = ir::verify(*r.module);
    for (const auto& d : problems) err << d.format(file) << "\n";
    if (!problems.empty()) {
      err << file << ": error: the input does not verify; no pass applied (--no-verify to apply anyway)\n";
      return 1;
    }
  }
  const mutators::PassResult res = p->apply(*r.module, kv);
  if (!res.applied) {
    err << file << ": " << pass << " not applied: " << res.refusal << "\n";
    return 1;
  }
  out << ir::print_module(*r.module);
  err << pass << ": " << res.changes << " change" << (res.changes == 1 ? "" : "s") << "\n";
  return 0;
}

}  // namespace ptxevo::cli
