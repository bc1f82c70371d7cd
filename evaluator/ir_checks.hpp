// Loopholes closed by reading the candidate's PTX: state that persists across launches,
// reads of clocks that reveal the harness phase, and launches outside declared resources.
#pragma once

#include <string>
#include <vector>

#include "evaluator/op.hpp"
#include "ir/module.hpp"

namespace ptxevo::evaluator {

struct IrViolation {
  std::string rule;     // "persistent-global", "clock-read", "launch-resources", "missing-entry"
  std::string message;  // says what and where (function, line)
};

// `plan` is the launch the engine will make; every entry it names must exist and every
// launch must fit the kernel's .reqntid/.maxntid and cluster directives.
std::vector<IrViolation> check_ir(const ir::Module& m, const LaunchPlan& plan);

}  // namespace ptxevo::evaluator
