// ModuleStats as a terminal report: one section per function, labels in a fixed-width column,
// tables right-aligned, zero rows left out so the interesting lines stand out.
#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "ir/analysis/module_stats.hpp"

namespace ptxevo::ir {
namespace {

constexpr int kLabelWidth = 16;
constexpr RegClass kClasses[] = {RegClass::Pred, RegClass::B16, RegClass::B32, RegClass::B64, RegClass::B128};

std::string plural(std::size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::ostream& label(std::ostream& o, const char* name) {
  return o << "  " << std::left << std::setw(kLabelWidth) << name << std::right;
}

// A heading for a table printed on the lines below it.
std::ostream& heading(std::ostream& o, const char* name) { return o << "  " << name; }

std::string join_perf(const PerfDirective& p) {
  std::string s = p.name;
  for (std::size_t i = 0; i < p.args.size(); ++i) s += (i ? ", " : " ") + p.args[i];
  return s;
}

std::string percent(std::size_t n, std::size_t total) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%5.1f%%", total ? 100.0 * static_cast<double>(n) / static_cast<double>(total) : 0.0);
  return buf;
}

void registers_table(std::ostream& o, const FunctionStats& f) {
  label(o, "registers") << std::left << std::setw(6) << "class" << std::right << std::setw(10) << "declared"
                        << std::setw(10) << "max live" << "\n";
  for (RegClass c : kClasses) {
    const std::size_t k = class_index(c);
    if (f.declared_registers[k] == 0 && f.max_live[k] == 0) continue;
    o << std::string(2 + kLabelWidth, ' ') << std::left << std::setw(6) << to_string(c) << std::right
      << std::setw(10) << f.declared_registers[k] << std::setw(10) << f.max_live[k] << "\n";
  }
  label(o, "estimated regs") << f.estimated_registers << "  (" << f.max_live_slots << " live 32-bit slots + "
                             << kReservedRegisters << " reserved)\n";
}

void mix_table(std::ostream& o, const InstructionMix& mix) {
  std::vector<std::pair<std::size_t, InstrCategory>> rows;
  for (std::size_t c = 0; c < kInstrCategoryCount; ++c)
    if (mix.by_category[c]) rows.emplace_back(mix.by_category[c], static_cast<InstrCategory>(c));
  // Most frequent first; ties keep category order.
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  heading(o, "instruction mix") << (rows.empty() ? "  -" : "") << "\n";
  for (const auto& [n, c] : rows)
    o << "    " << std::left << std::setw(18) << to_string(c) << std::right << std::setw(7) << n << "  "
      << percent(n, mix.total) << "\n";
  if (!mix.access_width.empty()) {
    label(o, "access widths");
    bool first = true;
    for (const auto& [bits, n] : mix.access_width) {
      o << (first ? "" : "  ") << (bits ? std::to_string(bits) + "b" : std::string("?b")) << " x" << n;
      first = false;
    }
    o << "\n";
  }
}

void memory_table(std::ostream& o, const MemorySummary& m) {
  if (m.groups.empty()) return;
  heading(o, "memory accesses") << "\n";
  o << "    " << std::left << std::setw(24) << "space" << std::setw(8) << "dir" << std::right << std::setw(6)
    << "bits" << "  " << std::left << std::setw(28) << "cache" << std::right << std::setw(5) << "loop"
    << std::setw(7) << "count" << "\n";
  for (const auto& [k, n] : m.groups) {
    std::string space = to_string(k.space);
    if (k.source) space += std::string(" <- ") + to_string(*k.source);
    o << "    " << std::left << std::setw(24) << space << std::setw(8) << to_string(k.direction) << std::right
      << std::setw(6) << (k.width_bits ? std::to_string(k.width_bits) : std::string("?")) << "  " << std::left
      << std::setw(28) << (k.cache.empty() ? std::string("-") : k.cache) << std::right << std::setw(5)
      << k.loop_depth << std::setw(7) << n << "\n";
  }
}

void function_section(std::ostream& o, const FunctionStats& f) {
  o << "\n" << (f.is_entry ? ".entry " : ".func ") << f.name;
  if (!f.has_body) {
    o << "  (declaration)\n";
    return;
  }
  o << "\n";
  for (const auto& p : f.perf) label(o, "perf") << join_perf(p) << "\n";
  label(o, "cfg") << plural(f.blocks, "block", "blocks") << ", " << plural(f.edges, "edge", "edges");
  if (f.unreachable_blocks) o << ", " << f.unreachable_blocks << " unreachable";
  o << "\n";
  label(o, "loops") << f.loops;
  if (f.loops) o << "  (max depth " << f.max_loop_depth << ")";
  o << "\n";
  label(o, "instructions") << f.instructions << "\n";
  if (!f.callees.empty()) {
    label(o, "calls");
    for (std::size_t i = 0; i < f.callees.size(); ++i) o << (i ? ", " : "") << f.callees[i];
    o << "\n";
  }
  if (f.shared_bytes || f.local_bytes)
    label(o, "static memory") << f.shared_bytes << " B shared, " << f.local_bytes << " B local\n";
  registers_table(o, f);
  mix_table(o, f.mix);
  memory_table(o, f.memory);
}

}  // namespace

std::string to_text(const ModuleStats& s) {
  std::ostringstream o;
  o << "PTX " << (s.version.empty() ? "?" : s.version) << "  target " << (s.target.empty() ? "?" : s.target);
  if (!s.address_size.empty()) o << "  address_size " << s.address_size;
  o << "\n" << plural(s.functions.size(), "function", "functions") << " (" << s.entries << " "
    << (s.entries == 1 ? "entry" : "entries") << "), " << plural(s.global_vars, "module variable", "module variables")
    << "\n";
  for (const auto& f : s.functions) function_section(o, f);
  return o.str();
}

}  // namespace ptxevo::ir
