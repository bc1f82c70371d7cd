// Knob constraints: conditions a seed uses to exclude knob combinations its template cannot
// build, e.g. "THREADS % TPR == 0 && (LOADER != \"cp_async\" || VEC >= 4)", written in the
// expression language of expression.hpp with the seed's knobs as the names. A constraint must
// be a condition.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "evaluator/expression.hpp"
#include "evaluator/op.hpp"

namespace ptxevo::evaluator {

inline constexpr int kMaxConstraintNesting = kMaxExpressionNesting;

struct ConstraintError {
  std::size_t column = 0;  // 1-based byte column in the expression
  std::string message;
};

// Syntax, knob names and the types that do not depend on a knob's kind (e.g. "1 && 2",
// "\"a\" + 1"). Every identifier must be one of `knob_names`.
std::optional<ConstraintError> check_constraint_syntax(const std::string& expr,
                                                       const std::vector<std::string>& knob_names);

// check_constraint_syntax plus full type checking, with each knob's kind (integer or string)
// taken from its value in `knobs` (e.g. a seed's defaults). Checks both sides of && and ||,
// so a type error cannot hide behind short-circuit evaluation.
std::optional<ConstraintError> check_constraint(const std::string& expr, const Knobs& knobs);

// Evaluates `expr` for `knobs`. && and || short-circuit. Throws std::invalid_argument, naming
// the column, for a syntax or type error, an unknown knob, division by zero or overflow.
bool constraint_holds(const std::string& expr, const Knobs& knobs);

}  // namespace ptxevo::evaluator
