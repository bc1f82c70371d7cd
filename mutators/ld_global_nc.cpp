#include "mutators/ld_global_nc.hpp"

#include <functional>
#include <set>

#include "ir/analysis/instruction_mix.hpp"
#include "ir/analysis/memory_summary.hpp"
#include "ir/def_use.hpp"
#include "mutators/pass_util.hpp"

namespace ptxevo::mutators {
namespace {

// Pointer provenance: for each register wide enough to hold an address, the set of roots its
// value may derive from: "param:NAME" (a kernel parameter), "sym:NAME" (a variable's address)
// or "?" (anything: a value loaded from memory, returned by a call, ...). Flow-insensitive: a
// register's set is the union over all its definitions, iterated to a fixpoint.
using Roots = std::set<std::string>;
const std::string kUnknown = "?";

int pointer_bits(const ir::Module& m) {
  for (const auto& it : m.items)
    if (const auto* d = std::get_if<ir::ModuleDirective>(&it.node))
      if (d->name == ".address_size" && !d->args.empty() && d->args[0] == "32") return 32;
  return 64;
}

const ir::Operand* first_address(const ir::Instruction& ins) {
  for (const auto& op : ins.operands)
    if (op.kind == ir::OperandKind::Address) return &op;
  return nullptr;
}

bool writes_global_or_generic(const ir::Instruction& ins) {
  if (ins.opcode == "tensormap") return true;  // tensormap.replace edits a map in global memory
  if (!ir::is_memory_access(ins)) return false;
  const ir::MemoryAccess a = ir::describe_access(ins);
  if (a.direction == ir::MemDirection::Load) return false;
  return a.space == ir::MemSpace::Global || a.space == ir::MemSpace::Generic;
}

std::string callee_of(const ir::Instruction& ins) {
  for (const auto& op : ins.operands)
    if (op.kind == ir::OperandKind::Symbol) return op.text;
  return "";
}

// True when `f` or anything it calls may write global memory; `why` names the first writer.
bool function_writes(const ir::Module& m, const ir::Function& f, std::set<std::string>& visiting, std::string* why) {
  if (!f.has_body) {
    *why = "calls " + f.name + ", whose body is not in the module";
    return true;
  }
  if (!visiting.insert(f.name).second) return false;
  for (const auto& st : f.body) {
    const auto* ins = std::get_if<ir::Instruction>(&st.node);
    if (!ins) continue;
    if (writes_global_or_generic(*ins)) {
      *why = "called function " + f.name + " writes memory (" + ins->full_opcode() + ")";
      return true;
    }
    if (ins->opcode == "call") {
      const ir::Function* g = m.find_function(callee_of(*ins));
      if (!g) {
        *why = "indirect call in " + f.name;
        return true;
      }
      if (function_writes(m, *g, visiting, why)) return true;
    }
  }
  return false;
}

struct Provenance {
  std::vector<Roots> regs;

  Roots of(const ir::Operand& op) const {
    Roots out;
    ir::for_each_leaf(op, [&](const ir::Operand& leaf) {
      if (leaf.kind == ir::OperandKind::Register && leaf.reg >= 0 && static_cast<std::size_t>(leaf.reg) < regs.size())
        out.insert(regs[static_cast<std::size_t>(leaf.reg)].begin(), regs[static_cast<std::size_t>(leaf.reg)].end());
      else if (leaf.kind == ir::OperandKind::Symbol)
        out.insert("sym:" + leaf.text);
    });
    return out;
  }
};

Provenance compute_provenance(const ir::Function& f, int ptr_bits) {
  std::set<std::string> params;
  if (f.is_entry)
    for (const auto& p : f.params) params.insert(p.name);
  Provenance pv;
  pv.regs.resize(f.registers.size());
  bool changed = true;
  while (changed) {
    changed = false;
    for (const auto& st : f.body) {
      const auto* ins = std::get_if<ir::Instruction>(&st.node);
      if (!ins) continue;
      const ir::DefUse du = ir::def_use(*ins);
      if (du.defs.empty()) continue;
      Roots value;
      const ir::Operand* addr = first_address(*ins);
      if (ins->opcode == "ld" && ins->has_modifier(".param") && addr) {
        std::string sym;
        for (const auto& it : addr->items)
          if (it.kind == ir::OperandKind::Symbol) sym = it.text;
        if (!sym.empty() && params.count(sym) && addr->items.size() == 1)
          value.insert("param:" + sym);
        else
          value.insert(kUnknown);
      } else if (ir::is_memory_access(*ins) || ins->opcode == "call") {
        value.insert(kUnknown);
      } else {
        for (int u : du.uses)
          if (u >= 0 && static_cast<std::size_t>(u) < pv.regs.size())
            value.insert(pv.regs[static_cast<std::size_t>(u)].begin(), pv.regs[static_cast<std::size_t>(u)].end());
        ir::for_each_leaf(*ins, [&](const ir::Operand& leaf) {
          if (leaf.kind == ir::OperandKind::Symbol) value.insert("sym:" + leaf.text);
        });
      }
      for (int d : du.defs) {
        if (d < 0 || static_cast<std::size_t>(d) >= pv.regs.size()) continue;
        if (f.registers[static_cast<std::size_t>(d)].width_bits < ptr_bits) continue;  // cannot hold an address
        Roots& r = pv.regs[static_cast<std::size_t>(d)];
        const std::size_t before = r.size();
        r.insert(value.begin(), value.end());
        changed = changed || r.size() != before;
      }
    }
  }
  return pv;
}

std::string describe(const Roots& r) {
  std::string s;
  for (const auto& x : r) s += (s.empty() ? "" : ", ") + (x == kUnknown ? std::string("a value loaded or returned") : x);
  return s;
}

}  // namespace

std::string LdGlobalNcPass::name() const { return "ld_global_nc"; }
std::string LdGlobalNcPass::description() const {
  return "ld.global (weak, no .nc) -> ld.global.nc when its buffer is provably read-only for the kernel";
}
std::string LdGlobalNcPass::legality() const {
  return "the load is in a .entry, has no .nc/.weak/.volatile/.relaxed/.acquire/.mmio/scope/.lu/.cv, and its "
         "address derives (through register def chains: mov, add, mad, mul.wide, cvta, ...) only from kernel "
         ".param pointers or .global variables; no store, atomic, reduction, async copy or tensormap write to "
         "global or generic memory in the kernel or any function it calls has an address that derives from "
         "the same roots, and every such write's address has known roots (a pointer loaded from memory or "
         "returned by a call could alias anything, and then nothing is rewritten). Distinct kernel pointer "
         "parameters are assumed not to alias each other (the __restrict__ contract the evaluator's ops give)";
}
std::map<std::string, std::string> LdGlobalNcPass::param_defaults() const { return {{"targets", ""}}; }

PassResult LdGlobalNcPass::apply(ir::Module& m, const PassParams& params) const {
  CommonParams p;
  if (auto err = prepare(*this, params, &p)) return finish(0, *err);
  const int ptr_bits = pointer_bits(m);
  int changes = 0, seen = 0;
  std::string refusal;
  bool refusal_weak = true;  // "already .nc" gives way to any reason that explains a real refusal
  auto note = [&](const std::string& why, bool weak = false) {
    if (refusal.empty() || (refusal_weak && !weak)) {
      refusal = why;
      refusal_weak = weak;
    }
  };
  for (auto* f : m.functions()) {
    if (!f->has_body) continue;
    std::vector<ir::Instruction*> candidates;
    for (auto& st : f->body) {
      auto* ins = std::get_if<ir::Instruction>(&st.node);
      if (!ins || !is_global_load(*ins) || !p.selected(*ins)) continue;
      ++seen;
      if (ins->has_modifier(".nc")) {
        note("the load is already ld.global.nc", true);
        continue;
      }
      if (has_ordering_qualifier(*ins) || ins->has_modifier(".weak") || ins->has_modifier(".lu") ||
          ins->has_modifier(".cv")) {
        note(ins->full_opcode() + " carries a memory-ordering or cache qualifier .nc cannot take");
        continue;
      }
      if (!f->is_entry) {
        note("load in non-entry function " + f->name + ": its pointers come from a caller");
        continue;
      }
      candidates.push_back(ins);
    }
    if (candidates.empty()) continue;

    const Provenance pv = compute_provenance(*f, ptr_bits);
    Roots written;
    std::string unknown_writer;
    for (const auto& st : f->body) {
      const auto* ins = std::get_if<ir::Instruction>(&st.node);
      if (!ins) continue;
      if (ins->opcode == "call") {
        std::set<std::string> visiting;
        std::string why;
        const ir::Function* g = m.find_function(callee_of(*ins));
        if (!g) {
          unknown_writer = "indirect call";
        } else if (function_writes(m, *g, visiting, &why)) {
          unknown_writer = why;
        }
        continue;
      }
      if (!writes_global_or_generic(*ins)) continue;
      const ir::Operand* addr = first_address(*ins);
      if (!addr || ins->has_modifier(".tensor") || ins->opcode == "tensormap") {
        unknown_writer = ins->full_opcode() + " writes through an address the pass cannot follow";
        continue;
      }
      Roots r = pv.of(*addr);
      if (r.empty() || r.count(kUnknown)) {
        unknown_writer = ins->full_opcode() + " writes through an address of unknown origin";
        continue;
      }
      written.insert(r.begin(), r.end());
    }
    if (!unknown_writer.empty()) {
      note("kernel " + f->name + ": " + unknown_writer + ", which may alias any load");
      continue;
    }
    for (auto* ins : candidates) {
      const ir::Operand* addr = first_address(*ins);
      if (!addr) continue;
      const Roots r = pv.of(*addr);
      if (r.empty() || r.count(kUnknown)) {
        note("the address of " + ins->full_opcode() + " (id " + std::to_string(ins->id) +
             ") does not derive from kernel parameters alone");
        continue;
      }
      std::string clash;
      for (const auto& x : r)
        if (written.count(x)) clash = x;
      if (!clash.empty()) {
        note("the kernel writes through " + clash + ", which the load at id " + std::to_string(ins->id) +
             " also reads (" + describe(r) + ")");
        continue;
      }
      insert_modifier_after(*ins, {".global", ".ca", ".cg", ".cs"}, ".nc");
      ++changes;
    }
  }
  if (seen == 0) refusal = "no ld.global instruction" + std::string(p.targets ? " among the targets" : "");
  return finish(changes, refusal);
}

}  // namespace ptxevo::mutators
