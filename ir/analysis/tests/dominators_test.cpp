#include "ir/analysis/dominators.hpp"

#include <gtest/gtest.h>

#include "ir/analysis/tests/test_helpers.hpp"

namespace ptxevo::ir {
namespace {

TEST(Dominators, Diamond) {
  // 0 -> {1, 2} -> 3
  const Module m = test::parse(test::kernel(R"(
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  ld.param.u32 %r1, [n];
  setp.gt.s32 %p1, %r1, 0;
  @%p1 bra RIGHT;
  mov.u32 %r2, 1;
  bra.uni JOIN;
RIGHT:
  mov.u32 %r2, 2;
JOIN:
  ret;
)"));
  const Cfg g = build_cfg(test::function(m, "k"));
  ASSERT_EQ(g.blocks.size(), 4u);
  const Dominators d = compute_dominators(g);
  EXPECT_EQ(d.idom[0], -1);
  EXPECT_EQ(d.idom[1], 0);
  EXPECT_EQ(d.idom[2], 0);
  EXPECT_EQ(d.idom[3], 0);  // neither arm dominates the join
  EXPECT_TRUE(d.dominates(0, 3));
  EXPECT_TRUE(d.dominates(3, 3));
  EXPECT_FALSE(d.dominates(1, 3));
  EXPECT_FALSE(d.dominates(2, 3));
  EXPECT_FALSE(d.dominates(3, 0));
  ASSERT_EQ(d.rpo.size(), 4u);
  EXPECT_EQ(d.rpo.front(), 0);
  EXPECT_EQ(d.rpo.back(), 3);  // the join comes after both arms
}

TEST(Dominators, ChainLoopAndUnreachable) {
  // 0 -> 1(H) -> 2 -> {1, 3}; 4 is unreachable (after an unguarded bra, no label).
  const Module m = test::parse(test::kernel(R"(
  .reg .pred %p<2>;
  .reg .b32 %r<3>;
  mov.u32 %r1, 0;
H:
  add.s32 %r1, %r1, 1;
  setp.lt.s32 %p1, %r1, 10;
  @%p1 bra H2;
  bra.uni OUT;
  mov.u32 %r2, 3;
H2:
  bra.uni H;
OUT:
  ret;
)"));
  const Cfg g = build_cfg(test::function(m, "k"));
  // blocks: 0 [mov], 1 H [add setp @bra], 2 [bra OUT], 3 [mov] unreachable, 4 H2 [bra H], 5 OUT [ret]
  ASSERT_EQ(g.blocks.size(), 6u);
  const Dominators d = compute_dominators(g);
  EXPECT_FALSE(d.reachable(3));
  EXPECT_EQ(d.idom[3], -1);
  EXPECT_FALSE(d.dominates(0, 3));
  EXPECT_EQ(d.idom[1], 0);
  EXPECT_EQ(d.idom[4], 1);
  EXPECT_EQ(d.idom[2], 1);
  EXPECT_EQ(d.idom[5], 2);
  EXPECT_TRUE(d.dominates(1, 5));
  EXPECT_FALSE(d.dominates(4, 1));
  EXPECT_EQ(d.rpo.size(), 5u);
}

}  // namespace
}  // namespace ptxevo::ir
