#include "exporter/ptx_compare.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "exporter/inline_ptx.hpp"

namespace ptxevo::exporter {

namespace {

// Numbers names in order of first appearance, per kind.
struct Canon {
  std::map<std::string, std::string> regs, labels, symbols;
  std::set<std::string> label_names;
  std::map<std::string, std::size_t> params;

  static std::string number(std::map<std::string, std::string>& m, const std::string& key, const char* prefix) {
    auto it = m.find(key);
    if (it != m.end()) return it->second;
    return m[key] = prefix + std::to_string(m.size());
  }

  std::string operand(const ir::Operand& op) {
    std::string s = op.negated ? "!" : "";
    switch (op.kind) {
      case ir::OperandKind::Register: return s + number(regs, op.text, "%");
      case ir::OperandKind::Symbol: {
        if (label_names.count(op.text)) s += number(labels, op.text, "L");
        else if (auto p = params.find(op.text); p != params.end()) s += "P" + std::to_string(p->second);
        else s += number(symbols, op.text, "S");
        if (op.has_offset) s += "+" + std::to_string(op.offset);
        return s;
      }
      case ir::OperandKind::Special:
      case ir::OperandKind::Immediate:
      case ir::OperandKind::Sink: return s + op.text;
      case ir::OperandKind::Address: {
        s += "[";
        for (std::size_t i = 0; i < op.items.size(); ++i) {
          s += (i ? "," : "") + operand(op.items[i]);
          if (i == 0 && op.has_offset) s += "+" + std::to_string(op.offset);
        }
        return s + "]";
      }
      case ir::OperandKind::Vector:
      case ir::OperandKind::List: {
        s += op.kind == ir::OperandKind::Vector ? "{" : "(";
        for (std::size_t i = 0; i < op.items.size(); ++i) s += (i ? "," : "") + operand(op.items[i]);
        return s + (op.kind == ir::OperandKind::Vector ? "}" : ")");
      }
      case ir::OperandKind::PredPair: return s + operand(op.items.at(0)) + "|" + operand(op.items.at(1));
    }
    return s;
  }
};

// The parameter an `ld.param` reads, or -1.
int param_load(const ir::Instruction& ins, const std::map<std::string, std::size_t>& params) {
  if (ins.opcode != "ld" || !ins.has_modifier(".param") || ins.operands.size() != 2) return -1;
  const auto& a = ins.operands[1];
  if (a.kind != ir::OperandKind::Address || a.items.size() != 1 || a.has_offset) return -1;
  auto it = params.find(a.items[0].text);
  return it == params.end() ? -1 : static_cast<int>(it->second);
}

bool is_lowered(const ir::Function& f) {
  const std::string prefix = std::string("%") + kRegisterPrefix;
  for (const auto& st : f.body)
    if (const auto* r = std::get_if<ir::RegDecl>(&st.node))
      for (const auto& n : r->names)
        if (n.name.rfind(prefix, 0) == 0) return true;
  return false;
}

std::vector<std::string> perf_set(const ir::Function& f) {
  std::vector<std::string> v;
  for (const auto& p : f.perf) {
    std::string s = p.name;
    for (const auto& a : p.args) s += " " + a;
    v.push_back(s);
  }
  std::sort(v.begin(), v.end());
  return v;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : "; ") + x;
  return s.empty() ? "(none)" : s;
}

}  // namespace

std::vector<std::string> normalized_sequence(const ir::Function& f) {
  Canon c;
  for (std::size_t i = 0; i < f.params.size(); ++i) c.params[f.params[i].name] = i;
  for (const auto& st : f.body)
    if (const auto* l = std::get_if<ir::Label>(&st.node)) c.label_names.insert(l->name);

  std::size_t begin = 0, end = f.body.size();
  std::map<std::string, int> outer;  // lowered: compiler register -> parameter it was loaded from
  if (is_lowered(f)) {
    while (begin < f.body.size() && !std::holds_alternative<ir::ScopeBegin>(f.body[begin].node)) {
      if (const auto* ins = std::get_if<ir::Instruction>(&f.body[begin].node)) {
        const int p = param_load(*ins, c.params);
        if (p >= 0) outer[ins->operands[0].text] = p;
      }
      ++begin;
    }
    int depth = 0;
    for (end = begin; end < f.body.size(); ++end) {
      if (std::holds_alternative<ir::ScopeBegin>(f.body[end].node)) ++depth;
      if (std::holds_alternative<ir::ScopeEnd>(f.body[end].node) && --depth == 0) break;
    }
    ++begin;  // inside the asm's scope
  }

  std::vector<std::string> seq;
  for (std::size_t i = begin; i < end && i < f.body.size(); ++i) {
    const auto& node = f.body[i].node;
    if (const auto* l = std::get_if<ir::Label>(&node)) {
      seq.push_back(Canon::number(c.labels, l->name, "L") + ":");
      continue;
    }
    const auto* ins = std::get_if<ir::Instruction>(&node);
    if (!ins) continue;
    std::string s = ins->guard ? "@" + std::string(ins->guard->negated ? "!" : "") + c.operand(ins->guard->pred) + " " : "";
    int p = param_load(*ins, c.params);
    // The lowering's stand-ins for ld.param: a mov of the operand, or a cvt widening a 32-bit one.
    const bool widening = ins->opcode == "cvt" && (ins->full_opcode() == "cvt.s64.s32" || ins->full_opcode() == "cvt.u64.u32");
    if (p < 0 && (ins->opcode == "mov" || widening) && ins->operands.size() == 2 &&
        ins->operands[1].kind == ir::OperandKind::Register) {
      auto it = outer.find(ins->operands[1].text);
      if (it != outer.end()) p = it->second;
    }
    if (p >= 0) {
      seq.push_back(s + "param " + std::to_string(p) + " -> " + c.operand(ins->operands[0]));
      continue;
    }
    s += ins->full_opcode();
    for (std::size_t k = 0; k < ins->operands.size(); ++k) s += (k ? ", " : " ") + c.operand(ins->operands[k]);
    seq.push_back(s);
  }
  return seq;
}

PtxComparison compare_modules(const ir::Module& candidate, const ir::Module& exported) {
  PtxComparison r;
  for (const auto* f : candidate.functions()) {
    if (!f->is_entry) continue;
    const auto* g = exported.find_function(f->name);
    if (!g) {
      r.difference = "entry " + f->name + " is missing from the exported PTX";
      return r;
    }
    if (perf_set(*f) != perf_set(*g)) {
      r.difference = "entry " + f->name + ": directives differ: candidate " + join(perf_set(*f)) + ", exported " +
                     join(perf_set(*g));
      return r;
    }
    const auto a = normalized_sequence(*f), b = normalized_sequence(*g);
    const std::size_t n = std::min(a.size(), b.size());
    for (std::size_t i = 0; i < n; ++i) {
      if (a[i] != b[i]) {
        r.difference = "entry " + f->name + ", instruction " + std::to_string(i + 1) + ": candidate '" + a[i] +
                       "', exported '" + b[i] + "'";
        return r;
      }
    }
    if (a.size() != b.size()) {
      r.difference = "entry " + f->name + ": the candidate has " + std::to_string(a.size()) +
                     " instructions and labels, the export " + std::to_string(b.size());
      return r;
    }
    ++r.entries;
    r.instructions += a.size();
  }
  r.same = true;
  return r;
}

}  // namespace ptxevo::exporter
