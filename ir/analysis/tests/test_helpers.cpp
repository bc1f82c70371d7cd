#include "ir/analysis/tests/test_helpers.hpp"

#include <algorithm>
#include <stdexcept>
#include <variant>

#include "ir/parser.hpp"

namespace ptxevo::ir::test {

Module parse(std::string_view ptx) {
  ParseResult r = parse_ptx(ptx);
  if (!r.ok()) throw std::runtime_error(r.error->format("<inline ptx>"));
  return std::move(*r.module);
}

std::string kernel(std::string_view body, std::string_view prelude) {
  std::string s = ".version 8.0\n.target sm_90a\n.address_size 64\n";
  s += prelude;
  s += "\n.visible .entry k(.param .u64 out, .param .u32 n)\n{\n";
  s += body;
  s += "\n}\n";
  return s;
}

const Function& function(const Module& m, const std::string& name) {
  const Function* f = m.find_function(name);
  if (!f) throw std::runtime_error("no function named " + name);
  return *f;
}

int block_labeled(const Cfg& g, const std::string& label) {
  for (const auto& b : g.blocks)
    if (b.label == label || std::find(b.aliases.begin(), b.aliases.end(), label) != b.aliases.end()) return b.id;
  return -1;
}

std::size_t find_instruction(const Function& f, const std::string& full_opcode, int n) {
  for (std::size_t i = 0; i < f.body.size(); ++i)
    if (const auto* ins = std::get_if<Instruction>(&f.body[i].node); ins && ins->full_opcode() == full_opcode)
      if (n-- == 0) return i;
  throw std::runtime_error("no instruction " + full_opcode);
}

}  // namespace ptxevo::ir::test
