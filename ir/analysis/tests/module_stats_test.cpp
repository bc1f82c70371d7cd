#include "ir/analysis/module_stats.hpp"

#include <gtest/gtest.h>

#include "ir/analysis/tests/test_helpers.hpp"

namespace ptxevo::ir {
namespace {

constexpr const char* kModule = R"(
.version 8.0
.target sm_90a
.address_size 64
.shared .align 16 .b8 smem[4096];
.shared .align 4 .f32 unused_smem[64];
.global .u32 counter;
.extern .func (.param .b32 rv) helper(.param .b32 a);

.visible .entry k(.param .u64 out, .param .u32 n)
.maxntid 128, 1, 1
.minnctapersm 2
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .f32 %f<3>;
  .reg .b64 %rd<3>;
  .local .align 8 .b8 depot[32];
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, smem;
  mov.u32 %r3, 0;
LOOP:
  ld.shared.f32 %f1, [%r2];
  add.f32 %f2, %f1, %f1;
  {
  .param .b32 param0;
  st.param.b32 [param0], %r3;
  .param .b32 retval0;
  call.uni (retval0), helper, (param0);
  ld.param.b32 %r4, [retval0];
  }
  add.s32 %r3, %r3, %r4;
  setp.lt.s32 %p1, %r3, %r1;
  @%p1 bra LOOP;
  cvta.to.global.u64 %rd2, %rd1;
  st.global.f32 [%rd2], %f2;
  ret;
}
)";

TEST(ModuleStats, AnalyzeModule) {
  const Module m = test::parse(kModule);
  const ModuleStats s = analyze_module(m);
  EXPECT_EQ(s.version, "8.0");
  EXPECT_EQ(s.target, "sm_90a");
  EXPECT_EQ(s.address_size, "64");
  EXPECT_EQ(s.global_vars, 3u);
  EXPECT_EQ(s.entries, 1u);
  ASSERT_EQ(s.functions.size(), 2u);

  const FunctionStats& helper = s.functions[0];
  EXPECT_EQ(helper.name, "helper");
  EXPECT_FALSE(helper.has_body);
  EXPECT_EQ(helper.blocks, 0u);

  const FunctionStats& k = s.functions[1];
  EXPECT_TRUE(k.is_entry);
  EXPECT_EQ(k.blocks, 3u);
  EXPECT_EQ(k.edges, 3u);  // 0->1, 1->1, 1->2
  EXPECT_EQ(k.unreachable_blocks, 0u);
  EXPECT_EQ(k.loops, 1u);
  EXPECT_EQ(k.max_loop_depth, 1);
  EXPECT_EQ(k.instructions, 15u);
  EXPECT_EQ(k.declared_registers[class_index(RegClass::Pred)], 2);
  EXPECT_EQ(k.declared_registers[class_index(RegClass::B32)], 6 + 3);  // %r<6> and %f<3>
  EXPECT_EQ(k.declared_registers[class_index(RegClass::B64)], 3);
  EXPECT_EQ(k.shared_bytes, 4096u);  // unused_smem is not named by k
  EXPECT_EQ(k.local_bytes, 32u);
  ASSERT_EQ(k.callees.size(), 1u);
  EXPECT_EQ(k.callees[0], "helper");
  ASSERT_EQ(k.perf.size(), 2u);
  EXPECT_EQ(k.mix.count(InstrCategory::SharedLoad), 1u);
  EXPECT_EQ(k.mix.count(InstrCategory::Fp32), 1u);
  EXPECT_EQ(k.memory.accesses.size(), 6u);
  EXPECT_EQ(k.estimated_registers, k.max_live_slots + kReservedRegisters);
  EXPECT_GT(k.max_live_slots, 0);
  EXPECT_EQ(analyze_function(*m.find_function("k")).shared_bytes, 0u);  // no module: only body decls
}

TEST(ModuleStats, JsonHasTheNumbers) {
  const Module m = test::parse(kModule);
  const nlohmann::json j = to_json(analyze_module(m));
  EXPECT_EQ(j["target"], "sm_90a");
  ASSERT_EQ(j["functions"].size(), 2u);
  const auto& k = j["functions"][1];
  EXPECT_EQ(k["name"], "k");
  EXPECT_EQ(k["loops"]["count"], 1);
  EXPECT_EQ(k["registers"]["declared"]["b64"], 3);
  EXPECT_EQ(k["perf"]["maxntid"], nlohmann::json::array({128, 1, 1}));
  EXPECT_EQ(k["perf"]["minnctapersm"], nlohmann::json::array({2}));
  EXPECT_EQ(k["instruction_mix"]["categories"]["shared_load"], 1);
  EXPECT_EQ(k["instruction_mix"]["categories"]["tensor_core"], 0);  // zeros are present too
  EXPECT_EQ(k["instruction_mix"]["access_width_bits"]["32"], 5);
  bool found = false;
  for (const auto& g : k["memory"]["groups"])
    if (g["space"] == "shared" && g["direction"] == "load" && g["loop_depth"] == 1) {
      found = true;
      EXPECT_EQ(g["width_bits"], 32);
      EXPECT_EQ(g["count"], 1);
      EXPECT_TRUE(g["source"].is_null());
    }
  EXPECT_TRUE(found);
}

TEST(ModuleStats, TextReport) {
  const Module m = test::parse(kModule);
  const std::string t = to_text(analyze_module(m));
  EXPECT_NE(t.find("target sm_90a"), std::string::npos);
  EXPECT_NE(t.find(".func helper  (declaration)"), std::string::npos);
  EXPECT_NE(t.find(".entry k\n"), std::string::npos);
  EXPECT_NE(t.find(".maxntid 128, 1, 1"), std::string::npos);
  EXPECT_NE(t.find("3 blocks, 3 edges"), std::string::npos);
  EXPECT_NE(t.find("calls           helper"), std::string::npos);
  EXPECT_NE(t.find("4096 B shared, 32 B local"), std::string::npos);
}

TEST(ModuleStats, EmptyFunction) {
  const Module m = test::parse(".version 8.0\n.target sm_90a\n.visible .entry e()\n{\n}\n");
  const FunctionStats f = analyze_function(test::function(m, "e"));
  EXPECT_TRUE(f.has_body);
  EXPECT_EQ(f.blocks, 1u);
  EXPECT_EQ(f.edges, 0u);
  EXPECT_EQ(f.instructions, 0u);
  EXPECT_EQ(f.loops, 0u);
  EXPECT_EQ(f.memory.accesses.size(), 0u);
  EXPECT_EQ(f.estimated_registers, kReservedRegisters);
  EXPECT_NO_THROW((void)to_text(analyze_module(m)));
}

TEST(ModuleStats, VarSizes) {
  const Module m = test::parse(
      ".version 8.0\n.target sm_90a\n.shared .align 16 .v4 .f32 a[8][2];\n.extern .shared .align 16 .b8 dyn[];\n"
      ".global .u64 g;\n");
  const auto globals = m.globals();
  ASSERT_EQ(globals.size(), 3u);
  EXPECT_EQ(var_size_bytes(*globals[0]), 16u * 8 * 2);
  EXPECT_EQ(var_size_bytes(*globals[1]), 0u);
  EXPECT_EQ(var_size_bytes(*globals[2]), 8u);
}

}  // namespace
}  // namespace ptxevo::ir
