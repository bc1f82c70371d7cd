// Bad input must come back as FILE:LINE:COL errors pointing at the offending token.
#include <gtest/gtest.h>

#include "ir/parser.hpp"

namespace ptxevo::ir {
namespace {

struct Case {
  const char* name;
  std::string text;
  std::uint32_t line;
  std::uint32_t col;
  const char* message_part;
};

const std::string kHead = ".version 8.7\n.target sm_90a\n.address_size 64\n";  // lines 1-3

std::vector<Case> cases() {
  return {
      {"garbage_at_module_scope", kHead + "hello world\n", 4, 1, "expected a directive"},
      {"missing_semicolon", kHead + ".visible .entry k()\n{\n.reg .b32 %r<2>;\nmov.u32 %r1, 1\nret;\n}\n", 8, 1,
       "expected ',' or ';'"},
      {"unclosed_body", kHead + ".visible .entry k()\n{\nret;\n", 7, 1, "expected '}'"},
      {"bad_register_count", kHead + ".visible .entry k()\n{\n.reg .b32 %r<abc>;\n}\n", 6, 14, "expected a number"},
      {"huge_register_count", kHead + ".visible .entry k()\n{\n.reg .b32 %r<99999999999>;\n}\n", 6, 14,
       "register count"},
      {"unclosed_vector", kHead + ".visible .entry k()\n{\n.reg .b32 %r<3>;\nmov.b64 %rd1, {%r1, %r2;\n}\n", 7, 24,
       "expected '}'"},
      {"unclosed_address", kHead + ".visible .entry k()\n{\nld.global.u32 %r1, [%rd1;\n}\n", 6, 25, "expected ']'"},
      {"bad_offset", kHead + ".visible .entry k()\n{\nld.global.u32 %r1, [%rd1+%r2];\n}\n", 6, 26,
       "expected a number"},
      {"unterminated_comment", kHead + "/* never closed\n", 4, 1, "unterminated block comment"},
      {"unterminated_string", kHead + ".pragma \"nounroll;\n", 4, 9, "unterminated string"},
      {"bad_character", kHead + ".visible .entry k()\n{\nadd.s32 %r1, %r2, #3;\n}\n", 6, 19, "unexpected character"},
      {"nul_byte", kHead + std::string("ret\0;", 5), 4, 4, "byte 0x00"},
      {"operand_is_directive", kHead + ".visible .entry k()\n{\nmov.u32 %r1, ;\n}\n", 6, 14, "expected a register"},
      {"guard_without_predicate", kHead + ".visible .entry k()\n{\n@ bra L;\n}\n", 6, 3, "predicate register"},
      {"label_without_statement_body", kHead + ".visible .entry k()\n{\n.foo .b32 x;\n}\n", 6, 1,
       "unexpected directive"},
      {"missing_function_name", kHead + ".visible .entry (\n)\n{\n}\n", 4, 17, "expected a name"},
      {"bad_param", kHead + ".visible .entry k(.u64 p)\n{\n}\n", 4, 19, "expected .param or .reg"},
      {"version_without_number", ".version sm_90\n", 1, 10, "expected a number"},
      {"bad_hex_float", kHead + ".visible .entry k()\n{\nmov.f32 %f1, 0f3F8;\n}\n", 6, 14, "hex digits"},
      {"unbalanced_initializer", kHead + ".global .b32 a[2] = {1, 2}};\n", 4, 27, "unbalanced"},
      {"section_garbage", kHead + ".section .debug_info\n{\n+ 3\n}\n", 6, 1, "data directive"},
      {"nested_address", kHead + ".visible .entry k()\n{\nld.u32 %r1, [%rd1, [%rd2]];\n}\n", 6, 20,
       "nested address"},
      {"empty_file_is_fine_but_truncated_entry", kHead + ".visible .entry k(", 4, 19, "expected .param"},
  };
}

class Malformed : public ::testing::TestWithParam<Case> {};

TEST_P(Malformed, ReportsLineAndColumn) {
  const Case& c = GetParam();
  ParseResult r = parse_ptx(c.text);
  ASSERT_FALSE(r.ok()) << "input was accepted";
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->loc.line, c.line) << r.error->format("f.ptx");
  EXPECT_EQ(r.error->loc.col, c.col) << r.error->format("f.ptx");
  EXPECT_NE(r.error->message.find(c.message_part), std::string::npos) << r.error->format("f.ptx");
  const std::string formatted = r.error->format("f.ptx");
  EXPECT_EQ(formatted.rfind("f.ptx:" + std::to_string(c.line) + ":" + std::to_string(c.col) + ": error: ", 0), 0u)
      << formatted;
}

INSTANTIATE_TEST_SUITE_P(Inputs, Malformed, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& p) { return std::string(p.param.name); });

TEST(MalformedDeep, DeeplyNestedScopesDoNotOverflowTheStack) {
  std::string body(200000, '{');
  ParseResult r = parse_ptx(kHead + ".visible .entry k()\n{\n" + body);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error->message.find("expected '}'"), std::string::npos);
}

TEST(MalformedDeep, LongNegationChainIsRejected) {
  ParseResult r = parse_ptx(kHead + ".visible .entry k()\n{\nnot.pred %p1, " + std::string(100000, '!') + "%p2;\n}\n");
  ASSERT_FALSE(r.ok());
}

TEST(MalformedDeep, EmptyInputIsAnEmptyModule) {
  ParseResult r = parse_ptx("");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.module->items.empty());
}

}  // namespace
}  // namespace ptxevo::ir
