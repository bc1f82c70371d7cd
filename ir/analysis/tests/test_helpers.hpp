// Shared fixtures for the analysis tests: parse inline PTX (throwing on a parse error so the
// test fails with the diagnostic), wrap a body in a kernel, find blocks and instructions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "ir/analysis/cfg.hpp"
#include "ir/module.hpp"

namespace ptxevo::ir::test {

// The parsed module; throws std::runtime_error with FILE:LINE:COL on a parse error.
Module parse(std::string_view ptx);

// A module holding `.visible .entry k(.param .u64 out, .param .u32 n) { body }` after `prelude`
// (module-scope declarations).
std::string kernel(std::string_view body, std::string_view prelude = "");

// The function named `name` (throws when missing).
const Function& function(const Module& m, const std::string& name);

// Id of the block whose label (or alias) is `label`; -1 when none.
int block_labeled(const Cfg& g, const std::string& label);

// Body index of the n-th (0-based) instruction whose full opcode is `full_opcode`; throws when absent.
std::size_t find_instruction(const Function& f, const std::string& full_opcode, int n = 0);

}  // namespace ptxevo::ir::test
