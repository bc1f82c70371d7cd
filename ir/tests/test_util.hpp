#pragma once

#include <gtest/gtest.h>

#include "ir/parser.hpp"

namespace ptxevo::ir::testing {

// Parses `text` or fails the test with the diagnostic.
inline Module parse_or_fail(const std::string& text) {
  ParseResult r = parse_ptx(text);
  if (!r.ok()) {
    ADD_FAILURE() << r.error->format("<test>");
    return Module{};
  }
  return std::move(*r.module);
}

inline const Instruction& nth_instruction(const Function& f, std::size_t n) {
  std::size_t k = 0;
  for (const auto& st : f.body)
    if (const auto* i = std::get_if<Instruction>(&st.node)) {
      if (k++ == n) return *i;
    }
  throw std::out_of_range("no such instruction");
}

inline std::string wrap_kernel(const std::string& body, const std::string& decls = "") {
  return ".version 8.7\n.target sm_90a\n.address_size 64\n" + decls +
         ".visible .entry k(\n.param .u64 k_p0\n)\n{\n" + body + "\n}\n";
}

}  // namespace ptxevo::ir::testing
