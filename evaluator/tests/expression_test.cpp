#include "evaluator/expression.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace ptxevo::evaluator {
namespace {

const Bindings kValues = {{"M", std::int64_t{4096}}, {"N", std::int64_t{1000}}, {"THREADS", std::int64_t{256}},
                          {"dtype", std::string("bf16")}, {"has_bias", true}, {"zero", std::int64_t{0}}};

std::string error_of(const std::string& expr) {
  try {
    evaluate_int(expr, kValues);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Expression, IntegerArithmeticAndFunctions) {
  EXPECT_EQ(evaluate_int("M * N", kValues), 4096000);
  EXPECT_EQ(evaluate_int("cdiv(N, THREADS)", kValues), 4);
  EXPECT_EQ(evaluate_int("cdiv(1024, THREADS)", kValues), 4);
  EXPECT_EQ(evaluate_int("min(M, N) + max(M, N)", kValues), 5096);
  EXPECT_EQ(evaluate_int("-N % 7", kValues), -1000 % 7);
  EXPECT_EQ(evaluate_int("min(max(1, 2), cdiv(9, 2))", kValues), 2);
  EXPECT_EQ(evaluate_int("next_pow2(1) + next_pow2(N)", kValues), 1 + 1024);
  EXPECT_EQ(evaluate_int("next_pow2(THREADS)", kValues), 256);
}

TEST(Expression, ConditionalPicksOneBranchAndSkipsTheOthersErrors) {
  EXPECT_EQ(evaluate_int("dtype == \"bf16\" ? 2 : 4", kValues), 2);
  EXPECT_EQ(evaluate_int("dtype == \"f32\" ? 2 : dtype == \"bf16\" ? 3 : 4", kValues), 3);
  EXPECT_EQ(evaluate_int("has_bias ? N : 0", kValues), 1000);
  // The branch not taken is not evaluated: no division by zero.
  EXPECT_EQ(evaluate_int("zero == 0 ? 1 : N / zero", kValues), 1);
  EXPECT_TRUE(evaluate_condition("has_bias && N > 0", kValues));
  EXPECT_FALSE(evaluate_condition("!has_bias", kValues));
  EXPECT_EQ(evaluate_string("has_bias ? dtype : \"fp32\"", kValues), "bf16");
}

TEST(Expression, ErrorsNameTheColumn) {
  EXPECT_NE(error_of("M * K").find("column 5: unknown name 'K'"), std::string::npos) << error_of("M * K");
  EXPECT_NE(error_of("N / zero").find("column 3: division by zero"), std::string::npos);
  EXPECT_NE(error_of("pow(N, 2)").find("unknown function 'pow'"), std::string::npos);
  EXPECT_NE(error_of("min(N)").find("min() takes two arguments"), std::string::npos);
  EXPECT_NE(error_of("next_pow2(N, 2)").find("next_pow2() takes one argument"), std::string::npos);
  EXPECT_NE(error_of("next_pow2(zero)").find("needs 1 <= a"), std::string::npos);
  EXPECT_NE(error_of("has_bias ? 1 : dtype").find("branches of '?' differ"), std::string::npos);
  EXPECT_NE(error_of("has_bias").find("expected an integer, got a condition"), std::string::npos);
  EXPECT_NE(error_of("M ? 1 : 2").find("'?' expects a condition"), std::string::npos);
  EXPECT_NE(error_of("M > 1 ? 1").find("expected ':'"), std::string::npos);
  EXPECT_NE(error_of("cdiv(N, zero)").find("needs a >= 0 and b > 0"), std::string::npos);
  EXPECT_NE(error_of("9223372036854775807 + 1").find("integer overflow"), std::string::npos);
}

TEST(Expression, ChainedConditionalsAreBoundedLikeParentheses) {
  std::string e;
  for (int i = 0; i < kMaxExpressionNesting + 1; ++i) e += "has_bias ? 1 : ";
  e += "0";
  EXPECT_NE(error_of(e).find("nesting deeper than 64"), std::string::npos);
}

TEST(Expression, CheckingNeedsOnlyTheKinds) {
  const ExprTypes types = {{"M", ExprKind::Int}, {"dtype", ExprKind::Str}, {"has_bias", ExprKind::Bool}};
  EXPECT_FALSE(check_expression("has_bias ? M : 0", types, ExprKind::Int));
  EXPECT_FALSE(check_expression("dtype == \"f16\"", types, ExprKind::Bool));
  const auto e = check_expression("M + dtype", types, ExprKind::Int);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->column, 5u);
  EXPECT_NE(e->message.find("'+' expects an integer, got a string"), std::string::npos);
  const auto k = check_expression("M", types, ExprKind::Bool);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->message, "expected a condition, got an integer");
  // Both branches of a short circuit are type checked.
  EXPECT_TRUE(check_expression("has_bias || dtype + 1 > 0", types, ExprKind::Bool));
}

TEST(Expression, CppTextKeepsRuntimeNamesAndFoldsConstants) {
  const Bindings constants = {{"THREADS", std::int64_t{256}}, {"dtype", std::string("bf16")}, {"has_bias", false}};
  EXPECT_EQ(expression_to_cpp("cdiv(M, THREADS)", constants, {"M"}, ExprKind::Int), "ptxevo_cdiv(M, 256LL)");
  EXPECT_EQ(expression_to_cpp("dtype == \"bf16\" ? M * 2 : -1", constants, {"M"}, ExprKind::Int),
            "(true ? (M * 2LL) : (-1LL))");
  EXPECT_EQ(expression_to_cpp("has_bias && M > 0", constants, {"M"}, ExprKind::Bool), "(false && (M > 0LL))");
  EXPECT_EQ(expression_to_cpp("min(M, 4)", constants, {"M"}, ExprKind::Int), "std::min<std::int64_t>(M, 4LL)");
  EXPECT_THROW(expression_to_cpp("K + 1", constants, {"M"}, ExprKind::Int), std::invalid_argument);
}

TEST(Expression, PythonTextTruncatesLikeC) {
  const Bindings constants = {{"THREADS", std::int64_t{256}}, {"dtype", std::string("bf16")}, {"has_bias", true}};
  EXPECT_EQ(expression_to_python("cdiv(M, THREADS) + M / 3 - M % 2", constants, {"M"}, ExprKind::Int),
            "((ptxevo_cdiv(M, 256) + ptxevo_div(M, 3)) - ptxevo_mod(M, 2))");
  EXPECT_EQ(expression_to_python("dtype == \"f32\" || !has_bias ? min(M, 4) : -1", constants, {"M"}, ExprKind::Int),
            "(min(M, 4) if (False or (not True)) else (-1))");
}

}  // namespace
}  // namespace ptxevo::evaluator
