#include <gtest/gtest.h>

#include "ir/verifier.hpp"
#include "test_util.hpp"

namespace ptxevo::ir {
namespace {

using testing::parse_or_fail;
using testing::wrap_kernel;

std::vector<Diagnostic> check(const std::string& body, const std::string& decls = "") {
  return verify(parse_or_fail(wrap_kernel(body, decls)));
}

TEST(Verifier, CleanKernelHasNoDiagnostics) {
  EXPECT_TRUE(check(".reg .b32 %r<3>;\n.reg .pred %p<2>;\nL1:\nmov.u32 %r1, %tid.x;\n"
                    "setp.eq.u32 %p1, %r1, 0;\n@%p1 bra L1;\nst.shared.u32 [smem+4], %r1;\nret;",
                    ".shared .align 4 .b8 smem[16];\n")
                  .empty());
}

TEST(Verifier, UndeclaredRegisterWithPosition) {
  auto d = check(".reg .b32 %r<3>;\nmov.u32 %r1, %r7;");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d[0].message.find("undeclared register '%r7'"), std::string::npos);
  EXPECT_EQ(d[0].loc.line, 9u);
}

TEST(Verifier, RangeBoundIsExclusive) {
  auto d = check(".reg .b32 %r<3>;\nmov.u32 %r3, 0;");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d[0].message.find("'%r3'"), std::string::npos);
}

TEST(Verifier, UndefinedLabel) {
  auto d = check("bra NOWHERE;");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d[0].message.find("undefined label 'NOWHERE'"), std::string::npos);
}

TEST(Verifier, GuardMustBePredicate) {
  auto d = check(".reg .b32 %r<3>;\n@%r1 mov.u32 %r2, 0;");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d[0].message.find("not a predicate"), std::string::npos);
}

TEST(Verifier, ScopedRegisterIsInvisibleOutsideItsScope) {
  auto d = check(".reg .b32 %r<2>;\n{\n.reg .b32 t;\n}\nmov.u32 %r1, t;");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d[0].message.find("undefined name 't'"), std::string::npos);
}

TEST(Verifier, MissingVersionAndTarget) {
  Module m = parse_or_fail(".address_size 64\n");
  auto d = verify(m);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_NE(d[0].message.find(".version"), std::string::npos);
  EXPECT_NE(d[1].message.find(".target"), std::string::npos);
}

TEST(Verifier, BranchToVariableIsNotALabel) {
  auto d = check("bra smem;", ".shared .align 4 .b8 smem[16];\n");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d[0].message.find("is not a label"), std::string::npos);
}

}  // namespace
}  // namespace ptxevo::ir
