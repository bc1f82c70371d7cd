// The engine owns every kernel's parameter list: an agent-written source must keep each entry
// the launch plan names with exactly the plan's arguments, in order and of matching width, or
// the engine's launch would hand it garbage. Runs on the final PTX beside evaluator::check_ir.
#pragma once

#include <string>
#include <vector>

#include "evaluator/ir_checks.hpp"
#include "evaluator/op.hpp"
#include "ir/module.hpp"

namespace ptxevo::search {

std::vector<evaluator::IrViolation> check_entry_params(const ir::Module& m, const evaluator::LaunchPlan& plan);

}  // namespace ptxevo::search
