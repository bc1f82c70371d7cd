#include <gtest/gtest.h>

#include "ir/lexer.hpp"

namespace ptxevo::ir {
namespace {

std::vector<std::string> texts(const std::string& s) {
  std::vector<std::string> out;
  for (const auto& t : tokenize(s))
    if (t.kind != TokenKind::End) out.emplace_back(t.text);
  return out;
}

TEST(Lexer, SplitsOpcodeModifiersAndOperands) {
  EXPECT_EQ(texts("ld.global.nc.v4.f32 {%f1, %f2}, [%rd1+16];"),
            (std::vector<std::string>{"ld", ".global", ".nc", ".v4", ".f32", "{", "%f1", ",", "%f2", "}", ",", "[",
                                      "%rd1", "+", "16", "]", ";"}));
}

TEST(Lexer, KeepsDoubleColonModifiersWhole) {
  EXPECT_EQ(texts("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes .L2::256B"),
            (std::vector<std::string>{"cp", ".async", ".bulk", ".shared::cluster", ".global",
                                      ".mbarrier::complete_tx::bytes", ".L2::256B"}));
}

TEST(Lexer, FloatLiteralsKeepTheirSpelling) {
  EXPECT_EQ(texts("0f3F800000 0d3FF0000000000000 1.5e-3 0x1F 12U"),
            (std::vector<std::string>{"0f3F800000", "0d3FF0000000000000", "1.5e-3", "0x1F", "12U"}));
}

TEST(Lexer, SkipsCommentsAndTracksPositions) {
  auto toks = tokenize("// line one\n  /* block\n comment */ add.s32");
  ASSERT_GE(toks.size(), 2u);
  EXPECT_EQ(toks[0].text, "add");
  EXPECT_EQ(toks[0].loc.line, 3u);
  EXPECT_EQ(toks[0].loc.col, 13u);
  EXPECT_TRUE(toks[0].space_before);
  EXPECT_FALSE(toks[1].space_before);
}

TEST(Lexer, RejectsBadCharacterWithPosition) {
  try {
    tokenize("add.s32 %r1,\n  %r2 # 3;");
    FAIL() << "expected an error";
  } catch (const ParseError& e) {
    EXPECT_EQ(e.loc().line, 2u);
    EXPECT_EQ(e.loc().col, 7u);
    EXPECT_NE(std::string(e.what()).find("'#'"), std::string::npos);
  }
}

TEST(Lexer, RejectsShortHexFloat) { EXPECT_THROW(tokenize("mov.f32 %f1, 0f3F80;"), ParseError); }

}  // namespace
}  // namespace ptxevo::ir
