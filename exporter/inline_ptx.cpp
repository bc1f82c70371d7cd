#include "exporter/inline_ptx.hpp"

#include <map>
#include <set>

#include "ir/printer.hpp"

namespace ptxevo::exporter {

namespace {

std::string arg_placeholder(std::size_t i) { return "__PTXEVO_ARG" + std::to_string(i) + "__"; }

std::string rename_register(const std::string& name) {
  return name.rfind('%', 0) == 0 ? "%" + std::string(kRegisterPrefix) + name.substr(1) : kRegisterPrefix + name;
}

std::string rename_label(const std::string& entry, const std::string& label) {
  const std::string bare = label.rfind('$', 0) == 0 ? label.substr(1) : label;
  return "$" + entry + "__" + bare;
}

// Bytes of a parameter's value and whether it is a float, from its type token.
struct ParamType {
  int bytes = 0;
  bool is_float = false;
};

ParamType param_type(const ir::Param& p) {
  for (const auto& a : p.attrs) {
    if (a.size() < 3 || a[0] != '.') continue;
    const char k = a[1];
    if (k != 'u' && k != 's' && k != 'b' && k != 'f') continue;
    const int bits = std::atoi(a.c_str() + 2);
    if (bits == 8 || bits == 16 || bits == 32 || bits == 64) return {bits / 8, k == 'f'};
  }
  return {};
}

const char* expected_constraint(const ParamType& t) {
  if (t.bytes == 8) return t.is_float ? "d" : "l";
  if (t.bytes == 4) return t.is_float ? "f" : "r";
  return "";
}

struct Renamer {
  std::string entry;
  std::set<std::string> labels;
  std::map<std::string, std::string> symbols;  // module variables renamed (the dynamic shared array)

  void operand(ir::Operand& op) const {
    switch (op.kind) {
      case ir::OperandKind::Register:
        op.text = rename_register(op.text);
        break;
      case ir::OperandKind::Symbol:
        if (labels.count(op.text)) op.text = rename_label(entry, op.text);
        else if (auto it = symbols.find(op.text); it != symbols.end()) op.text = it->second;
        break;
      default:
        break;
    }
    for (auto& item : op.items) operand(item);
  }
};

void collect_symbols(const ir::Operand& op, std::set<std::string>& out) {
  if (op.kind == ir::OperandKind::Symbol) out.insert(op.text);
  for (const auto& item : op.items) collect_symbols(item, out);
}

std::string perf_args(const ir::PerfDirective& p) {
  std::string s;
  for (std::size_t i = 0; i < p.args.size(); ++i) s += (i ? ", " : "") + p.args[i];
  return s;
}

}  // namespace

std::string c_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\t') {
      out += "\\t";
      continue;
    }
    out += c;
  }
  return out;
}

std::string launch_attributes(const ir::Function& f) {
  const ir::PerfDirective *maxntid = nullptr, *minblocks = nullptr, *maxrank = nullptr, *maxnreg = nullptr,
                          *cluster = nullptr;
  for (const auto& p : f.perf) {
    if (p.name == ".maxntid") maxntid = &p;
    else if (p.name == ".minnctapersm") minblocks = &p;
    else if (p.name == ".maxclusterrank") maxrank = &p;
    else if (p.name == ".maxnreg") maxnreg = &p;
    else if (p.name == ".reqnctapercluster") cluster = &p;
    else if (p.name == ".explicitcluster") continue;  // implied by __cluster_dims__ or a launch-time cluster
    else
      throw ExportError("entry " + f.name + ": the directive " + p.name + " " + perf_args(p) +
                        " has no CUDA C++ attribute, so the entry cannot be exported as inline PTX");
  }
  std::string attrs;
  if (maxntid) {
    long long threads = 1;
    for (const auto& a : maxntid->args) threads *= std::atoll(a.c_str());
    attrs += "__launch_bounds__(" + std::to_string(threads);
    if (minblocks || maxrank) attrs += ", " + (minblocks ? perf_args(*minblocks) : std::string("0"));
    if (maxrank) attrs += ", " + perf_args(*maxrank);
    attrs += ")";
  } else if (minblocks || maxrank) {
    throw ExportError("entry " + f.name + ": .minnctapersm or .maxclusterrank without .maxntid has no CUDA C++ "
                      "attribute (__launch_bounds__ needs the thread count)");
  }
  if (maxnreg) {
    if (maxntid)
      throw ExportError("entry " + f.name + ": it has both .maxntid and .maxnreg " + perf_args(*maxnreg) +
                        "; CUDA C++ forbids __launch_bounds__ together with __maxnreg__, so the entry cannot be "
                        "exported as source (export --format ptx keeps it)");
    attrs += std::string(attrs.empty() ? "" : " ") + "__maxnreg__(" + perf_args(*maxnreg) + ")";
  }
  if (cluster) attrs += std::string(attrs.empty() ? "" : " ") + "__cluster_dims__(" + perf_args(*cluster) + ")";
  return attrs;
}

LoweredEntry lower_entry(const ir::Module& m, const ir::Function& f, const std::vector<KernelParam>& params) {
  const std::string where = "entry " + f.name + ": ";
  if (!f.is_entry || !f.has_body) throw ExportError(where + "not a kernel entry with a body");
  if (f.params.size() != params.size())
    throw ExportError(where + "the PTX has " + std::to_string(f.params.size()) + " parameters, the op's launcher " +
                      std::to_string(params.size()));
  std::map<std::string, std::size_t> param_index;
  for (std::size_t i = 0; i < f.params.size(); ++i) {
    const auto& p = f.params[i];
    const ParamType t = param_type(p);
    if (!p.dims.empty() || t.bytes == 0)
      throw ExportError(where + "parameter " + p.name + " is an array or aggregate; only scalar and pointer "
                        "parameters can be bound to asm operands");
    if (params[i].constraint != expected_constraint(t))
      throw ExportError(where + "parameter " + std::to_string(i) + " (" + params[i].name + ") is " +
                        std::to_string(t.bytes) + (t.is_float ? "-byte float" : "-byte integer") +
                        " in the PTX, but the launcher declares '" + params[i].type + "'");
    param_index[p.name] = i;
  }

  LoweredEntry out;
  Renamer ren;
  ren.entry = f.name;
  std::set<std::string> used;
  for (const auto& st : f.body) {
    if (const auto* l = std::get_if<ir::Label>(&st.node)) ren.labels.insert(l->name);
    if (const auto* ins = std::get_if<ir::Instruction>(&st.node)) {
      if (ins->opcode == "call")
        throw ExportError(where + "it calls a device function; inline PTX in one asm block cannot hold calls");
      for (const auto& op : ins->operands) collect_symbols(op, used);
    }
  }

  // Module variables the entry names: shared ones move into the scope, the dynamic one is renamed.
  std::vector<ir::Statement> decls;
  for (const auto* v : m.globals()) {
    if (!used.count(v->name)) continue;
    if (v->state_space() != ".shared")
      throw ExportError(where + "it uses the module variable " + v->name + " in " + v->state_space() +
                        "; exported kernels may use only shared memory");
    if (v->is_extern()) {
      ren.symbols[v->name] = kDynamicSmemName;
      out.uses_dynamic_smem = true;
      for (std::size_t i = 0; i + 1 < v->attrs.size(); ++i)
        if (v->attrs[i] == ".align") out.dynamic_smem_align = static_cast<unsigned>(std::atoi(v->attrs[i + 1].c_str()));
    } else {
      decls.push_back({{}, *v});
    }
  }

  ir::Function lowered = f;
  lowered.perf.clear();
  lowered.body = decls;
  for (const auto& st : f.body) {
    ir::Statement s = st;
    if (auto* d = std::get_if<ir::Directive>(&s.node)) {
      if (d->name == ".loc" || d->name == ".file") continue;  // line info refers to files not exported
      for (auto& a : d->args)
        if (ren.labels.count(a)) a = rename_label(f.name, a);
    } else if (auto* l = std::get_if<ir::Label>(&s.node)) {
      l->name = rename_label(f.name, l->name);
    } else if (auto* r = std::get_if<ir::RegDecl>(&s.node)) {
      for (auto& n : r->names) n.name = rename_register(n.name);
    } else if (auto* ins = std::get_if<ir::Instruction>(&s.node)) {
      const bool ld_param = ins->opcode == "ld" && ins->has_modifier(".param");
      if (ld_param) {
        const auto& addr = ins->operands.size() == 2 ? ins->operands[1] : ir::Operand{};
        const bool plain = addr.kind == ir::OperandKind::Address && addr.items.size() == 1 &&
                           addr.items[0].kind == ir::OperandKind::Symbol && param_index.count(addr.items[0].text);
        if (!plain || (addr.has_offset && addr.offset != 0) || addr.items[0].has_offset ||
            ins->operands[0].kind != ir::OperandKind::Register || ins->operands[0].reg < 0)
          throw ExportError(where + "'" + ir::print_instruction(*ins) + "' reads a parameter in a way an asm "
                            "operand cannot stand for (an offset, a vector or a non-parameter)");
        const std::size_t i = param_index.at(addr.items[0].text);
        const auto& reg = f.registers.at(static_cast<std::size_t>(ins->operands[0].reg));
        const ParamType t = param_type(f.params[i]);
        // A 32-bit integer parameter may be loaded widened (ld.param.s32 %rd, ...): the operand
        // is 32-bit, so the widening becomes a cvt of it.
        const bool widened = reg.width_bits == 64 && t.bytes == 4 && !t.is_float &&
                             (ins->has_modifier(".s32") || ins->has_modifier(".u32"));
        if (reg.width_bits != t.bytes * 8 && !widened)
          throw ExportError(where + "'" + ir::print_instruction(*ins) + "' loads a " + std::to_string(t.bytes * 8) +
                            "-bit parameter into a " + std::to_string(reg.width_bits) + "-bit register");
        ir::Instruction mov;
        mov.id = ins->id;
        mov.guard = ins->guard;
        mov.opcode = widened ? "cvt" : "mov";
        mov.modifiers = {".b" + std::to_string(reg.width_bits)};
        if (widened)
          mov.modifiers = ins->has_modifier(".s32") ? std::vector<std::string>{".s64", ".s32"}
                                                    : std::vector<std::string>{".u64", ".u32"};
        mov.operands = {ins->operands[0], ir::Operand{}};
        mov.operands[1].kind = ir::OperandKind::Immediate;
        mov.operands[1].text = arg_placeholder(i);
        *ins = std::move(mov);
      } else {
        for (const auto& op : ins->operands) {
          std::set<std::string> syms;
          collect_symbols(op, syms);
          for (const auto& sname : syms)
            if (param_index.count(sname))
              throw ExportError(where + "'" + ir::print_instruction(*ins) + "' takes the address of parameter " +
                                sname + "; only loads of parameters can be bound to asm operands");
        }
      }
      if (ins->guard) ren.operand(ins->guard->pred);
      for (auto& op : ins->operands) ren.operand(op);
    }
    lowered.body.push_back(std::move(s));
  }

  // The printed body, between the function's own braces.
  const std::string text = ir::print_function(lowered);
  const auto open = text.find("\n{\n");
  const auto close = text.rfind("}\n");
  if (open == std::string::npos || close == std::string::npos || close < open + 3)
    throw ExportError(where + "internal error: the printed function has no body");
  const std::string body = text.substr(open + 3, close - open - 3);

  std::string lines = "      \"{\\n\"\n";
  std::size_t pos = 0;
  while (pos < body.size()) {
    std::size_t nl = body.find('\n', pos);
    if (nl == std::string::npos) nl = body.size();
    std::string line;
    for (char c : body.substr(pos, nl - pos)) line += c == '%' ? std::string("%%") : std::string(1, c);
    for (std::size_t i = 0; i < params.size(); ++i) {
      const std::string ph = arg_placeholder(i);
      for (auto at = line.find(ph); at != std::string::npos; at = line.find(ph))
        line.replace(at, ph.size(), "%" + std::to_string(i));
    }
    lines += "      \"" + c_escape(line) + "\\n\"\n";
    pos = nl + 1;
  }
  lines += "      \"}\\n\"\n";

  std::string sig;
  for (std::size_t i = 0; i < params.size(); ++i) sig += (i ? ", " : "") + params[i].type + " " + params[i].name;
  std::string operands;
  for (std::size_t i = 0; i < params.size(); ++i)
    operands += (i ? ", " : "") + std::string("\"") + params[i].constraint + "\"(" + params[i].name + ")";
  if (out.uses_dynamic_smem)  // keeps the declaration in the PTX; the asm names it directly
    operands += std::string(", \"r\"((unsigned)__cvta_generic_to_shared(") + kDynamicSmemName + "))";

  const std::string attrs = launch_attributes(f);
  out.definition = "extern \"C\" __global__ void " + (attrs.empty() ? "" : attrs + " ") + f.name + "(" + sig +
                   ") {\n  asm volatile(\n" + lines + "      :\n      : " + operands + "\n      : \"memory\");\n}\n";
  return out;
}

}  // namespace ptxevo::exporter
