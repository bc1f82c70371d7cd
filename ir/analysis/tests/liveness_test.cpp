#include "ir/analysis/liveness.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "ir/analysis/tests/test_helpers.hpp"

namespace ptxevo::ir {
namespace {

int reg_id(const Function& f, const std::string& name) {
  for (std::size_t i = 0; i < f.registers.size(); ++i)
    if (f.registers[i].name == name) return static_cast<int>(i);
  throw std::runtime_error("no register " + name);
}

RegisterPressure pressure_of(const Function& f) {
  const Cfg g = build_cfg(f);
  return register_pressure(f, g, compute_liveness(f, g));
}

TEST(Liveness, StraightLineCountedByHand) {
  // Live 32-bit slots after each instruction (rd = 2 slots):
  //   ld rd1            {rd1}            2
  //   ld r1             {rd1 r1}         3
  //   add r2 = r1+1     {rd1 r1 r2}      4   <- peak, b32 = 2, b64 = 1
  //   mul r3 = r1*r2    {rd1 r3}         3   (r1, r2 die here; before it: 4)
  //   cvta rd2 = rd1    {rd2 r3}         3
  //   st [rd2], r3      {}               0
  const Module m = test::parse(test::kernel(R"(
  .reg .b32 %r<4>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [n];
  add.s32 %r2, %r1, 1;
  mul.lo.s32 %r3, %r1, %r2;
  cvta.to.global.u64 %rd2, %rd1;
  st.global.u32 [%rd2], %r3;
  ret;
)"));
  const Function& f = test::function(m, "k");
  const RegisterPressure p = pressure_of(f);
  EXPECT_EQ(p.max_slots, 4);
  EXPECT_EQ(p.max_live[class_index(RegClass::B32)], 2);
  EXPECT_EQ(p.max_live[class_index(RegClass::B64)], 1);  // rd1 dies where rd2 is born
  EXPECT_EQ(p.max_live[class_index(RegClass::Pred)], 0);
  EXPECT_EQ(p.estimated_registers, 4 + kReservedRegisters);
  EXPECT_EQ(estimate_registers(f), 4 + kReservedRegisters);
  // The peak holds after the add and before the mul (same point): either names it.
  const std::size_t add = test::find_instruction(f, "add.s32"), mul = test::find_instruction(f, "mul.lo.s32");
  EXPECT_TRUE(p.peak_statement == add || p.peak_statement == mul) << p.peak_statement;
}

TEST(Liveness, DeadDefinitionsStillOccupyARegister) {
  const Module m = test::parse(test::kernel(R"(
  .reg .b32 %r<4>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, 1;
  mov.u32 %r2, 2;
  mov.u32 %r3, 3;
  st.u32 [%rd1], %r1;
  ret;
)"));
  const RegisterPressure p = pressure_of(test::function(m, "k"));
  // r2 and r3 are never read, but each exists next to rd1 and r1 at its definition.
  EXPECT_EQ(p.max_live[class_index(RegClass::B32)], 2);
  EXPECT_EQ(p.max_slots, 4);
}

TEST(Liveness, GuardedWriteDoesNotKill) {
  // r1 must survive the guarded mov: when %p1 is false the store reads the loaded value.
  const Module m = test::parse(test::kernel(R"(
  .reg .pred %p<2>;
  .reg .b32 %r<3>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [n];
  ld.param.u32 %r2, [n+4];
  setp.eq.s32 %p1, %r2, 0;
  @%p1 mov.u32 %r1, 5;
  st.u32 [%rd1], %r1;
  ret;
)"));
  const RegisterPressure p = pressure_of(test::function(m, "k"));
  EXPECT_EQ(p.max_live[class_index(RegClass::B32)], 2);  // r1 and r2 together
  EXPECT_EQ(p.max_live[class_index(RegClass::Pred)], 1);
  EXPECT_EQ(p.max_slots, 4);
}

TEST(Liveness, BlockLiveInOutAcrossIfElse) {
  const Module m = test::parse(test::kernel(R"(
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
)"));
  const Function& f = test::function(m, "k");
  const Cfg g = build_cfg(f);
  const Liveness lv = compute_liveness(f, g);
  const int r1 = reg_id(f, "%r1"), r2 = reg_id(f, "%r2"), r3 = reg_id(f, "%r3"), p1 = reg_id(f, "%p1");
  EXPECT_EQ(lv.live_in[0].size(), 0u);
  EXPECT_TRUE(lv.live_out[0].contains(r1));
  EXPECT_FALSE(lv.live_out[0].contains(p1));  // consumed by the branch
  EXPECT_FALSE(lv.live_out[0].contains(r2));  // defined on both arms
  EXPECT_TRUE(lv.live_in[1].contains(r1));
  EXPECT_FALSE(lv.live_in[1].contains(r2));
  EXPECT_TRUE(lv.live_out[1].contains(r2));
  EXPECT_TRUE(lv.live_out[2].contains(r2));
  EXPECT_EQ(lv.live_in[3].size(), 2u);  // r1, r2
  EXPECT_FALSE(lv.live_in[3].contains(r3));
  EXPECT_EQ(lv.live_out[3].size(), 0u);
}

TEST(Liveness, LoopCarriedValueIsLiveAroundTheBackEdge) {
  const Module m = test::parse(test::kernel(R"(
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<2>;
  ld.param.u32 %r1, [n];
  mov.u32 %r2, 0;
  mov.u32 %r3, 0;
LOOP:
  add.s32 %r3, %r3, %r2;
  add.s32 %r2, %r2, 1;
  setp.lt.s32 %p1, %r2, %r1;
  @%p1 bra LOOP;
  ld.param.u64 %rd1, [out];
  st.u32 [%rd1], %r3;
  ret;
)"));
  const Function& f = test::function(m, "k");
  const Cfg g = build_cfg(f);
  const Liveness lv = compute_liveness(f, g);
  const int loop = test::block_labeled(g, "LOOP");
  ASSERT_EQ(loop, 1);
  EXPECT_EQ(lv.live_in[loop].size(), 3u);   // r1, r2, r3
  EXPECT_EQ(lv.live_out[loop].size(), 3u);  // the back edge keeps all three
  const RegisterPressure p = register_pressure(f, g, lv);
  EXPECT_EQ(p.max_live[class_index(RegClass::B32)], 3);
  EXPECT_EQ(p.max_slots, 3);  // r1 r2 r3 in the loop, rd1 (2) + r3 after it; predicates are free
}

TEST(Liveness, VectorRegisterSlotsAndPartialWrites) {
  // A .v4 .f32 register takes four 32-bit slots; writing one component keeps the rest live.
  const Module m = test::parse(test::kernel(R"(
  .reg .v4 .f32 %v;
  .reg .f32 %f<2>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out];
  ld.global.v4.f32 %v, [%rd1];
L:
  mov.f32 %v.x, 0f3F800000;
  st.global.v4.f32 [%rd1], %v;
  ret;
)"));
  const Function& f = test::function(m, "k");
  const Cfg g = build_cfg(f);
  const Liveness lv = compute_liveness(f, g);
  const RegisterPressure p = register_pressure(f, g, lv);
  EXPECT_EQ(p.max_live[class_index(RegClass::B128)], 1);
  EXPECT_EQ(p.max_slots, 6);  // rd1 (2) + v (4)
  const int v = reg_id(f, "%v");
  EXPECT_EQ(register_slots(f.registers[static_cast<std::size_t>(v)]), 4);
  // The label splits the block right before the component write: v must be live into it.
  ASSERT_EQ(test::block_labeled(g, "L"), 1);
  EXPECT_TRUE(lv.live_in[1].contains(v));
}

TEST(Liveness, EmptyFunctionNeedsOnlyTheReservedRegisters) {
  const Module m = test::parse(".version 8.0\n.target sm_90a\n.visible .entry e()\n{\n}\n");
  EXPECT_EQ(estimate_registers(test::function(m, "e")), kReservedRegisters);
}

}  // namespace
}  // namespace ptxevo::ir
