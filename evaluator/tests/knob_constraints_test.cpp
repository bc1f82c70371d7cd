#include "evaluator/knob_constraints.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace ptxevo::evaluator {
namespace {

const Knobs kKnobs = {{"THREADS", std::int64_t{256}},
                      {"TPR", std::int64_t{32}},
                      {"VEC", std::int64_t{8}},
                      {"NEG", std::int64_t{-7}},
                      {"LOADER", std::string("cp_async")}};
const std::vector<std::string> kNames = {"THREADS", "TPR", "VEC", "NEG", "LOADER"};

// Expects `expr` to be rejected by check_constraint at `column` with a message containing
// `needle`, and constraint_holds to throw for it too.
void expect_error(const std::string& expr, std::size_t column, const std::string& needle) {
  SCOPED_TRACE(expr);
  auto err = check_constraint(expr, kKnobs);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->column, column) << err->message;
  EXPECT_NE(err->message.find(needle), std::string::npos) << err->message;
  EXPECT_THROW(constraint_holds(expr, kKnobs), std::invalid_argument);
}

TEST(KnobConstraints, EvaluatesArithmeticAndComparisons) {
  EXPECT_TRUE(constraint_holds("THREADS % TPR == 0", kKnobs));
  EXPECT_TRUE(constraint_holds("TPR <= THREADS", kKnobs));
  EXPECT_FALSE(constraint_holds("THREADS < TPR", kKnobs));
  EXPECT_TRUE(constraint_holds("THREADS / TPR * VEC == 64", kKnobs));
  EXPECT_TRUE(constraint_holds("1 + 2 * 3 == 7", kKnobs));  // * binds tighter than +
  EXPECT_TRUE(constraint_holds("(1 + 2) * 3 == 9", kKnobs));
  EXPECT_TRUE(constraint_holds("10 - 4 - 3 == 3", kKnobs));  // left associative
  EXPECT_TRUE(constraint_holds("NEG / 2 == -3", kKnobs));    // C truncation
  EXPECT_TRUE(constraint_holds("NEG % 2 == -1", kKnobs));
  EXPECT_TRUE(constraint_holds("- -VEC == 8", kKnobs));
  EXPECT_TRUE(constraint_holds("VEC >= 8 && VEC > 7 && VEC != 9", kKnobs));
}

TEST(KnobConstraints, BooleanOperatorsAndStrings) {
  EXPECT_TRUE(constraint_holds("LOADER == \"cp_async\"", kKnobs));
  EXPECT_FALSE(constraint_holds("LOADER != \"cp_async\"", kKnobs));
  EXPECT_TRUE(constraint_holds("\"plain\" != LOADER", kKnobs));
  EXPECT_TRUE(constraint_holds("LOADER != \"cp_async\" || VEC >= 4", kKnobs));
  EXPECT_FALSE(constraint_holds("!(VEC == 8)", kKnobs));
  EXPECT_TRUE(constraint_holds("!!(VEC == 8)", kKnobs));
  EXPECT_TRUE(constraint_holds("VEC == 1 || VEC == 2 || VEC == 8", kKnobs));
  EXPECT_FALSE(constraint_holds("VEC == 8 && TPR == 1", kKnobs));
  EXPECT_TRUE(constraint_holds("VEC == 1 || VEC == 8 && TPR == 32", kKnobs));  // && binds tighter
  EXPECT_TRUE(constraint_holds("(VEC > 1) == (TPR > 1)", kKnobs));
}

TEST(KnobConstraints, ShortCircuitSkipsRuntimeErrors) {
  EXPECT_TRUE(constraint_holds("VEC == 8 || 1 / 0 == 1", kKnobs));
  EXPECT_FALSE(constraint_holds("VEC == 1 && 1 / 0 == 1", kKnobs));
  EXPECT_THROW(constraint_holds("VEC == 1 || 1 / 0 == 1", kKnobs), std::invalid_argument);
}

TEST(KnobConstraints, RuntimeErrorsThrow) {
  try {
    constraint_holds("THREADS % (TPR - 32) == 0", kKnobs);
    FAIL() << "expected a throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("column 9: modulo by zero"), std::string::npos) << e.what();
  }
  EXPECT_THROW(constraint_holds("VEC / 0 == 1", kKnobs), std::invalid_argument);
  EXPECT_THROW(constraint_holds("9223372036854775807 + 1 > 0", kKnobs), std::invalid_argument);
  EXPECT_THROW(constraint_holds("-9223372036854775807 - 2 < 0", kKnobs), std::invalid_argument);
  EXPECT_THROW(constraint_holds("4294967296 * 4294967296 > 0", kKnobs), std::invalid_argument);
  EXPECT_THROW(constraint_holds("(-9223372036854775807 - 1) / -1 > 0", kKnobs), std::invalid_argument);
  EXPECT_THROW(constraint_holds("-(-9223372036854775807 - 1) > 0", kKnobs), std::invalid_argument);
  EXPECT_THROW(constraint_holds("MISSING == 1", kKnobs), std::invalid_argument);
  EXPECT_THROW(constraint_holds("VEC == 1", Knobs{}), std::invalid_argument);
}

TEST(KnobConstraints, SyntaxErrorsHaveColumns) {
  expect_error("", 1, "expected a number");
  expect_error("THREADS %", 10, "got the end of the expression");
  expect_error("THREADS = 256", 9, "use '=='");
  expect_error("VEC == 8 & TPR == 1", 10, "expected '&&'");
  expect_error("VEC == 8 | TPR == 1", 10, "expected '||'");
  expect_error("(VEC == 8", 10, "expected ')' to close the '(' at column 1");
  expect_error("VEC == 8)", 9, "expected an operator, got ')'");
  expect_error("VEC 8", 5, "expected an operator, got '8'");
  expect_error("VEC == 8x", 8, "invalid integer literal");
  expect_error("VEC == 0x10", 8, "invalid integer literal");
  expect_error("VEC == 99999999999999999999", 8, "does not fit in 64 bits");
  expect_error("LOADER == \"plain", 11, "unterminated string");
  expect_error("VEC # 2", 5, "unexpected character '#'");
  expect_error("VEC == 1 < 2", 10, "comparisons do not chain");
  expect_error("VECC == 8", 1, "unknown knob 'VECC'; knobs: LOADER, NEG, THREADS, TPR, VEC");
}

TEST(KnobConstraints, TypeErrorsHaveColumns) {
  expect_error("VEC", 1, "must be a condition");
  expect_error("VEC + 1", 1, "got an integer");
  expect_error("LOADER", 1, "got a string");
  expect_error("VEC == 8 && 1", 13, "'&&' expects a condition, got an integer");
  expect_error("1 || VEC == 8", 1, "'||' expects a condition, got an integer");
  expect_error("!VEC", 2, "'!' expects a condition");
  expect_error("-(VEC == 8) == 1", 2, "'-' expects an integer, got a condition");
  expect_error("LOADER + 1 == 2", 1, "'+' expects an integer, got a string");
  expect_error("LOADER < \"z\"", 1, "'<' expects an integer, got a string");
  expect_error("LOADER == 1", 11, "'==' compares a string with an integer");
  expect_error("VEC == \"8\"", 8, "'==' compares an integer with a string");
  // Type errors are found in the operand that short-circuit evaluation skips, too.
  expect_error("VEC == 8 || LOADER == 1", 23, "compares a string with an integer");
}

TEST(KnobConstraints, NestingIsBounded) {
  const auto nested = [](int n) { return std::string(n, '(') + "VEC == 8" + std::string(n, ')'); };
  EXPECT_TRUE(constraint_holds(nested(kMaxConstraintNesting), kKnobs));
  expect_error(nested(kMaxConstraintNesting + 1), kMaxConstraintNesting + 1, "nesting deeper than 64");
  // Far past the limit: rejected at the limit, no stack overflow.
  expect_error(std::string(10000, '('), kMaxConstraintNesting + 1, "nesting deeper than 64");
  expect_error(std::string(10000, '!') + "(VEC == 8)", kMaxConstraintNesting + 1, "nesting deeper");
  expect_error(std::string(10000, '-') + "VEC == 8", kMaxConstraintNesting + 1, "nesting deeper");
  // Long flat chains are loops, not recursion.
  std::string chain = "VEC";
  for (int i = 0; i < 10000; ++i) chain += " + 0";
  EXPECT_TRUE(constraint_holds(chain + " == 8", kKnobs));
}

TEST(KnobConstraints, SyntaxCheckWithNamesOnly) {
  EXPECT_FALSE(check_constraint_syntax("THREADS % TPR == 0", kNames).has_value());
  EXPECT_FALSE(check_constraint_syntax("LOADER == \"plain\" || VEC >= 4", kNames).has_value());
  // A knob's kind is unknown here, so a knob may be compared with a string or an integer...
  EXPECT_FALSE(check_constraint_syntax("VEC == \"x\"", kNames).has_value());
  // ...but literal kinds are still checked, and a knob alone is never a condition.
  auto err = check_constraint_syntax("VEC == 8 && 2", kNames);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->column, 13u);
  err = check_constraint_syntax("VEC && TPR == 1", kNames);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->column, 1u);
  EXPECT_NE(err->message.find("got a knob"), std::string::npos) << err->message;
  err = check_constraint_syntax("THREADS % TPRR == 0", kNames);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->column, 11u);
  EXPECT_NE(err->message.find("unknown knob 'TPRR'"), std::string::npos);
  err = check_constraint_syntax("A == 1", {});
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->message.find("there are no knobs"), std::string::npos);
}

}  // namespace
}  // namespace ptxevo::evaluator
