#include "ir/printer.hpp"

#include <cctype>
#include <cstdint>

namespace ptxevo::ir {
namespace {

bool no_space_before(const std::string& t) {
  return t == "," || t == ";" || t == ")" || t == "]" || t == "}";
}
bool no_space_after(const std::string& t) { return t == "(" || t == "[" || t == "{"; }

// Joins directive/initializer tokens with single spaces, tight around brackets.
std::string join_tokens(const std::vector<std::string>& toks) {
  std::string out;
  for (std::size_t i = 0; i < toks.size(); ++i) {
    // `generic(x)`: a call-like name keeps its parenthesis.
    const bool call_like = toks[i] == "(" && i > 0 && !toks[i - 1].empty() &&
                           (std::isalpha(static_cast<unsigned char>(toks[i - 1][0])) || toks[i - 1][0] == '_');
    if (i > 0 && !call_like && !no_space_before(toks[i]) && !no_space_after(toks[i - 1])) out += ' ';
    out += toks[i];
  }
  return out;
}

std::string offset_suffix(std::int64_t off) {
  if (off >= 0) return "+" + std::to_string(off);
  const std::uint64_t mag = 0 - static_cast<std::uint64_t>(off);
  return "+-" + std::to_string(mag);
}

std::string print_param(const Param& p) {
  std::string s;
  for (const auto& a : p.attrs) s += a + " ";
  s += p.name;
  for (const auto& d : p.dims) s += "[" + d + "]";
  return s;
}

std::string print_var(const VarDecl& v) {
  std::string s;
  for (const auto& a : v.attrs) s += a + " ";
  s += v.name;
  for (const auto& d : v.dims) s += "[" + d + "]";
  if (v.has_init) s += " = " + join_tokens(v.init);
  return s + ";";
}

std::string print_directive(const Directive& d) {
  std::string s;
  if (!d.label.empty()) s += d.label + ": ";
  s += d.name;
  if (!d.args.empty()) s += " " + join_tokens(d.args);
  if (d.semicolon) s += ";";
  return s;
}

void print_body(const Function& f, std::string& out) {
  int depth = 1;
  auto indent = [&](int d) { out.append(static_cast<std::size_t>(d), '\t'); };
  for (const auto& st : f.body) {
    std::visit(
        [&](const auto& n) {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, Instruction>) {
            indent(depth);
            out += print_instruction(n);
          } else if constexpr (std::is_same_v<T, Label>) {
            out += n.name + ":";
          } else if constexpr (std::is_same_v<T, RegDecl>) {
            indent(depth);
            out += ".reg";
            for (const auto& t : n.type) out += " " + t;
            for (std::size_t i = 0; i < n.names.size(); ++i) {
              out += i == 0 ? " " : ", ";
              out += n.names[i].name;
              if (n.names[i].count >= 0) out += "<" + std::to_string(n.names[i].count) + ">";
            }
            out += ";";
          } else if constexpr (std::is_same_v<T, VarDecl>) {
            indent(depth);
            out += print_var(n);
          } else if constexpr (std::is_same_v<T, ScopeBegin>) {
            indent(depth);
            out += "{";
            ++depth;
          } else if constexpr (std::is_same_v<T, ScopeEnd>) {
            --depth;
            indent(depth);
            out += "}";
          } else if constexpr (std::is_same_v<T, Directive>) {
            indent(depth);
            out += print_directive(n);
          }
        },
        st.node);
    out += '\n';
  }
}

}  // namespace

std::string print_operand(const Operand& op) {
  std::string s = op.negated ? "!" : "";
  switch (op.kind) {
    case OperandKind::Register:
    case OperandKind::Special:
    case OperandKind::Immediate:
    case OperandKind::Sink:
      return s + op.text;
    case OperandKind::Symbol:
      s += op.text;
      if (op.has_offset) s += op.offset >= 0 ? "+" + std::to_string(op.offset) : std::to_string(op.offset);
      return s;
    case OperandKind::Vector:
    case OperandKind::List: {
      s += op.kind == OperandKind::Vector ? "{" : "(";
      for (std::size_t i = 0; i < op.items.size(); ++i) {
        if (i) s += ", ";
        s += print_operand(op.items[i]);
      }
      return s + (op.kind == OperandKind::Vector ? "}" : ")");
    }
    case OperandKind::Address: {
      s += "[";
      for (std::size_t i = 0; i < op.items.size(); ++i) {
        if (i) s += ", ";
        s += print_operand(op.items[i]);
        if (i == 0 && op.has_offset) s += offset_suffix(op.offset);
      }
      return s + "]";
    }
    case OperandKind::PredPair:
      return s + print_operand(op.items.at(0)) + "|" + print_operand(op.items.at(1));
  }
  return s;
}

std::string print_instruction(const Instruction& ins) {
  std::string s;
  if (ins.guard) s += std::string("@") + (ins.guard->negated ? "!" : "") + print_operand(ins.guard->pred) + " ";
  s += ins.full_opcode();
  for (std::size_t i = 0; i < ins.operands.size(); ++i) {
    s += i == 0 ? " " : ", ";
    s += print_operand(ins.operands[i]);
  }
  return s + ";";
}

std::string print_function(const Function& f) {
  std::string out;
  for (const auto& l : f.linkage) out += l + " ";
  out += f.is_entry ? ".entry " : ".func ";
  auto param_list = [&](const std::vector<Param>& ps, bool multiline) {
    std::string s = "(";
    for (std::size_t i = 0; i < ps.size(); ++i) {
      if (multiline) s += "\n\t";
      s += print_param(ps[i]);
      if (i + 1 < ps.size()) s += multiline ? "," : ", ";
    }
    if (multiline && !ps.empty()) s += "\n";
    return s + ")";
  };
  if (f.has_returns) out += param_list(f.returns, false) + " ";
  out += f.name;
  if (f.has_params) out += param_list(f.params, true);
  out += '\n';
  for (const auto& p : f.perf) {
    out += p.name;
    for (std::size_t i = 0; i < p.args.size(); ++i) out += (i == 0 ? " " : ", ") + p.args[i];
    out += '\n';
  }
  if (!f.has_body) {
    out.back() = ';';
    return out + "\n";
  }
  out += "{\n";
  print_body(f, out);
  out += "}\n";
  return out;
}

std::string print_module(const Module& m) {
  std::string out;
  out.reserve(1 << 16);
  bool prev_block = false;
  for (const auto& item : m.items) {
    std::visit(
        [&](const auto& n) {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, ModuleDirective>) {
            if (prev_block) out += '\n';
            out += n.name;
            if (!n.args.empty()) out += " " + join_tokens(n.args);
            if (n.semicolon) out += ";";
            out += '\n';
            prev_block = false;
          } else if constexpr (std::is_same_v<T, VarDecl>) {
            if (prev_block) out += '\n';
            out += print_var(n) + "\n";
            prev_block = false;
          } else if constexpr (std::is_same_v<T, Function>) {
            out += '\n';
            out += print_function(n);
            prev_block = true;
          } else if constexpr (std::is_same_v<T, Section>) {
            out += '\n';
            out += ".section " + n.name + "\n{\n";
            for (const auto& d : n.items) {
              if (!d.label.empty()) {
                out += d.label + ":\n";
                continue;
              }
              out += "\t" + d.type;
              for (std::size_t i = 0; i < d.values.size(); ++i) {
                out += i == 0 ? " " : ", ";
                out += d.values[i];
              }
              out += '\n';
            }
            out += "}\n";
            prev_block = true;
          }
        },
        item.node);
  }
  return out;
}

}  // namespace ptxevo::ir
