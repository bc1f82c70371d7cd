#include <gtest/gtest.h>

#include "evaluator/nvrtc_compiler.hpp"

namespace ptxevo::evaluator {
namespace {

TEST(Nvrtc, CompilesDeviceCodeForEachArch) {
  const char* src = "extern \"C\" __global__ void k(float* y, const float* x) { y[threadIdx.x] = 2.f * x[threadIdx.x]; }";
  for (const char* arch : {"sm_80", "sm_90a", "sm_100a"}) {
    NvrtcResult r = compile_to_ptx(src, "k.cu", arch, {});
    ASSERT_TRUE(r.ok) << arch << ": " << r.log;
    EXPECT_NE(r.ptx.find(std::string(".target ") + arch), std::string::npos) << arch;
    EXPECT_NE(r.ptx.find(".entry k("), std::string::npos);
  }
}

TEST(Nvrtc, ReportsErrorsWithSourceLine) {
  NvrtcResult r = compile_to_ptx("__global__ void k() {\n  undeclared_thing = 1;\n}\n", "bad.cu", "sm_90a", {});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.log.find("bad.cu(2)"), std::string::npos) << r.log;
}

TEST(Nvrtc, IncludesCudaHeaders) {
  NvrtcResult r = compile_to_ptx("#include <cuda_bf16.h>\n__global__ void k(__nv_bfloat16* p) { p[0] = __float2bfloat16(1.f); }",
                                 "h.cu", "sm_90a", {});
  EXPECT_TRUE(r.ok) << r.log;
}

TEST(Nvrtc, VersionIsThirteen) { EXPECT_EQ(nvrtc_version().rfind("13.", 0), 0u) << nvrtc_version(); }

}  // namespace
}  // namespace ptxevo::evaluator
