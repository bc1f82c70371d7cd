#include "ir/module.hpp"

#include <algorithm>

namespace ptxevo::ir {

std::string Instruction::full_opcode() const {
  std::string s = opcode;
  for (const auto& m : modifiers) s += m;
  return s;
}

bool Instruction::has_modifier(const std::string& m) const {
  return std::find(modifiers.begin(), modifiers.end(), m) != modifiers.end();
}

std::string VarDecl::state_space() const {
  static const char* kSpaces[] = {".global", ".shared", ".const", ".local", ".param", ".tex"};
  for (const auto& a : attrs)
    for (const char* s : kSpaces)
      if (a == s || a.rfind(std::string(s) + "::", 0) == 0) return a;
  return "";
}

bool VarDecl::is_extern() const {
  return std::find(attrs.begin(), attrs.end(), ".extern") != attrs.end();
}

const char* to_string(RegClass c) {
  switch (c) {
    case RegClass::Pred: return "pred";
    case RegClass::B16: return "b16";
    case RegClass::B32: return "b32";
    case RegClass::B64: return "b64";
    case RegClass::B128: return "b128";
  }
  return "?";
}

RegClass reg_class_of(const std::vector<std::string>& type, int* width_bits) {
  int lanes = 1;
  int bits = 32;
  bool pred = false;
  for (const auto& t : type) {
    if (t == ".v2") lanes = 2;
    else if (t == ".v4") lanes = 4;
    else if (t == ".v8") lanes = 8;
    else if (t == ".pred") pred = true;
    else if (t.size() >= 3 && (t[1] == 'b' || t[1] == 'u' || t[1] == 's' || t[1] == 'f')) {
      // .b32 .u16 .s64 .f32 .f16 .f16x2 .bf16 .bf16x2 .b128
      // Digits are parsed with a bound: hostile input like ".b99999999999" must not overflow.
      auto number = [&](std::size_t& i) {
        int v = 0;
        bool any = false;
        while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) {
          v = std::min(v * 10 + (t[i++] - '0'), 1 << 16);
          any = true;
        }
        return any ? v : -1;
      };
      std::size_t i = (t.compare(0, 3, ".bf") == 0) ? 3 : 2;
      const int width = number(i);
      if (width > 0) {
        bits = width;
        if (i < t.size() && t[i] == 'x') {
          ++i;
          const int lanes_in_type = number(i);
          if (lanes_in_type > 0)
            bits = static_cast<int>(std::min<std::int64_t>(std::int64_t{bits} * lanes_in_type, 1 << 16));
        }
      }
    }
  }
  if (pred) {
    if (width_bits) *width_bits = 1;
    return RegClass::Pred;
  }
  const int total = bits * lanes;
  if (width_bits) *width_bits = total;
  if (lanes > 1 || bits > 64) return RegClass::B128;
  if (bits <= 16) return RegClass::B16;
  if (bits <= 32) return RegClass::B32;
  return RegClass::B64;
}

const PerfDirective* Function::find_perf(const std::string& n) const {
  for (const auto& p : perf)
    if (p.name == n) return &p;
  return nullptr;
}

std::string Module::version() const {
  for (const auto& it : items)
    if (const auto* d = std::get_if<ModuleDirective>(&it.node); d && d->name == ".version" && !d->args.empty())
      return d->args[0];
  return "";
}

std::string Module::target() const {
  for (const auto& it : items)
    if (const auto* d = std::get_if<ModuleDirective>(&it.node); d && d->name == ".target" && !d->args.empty())
      return d->args[0];
  return "";
}

std::vector<Function*> Module::functions() {
  std::vector<Function*> out;
  for (auto& it : items)
    if (auto* f = std::get_if<Function>(&it.node)) out.push_back(f);
  return out;
}

std::vector<const Function*> Module::functions() const {
  std::vector<const Function*> out;
  for (const auto& it : items)
    if (const auto* f = std::get_if<Function>(&it.node)) out.push_back(f);
  return out;
}

Function* Module::find_function(const std::string& n) {
  for (auto* f : functions())
    if (f->name == n && f->has_body) return f;
  for (auto* f : functions())
    if (f->name == n) return f;
  return nullptr;
}

const Function* Module::find_function(const std::string& n) const {
  return const_cast<Module*>(this)->find_function(n);
}

std::vector<const VarDecl*> Module::globals() const {
  std::vector<const VarDecl*> out;
  for (const auto& it : items)
    if (const auto* v = std::get_if<VarDecl>(&it.node)) out.push_back(v);
  return out;
}

}  // namespace ptxevo::ir
