// Expressions over named values: the one small language a spec's knob constraints
// (knob_constraints.hpp) and a declared op's shapes, launch plans, sizes and conditions are
// written in. It is C's integer subset:
//
//   expr    := or ("?" expr ":" expr)?
//   or      := and ("||" and)*
//   and     := cmp ("&&" cmp)*
//   cmp     := sum (("==" | "!=" | "<" | "<=" | ">" | ">=") sum)?   comparisons do not chain
//   sum     := product (("+" | "-") product)*
//   product := unary (("*" | "/" | "%") unary)*
//   unary   := ("!" | "-") unary | primary
//   primary := INTEGER | NAME | "STRING" | "(" expr ")" | FUNCTION "(" expr ("," expr)* ")"
//
// Values are 64-bit integers, strings (only compared with == and !=) and conditions
// (comparisons, && || ! and boolean names). Functions: min(a, b), max(a, b), cdiv(a, b) (the
// quotient rounded up; a >= 0, b > 0) and next_pow2(a) (the smallest power of two >= a, a >= 1). Arithmetic is C's (/ and % truncate), but overflow
// and division by zero are errors, never UB. Nesting deeper than kMaxExpressionNesting is
// rejected so that a hostile "((((..." cannot overflow the stack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>

namespace ptxevo::evaluator {

inline constexpr int kMaxExpressionNesting = 64;

struct ExpressionError {
  std::size_t column = 0;  // 1-based byte column in the expression
  std::string message;
};

enum class ExprKind { Int, Str, Bool };
const char* to_string(ExprKind k);  // "an integer", "a string", "a condition"

using ExprValue = std::variant<std::int64_t, std::string, bool>;
using Bindings = std::map<std::string, ExprValue>;  // name -> value
using ExprTypes = std::map<std::string, ExprKind>;  // name -> kind, for checking without values

// Syntax, names and types; the result must be of kind `want`. Both sides of && || and ?: are
// checked, so a type error cannot hide behind short-circuit evaluation.
std::optional<ExpressionError> check_expression(const std::string& expr, const ExprTypes& types, ExprKind want);

// Evaluate; throw std::invalid_argument naming the column for any error (syntax, type, an
// unknown name, division by zero, overflow).
std::int64_t evaluate_int(const std::string& expr, const Bindings& values);
bool evaluate_condition(const std::string& expr, const Bindings& values);
std::string evaluate_string(const std::string& expr, const Bindings& values);

// The expression as C++ text of the same value, for generated host code: names in `runtime`
// are std::int64_t variables of that name, every other name is replaced by its value in
// `constants` (string comparisons fold to true or false). cdiv and next_pow2 become ptxevo_cdiv
// and ptxevo_next_pow2, which the generated code defines. Throws like evaluate_int.
std::string expression_to_cpp(const std::string& expr, const Bindings& constants, const std::set<std::string>& runtime,
                              ExprKind want);
// The same in Python, for generated modules: C's truncating / and % become ptxevo_div and
// ptxevo_mod, cdiv and next_pow2 ptxevo_cdiv and ptxevo_next_pow2 (the generated module defines them), ?: a conditional
// expression, && || ! and, or, not.
std::string expression_to_python(const std::string& expr, const Bindings& constants,
                                 const std::set<std::string>& runtime, ExprKind want);

}  // namespace ptxevo::evaluator
