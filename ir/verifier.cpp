#include "ir/verifier.hpp"

#include <unordered_set>

#include "ir/def_use.hpp"

namespace ptxevo::ir {
namespace {

void verify_function(const Function& f, const std::unordered_set<std::string>& module_names,
                     std::vector<Diagnostic>& out) {
  std::unordered_set<std::string> labels;
  std::unordered_set<std::string> locals;
  for (const auto* list : {&f.params, &f.returns})
    for (const auto& p : *list) locals.insert(p.name);
  for (const auto& st : f.body) {
    if (const auto* l = std::get_if<Label>(&st.node)) {
      // Labels inside inline-asm scopes may repeat across scopes; ptxas itself rejects true clashes.
      labels.insert(l->name);
    } else if (const auto* d = std::get_if<Directive>(&st.node); d && !d->label.empty()) {
      labels.insert(d->label);
    } else if (const auto* v = std::get_if<VarDecl>(&st.node)) {
      locals.insert(v->name);
    }
  }
  auto known = [&](const std::string& n) { return labels.count(n) || locals.count(n) || module_names.count(n); };
  for (const auto& st : f.body) {
    const auto* ins = std::get_if<Instruction>(&st.node);
    if (!ins) continue;
    if (ins->guard) {
      const Operand& g = ins->guard->pred;
      if (g.kind != OperandKind::Register || g.reg < 0) {
        out.push_back({st.loc, "guard '" + g.text + "' is not a declared predicate register"});
      } else if (f.registers[static_cast<std::size_t>(g.reg)].cls != RegClass::Pred) {
        out.push_back({st.loc, "guard '" + g.text + "' is not a predicate register"});
      }
    }
    const bool is_branch = ins->opcode == "bra";
    for_each_leaf(*ins, [&](const Operand& leaf) {
      if (leaf.kind == OperandKind::Register && leaf.reg < 0) {
        out.push_back({st.loc, "use of undeclared register '" + leaf.text + "' in '" + ins->full_opcode() + "'"});
      } else if (leaf.kind == OperandKind::Symbol && !known(leaf.text)) {
        out.push_back({st.loc, std::string(is_branch ? "branch to undefined label '" : "undefined name '") +
                                   leaf.text + "' in '" + ins->full_opcode() + "'"});
      }
    });
    if (is_branch && !ins->operands.empty() && ins->operands.back().kind == OperandKind::Symbol &&
        !labels.count(ins->operands.back().text) && known(ins->operands.back().text)) {
      out.push_back({st.loc, "branch target '" + ins->operands.back().text + "' is not a label"});
    }
  }
}

}  // namespace

std::vector<Diagnostic> verify(const Module& m) {
  std::vector<Diagnostic> out;
  bool has_version = false;
  bool has_target = false;
  std::unordered_set<std::string> module_names;
  for (const auto& it : m.items) {
    if (const auto* d = std::get_if<ModuleDirective>(&it.node)) {
      has_version |= d->name == ".version";
      has_target |= d->name == ".target";
    } else if (const auto* v = std::get_if<VarDecl>(&it.node)) {
      module_names.insert(v->name);
    } else if (const auto* f = std::get_if<Function>(&it.node)) {
      module_names.insert(f->name);
    } else if (const auto* s = std::get_if<Section>(&it.node)) {
      module_names.insert(s->name);
      for (const auto& item : s->items)
        if (!item.label.empty()) module_names.insert(item.label);
    }
  }
  if (!has_version) out.push_back({{1, 1}, "missing .version directive"});
  if (!has_target) out.push_back({{1, 1}, "missing .target directive"});
  for (const auto& it : m.items)
    if (const auto* f = std::get_if<Function>(&it.node); f && f->has_body) verify_function(*f, module_names, out);
  return out;
}

}  // namespace ptxevo::ir
