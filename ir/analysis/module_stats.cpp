#include "ir/analysis/module_stats.hpp"

#include <algorithm>
#include <charconv>
#include <set>
#include <variant>

#include "ir/analysis/cfg.hpp"
#include "ir/analysis/dominators.hpp"
#include "ir/analysis/loops.hpp"
#include "ir/analysis/type_width.hpp"
#include "ir/def_use.hpp"

namespace ptxevo::ir {
namespace {

// Symbols an instruction names: direct operands and address bases.
void collect_symbols(const Instruction& ins, std::set<std::string>& out) {
  for_each_leaf(ins, [&](const Operand& leaf) {
    if (leaf.kind == OperandKind::Symbol) out.insert(leaf.text);
  });
}

// call (ret), callee, (args)...: the callee is the first symbol operand outside the lists.
const std::string* callee_of(const Instruction& ins) {
  for (const auto& op : ins.operands)
    if (op.kind == OperandKind::Symbol) return &op.text;
  return nullptr;
}

bool is_space(const VarDecl& v, const char* space) {
  const std::string s = v.state_space();
  return s == space || s.rfind(std::string(space) + "::", 0) == 0;
}

}  // namespace

std::uint64_t var_size_bytes(const VarDecl& v) {
  int bits = 0;
  std::uint64_t lanes = 1;
  for (const auto& a : v.attrs) {
    if (a == ".v2") lanes = 2;
    else if (a == ".v4") lanes = 4;
    else if (a == ".v8") lanes = 8;
    else if (const int b = type_bits(a); b > 0) bits = b;
  }
  std::uint64_t bytes = lanes * static_cast<std::uint64_t>(bits) / 8;
  for (const auto& d : v.dims) {
    std::uint64_t n = 0;
    auto [ptr, ec] = std::from_chars(d.data(), d.data() + d.size(), n);
    if (d.empty() || ec != std::errc() || ptr != d.data() + d.size()) return 0;
    bytes *= n;
  }
  return bytes;
}

FunctionStats analyze_function(const Function& f, const Module* module) {
  FunctionStats s;
  s.name = f.name;
  s.is_entry = f.is_entry;
  s.has_body = f.has_body;
  s.perf = f.perf;
  for (const auto& r : f.registers) ++s.declared_registers[class_index(r.cls)];
  if (!f.has_body) return s;

  const Cfg g = build_cfg(f);
  const Dominators dom = compute_dominators(g);
  const LoopInfo loops = find_loops(g, dom);
  const RegisterPressure pressure = register_pressure(f, g, compute_liveness(f, g));

  s.blocks = g.blocks.size();
  s.edges = g.edge_count();
  for (const auto& b : g.blocks)
    if (!dom.reachable(b.id) && !b.instructions.empty()) ++s.unreachable_blocks;
  s.loops = loops.loops.size();
  s.max_loop_depth = loops.max_depth();
  s.max_live = pressure.max_live;
  s.max_live_slots = pressure.max_slots;
  s.estimated_registers = pressure.estimated_registers;
  s.mix = instruction_mix(f);
  s.instructions = s.mix.total;
  s.memory = summarize_memory(f, g, loops);

  std::set<std::string> named;
  for (const auto& st : f.body) {
    if (const auto* ins = std::get_if<Instruction>(&st.node)) {
      collect_symbols(*ins, named);
      if (ins->opcode == "call")
        if (const std::string* callee = callee_of(*ins);
            callee && std::find(s.callees.begin(), s.callees.end(), *callee) == s.callees.end())
          s.callees.push_back(*callee);
    } else if (const auto* v = std::get_if<VarDecl>(&st.node)) {
      if (is_space(*v, ".shared")) s.shared_bytes += var_size_bytes(*v);
      if (is_space(*v, ".local")) s.local_bytes += var_size_bytes(*v);
    }
  }
  if (module)
    for (const VarDecl* v : module->globals())
      if (is_space(*v, ".shared") && named.count(v->name)) s.shared_bytes += var_size_bytes(*v);
  return s;
}

ModuleStats analyze_module(const Module& m) {
  ModuleStats s;
  s.version = m.version();
  s.target = m.target();
  for (const auto& it : m.items)
    if (const auto* d = std::get_if<ModuleDirective>(&it.node); d && d->name == ".address_size" && !d->args.empty())
      s.address_size = d->args[0];
  s.global_vars = m.globals().size();
  for (const Function* f : m.functions()) {
    s.functions.push_back(analyze_function(*f, &m));
    if (f->is_entry) ++s.entries;
  }
  return s;
}

}  // namespace ptxevo::ir
