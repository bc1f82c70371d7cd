#include "search/ptx_profile.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "campaign_fixture.hpp"
#include "search/cost_features.hpp"

namespace ptxevo::search {
namespace {

// A loop of a 128-bit read-only load and an FMA, then a 32-bit store.
constexpr const char* kLoopKernel = R"(.version 8.0
.target sm_90a
.address_size 64
.visible .entry scale(.param .u64 p, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  .reg .f32 %f<8>;
  ld.param.u64 %rd1, [p];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, 0;
$L_loop:
  ld.global.nc.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];
  fma.rn.f32 %f5, %f1, %f2, %f3;
  add.s32 %r2, %r2, 1;
  setp.lt.u32 %p1, %r2, %r1;
  @%p1 bra $L_loop;
  st.global.f32 [%rd1], %f5;
  ret;
}
)";

TEST(PtxProfile, CountsKindsWidthsHintsAndLoops) {
  const auto p = profile_ptx(kLoopKernel);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].function, "scale");
  EXPECT_EQ(p[0].instructions, 10);
  using C = ir::InstrCategory;
  EXPECT_EQ(p[0].category(C::GlobalLoad), 1);
  EXPECT_EQ(p[0].category(C::GlobalStore), 1);
  EXPECT_EQ(p[0].category(C::Fp32), 1);
  EXPECT_EQ(p[0].category(C::Param), 2);
  EXPECT_EQ(p[0].category(C::Control), 2);  // bra, ret
  EXPECT_EQ(p[0].global_loads, 1);
  EXPECT_EQ(p[0].global_load_bytes, 16);
  EXPECT_EQ(p[0].global_store_bytes, 4);
  EXPECT_EQ(p[0].cache_hinted, 1);  // .nc
  EXPECT_EQ(p[0].in_loops, 5);      // ld, fma, add, setp, bra
  EXPECT_EQ(p[0].max_loop_depth, 1);
}

TEST(PtxProfile, JsonRoundTripsAndBadTextGivesNone) {
  const auto p = profile_ptx(kLoopKernel);
  const auto back = ptx_profile_from_json(ptx_profile_json(p));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].function, p[0].function);
  EXPECT_EQ(back[0].by_category, p[0].by_category);
  EXPECT_EQ(back[0].global_load_bytes, p[0].global_load_bytes);
  EXPECT_EQ(back[0].in_loops, p[0].in_loops);
  EXPECT_TRUE(ptx_profile_from_json("").empty());
  EXPECT_TRUE(ptx_profile_from_json("{not json").empty());
  EXPECT_TRUE(ptx_profile_from_json("[1, 2]").empty());
}

TEST(PtxProfile, PtxThatDoesNotParseNamesTheLine) {
  try {
    profile_ptx(".version 8.0\n.target sm_90a\n.visible .entry k( {\n");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
  }
}

// The IR columns: present with a profile of the launched entry, all 0 without one; a wider load
// shows in the width column; more resident threads put more bytes in flight.
TEST(PtxProfile, CostFeaturesReadTheMainKernelsProfile) {
  testing::ScaleOp op;
  FeatureLayout layout;
  Genome g;
  g.knobs = {{"BLOCK", std::int64_t{256}}, {"UNROLL", std::int64_t{4}}};
  std::vector<evaluator::FunctionResources> res(1);
  res[0].name = "scale";
  res[0].registers = 32;
  const auto names = layout.names();
  auto col = [&](const FeatureRow& f, const std::string& n) {
    const auto it = std::find(names.begin(), names.end(), n);
    EXPECT_NE(it, names.end()) << n;
    return f.x[static_cast<std::size_t>(it - names.begin())];
  };
  const auto prof = profile_ptx(kLoopKernel);
  const FeatureRow with = cost_features(layout, op, {}, {{"N", 1 << 20}}, g, res, prof);
  const FeatureRow without = cost_features(layout, op, {}, {{"N", 1 << 20}}, g, res, {});
  ASSERT_EQ(with.x.size(), layout.size());
  EXPECT_GE(layout.size(), 39u);
  EXPECT_EQ(col(with, "ptx_profiled"), 1);
  EXPECT_EQ(col(without, "ptx_profiled"), 0);
  EXPECT_NEAR(col(with, "mix_fp32"), 0.1, 1e-12);
  EXPECT_NEAR(col(with, "loop_share"), 0.5, 1e-12);
  EXPECT_NEAR(col(with, "global_load_width"), 1.0, 1e-12);   // 16 bytes / 16
  EXPECT_NEAR(col(with, "global_store_width"), 0.25, 1e-12);
  EXPECT_NEAR(col(with, "cache_hinted_share"), 0.5, 1e-12);
  for (std::size_t j = 0; j < names.size(); ++j) {
    if (names[j].rfind("mix_", 0) == 0 || names[j] == "log2_bytes_in_flight_ratio") {
      EXPECT_EQ(without.x[j], 0) << names[j];
    }
  }
  // 1024 CTAs of 256 threads, all resident (8 a SM): 262144 threads x 16 B against 4.2 TB/s x 700 ns.
  EXPECT_NEAR(col(with, "log2_bytes_in_flight_ratio"), std::log2(262144.0 * 16 / (4.2e12 * 700e-9)), 1e-9);
  auto half = res;
  half[0].registers = 128;  // 2 CTAs a SM: fewer loads in flight
  const FeatureRow fewer = cost_features(layout, op, {}, {{"N", 1 << 20}}, g, half, prof);
  EXPECT_LT(col(fewer, "log2_bytes_in_flight_ratio"), col(with, "log2_bytes_in_flight_ratio"));
}

}  // namespace
}  // namespace ptxevo::search
