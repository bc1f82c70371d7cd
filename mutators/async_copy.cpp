#include "mutators/async_copy.hpp"

#include <algorithm>
#include <set>

#include "ir/analysis/instruction_mix.hpp"
#include "ir/analysis/memory_summary.hpp"
#include "ir/analysis/type_width.hpp"
#include "ir/def_use.hpp"
#include "mutators/pass_util.hpp"

namespace ptxevo::mutators {
namespace {

bool plain_register(const ir::Operand& o) {
  return o.kind == ir::OperandKind::Register && o.reg >= 0 && o.text.find('.') == std::string::npos;
}

// Registers of a data operand (a register or a vector of registers); empty when it is anything else.
std::vector<int> data_registers(const ir::Operand& o) {
  if (plain_register(o)) return {o.reg};
  std::vector<int> out;
  if (o.kind != ir::OperandKind::Vector) return {};
  for (const auto& it : o.items) {
    if (!plain_register(it)) return {};
    out.push_back(it.reg);
  }
  return out;
}

bool same_guard(const ir::Instruction& a, const ir::Instruction& b) {
  if (a.guard.has_value() != b.guard.has_value()) return false;
  return !a.guard || (a.guard->negated == b.guard->negated && a.guard->pred.reg == b.guard->pred.reg &&
                      a.guard->pred.text == b.guard->pred.text);
}

bool touches(const std::vector<int>& regs, const std::vector<int>& of) {
  for (int r : regs)
    if (std::find(of.begin(), of.end(), r) != of.end()) return true;
  return false;
}

std::vector<int> address_registers(const ir::Instruction& ins) {
  std::vector<int> out;
  if (ins.guard && ins.guard->pred.reg >= 0) out.push_back(ins.guard->pred.reg);
  for (const auto& op : ins.operands)
    if (op.kind == ir::OperandKind::Address)
      ir::for_each_leaf(op, [&](const ir::Operand& l) {
        if (l.kind == ir::OperandKind::Register && l.reg >= 0) out.push_back(l.reg);
      });
  return out;
}

bool is_barrier(const ir::Instruction& ins) {
  return (ins.opcode == "bar" || ins.opcode == "barrier") && !ins.has_modifier(".warp");
}

bool is_cp_async_sync(const ir::Instruction& ins) {
  return ins.opcode == "cp" && ins.has_modifier(".async") &&
         (ins.has_modifier(".commit_group") || ins.has_modifier(".wait_all") || ins.has_modifier(".wait_group"));
}

// A non-bulk cp.async into shared memory: [dst], [src], size.
bool is_plain_cp_async(const ir::Instruction& ins) {
  return ins.opcode == "cp" && ins.has_modifier(".async") && !ins.has_modifier(".bulk") && ins.operands.size() >= 3 &&
         ins.operands[0].kind == ir::OperandKind::Address;
}

bool synchronises(const ir::Instruction& ins) {
  using C = ir::InstrCategory;
  switch (ir::categorize(ins)) {
    case C::Atomic:
    case C::AsyncCopy:
    case C::Mbarrier:
    case C::BarrierFence:
    case C::Control:
      return true;
    default:
      break;
  }
  if (has_ordering_qualifier(ins)) return true;
  // bar.warp.sync orders memory among the warp's threads: a neighbour may read the bytes after it;
  // surface writes (sust, sured) may hit the global source.
  static const std::set<std::string> kOthers = {"call",  "setmaxnreg", "griddepcontrol", "trap", "exit", "ret",
                                                "bra",   "brx",        "pmevent",        "brkpt", "bar",  "barrier",
                                                "sust",  "sured"};
  return kOthers.count(ins.opcode) != 0;
}

// Byte ranges [a, a+n) and [b, b+m) off one base do not overlap.
bool disjoint(const ir::Operand& x, int n, const ir::Operand& y, int m) {
  if (x.items.size() != 1 || y.items.size() != 1 || n <= 0 || m <= 0) return false;
  const ir::Operand& bx = x.items[0];
  const ir::Operand& by = y.items[0];
  std::int64_t ox = x.has_offset ? x.offset : 0, oy = y.has_offset ? y.offset : 0;
  if (bx.kind == ir::OperandKind::Symbol && by.kind == ir::OperandKind::Symbol && bx.text == by.text) {
    ox += bx.offset;
    oy += by.offset;
  } else if (!(plain_register(bx) && plain_register(by) && bx.reg == by.reg)) {
    return false;
  }
  return ox + n <= oy || oy + m <= ox;
}

// True when `x` may access shared memory that overlaps the `bytes` at `dst` (the st.shared's
// address): any generic access, and any shared access not provably disjoint, i.e. not a plain
// ld/st.shared or cp.async into shared off the same base (`base_stable`: the base register is
// not redefined between the two) at non-overlapping offsets.
bool may_overlap_shared(const ir::Instruction& x, const ir::Operand& dst, int bytes, bool base_stable) {
  if (!ir::is_memory_access(x)) return false;
  const ir::MemoryAccess a = ir::describe_access(x);
  const bool shared = a.space == ir::MemSpace::Shared || (a.source && *a.source == ir::MemSpace::Shared);
  if (!shared && a.space != ir::MemSpace::SharedCluster && a.space != ir::MemSpace::Generic &&
      !(a.source && *a.source == ir::MemSpace::Generic))
    return false;
  if (!shared || !base_stable || a.source == ir::MemSpace::Shared) return true;
  const bool plain = x.opcode == "ld" || x.opcode == "st" || (x.opcode == "cp" && !x.has_modifier(".bulk"));
  if (!plain) return true;
  const ir::Operand* addr = nullptr;
  for (const auto& op : x.operands)
    if (op.kind == ir::OperandKind::Address) {
      addr = &op;
      break;
    }
  return !addr || !disjoint(dst, bytes, *addr, ir::access_width_bits(x) / 8);
}

bool defines_any(const ir::Instruction& x, const std::vector<int>& regs) {
  return !regs.empty() && touches(regs, ir::def_use(x).defs);
}

struct Candidate {
  std::size_t load = 0, store = 0, barrier = 0;
  int bytes = 0;
};

std::size_t index_of(const std::vector<ir::Statement>& body, std::uint32_t id) {
  for (std::size_t i = 0; i < body.size(); ++i)
    if (const auto* ins = std::get_if<ir::Instruction>(&body[i].node); ins && ins->id == id) return i;
  return body.size();
}

// Checks the load at body[i]; the candidate, or the reason it cannot be rewritten.
std::optional<Candidate> check(const std::vector<ir::Statement>& body, const ir::Function& f, std::size_t i,
                               const std::vector<int>& use_count, std::string* why) {
  const auto& ld = std::get<ir::Instruction>(body[i].node);
  const std::string id = "id " + std::to_string(ld.id);
  if (has_ordering_qualifier(ld) || ld.has_modifier(".L2::cache_hint") || ld.has_modifier(".lu") ||
      ld.has_modifier(".cv") || ld.has_modifier(".v8") || ld.operands.size() != 2) {
    *why = ld.full_opcode() + " (" + id + ") has an ordering or cache qualifier, or an operand, cp.async cannot take";
    return std::nullopt;
  }
  const std::vector<int> dest = data_registers(ld.operands[0]);
  const int type = ir::type_bits(ir::data_type(ld));
  const int bytes = type * ir::vector_lanes(ld) / 8;
  if (dest.empty() || (bytes != 4 && bytes != 8 && bytes != 16)) {
    *why = ld.full_opcode() + " (" + id + ") does not load 4, 8 or 16 bytes into registers";
    return std::nullopt;
  }
  for (int r : dest)
    if (f.registers[static_cast<std::size_t>(r)].width_bits != type ||
        std::count(dest.begin(), dest.end(), r) != 1 || use_count[static_cast<std::size_t>(r)] != 1) {
      *why = "the value loaded at " + id + " is used elsewhere than in one st.shared (or is widened on load)";
      return std::nullopt;
    }
  const std::vector<int> ld_addr = address_registers(ld);
  Candidate c;
  c.load = i;
  c.bytes = bytes;
  // The store: the only use, in the same basic block, with nothing between that the delayed
  // read of global memory could observe.
  std::vector<std::size_t> between;
  std::size_t j = i + 1;
  for (; j < body.size(); ++j) {
    if (const auto* d = std::get_if<ir::Directive>(&body[j].node); d && d->name == ".loc") continue;
    const auto* x = std::get_if<ir::Instruction>(&body[j].node);
    if (!x) {
      *why = "the value loaded at " + id + " is not stored to shared memory in the same basic block";
      return std::nullopt;
    }
    const ir::DefUse du = ir::def_use(*x);
    if (touches(dest, du.uses)) break;
    if (touches(dest, du.defs) || touches(ld_addr, du.defs)) {
      *why = "the load's destination, address or guard is redefined before its store (" + id + ")";
      return std::nullopt;
    }
    const bool writes = ir::is_memory_access(*x) && ir::describe_access(*x).direction != ir::MemDirection::Load;
    const ir::MemSpace space = ir::is_memory_access(*x) ? ir::describe_access(*x).space : ir::MemSpace::Local;
    if (synchronises(*x) || (writes && (space == ir::MemSpace::Global || space == ir::MemSpace::Generic))) {
      *why = x->full_opcode() + " (id " + std::to_string(x->id) + ") lies between the load at " + id +
             " and its store to shared memory";
      return std::nullopt;
    }
    between.push_back(j);
  }
  if (j == body.size()) {
    *why = "the value loaded at " + id + " is never stored";
    return std::nullopt;
  }
  const auto& st = std::get<ir::Instruction>(body[j].node);
  const bool shared = st.has_modifier(".shared") || st.has_modifier(".shared::cta");
  if (st.opcode != "st" || !shared || st.has_modifier(".async") || st.has_modifier(".bulk") ||
      has_ordering_qualifier(st) || st.operands.size() != 2 || st.operands[0].kind != ir::OperandKind::Address ||
      data_registers(st.operands[1]) != dest || ir::type_bits(ir::data_type(st)) * ir::vector_lanes(st) / 8 != bytes) {
    *why = "the value loaded at " + id + " goes to " + st.full_opcode() + " (id " + std::to_string(st.id) +
           "), not to a plain st.shared of the same " + std::to_string(bytes) + " bytes";
    return std::nullopt;
  }
  if (!same_guard(ld, st)) {
    *why = "the load at " + id + " and its st.shared (id " + std::to_string(st.id) + ") have different guards";
    return std::nullopt;
  }
  const ir::Operand& dst = st.operands[0];
  std::vector<int> dst_base;
  if (!dst.items.empty() && plain_register(dst.items[0])) dst_base.push_back(dst.items[0].reg);
  // Shared accesses before the store stay before the copy is issued; they must not touch its bytes.
  bool base_stable = true;
  for (auto k = between.rbegin(); k != between.rend(); ++k) {
    const auto& x = std::get<ir::Instruction>(body[*k].node);
    base_stable = base_stable && !defines_any(x, dst_base);
    if (may_overlap_shared(x, dst, bytes, base_stable)) {
      *why = x.full_opcode() + " (id " + std::to_string(x.id) + ") between the load at " + id +
             " and its store may access the same shared bytes";
      return std::nullopt;
    }
  }
  c.store = j;
  // The barrier: on the straight-line path after the store (fall-through past labels only), with
  // no access in between that could see the shared write early or change the global source.
  base_stable = true;
  for (std::size_t k = j + 1; k < body.size(); ++k) {
    const auto* x = std::get_if<ir::Instruction>(&body[k].node);
    if (!x) continue;  // labels (fall-through), .loc, declarations, scope braces
    if (is_barrier(*x)) {
      c.barrier = k;
      return c;
    }
    const std::string at = x->full_opcode() + " (id " + std::to_string(x->id) + ")";
    if (x->opcode == "ret" || x->opcode == "exit") {
      *why = "no bar.sync follows the st.shared at id " + std::to_string(st.id) + " before " + at;
      return std::nullopt;
    }
    if (is_cp_async_sync(*x)) continue;
    const bool copy = is_plain_cp_async(*x) && x->has_modifier(".shared") && x->has_modifier(".global");
    if (copy || ir::is_memory_access(*x)) {
      const ir::MemoryAccess a = ir::describe_access(*x);
      if (!copy && a.direction != ir::MemDirection::Load && a.space != ir::MemSpace::Shared &&
          a.space != ir::MemSpace::Local) {
        *why = at + " writes memory the copy at id " + std::to_string(ld.id) + " may still be reading before the barrier";
        return std::nullopt;
      }
      if (may_overlap_shared(*x, dst, bytes, base_stable)) {
        *why = at + " may access the shared bytes the copy at id " + std::to_string(ld.id) +
               " is still writing before the barrier";
        return std::nullopt;
      }
    } else if (synchronises(*x)) {
      *why = at + " comes between the st.shared at id " + std::to_string(st.id) +
             " and the next barrier (a bar.sync must follow on the straight-line path)";
      return std::nullopt;
    }
    base_stable = base_stable && !defines_any(*x, dst_base);
  }
  *why = "no bar.sync follows the st.shared at id " + std::to_string(st.id);
  return std::nullopt;
}

ir::Instruction sync_op(std::uint32_t id, const std::string& what) {
  ir::Instruction s;
  s.id = id;
  s.opcode = "cp";
  s.modifiers = {".async", what};
  return s;
}

}  // namespace

std::string AsyncCopyPass::name() const { return "async_copy"; }
std::string AsyncCopyPass::description() const {
  return "ld.global of 4/8/16 bytes whose value only feeds one st.shared before a barrier -> cp.async.ca (or .cg) "
         ".shared.global, with cp.async.commit_group and cp.async.wait_all before the barrier";
}
std::string AsyncCopyPass::legality() const {
  return "PTX ISA 7.0 and sm_80 or later; the load is ld.global(.nc) of 4, 8 or 16 bytes into registers as wide as "
         "its type, without .volatile/.relaxed/.acquire/.mmio/scope, .lu/.cv or .L2::cache_hint (other cache hints "
         "are dropped); each loaded register is read exactly once in the function, by a st.shared(::cta) of the same "
         "bytes in the same register order, with the same guard, in the same basic block; between load and store "
         "nothing redefines the loaded registers, the load's address or guard, writes memory, touches shared or "
         "generic memory, synchronises or transfers control; after the store, on the straight-line path (falling "
         "through labels, no branch, call, ret or exit), a bar/barrier (not bar.warp) follows with nothing between "
         "that writes global or generic memory, reads or writes shared or generic memory (other cp.asyncs to "
         "provably disjoint bytes of the same base excepted), fences or is atomic. The copy is issued where the "
         "store was, and commit_group + wait_all before the barrier complete it (and any earlier cp.async of the "
         "thread, which only waits for those earlier) before other threads can read it";
}
std::map<std::string, std::string> AsyncCopyPass::param_defaults() const {
  return {{"targets", ""}, {"cache16", "ca"}};
}

PassResult AsyncCopyPass::apply(ir::Module& m, const PassParams& params) const {
  CommonParams p;
  if (auto err = prepare(*this, params, &p)) return finish(0, *err);
  const std::string cache16 = p.values.at("cache16");
  if (cache16 != "ca" && cache16 != "cg") return finish(0, "cache16 must be ca or cg (got '" + cache16 + "')");
  if (auto err = require_isa(m, 70, 80, "cp.async")) return finish(0, *err);

  int changes = 0, seen = 0;
  std::string refusal;
  for (auto* f : m.functions()) {
    if (!f->has_body) continue;
    auto& body = f->body;
    std::vector<std::uint32_t> loads;
    for (const auto& st : body)
      if (const auto* ins = std::get_if<ir::Instruction>(&st.node); ins && is_global_load(*ins) && p.selected(*ins))
        loads.push_back(ins->id);
    seen += static_cast<int>(loads.size());
    if (loads.empty()) continue;
    // Reads per register. A rewrite removes only reads of its own load's registers (read once)
    // and of address registers (which only need to stay read), so the counts stay valid.
    std::vector<int> use_count(f->registers.size(), 0);
    for (const auto& st : body)
      if (const auto* ins = std::get_if<ir::Instruction>(&st.node))
        for (int u : ir::def_use(*ins).uses)
          if (u >= 0 && static_cast<std::size_t>(u) < use_count.size()) ++use_count[static_cast<std::size_t>(u)];
    // Latest first: an earlier load's walk to the barrier then sees the copies already made.
    for (auto it = loads.rbegin(); it != loads.rend(); ++it) {
      const std::size_t i = index_of(body, *it);
      std::string why;
      const auto c = check(body, *f, i, use_count, &why);
      if (!c) {
        if (refusal.empty()) refusal = why;
        continue;
      }
      const auto ld = std::get<ir::Instruction>(body[c->load].node);
      const auto& st = std::get<ir::Instruction>(body[c->store].node);
      ir::Instruction cp;
      cp.id = ld.id;
      cp.guard = ld.guard;
      cp.opcode = "cp";
      cp.modifiers = {".async", c->bytes == 16 && cache16 == "cg" ? ".cg" : ".ca", ".shared", ".global"};
      ir::Operand size;
      size.kind = ir::OperandKind::Immediate;
      size.text = std::to_string(c->bytes);
      cp.operands = {st.operands[0], ld.operands[1], size};
      body[c->store].node = std::move(cp);
      // commit + wait_all right before the barrier, unless the previous copy put them there.
      std::size_t prev = c->barrier;
      auto before = [&](std::size_t k) -> const ir::Instruction* {
        while (k-- > 0) {
          if (const auto* d = std::get_if<ir::Directive>(&body[k].node); d && d->name == ".loc") continue;
          prev = k;
          return std::get_if<ir::Instruction>(&body[k].node);
        }
        return nullptr;
      };
      const ir::Instruction* w = before(c->barrier);
      const ir::Instruction* cm = w ? before(prev) : nullptr;
      const bool present = w && cm && w->full_opcode() == "cp.async.wait_all" && !w->guard &&
                           cm->full_opcode() == "cp.async.commit_group" && !cm->guard;
      if (!present) {
        body.insert(body.begin() + static_cast<std::ptrdiff_t>(c->barrier),
                    ir::Statement{body[c->barrier].loc, sync_op(m.next_instruction_id++, ".wait_all")});
        body.insert(body.begin() + static_cast<std::ptrdiff_t>(c->barrier),
                    ir::Statement{body[c->barrier].loc, sync_op(m.next_instruction_id++, ".commit_group")});
      }
      body.erase(body.begin() + static_cast<std::ptrdiff_t>(c->load));
      ++changes;
    }
  }
  if (seen == 0) return finish(0, "no ld.global instruction" + std::string(p.targets ? " among the targets" : ""));
  return finish(changes, refusal);
}

}  // namespace ptxevo::mutators
