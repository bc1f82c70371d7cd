#include "mutators/widen_vector.hpp"

#include <algorithm>
#include <charconv>
#include <set>

#include "ir/analysis/instruction_mix.hpp"
#include "ir/analysis/memory_summary.hpp"
#include "ir/analysis/type_width.hpp"
#include "ir/def_use.hpp"
#include "ir/printer.hpp"
#include "mutators/alignment.hpp"
#include "mutators/pass_util.hpp"

namespace ptxevo::mutators {
namespace {

const std::set<std::string> kTypes = {".b8",  ".b16", ".b32", ".b64", ".u8",  ".u16", ".u32", ".u64",
                                      ".s8",  ".s16", ".s32", ".s64", ".f32", ".f64"};

bool plain_register(const ir::Operand& o) {
  return o.kind == ir::OperandKind::Register && o.reg >= 0 && o.text.find('.') == std::string::npos;
}

// One ld/st that may join a vector: what must match between members, and where it points.
struct Access {
  bool load = false;
  ir::MemSpace space = ir::MemSpace::Global;
  std::string key;                  // opcode + modifiers without .v2 + guard + base
  int lanes = 1;                    // 1 or 2
  int elem_bytes = 0;
  std::int64_t offset = 0;
  std::vector<ir::Operand> data;    // destination registers (ld) or values (st), flattened
  std::vector<int> base_regs;       // the base register and the guard predicate
  int reg_width = 0;                // bits of the data registers (0: immediates only)
};

std::optional<Access> describe(const ir::Function& f, const ir::Instruction& ins) {
  if (ins.opcode != "ld" && ins.opcode != "st") return std::nullopt;
  Access a;
  a.load = ins.opcode == "ld";
  const bool global = ins.has_modifier(".global");
  const bool shared = ins.has_modifier(".shared") || ins.has_modifier(".shared::cta");
  if (global == shared) return std::nullopt;
  a.space = global ? ir::MemSpace::Global : ir::MemSpace::Shared;
  if (has_ordering_qualifier(ins) || ins.has_modifier(".L2::cache_hint") || ins.has_modifier(".async") ||
      ins.has_modifier(".bulk") || ins.has_modifier(".v4") || ins.has_modifier(".v8") || ins.operands.size() != 2)
    return std::nullopt;
  a.lanes = ins.has_modifier(".v2") ? 2 : 1;
  const std::string type(ir::data_type(ins));
  if (!kTypes.count(type)) return std::nullopt;
  a.elem_bytes = ir::type_bits(type) / 8;
  const ir::Operand& addr = ins.operands[a.load ? 1 : 0];
  const ir::Operand& data = ins.operands[a.load ? 0 : 1];
  if (addr.kind != ir::OperandKind::Address || addr.items.size() != 1) return std::nullopt;
  const ir::Operand& base = addr.items[0];
  if (!plain_register(base) && base.kind != ir::OperandKind::Symbol) return std::nullopt;
  auto data_ok = [&](const ir::Operand& o) {
    return plain_register(o) || (!a.load && o.kind == ir::OperandKind::Immediate);
  };
  if (a.lanes == 1) {
    if (!data_ok(data)) return std::nullopt;
    a.data = {data};
  } else {
    if (data.kind != ir::OperandKind::Vector || data.items.size() != 2) return std::nullopt;
    for (const auto& it : data.items)
      if (!data_ok(it)) return std::nullopt;
    a.data = data.items;
  }
  // The registers of one vector must be alike (immediates in stores fit any width).
  int width = 0;
  for (const auto& o : a.data) {
    if (o.kind != ir::OperandKind::Register) continue;
    const int w = f.registers[static_cast<std::size_t>(o.reg)].width_bits;
    if (width != 0 && w != width) return std::nullopt;
    width = w;
  }
  a.offset = base.kind == ir::OperandKind::Symbol ? base.offset : 0;
  if (addr.has_offset) a.offset += addr.offset;
  a.reg_width = width;
  a.key = ins.opcode;
  for (const auto& mod : ins.modifiers)
    if (mod != ".v2") a.key += mod;
  if (ins.guard)
    a.key += (ins.guard->negated ? " @!" : " @") + ins.guard->pred.text + "#" + std::to_string(ins.guard->pred.reg);
  if (base.kind == ir::OperandKind::Symbol) {
    a.key += " [" + base.text;
  } else {
    a.key += " [#" + std::to_string(base.reg);
    a.base_regs.push_back(base.reg);
  }
  if (ins.guard && ins.guard->pred.reg >= 0) a.base_regs.push_back(ins.guard->pred.reg);
  return a;
}

bool meets(const std::vector<int>& regs, const std::set<int>& s) {
  for (int r : regs)
    if (s.count(r)) return true;
  return false;
}

std::vector<int> data_regs(const Access& a) {
  std::vector<int> out;
  for (const auto& o : a.data)
    if (o.kind == ir::OperandKind::Register) out.push_back(o.reg);
  return out;
}

// Instructions no access may be moved across: control transfer, barriers (bar.warp.sync too: it
// orders memory among the warp's threads), fences, atomics, async copies, surface writes,
// memory-ordering accesses and the other synchronising opcodes.
bool fences_motion(const ir::Instruction& ins) {
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
  static const std::set<std::string> kOthers = {"call",    "setmaxnreg", "wgmma",     "tcgen05", "griddepcontrol",
                                                "trap",    "exit",       "ret",       "bra",     "brx",
                                                "pmevent", "brkpt",      "nanosleep", "bar",     "barrier",
                                                "sust",    "sured"};
  return kOthers.count(ins.opcode) != 0;
}

// Can a load of `a` (resp. store) move across `ins` as far as memory is concerned?
bool memory_blocks(const ir::Instruction& ins, const Access& a) {
  if (!ir::is_memory_access(ins)) return false;
  const ir::MemoryAccess x = ir::describe_access(ins);
  if (x.direction != ir::MemDirection::Load) return true;  // any write may alias: never cross it
  if (a.load) return false;                                // loads commute with loads
  // A store may not move past a load that may read what it writes: same space or generic.
  const bool same = x.space == ir::MemSpace::Generic || x.space == a.space ||
                    (a.space == ir::MemSpace::Shared && x.space == ir::MemSpace::SharedCluster);
  return same;
}

struct Chain {
  std::vector<std::size_t> members;  // statement indices, first = the access the chain starts at
  std::vector<Access> accesses;
  std::string stop;                  // why it ended before a full vector, when a partner was blocked
};

Chain find_chain(const ir::Function& f, std::size_t start, const Access& first, int window, int max_lanes) {
  const auto& body = f.body;
  Chain c;
  c.members.push_back(start);
  c.accesses.push_back(first);
  const auto& x0 = std::get<ir::Instruction>(body[start].node);
  std::set<int> member_regs;  // ld: registers the members define; st: registers their values read
  for (int r : data_regs(first)) member_regs.insert(r);
  if (first.load && meets(first.base_regs, member_regs)) return c;  // the load overwrites its own base
  std::set<int> defs_between, uses_between;
  int lanes = first.lanes, seen = 0, width = first.reg_width;
  std::int64_t next = first.offset + first.lanes * first.elem_bytes;
  for (std::size_t j = start + 1; j < body.size() && seen < window && lanes < max_lanes; ++j) {
    if (const auto* d = std::get_if<ir::Directive>(&body[j].node)) {
      if (d->name == ".loc") continue;
      break;
    }
    const auto* y = std::get_if<ir::Instruction>(&body[j].node);
    if (!y) break;  // label, scope brace, declaration: another basic block or scope
    ++seen;
    const auto acc = describe(f, *y);
    const ir::DefUse du = ir::def_use(*y);
    if (acc && acc->key == first.key && acc->lanes == first.lanes && acc->offset == next &&
        (acc->reg_width == 0 || width == 0 || acc->reg_width == width)) {
      if (width == 0) width = acc->reg_width;
      const std::vector<int> mine = data_regs(*acc);
      bool ok = !meets(first.base_regs, defs_between);
      if (first.load)
        ok = ok && !meets(mine, defs_between) && !meets(mine, uses_between) && !meets(mine, member_regs) &&
             !meets(first.base_regs, std::set<int>(mine.begin(), mine.end()));
      else
        ok = ok && !meets(std::vector<int>(member_regs.begin(), member_regs.end()), defs_between);
      if (!ok) {
        c.stop = "the access at id " + std::to_string(y->id) + " cannot join the one at id " + std::to_string(x0.id) +
                 (first.load ? ": its destination is read or written, or the address or guard redefined, in between"
                             : ": a stored value, the address or the guard is redefined in between");
        break;
      }
      c.members.push_back(j);
      c.accesses.push_back(*acc);
      for (int r : mine) member_regs.insert(r);
      lanes += acc->lanes;
      next += acc->lanes * acc->elem_bytes;
      continue;
    }
    if (fences_motion(*y) || memory_blocks(*y, first)) break;
    for (int r : du.defs) defs_between.insert(r);
    for (int r : du.uses) uses_between.insert(r);
  }
  return c;
}

ir::Instruction merged(const std::vector<const ir::Instruction*>& parts, const std::vector<Access>& accesses,
                       int lanes) {
  ir::Instruction v = *parts.front();
  const std::string vec = lanes == 4 ? ".v4" : ".v2";
  auto it = std::find(v.modifiers.begin(), v.modifiers.end(), ".v2");
  if (it != v.modifiers.end()) {
    *it = vec;
  } else {
    std::size_t pos = v.modifiers.size();
    for (std::size_t i = 0; i < v.modifiers.size(); ++i)
      if (ir::type_bits(v.modifiers[i]) > 0) pos = i;
    v.modifiers.insert(v.modifiers.begin() + static_cast<std::ptrdiff_t>(pos), vec);
  }
  ir::Operand data;
  data.kind = ir::OperandKind::Vector;
  for (const auto& a : accesses)
    for (const auto& o : a.data) data.items.push_back(o);
  v.operands[accesses.front().load ? 0 : 1] = std::move(data);
  return v;
}

int parse_int(const std::string& s, int lo, int hi, int* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && *out >= lo && *out <= hi;
}

}  // namespace

std::string WidenVectorPass::name() const { return "widen_vector"; }
std::string WidenVectorPass::description() const {
  return "adjacent scalar or .v2 ld/st to .global or .shared from one base at consecutive constant offsets -> one "
         ".v2/.v4 access, when the IR proves the vector's alignment";
}
std::string WidenVectorPass::legality() const {
  return "the accesses are all ld or all st, to .global or .shared(::cta), with identical modifiers (type, cache "
         "operators, .nc) apart from .v2, no .volatile/.relaxed/.acquire/.release/.mmio/scope, no .L2::cache_hint, the "
         "same guard, the same base register or variable and offsets o, o+w, o+2w, ... (w the bytes of one access); "
         "they lie in one basic block (no label, scope brace or declaration between), within `window` instructions; "
         "nothing between them transfers control, is a barrier (bar.warp.sync included), fence, atomic, async copy, "
         "call, surface write or ordered access, writes memory, or (for stores) reads the same state space or "
         "generic memory; nothing between them "
         "redefines the base or guard; for loads nothing between reads or writes a later load's destination and no "
         "load overwrites the base (the vector load takes the first load's place), for stores nothing between "
         "redefines an earlier store's value (the vector store takes the last store's place). The vector is at most "
         "`max_bytes` (8 or 16) and 4 lanes, and base + o is proven a multiple of its size: the base's alignment "
         "comes from a kernel parameter declared .ptr .align N (through ld.param and cvta), or a variable's .align "
         "(or element size), carried through mov, cvta, integer cvt, add/sub/and/or/shl/mul.lo/mul.wide/mad.lo "
         "with constants or other aligned values (a register read before any write is assumed not to happen); "
         "otherwise the accesses stay as they are";
}
std::map<std::string, std::string> WidenVectorPass::param_defaults() const {
  return {{"targets", ""}, {"access", "both"}, {"max_bytes", "16"}, {"window", "16"}};
}

PassResult WidenVectorPass::apply(ir::Module& m, const PassParams& params) const {
  CommonParams p;
  if (auto err = prepare(*this, params, &p)) return finish(0, *err);
  const std::string access = p.values.at("access");
  if (access != "both" && access != "load" && access != "store")
    return finish(0, "access must be both, load or store (got '" + access + "')");
  int max_bytes = 0, window = 0;
  if (!parse_int(p.values.at("max_bytes"), 8, 16, &max_bytes) || (max_bytes != 8 && max_bytes != 16))
    return finish(0, "max_bytes must be 8 or 16 (got '" + p.values.at("max_bytes") + "')");
  if (!parse_int(p.values.at("window"), 1, 256, &window))
    return finish(0, "window must be an integer between 1 and 256 (got '" + p.values.at("window") + "')");

  int changes = 0, eligible = 0;
  std::string refusal;
  auto note = [&](const std::string& why) {
    if (refusal.empty()) refusal = why;
  };
  for (auto* f : m.functions()) {
    if (!f->has_body) continue;
    const AlignmentInfo align(m, *f);
    auto& body = f->body;
    for (std::size_t i = 0, next = 1; i < body.size(); i = next++) {
      const auto* ins = std::get_if<ir::Instruction>(&body[i].node);
      if (!ins || !p.selected(*ins)) continue;
      const auto a = describe(*f, *ins);
      if (!a || (access == "load" && !a->load) || (access == "store" && a->load)) continue;
      ++eligible;
      const int max_lanes = std::min(4, max_bytes / a->elem_bytes);
      if (max_lanes <= a->lanes) continue;
      const Chain c = find_chain(*f, i, *a, window, max_lanes);
      if (c.members.size() < 2) {
        if (!c.stop.empty()) note(c.stop);
        continue;
      }
      // The widest vector the chain fills whose alignment is proven.
      std::size_t take = 0;
      int lanes = 0;
      const std::uint64_t known = align.of_address(ins->operands[a->load ? 1 : 0]);
      for (int want : {4, 2}) {
        if (want > max_lanes || want <= a->lanes) continue;
        const std::size_t n = static_cast<std::size_t>(want / a->lanes);
        if (c.members.size() < n) continue;
        const std::uint64_t need = static_cast<std::uint64_t>(want * a->elem_bytes);
        if (known >= need) {
          take = n;
          lanes = want;
          break;
        }
        const ir::Operand& addr = ins->operands[a->load ? 1 : 0];
        std::string base_note;
        if (addr.items[0].kind == ir::OperandKind::Register)
          base_note = "base " + addr.items[0].text + " is known only " + std::to_string(align.of(addr.items[0])) +
                      "-byte aligned";
        else
          base_note = addr.items[0].text + " is declared only " + std::to_string(align.of_symbol(addr.items[0].text)) +
                      "-byte aligned";
        note("cannot prove " + ir::print_operand(addr) + " (id " + std::to_string(ins->id) + ") is " +
             std::to_string(need) + "-byte aligned for " + (want == 4 ? ".v4" : ".v2") + ": " + base_note +
             (addr.has_offset ? " with offset " + std::to_string(addr.offset) : "") +
             " (declare the pointer parameter .ptr .global .align N, or the variable .align N)");
      }
      if (take == 0) continue;
      std::vector<const ir::Instruction*> parts;
      std::vector<Access> accs(c.accesses.begin(), c.accesses.begin() + static_cast<std::ptrdiff_t>(take));
      for (std::size_t k = 0; k < take; ++k) parts.push_back(&std::get<ir::Instruction>(body[c.members[k]].node));
      ir::Instruction v = merged(parts, accs, lanes);
      // Loads take the first load's place, stores the last store's.
      const std::size_t at = a->load ? c.members.front() : c.members[take - 1];
      body[at].node = std::move(v);
      for (std::size_t k = take; k-- > 0;)
        if (c.members[k] != at) body.erase(body.begin() + static_cast<std::ptrdiff_t>(c.members[k]));
      ++changes;
      if (!a->load) next = i;  // the statement now at i followed the first store: look at it too
    }
  }
  if (eligible == 0)
    return finish(0, "no scalar or .v2 ld/st to .global or .shared" + std::string(p.targets ? " among the targets" : "") +
                         " that could join a vector");
  return finish(changes, refusal.empty() ? "no two ld/st of the same kind, base, guard and modifiers at consecutive "
                                           "offsets within one basic block"
                                         : refusal);
}

}  // namespace ptxevo::mutators
