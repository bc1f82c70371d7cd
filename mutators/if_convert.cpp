#include "mutators/if_convert.hpp"

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>

#include "ir/analysis/instruction_mix.hpp"
#include "ir/def_use.hpp"
#include "mutators/pass_util.hpp"

namespace ptxevo::mutators {
namespace {

// Why `ins` may not run under a guard instead of behind a branch (or the reverse); "" when it
// may. For one thread a false guard and a skipping branch are the same; the difference is for
// instructions the whole warp or block must reach together, and for control flow itself.
std::string not_guardable(const ir::Instruction& ins) {
  using C = ir::InstrCategory;
  switch (ir::categorize(ins)) {
    case C::Control: return "transfers control";
    case C::BarrierFence: return "is a barrier or fence";
    case C::Atomic: return "is atomic";
    case C::AsyncCopy: return "is an async copy";
    case C::Mbarrier: return "is an mbarrier operation";
    case C::TensorCore: return "is a warp-collective tensor-core instruction";
    case C::Warp: return "is a warp-collective instruction";
    default: break;
  }
  static const std::set<std::string> kOthers = {"call", "setmaxnreg", "griddepcontrol", "trap",  "exit",    "ret",
                                                "bra",  "brx",        "pmevent",        "brkpt", "nanosleep"};
  if (kOthers.count(ins.opcode)) return "is a control or scheduling instruction";
  if (ins.has_modifier(".aligned")) return "is .aligned (all threads of the warp must execute it)";
  if (ins.opcode == "st" && (ins.has_modifier(".async") || ins.has_modifier(".bulk"))) return "is an async store";
  return "";
}

bool defines(const ir::Instruction& ins, int reg) {
  const ir::DefUse du = ir::def_use(ins);
  return std::find(du.defs.begin(), du.defs.end(), reg) != du.defs.end();
}

bool parse_count(const std::string& s, int lo, int hi, int* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && *out >= lo && *out <= hi;
}

// A register name not yet used in `f`, with `base` as its prefix.
std::string fresh_register(const ir::Function& f, const std::string& base) {
  for (int k = -1;; ++k) {
    const std::string n = k < 0 ? base : base + std::to_string(k);
    bool clash = false;
    for (const auto& r : f.registers) clash = clash || r.name == n;
    if (!clash) return n;
  }
}

// How many times `label` is named: branch operands, call targets, .branchtargets lists.
int label_references(const ir::Function& f, const std::string& label) {
  int n = 0;
  for (const auto& st : f.body) {
    if (const auto* ins = std::get_if<ir::Instruction>(&st.node))
      ir::for_each_leaf(*ins, [&](const ir::Operand& o) { n += o.kind == ir::OperandKind::Symbol && o.text == label; });
    if (const auto* d = std::get_if<ir::Directive>(&st.node))
      for (const auto& a : d->args) n += a == label || a == label + "," || a == label + ";";
  }
  return n;
}

std::string describe_at(const ir::Instruction& ins) {
  return ins.full_opcode() + " (id " + std::to_string(ins.id) + ")";
}

}  // namespace

// ---- if_convert ---------------------------------------------------------------------------

std::string IfConvertPass::name() const { return "if_convert"; }
std::string IfConvertPass::description() const {
  return "a short forward `@p bra L;` -> the instructions it skips predicated on !p, the branch removed (an "
         "if/else diamond -> both sides predicated)";
}
std::string IfConvertPass::legality() const {
  return "the branch is a guarded bra (not brx) whose target label L comes after at most `max_instructions` "
         "instructions with no other label, declaration, scope brace or directive (other than .loc) in between, so "
         "the skipped instructions are entered only by falling through the branch; or the branch opens an if/else "
         "diamond `@p bra L; A; bra J; L: B; J:` whose A and B together are at most `max_instructions`, with no "
         "other label in A or B and L's place named by no other branch (B then runs under @p, A under @!p, and "
         "both branches go); none of them transfers control "
         "(bra, call, ret, exit, trap), is a barrier, fence, atomic, async copy, mbarrier, warp-collective, "
         "tensor-core or .aligned instruction (those must be reached by the warp together), and none redefines the "
         "branch predicate. Each then runs under @!p (the opposite of the branch's guard): for one thread a false "
         "guard and a skipping branch are the same, stores and loads included. An instruction that already has a "
         "guard @q gets a fresh predicate `and.pred %c, q, !p` computed right before it (combine_guards=true), or "
         "the branch is refused (combine_guards=false)";
}
std::map<std::string, std::string> IfConvertPass::param_defaults() const {
  return {{"targets", ""}, {"max_instructions", "4"}, {"combine_guards", "true"}};
}

PassResult IfConvertPass::apply(ir::Module& m, const PassParams& params) const {
  CommonParams p;
  if (auto err = prepare(*this, params, &p)) return finish(0, *err);
  int k_max = 0;
  if (!parse_count(p.values.at("max_instructions"), 1, 64, &k_max))
    return finish(0, "max_instructions must be an integer between 1 and 64 (got '" + p.values.at("max_instructions") +
                         "')");
  const std::string& cg = p.values.at("combine_guards");
  if (cg != "true" && cg != "false") return finish(0, "combine_guards must be true or false (got '" + cg + "')");
  const bool combine = cg == "true";

  int changes = 0, seen = 0;
  std::string refusal;
  for (auto* f : m.functions()) {
    if (!f->has_body) continue;
    auto& body = f->body;
    int combine_reg = -1;  // the function's predicate for combined guards, made on first use
    std::string combine_name;
    for (std::size_t i = 0; i < body.size(); ++i) {
      const auto* br = std::get_if<ir::Instruction>(&body[i].node);
      if (!br || br->opcode != "bra" || !p.selected(*br)) continue;
      if (!br->guard || br->operands.size() != 1 || br->operands[0].kind != ir::OperandKind::Symbol) continue;
      ++seen;
      const std::string target = br->operands[0].text;
      const std::string at = "the branch at id " + std::to_string(br->id);
      const int pred = br->guard->pred.reg;
      std::string why;
      std::vector<std::size_t> then_part, else_part;  // run under !p, under p
      std::optional<std::size_t> jump;                // `bra J;` ending the then part of a diamond
      // Instructions from j up to the next label; false (why set) when something cannot be predicated.
      auto collect = [&](std::size_t& j, std::vector<std::size_t>& out, bool allow_jump) {
        for (; j < body.size(); ++j) {
          if (const auto* d = std::get_if<ir::Directive>(&body[j].node)) {
            if (d->name == ".loc") continue;
            why = at + " skips a " + d->name + " directive";
            return false;
          }
          if (std::holds_alternative<ir::Label>(body[j].node)) return true;
          const auto* x = std::get_if<ir::Instruction>(&body[j].node);
          if (!x) {
            why = at + " skips a declaration or scope brace";
            return false;
          }
          if (allow_jump && x->opcode == "bra" && !x->guard && x->operands.size() == 1 &&
              x->operands[0].kind == ir::OperandKind::Symbol) {
            jump = j++;
            return true;  // the caller checks that the branch target follows
          }
          out.push_back(j);
          if (static_cast<int>(then_part.size() + else_part.size()) > k_max) {
            why = at + " skips more than max_instructions=" + std::to_string(k_max) + " instructions";
            return false;
          }
          if (const std::string g = not_guardable(*x); !g.empty()) {
            why = describe_at(*x) + " behind " + at + " cannot be predicated: it " + g;
            return false;
          }
          if (pred >= 0 && defines(*x, pred)) {
            why = describe_at(*x) + " redefines " + br->guard->pred.text + ", the predicate of " + at;
            return false;
          }
          if (x->guard && !combine) {
            why = describe_at(*x) + " behind " + at + " already has a guard (combine_guards=false)";
            return false;
          }
        }
        why = at + " is not a short forward branch: " + target + " does not follow it";
        return false;
      };
      std::size_t j = i + 1;
      bool ok = collect(j, then_part, true);
      std::vector<std::string> run;  // the labels at j (one place)
      std::size_t after_run = j;
      auto labels_at = [&](std::size_t from) {
        run.clear();
        for (after_run = from; after_run < body.size(); ++after_run) {
          if (const auto* l = std::get_if<ir::Label>(&body[after_run].node)) {
            run.push_back(l->name);
            continue;
          }
          if (const auto* d = std::get_if<ir::Directive>(&body[after_run].node); d && d->name == ".loc") continue;
          break;
        }
      };
      auto in_run = [&](const std::string& n) { return std::find(run.begin(), run.end(), n) != run.end(); };
      if (ok) {
        labels_at(j);
        if (!in_run(target)) {
          why = jump ? describe_at(std::get<ir::Instruction>(body[*jump].node)) + " behind " + at +
                           " cannot be predicated: it transfers control"
                     : at + " is not a short forward branch: a label other than " + target + " comes first";
          ok = false;
        }
      }
      if (ok && jump) {
        // A diamond `@p bra L; A; bra J; L: B; J:`: B runs under p. L must be entered from this
        // branch only (no other label shares its place), or B would lose its other way in.
        const std::string join = std::get<ir::Instruction>(body[*jump].node).operands[0].text;
        if (!in_run(join)) {
          for (const auto& l : run)
            if (label_references(*f, l) != (l == target ? 1 : 0)) {
              why = "label " + l + " after " + at + " is also reached from elsewhere, so its code cannot be predicated";
              ok = false;
            }
          std::size_t k = after_run;
          ok = ok && collect(k, else_part, false);
          if (ok) {
            labels_at(k);
            if (!in_run(join)) {
              why = at + " is not a short if/else: " + join + " does not follow the else part";
              ok = false;
            }
          }
        }
      }
      if (ok && then_part.empty() && else_part.empty()) {
        why = at + " skips no instruction";
        ok = false;
      }
      if (!ok) {
        if (refusal.empty()) refusal = why;
        continue;
      }
      const ir::Guard branch = *br->guard;
      // Puts body[idx] under `g`, or under `g && its own guard` through a fresh and.pred.
      auto predicate = [&](std::size_t idx, bool negated) {
        auto& x = std::get<ir::Instruction>(body[idx].node);
        if (!x.guard) {
          x.guard = ir::Guard{negated, branch.pred};
          return;
        }
        if (combine_reg < 0) {
          combine_name = fresh_register(*f, "%ptxevo_ifc");
          combine_reg = static_cast<int>(f->registers.size());
          f->registers.push_back({combine_name, ir::RegClass::Pred, 1});
        }
        ir::Operand c;
        c.kind = ir::OperandKind::Register;
        c.text = combine_name;
        c.reg = combine_reg;
        ir::Instruction both;
        both.id = m.next_instruction_id++;
        both.opcode = "and";
        both.modifiers = {".pred"};
        ir::Operand q = x.guard->pred, np = branch.pred;
        q.negated = x.guard->negated;
        np.negated = negated;
        both.operands = {c, q, np};
        x.guard = ir::Guard{false, c};
        body.insert(body.begin() + static_cast<std::ptrdiff_t>(idx), ir::Statement{body[idx].loc, both});
      };
      // Back to front, so the indices still to visit stay valid while and.preds go in.
      for (std::size_t r = else_part.size(); r-- > 0;) predicate(else_part[r], branch.negated);
      if (jump) body.erase(body.begin() + static_cast<std::ptrdiff_t>(*jump));
      for (std::size_t r = then_part.size(); r-- > 0;) predicate(then_part[r], !branch.negated);
      body.erase(body.begin() + static_cast<std::ptrdiff_t>(i));
      --i;  // the loop's ++i lands on the first statement that followed the branch
      ++changes;
    }
    if (combine_reg >= 0) {
      ir::RegDecl decl;
      decl.type = {".pred"};
      decl.names.push_back({combine_name, -1});
      body.insert(body.begin(), ir::Statement{{}, std::move(decl)});
    }
  }
  if (seen == 0) return finish(0, "no conditional bra" + std::string(p.targets ? " among the targets" : ""));
  return finish(changes, refusal);
}

// ---- if_unconvert -------------------------------------------------------------------------

std::string IfUnconvertPass::name() const { return "if_unconvert"; }
std::string IfUnconvertPass::description() const {
  return "a run of consecutive instructions under one guard @p -> `@!p bra L;`, the instructions unguarded, `L:`";
}
std::string IfUnconvertPass::legality() const {
  return "at least `min_instructions` consecutive instructions (only .loc directives between them) carry the same "
         "guard @p (same register, same negation); none transfers control, is a barrier, fence, atomic, async "
         "copy, mbarrier, warp-collective, tensor-core or .aligned instruction; none but the last redefines p (the "
         "run ends at an instruction that does, since later guards would read the new value). They then run behind "
         "`@!p bra L;` with a fresh label L after them: for one thread a skipping branch and a false guard are the "
         "same";
}
std::map<std::string, std::string> IfUnconvertPass::param_defaults() const {
  return {{"targets", ""}, {"min_instructions", "2"}};
}

PassResult IfUnconvertPass::apply(ir::Module& m, const PassParams& params) const {
  CommonParams p;
  if (auto err = prepare(*this, params, &p)) return finish(0, *err);
  int min_run = 0;
  if (!parse_count(p.values.at("min_instructions"), 1, 1000, &min_run))
    return finish(0, "min_instructions must be an integer between 1 and 1000 (got '" + p.values.at("min_instructions") +
                         "')");
  int changes = 0, guarded = 0, longest = 0;
  std::string refusal;
  for (auto* f : m.functions()) {
    if (!f->has_body) continue;
    auto& body = f->body;
    std::set<std::string> labels;
    for (const auto& st : body)
      if (const auto* l = std::get_if<ir::Label>(&st.node)) labels.insert(l->name);
    int next_label = 0;
    for (std::size_t i = 0; i < body.size(); ++i) {
      const auto* x = std::get_if<ir::Instruction>(&body[i].node);
      if (!x || !x->guard || !p.selected(*x)) continue;
      ++guarded;
      if (const std::string g = not_guardable(*x); !g.empty()) {
        if (refusal.empty() && x->opcode != "bra") refusal = describe_at(*x) + " cannot go behind a branch: it " + g;
        continue;
      }
      const ir::Guard g = *x->guard;
      std::vector<std::size_t> run;
      std::size_t end = i;  // one past the last statement of the run
      for (std::size_t j = i; j < body.size(); ++j) {
        if (const auto* d = std::get_if<ir::Directive>(&body[j].node); d && d->name == ".loc" && !run.empty()) continue;
        const auto* y = std::get_if<ir::Instruction>(&body[j].node);
        if (!y || !y->guard || y->guard->negated != g.negated || y->guard->pred.reg != g.pred.reg ||
            y->guard->pred.text != g.pred.text || !not_guardable(*y).empty())
          break;
        run.push_back(j);
        end = j + 1;
        if (g.pred.reg >= 0 && defines(*y, g.pred.reg)) break;
      }
      longest = std::max(longest, static_cast<int>(run.size()));
      if (static_cast<int>(run.size()) < min_run) {
        i = end - 1;
        continue;
      }
      std::string label;
      do {
        label = "$ptxevo_skip" + std::to_string(next_label++);
      } while (labels.count(label));
      labels.insert(label);
      for (std::size_t r : run) std::get<ir::Instruction>(body[r].node).guard.reset();
      ir::Instruction br;
      br.id = m.next_instruction_id++;
      br.guard = g;
      br.guard->negated = !g.negated;
      br.opcode = "bra";
      ir::Operand t;
      t.kind = ir::OperandKind::Symbol;
      t.text = label;
      br.operands = {t};
      body.insert(body.begin() + static_cast<std::ptrdiff_t>(end), ir::Statement{{}, ir::Label{label}});
      body.insert(body.begin() + static_cast<std::ptrdiff_t>(i), ir::Statement{body[i].loc, std::move(br)});
      i = end + 1;  // the label
      ++changes;
    }
  }
  if (guarded == 0) return finish(0, "no guarded instruction" + std::string(p.targets ? " among the targets" : ""));
  if (refusal.empty() || longest > 0)
    refusal = "no run of min_instructions=" + std::to_string(min_run) +
              " consecutive instructions under one guard (longest: " + std::to_string(longest) + ")" +
              (refusal.empty() ? "" : "; " + refusal);
  return finish(changes, refusal);
}

}  // namespace ptxevo::mutators
