#include "ir/analysis/loops.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ir/analysis/tests/test_helpers.hpp"

namespace ptxevo::ir {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

TEST(Loops, NestedDepthAndParent) {
  const Module m = test::parse(test::kernel(R"(
  .reg .pred %p<3>;
  .reg .b32 %r<4>;
  ld.param.u32 %r1, [n];
  mov.u32 %r2, 0;
OUTER:
  mov.u32 %r3, 0;
INNER:
  add.s32 %r3, %r3, 1;
  setp.lt.s32 %p1, %r3, %r1;
  @%p1 bra INNER;
  add.s32 %r2, %r2, 1;
  setp.lt.s32 %p2, %r2, %r1;
  @%p2 bra OUTER;
  ret;
)"));
  const Cfg g = build_cfg(test::function(m, "k"));
  ASSERT_EQ(g.blocks.size(), 5u);  // 0 pre, 1 OUTER, 2 INNER, 3 inner exit/outer latch, 4 ret
  const LoopInfo li = find_loops(g, compute_dominators(g));
  ASSERT_EQ(li.loops.size(), 2u);
  const int outer = li.innermost[1];
  const int inner = li.innermost[2];
  ASSERT_NE(outer, inner);
  EXPECT_EQ(li.loops[outer].header, 1);
  EXPECT_THAT(li.loops[outer].blocks, ElementsAre(1, 2, 3));
  EXPECT_THAT(li.loops[outer].latches, ElementsAre(3));
  EXPECT_EQ(li.loops[outer].parent, -1);
  EXPECT_EQ(li.loops[outer].depth, 1);
  EXPECT_EQ(li.loops[inner].header, 2);
  EXPECT_THAT(li.loops[inner].blocks, ElementsAre(2));
  EXPECT_EQ(li.loops[inner].parent, outer);
  EXPECT_EQ(li.loops[inner].depth, 2);
  EXPECT_EQ(li.loop_depth(0), 0);
  EXPECT_EQ(li.loop_depth(1), 1);
  EXPECT_EQ(li.loop_depth(2), 2);
  EXPECT_EQ(li.loop_depth(3), 1);
  EXPECT_EQ(li.loop_depth(4), 0);
  EXPECT_EQ(li.max_depth(), 2);
}

TEST(Loops, BackEdgesToOneHeaderMerge) {
  const Module m = test::parse(test::kernel(R"(
  .reg .pred %p<3>;
  .reg .b32 %r<2>;
  mov.u32 %r1, 0;
H:
  add.s32 %r1, %r1, 1;
  setp.lt.s32 %p1, %r1, 5;
  @%p1 bra H;
  setp.lt.s32 %p2, %r1, 9;
  @%p2 bra H;
  ret;
)"));
  const Cfg g = build_cfg(test::function(m, "k"));
  ASSERT_EQ(g.blocks.size(), 4u);  // 0, 1 H, 2 second test, 3 ret
  const LoopInfo li = find_loops(g, compute_dominators(g));
  ASSERT_EQ(li.loops.size(), 1u);
  EXPECT_EQ(li.loops[0].header, 1);
  EXPECT_THAT(li.loops[0].latches, UnorderedElementsAre(1, 2));
  EXPECT_THAT(li.loops[0].blocks, ElementsAre(1, 2));
  EXPECT_EQ(li.max_depth(), 1);
}

TEST(Loops, StraightLineHasNone) {
  const Module m = test::parse(test::kernel("  ret;"));
  const Cfg g = build_cfg(test::function(m, "k"));
  const LoopInfo li = find_loops(g, compute_dominators(g));
  EXPECT_TRUE(li.loops.empty());
  EXPECT_EQ(li.max_depth(), 0);
  EXPECT_EQ(li.loop_depth(0), 0);
  EXPECT_EQ(li.loop_depth(7), 0);  // out of range is "not in a loop", not a crash
}

}  // namespace
}  // namespace ptxevo::ir
