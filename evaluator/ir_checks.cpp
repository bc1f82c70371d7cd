#include "evaluator/ir_checks.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <string_view>

#include "ir/def_use.hpp"

namespace ptxevo::evaluator {
namespace {

using ir::Function;
using ir::Instruction;
using ir::Operand;
using ir::OperandKind;

std::string at(const Function& f, ir::SourceLoc loc) {
  return "'" + f.name + "' line " + std::to_string(loc.line);
}

bool has_attr(const std::vector<std::string>& attrs, std::string_view a) {
  return std::find(attrs.begin(), attrs.end(), a) != attrs.end();
}

// ---- persistent-global ------------------------------------------------------------------------
// A .global variable outlives the launch: a kernel that writes one can carry results from the
// correctness runs into the timed runs (loopholes 3 and 4). Reading one (a lookup table) is
// harmless, so the rule tracks where each variable's address flows and flags a write through
// it, or an escape the analysis cannot follow (a call, a store of the address itself).

struct GlobalVar {
  std::string name;
  std::uint32_t line = 0;
};

// Instructions that write memory through an address in any operand. Conservative: a tainted
// register anywhere in them (as address or as stored data) is a violation.
bool writes_memory(const Instruction& ins) {
  static constexpr std::string_view kWriters[] = {"st",       "atom",     "red",       "sust",    "sured",
                                                  "stmatrix", "multimem", "tensormap", "discard", "call"};
  for (auto w : kWriters)
    if (ins.opcode == w) return true;
  return ins.opcode == "wmma" && ins.has_modifier(".store");
}

// Reads through an address: the loaded value is data, not an address of the variable.
bool reads_only(const Instruction& ins) {
  return ins.opcode == "ld" || ins.opcode == "ldu" || ins.opcode == "prefetch" || ins.opcode == "prefetchu" ||
         ins.opcode == "applypriority";
}

// Indices (into `vars`) named by an operand directly or reached through tainted registers.
void collect_hits(const Operand& op, const std::map<std::string, int, std::less<>>& by_name,
                  const std::vector<int>& taint, std::set<int>& hits) {
  ir::for_each_leaf(op, [&](const Operand& leaf) {
    if (leaf.kind == OperandKind::Symbol) {
      if (auto it = by_name.find(leaf.text); it != by_name.end()) hits.insert(it->second);
    } else if (leaf.kind == OperandKind::Register && leaf.reg >= 0 && static_cast<std::size_t>(leaf.reg) < taint.size() &&
               taint[static_cast<std::size_t>(leaf.reg)] >= 0) {
      hits.insert(taint[static_cast<std::size_t>(leaf.reg)]);
    }
  });
}

void check_global_writes(const Function& f, const std::vector<GlobalVar>& vars,
                         const std::map<std::string, int, std::less<>>& by_name, std::vector<IrViolation>& out) {
  // taint[r] = a variable whose address register r may hold (-1: none). Flow-insensitive fixed
  // point: a register defined from a tainted operand (mov, cvta, add, ...) is tainted. Taint only
  // grows, so the loop ends after at most (registers + 1) passes; nvcc-style code needs two.
  std::vector<int> taint(f.registers.size(), -1);
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& st : f.body) {
      const auto* ins = std::get_if<Instruction>(&st.node);
      if (!ins || reads_only(*ins)) continue;
      std::set<int> hits;
      for (const auto& op : ins->operands) collect_hits(op, by_name, taint, hits);
      if (hits.empty()) continue;
      for (int d : ir::def_use(*ins).defs)
        if (d >= 0 && static_cast<std::size_t>(d) < taint.size() && taint[static_cast<std::size_t>(d)] < 0) {
          taint[static_cast<std::size_t>(d)] = *hits.begin();
          changed = true;
        }
    }
  }
  std::set<int> reported;
  for (const auto& st : f.body) {
    const auto* ins = std::get_if<Instruction>(&st.node);
    if (!ins || reads_only(*ins) || ins->operands.empty()) continue;
    std::set<int> hits;
    if (ins->opcode == "cp") {
      // cp.async / cp.async.bulk / cp.reduce.async.bulk: operand 0 is the destination; the
      // variable as a source (a table copied to shared memory) is a read.
      collect_hits(ins->operands[0], by_name, taint, hits);
    } else if (writes_memory(*ins)) {
      for (const auto& op : ins->operands) collect_hits(op, by_name, taint, hits);
    }
    for (int v : hits) {
      if (!reported.insert(v).second) continue;
      const GlobalVar& g = vars[static_cast<std::size_t>(v)];
      const std::string what = ins->opcode == "call" ? " passes the address of" : " writes through the address of";
      out.push_back({"persistent-global", at(f, st.loc) + ": " + ins->full_opcode() + what + " .global variable '" +
                                              g.name + "' (declared at line " + std::to_string(g.line) +
                                              "), state that persists across launches"});
    }
  }
}

void check_globals(const ir::Module& m, std::vector<IrViolation>& out) {
  std::vector<GlobalVar> vars;
  std::map<std::string, int, std::less<>> by_name;
  auto add = [&](const ir::VarDecl& v, std::uint32_t line) {
    if (v.state_space() != ".global") return;
    by_name.emplace(v.name, static_cast<int>(vars.size()));
    vars.push_back({v.name, line});
    // Defined outside the module (or mergeable with another definition): contents unknown and
    // shared with code the gate never sees.
    for (const char* l : {".extern", ".weak", ".common"})
      if (has_attr(v.attrs, l))
        out.push_back({"persistent-global", std::string(l) + " .global variable '" + v.name + "' at line " +
                                                std::to_string(line) + ": storage outside the candidate's control"});
  };
  for (const auto& item : m.items) {
    if (const auto* v = std::get_if<ir::VarDecl>(&item.node)) add(*v, item.loc.line);
    if (const auto* f = std::get_if<Function>(&item.node))
      for (const auto& st : f->body)
        if (const auto* lv = std::get_if<ir::VarDecl>(&st.node)) add(*lv, st.loc.line);
  }
  if (vars.empty()) return;
  // An initializer that holds a variable's address (`.global .u64 p = generic(buf);`) lets code
  // load the address and write through it without the flow above seeing it.
  for (const auto& item : m.items)
    if (const auto* v = std::get_if<ir::VarDecl>(&item.node))
      for (const auto& tok : v->init)
        if (auto it = by_name.find(tok); it != by_name.end() && tok != v->name)
          out.push_back({"persistent-global", "initializer of '" + v->name + "' at line " +
                                                  std::to_string(item.loc.line) + " stores the address of .global '" +
                                                  tok + "', which code can then write through"});
  for (const Function* f : m.functions())
    if (f->has_body) check_global_writes(*f, vars, by_name, out);
}

// ---- clock-read -------------------------------------------------------------------------------
// Clocks and counters let a kernel tell the correctness runs from the timed runs (loophole 12).
const char* clock_reason(std::string_view name) {
  static constexpr std::string_view kClocks[] = {"%clock",       "%clock_hi",      "%clock64",
                                                 "%globaltimer", "%globaltimer_lo", "%globaltimer_hi"};
  for (auto c : kClocks)
    if (name == c) return "a clock";
  // %pm0..%pm7 and %pm0_64..%pm7_64 are performance counters: as good as a clock.
  if (name.substr(0, 3) == "%pm") return "a performance counter (usable as a clock)";
  // Nonzero only inside a CUDA graph: reveals whether the launch is a graph replay (timing).
  if (name == "%current_graph_exec") return "the CUDA graph handle (reveals the harness phase)";
  return nullptr;
}

void check_clocks(const Function& f, std::vector<IrViolation>& out) {
  std::set<std::string> reported;
  for (const auto& st : f.body) {
    const auto* ins = std::get_if<Instruction>(&st.node);
    if (!ins) continue;
    ir::for_each_leaf(*ins, [&](const Operand& leaf) {
      if (leaf.kind != OperandKind::Special) return;
      const char* why = clock_reason(leaf.text);
      if (why && reported.insert(leaf.text).second)
        out.push_back({"clock-read", at(f, st.loc) + ": " + ins->full_opcode() + " reads " + leaf.text + ", " + why});
    });
  }
}

// ---- launch-resources -------------------------------------------------------------------------
bool parse_u64(const std::string& s, std::uint64_t* v) {
  int base = 10;
  std::size_t start = 0;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    start = 2;
  }
  auto r = std::from_chars(s.data() + start, s.data() + s.size(), *v, base);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// A .maxntid/.reqntid/.reqnctapercluster triple; omitted trailing dimensions are 1.
bool perf_dims(const ir::PerfDirective& p, std::uint64_t d[3]) {
  d[0] = d[1] = d[2] = 1;
  if (p.args.empty() || p.args.size() > 3) return false;
  for (std::size_t i = 0; i < p.args.size(); ++i)
    if (!parse_u64(p.args[i], &d[i])) return false;
  return true;
}

std::string dims(std::uint64_t x, std::uint64_t y, std::uint64_t z) {
  return std::to_string(x) + "x" + std::to_string(y) + "x" + std::to_string(z);
}
std::string dims(const Dim3& d) { return dims(d.x, d.y, d.z); }

void check_launch(const Function& f, const KernelLaunch& l, std::vector<IrViolation>& out) {
  const std::string where = at(f, f.loc);
  auto fail = [&](const std::string& msg) { out.push_back({"launch-resources", where + ": " + msg}); };
  const Dim3& b = l.block;
  const Dim3& c = l.cluster;
  const std::uint64_t threads = std::uint64_t{b.x} * b.y * b.z;
  // Hardware limits of every architecture ptxevo targets (sm_80 and later).
  if (b.x == 0 || b.y == 0 || b.z == 0 || l.grid.x == 0 || l.grid.y == 0 || l.grid.z == 0)
    fail("empty launch: grid " + dims(l.grid) + ", block " + dims(b));
  if (threads > 1024 || b.x > 1024 || b.y > 1024 || b.z > 64)
    fail("block " + dims(b) + " = " + std::to_string(threads) + " threads exceeds the 1024-thread (z <= 64) limit");
  if (l.grid.x > 0x7FFFFFFFu || l.grid.y > 65535 || l.grid.z > 65535)
    fail("grid " + dims(l.grid) + " exceeds the 2^31-1 x 65535 x 65535 limit");
  std::uint64_t d[3];
  for (const auto& p : f.perf) {
    const bool triple = p.name == ".maxntid" || p.name == ".reqntid" || p.name == ".reqnctapercluster";
    if (triple && !perf_dims(p, d)) {
      fail("cannot read the arguments of " + p.name);
      continue;
    }
    // .maxntid bounds the thread count (the product), not each dimension: __launch_bounds__(256)
    // emits `.maxntid 256, 1, 1` and a 32x8 block is a legal launch of it.
    if (p.name == ".maxntid" && threads > d[0] * d[1] * d[2])
      fail("block " + dims(b) + " = " + std::to_string(threads) + " threads exceeds .maxntid " + dims(d[0], d[1], d[2]));
    if (p.name == ".reqntid" && (b.x != d[0] || b.y != d[1] || b.z != d[2]))
      fail("block " + dims(b) + " differs from .reqntid " + dims(d[0], d[1], d[2]));
    if (p.name == ".reqnctapercluster" && (c.x != d[0] || c.y != d[1] || c.z != d[2]))
      fail("cluster " + dims(c) + " differs from .reqnctapercluster " + dims(d[0], d[1], d[2]));
    if (p.name == ".maxclusterrank") {
      std::uint64_t rank = 0;
      if (p.args.size() != 1 || !parse_u64(p.args[0], &rank)) fail("cannot read the argument of .maxclusterrank");
      else if (std::uint64_t{c.x} * c.y * c.z > rank)
        fail("cluster " + dims(c) + " exceeds .maxclusterrank " + std::to_string(rank));
    }
  }
  const std::uint64_t cluster = std::uint64_t{c.x} * c.y * c.z;
  if (cluster == 0) fail("cluster " + dims(c) + " has a zero dimension");
  if (cluster > 16) fail("cluster " + dims(c) + " = " + std::to_string(cluster) + " CTAs exceeds 16");
  if (cluster > 0 && (l.grid.x % c.x || l.grid.y % c.y || l.grid.z % c.z))
    fail("grid " + dims(l.grid) + " is not a multiple of cluster " + dims(c));
  // .explicitcluster demands cluster dimensions, from .reqnctapercluster or from the launch.
  if (f.find_perf(".explicitcluster") && !f.find_perf(".reqnctapercluster") && cluster == 1)
    fail(".explicitcluster kernel launched without a cluster");
}

}  // namespace

std::vector<IrViolation> check_ir(const ir::Module& m, const LaunchPlan& plan) {
  std::vector<IrViolation> out;
  check_globals(m, out);
  for (const Function* f : m.functions())
    if (f->has_body) check_clocks(*f, out);
  for (const auto& l : plan.kernels) {
    const Function* f = m.find_function(l.entry);
    if (!f || !f->is_entry || !f->has_body) {
      std::string msg = "the launch plan names entry '" + l.entry + "', but the module has no .entry '" + l.entry +
                        "' with a body";
      if (f) msg += " (line " + std::to_string(f->loc.line) + " declares " + (f->is_entry ? ".entry" : ".func") +
                    (f->has_body ? "" : " without a body") + ")";
      out.push_back({"missing-entry", msg});
      continue;
    }
    check_launch(*f, l, out);
  }
  return out;
}

}  // namespace ptxevo::evaluator
