// Module -> canonical PTX text. Layout and spacing are fixed; everything that reaches ptxas
// (order, spelling of literals, declarations) is kept, so ptxas sees the same program.
#pragma once

#include <string>

#include "ir/module.hpp"

namespace ptxevo::ir {

std::string print_module(const Module& m);
std::string print_function(const Function& f);
std::string print_instruction(const Instruction& ins);
std::string print_operand(const Operand& op);

}  // namespace ptxevo::ir
