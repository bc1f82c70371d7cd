#include "ir/analysis/cfg.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ir/analysis/tests/test_helpers.hpp"

namespace ptxevo::ir {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

// if (n > 0) r2 = 2 else r2 = 1; r3 = r2 + n
constexpr const char* kIfElse = R"(
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  ld.param.u32 %r1, [n];
  setp.gt.s32 %p1, %r1, 0;
  @%p1 bra THEN;
  mov.u32 %r2, 1;
  bra.uni JOIN;
THEN:
  mov.u32 %r2, 2;
JOIN:
  add.s32 %r3, %r2, %r1;
  ret;
)";

TEST(Cfg, IfElseBlocksAndEdges) {
  const Module m = test::parse(test::kernel(kIfElse));
  const Function& f = test::function(m, "k");
  const Cfg g = build_cfg(f);
  ASSERT_EQ(g.blocks.size(), 4u);
  EXPECT_EQ(g.entry, 0);
  const int then_b = test::block_labeled(g, "THEN");
  const int join_b = test::block_labeled(g, "JOIN");
  EXPECT_EQ(then_b, 2);
  EXPECT_EQ(join_b, 3);
  EXPECT_EQ(g.blocks[0].instructions.size(), 3u);
  EXPECT_EQ(g.blocks[1].instructions.size(), 2u);
  EXPECT_EQ(g.blocks[2].instructions.size(), 1u);
  EXPECT_EQ(g.blocks[3].instructions.size(), 2u);
  EXPECT_THAT(g.blocks[0].succs, UnorderedElementsAre(1, then_b));
  EXPECT_THAT(g.blocks[1].succs, ElementsAre(join_b));       // unguarded bra: target only
  EXPECT_THAT(g.blocks[2].succs, ElementsAre(join_b));       // falls through into JOIN
  EXPECT_TRUE(g.blocks[3].succs.empty());                     // ret
  EXPECT_THAT(g.blocks[3].preds, UnorderedElementsAre(1, then_b));
  EXPECT_EQ(g.edge_count(), 4u);
  EXPECT_TRUE(g.blocks[3].exits);
  EXPECT_FALSE(g.blocks[0].exits);
  // Statement -> block: the add sits in JOIN, the .reg declarations before any block.
  EXPECT_EQ(g.block_of_statement(test::find_instruction(f, "add.s32")), join_b);
  EXPECT_EQ(g.block_of_statement(0), -1);
}

TEST(Cfg, GuardedBranchAndGuardedReturnFallThrough) {
  const Module m = test::parse(test::kernel(R"(
  .reg .pred %p<3>;
  .reg .b32 %r<2>;
  ld.param.u32 %r1, [n];
  setp.eq.s32 %p1, %r1, 0;
  @!%p1 bra NEXT;
NEXT:
  setp.eq.s32 %p2, %r1, 1;
  @%p2 ret;
  @%p2 bra FAR;
  trap;
FAR:
  exit;
)"));
  const Cfg g = build_cfg(test::function(m, "k"));
  ASSERT_EQ(g.blocks.size(), 5u);
  // A guarded bra to the very next block: target and fall-through coincide, one edge.
  EXPECT_THAT(g.blocks[0].succs, ElementsAre(1));
  // @p ret leaves the function or falls through.
  EXPECT_THAT(g.blocks[1].succs, ElementsAre(2));
  EXPECT_TRUE(g.blocks[1].exits);
  EXPECT_THAT(g.blocks[2].succs, UnorderedElementsAre(3, test::block_labeled(g, "FAR")));
  // An unguarded trap ends the function: no edge into FAR.
  EXPECT_TRUE(g.blocks[3].succs.empty());
  EXPECT_TRUE(g.blocks[3].exits);
  EXPECT_THAT(g.blocks[4].preds, ElementsAre(2));
}

TEST(Cfg, BranchTargetsOfBrxIdx) {
  const Module m = test::parse(test::kernel(R"(
  .reg .b32 %r<3>;
  ld.param.u32 %r1, [n];
  ts: .branchtargets L2, L0;
  brx.idx %r1, ts;
L1:
  mov.u32 %r2, 1;
  bra.uni END;
L0:
  mov.u32 %r2, 0;
  bra.uni END;
L2:
  mov.u32 %r2, 2;
END:
  ret;
)"));
  const Cfg g = build_cfg(test::function(m, "k"));
  const int l0 = test::block_labeled(g, "L0"), l1 = test::block_labeled(g, "L1"), l2 = test::block_labeled(g, "L2");
  ASSERT_GE(l0, 0);
  ASSERT_GE(l2, 0);
  // Exactly the listed targets, in list order; an unguarded brx.idx does not fall through.
  EXPECT_THAT(g.blocks[0].succs, ElementsAre(l2, l0));
  EXPECT_TRUE(g.blocks[l1].preds.empty());  // L1 is unreachable but kept
  EXPECT_EQ(g.blocks.size(), 5u);
}

TEST(Cfg, CallAndLabelInsideScopes) {
  const Module m = test::parse(R"(
.version 8.0
.target sm_90a
.address_size 64
.func (.param .b32 rv) callee(.param .b32 a)
{
  .reg .b32 %r<2>;
  ld.param.b32 %r1, [a];
  st.param.b32 [rv], %r1;
  ret;
}
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<3>;
  .reg .b64 %rd<2>;
  mov.u32 %r1, 5;
  {
  .reg .b32 temp_param_reg;
  .param .b32 param0;
  st.param.b32 [param0], %r1;
  .param .b32 retval0;
  call.uni (retval0), callee, (param0);
  ld.param.b32 %r2, [retval0];
  }
  {
  .reg .pred %q;
  setp.eq.u32 %q, %r2, 0;
  @%q bra DONE_IN;
  add.u32 %r2, %r2, 1;
DONE_IN:
  }
  ld.param.u64 %rd1, [out];
  st.global.u32 [%rd1], %r2;
  ret;
}
)");
  const Cfg g = build_cfg(test::function(m, "k"));
  // The call and the scope markers do not split blocks; the label inside the second scope does.
  ASSERT_EQ(g.blocks.size(), 3u);
  EXPECT_EQ(g.blocks[0].instructions.size(), 6u);  // mov, st, call, ld, setp, @bra
  const int done = test::block_labeled(g, "DONE_IN");
  EXPECT_EQ(done, 2);
  EXPECT_THAT(g.blocks[0].succs, UnorderedElementsAre(1, done));
  EXPECT_THAT(g.blocks[1].succs, ElementsAre(done));
  EXPECT_EQ(g.blocks[2].instructions.size(), 3u);
}

TEST(Cfg, EmptyFunctionAndDeclaration) {
  const Module m = test::parse(R"(
.version 8.0
.target sm_90a
.extern .func ext(.param .b32 a);
.visible .entry e()
{
}
)");
  const Cfg g = build_cfg(test::function(m, "e"));
  ASSERT_EQ(g.blocks.size(), 1u);
  EXPECT_EQ(g.entry, 0);
  EXPECT_TRUE(g.blocks[0].instructions.empty());
  EXPECT_EQ(g.edge_count(), 0u);
  EXPECT_TRUE(g.blocks[0].exits);

  const Cfg decl = build_cfg(test::function(m, "ext"));
  EXPECT_TRUE(decl.blocks.empty());
  EXPECT_EQ(decl.entry, -1);
}

TEST(Cfg, ConsecutiveLabelsShareOneBlock) {
  const Module m = test::parse(test::kernel(R"(
  .reg .b32 %r<2>;
A:
B:
  mov.u32 %r1, 1;
  bra.uni B;
)"));
  const Cfg g = build_cfg(test::function(m, "k"));
  ASSERT_EQ(g.blocks.size(), 1u);
  EXPECT_EQ(g.blocks[0].label, "A");
  EXPECT_THAT(g.blocks[0].aliases, ElementsAre("B"));
  EXPECT_THAT(g.blocks[0].succs, ElementsAre(0));  // self loop through the alias
}

}  // namespace
}  // namespace ptxevo::ir
