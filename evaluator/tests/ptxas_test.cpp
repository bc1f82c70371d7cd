#include <gtest/gtest.h>

#include "evaluator/ptxas.hpp"

namespace ptxevo::evaluator {
namespace {

const char* kPtx = R"(.version 8.7
.target sm_90a
.address_size 64
.visible .entry copy(.param .u64 p)
{
	.reg .b32 %r<3>;
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [p];
	cvta.to.global.u64 %rd2, %rd1;
	ld.global.u32 %r1, [%rd2];
	add.s32 %r2, %r1, 1;
	st.global.u32 [%rd2], %r2;
	ret;
}
)";

TEST(Ptxas, AssemblesAndReportsResources) {
  PtxasResult r = run_ptxas(kPtx, "sm_90a");
  ASSERT_TRUE(r.ok) << r.log;
  EXPECT_GT(r.cubin.size(), 100u);
  ASSERT_EQ(r.functions.size(), 1u);
  EXPECT_EQ(r.functions[0].name, "copy");
  EXPECT_TRUE(r.functions[0].is_entry);
  EXPECT_GT(r.functions[0].registers, 0);
  EXPECT_EQ(r.functions[0].spill_stores, 0);
}

TEST(Ptxas, DeterministicOutput) {
  PtxasResult a = run_ptxas(kPtx, "sm_90a");
  PtxasResult b = run_ptxas(kPtx, "sm_90a");
  ASSERT_TRUE(a.ok && b.ok);
  EXPECT_EQ(a.cubin, b.cubin);
}

TEST(Ptxas, RejectsBadPtxWithLog) {
  PtxasResult r = run_ptxas(".version 8.7\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n bogus.op;\n}\n",
                            "sm_90a");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.log.find("error"), std::string::npos);
}

TEST(Ptxas, ParsesVerboseLog) {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90a'\n"
      "ptxas info    : Function properties for _Z1kPf\n"
      "    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem, 368 bytes cmem[0]\n"
      "ptxas info    : Function properties for helper\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n";
  auto fs = parse_ptxas_resources(log);
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[0].name, "_Z1kPf");
  EXPECT_EQ(fs[0].registers, 40);
  EXPECT_EQ(fs[0].shared_bytes, 1024);
  EXPECT_EQ(fs[0].stack_frame, 8);
  EXPECT_EQ(fs[0].spill_stores, 4);
  EXPECT_EQ(fs[0].spill_loads, 12);
  EXPECT_FALSE(fs[1].is_entry);
  EXPECT_EQ(fs[1].registers, -1);
}

TEST(Ptxas, VersionIsThirteen) { EXPECT_EQ(ptxas_version().rfind("13.", 0), 0u) << ptxas_version(); }

}  // namespace
}  // namespace ptxevo::evaluator
