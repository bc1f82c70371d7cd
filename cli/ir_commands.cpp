#include "cli/ir_commands.hpp"

#include <fstream>
#include <optional>
#include <sstream>

#include "ir/analysis/module_stats.hpp"
#include "ir/parser.hpp"
#include "ir/printer.hpp"
#include "ir/verifier.hpp"

namespace ptxevo::cli {
namespace {

// Reads and parses `file`; prints FILE:LINE:COL diagnostics and returns nullopt on failure.
std::optional<ir::Module> load(const std::string& file, std::ostream& err, bool verify) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    err << file << ": error: cannot open file\n";
    return std::nullopt;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  ir::ParseResult r = ir::parse_ptx(ss.str());
  if (!r.ok()) {
    err << r.error->format(file) << "\n";
    return std::nullopt;
  }
  if (verify) {
    auto problems = ir::verify(*r.module);
    for (const auto& d : problems) err << d.format(file) << "\n";
    if (!problems.empty()) return std::nullopt;
  }
  return std::move(r.module);
}

}  // namespace

int run_ir_print(const IrOptions& o, std::ostream& out, std::ostream& err) {
  auto m = load(o.file, err, !o.no_verify);
  if (!m) return 1;
  out << ir::print_module(*m);
  return 0;
}

int run_ir_verify(const IrOptions& o, std::ostream& out, std::ostream& err) {
  auto m = load(o.file, err, true);
  if (!m) return 1;
  out << o.file << ": ok\n";
  return 0;
}

int run_ir_stats(const IrOptions& o, std::ostream& out, std::ostream& err) {
  auto m = load(o.file, err, true);
  if (!m) return 1;
  const ir::ModuleStats stats = ir::analyze_module(*m);
  if (o.json) {
    out << ir::to_json(stats).dump(2) << "\n";
  } else {
    out << ir::to_text(stats);
  }
  return 0;
}

}  // namespace ptxevo::cli
