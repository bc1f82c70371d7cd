#include "evaluator/nvjitlink.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "evaluator/nvrtc_compiler.hpp"

namespace ptxevo::evaluator {
namespace {

// Static shared memory and a barrier, so the resource line carries smem and registers.
const char* kSource = R"(
extern "C" __global__ void __launch_bounds__(128) shift(float* out, const float* in, int n) {
  __shared__ float s[64];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x & 63] = i < n ? in[i] : 0.f;
  __syncthreads();
  if (i < n) out[i] = 2.f * s[(threadIdx.x + 1) & 63];
}
)";

std::string ptx_for(const std::string& arch) {
  NvrtcResult c = compile_to_ptx(kSource, "shift.cu", arch, {});
  EXPECT_TRUE(c.ok) << c.log;
  return c.ptx;
}

const FunctionResources* find(const std::vector<FunctionResources>& rs, const std::string& name) {
  for (const auto& r : rs)
    if (r.name == name) return &r;
  return nullptr;
}

TEST(NvJitLink, LinksForEachArchAndReportsResources) {
  for (const char* arch : {"sm_80", "sm_90a", "sm_100a"}) {
    LinkOptions o;
    o.arch = arch;
    LinkResult r = link_ptx(ptx_for(arch), o, "shift.ptx");
    ASSERT_TRUE(r.ok) << arch << ": " << r.error_log;
    ASSERT_GT(r.cubin.size(), 4u);
    EXPECT_EQ(std::string(r.cubin.begin(), r.cubin.begin() + 4), "\x7f" "ELF") << arch;
    const FunctionResources* f = find(r.resources, "shift");
    ASSERT_NE(f, nullptr) << arch << ": " << r.info_log;
    EXPECT_TRUE(f->is_entry);
    EXPECT_GT(f->registers, 0);
    EXPECT_EQ(f->shared_bytes, 256);
    EXPECT_EQ(f->spill_stores, 0);
    EXPECT_EQ(r.resources.size(), 1u) << r.info_log;  // no stray entries from the linker summary
  }
}

TEST(NvJitLink, OptionsReachPtxas) {
  EXPECT_EQ(link_option_strings({}), (std::vector<std::string>{"-arch=sm_90a", "-O3", "-verbose", "-no-cache"}));
  LinkOptions o;
  o.opt_level = 0;
  o.max_registers = 32;
  EXPECT_EQ(link_option_strings(o),
            (std::vector<std::string>{"-arch=sm_90a", "-O0", "-verbose", "-no-cache", "-maxrregcount=32"}));
  const std::string ptx = ptx_for("sm_90a");
  LinkResult r = link_ptx(ptx, o);
  ASSERT_TRUE(r.ok) << r.error_log;
  const FunctionResources* f = find(r.resources, "shift");
  ASSERT_NE(f, nullptr);
  EXPECT_LE(f->registers, 32);
  // Every ptxas level links, without ptxas warning about a redefined option.
  for (int level = 0; level <= 3; ++level) {
    o = {};
    o.opt_level = level;
    r = link_ptx(ptx, o);
    EXPECT_TRUE(r.ok) << "-O" << level << ": " << r.error_log;
    EXPECT_EQ(r.info_log.find("warning"), std::string::npos) << "-O" << level << ": " << r.info_log;
  }
  o.opt_level = 7;
  r = link_ptx(ptx, o);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error_log.find("NVJITLINK_ERROR_UNRECOGNIZED_OPTION"), std::string::npos) << r.error_log;
  EXPECT_NE(r.error_log.find("-O7"), std::string::npos) << r.error_log;
  EXPECT_TRUE(r.deterministic_failure);
}

TEST(NvJitLink, ReportsPtxErrorsWithLine) {
  std::string ptx = ptx_for("sm_90a");
  const auto at = ptx.find("bar.sync");
  ASSERT_NE(at, std::string::npos);
  ptx.replace(at, 8, "bar.snyc");
  LinkResult r = link_ptx(ptx, {}, "broken.ptx");
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.cubin.empty());
  EXPECT_TRUE(r.deterministic_failure);
  EXPECT_NE(r.error_log.find("line "), std::string::npos) << r.error_log;
  EXPECT_NE(r.error_log.find("NVJITLINK_ERROR_PTX_COMPILE"), std::string::npos) << r.error_log;
}

TEST(NvJitLink, ReportsBadOptions) {
  LinkOptions o;
  o.extra = {"-no-such-option"};
  LinkResult r = link_ptx(ptx_for("sm_90a"), o);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error_log.find("nvJitLinkCreate failed"), std::string::npos) << r.error_log;
}

TEST(NvJitLink, ConcurrentLinksAgree) {
  const std::string ptx = ptx_for("sm_90a");
  std::vector<LinkResult> results(4);
  std::vector<std::thread> threads;
  for (auto& r : results) threads.emplace_back([&ptx, &r] { r = link_ptx(ptx, {}); });
  for (auto& t : threads) t.join();
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok) << r.error_log;
    EXPECT_EQ(r.cubin, results[0].cubin);
  }
}

// A -verbose log as nvJitLink 13.0 writes it: ptxas's lines, then the linker's summary whose
// register counts cover each kernel's callees.
TEST(NvJitLink, ParsesLinkerSummary) {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Function properties for _Z6helperf\n"
      "ptxas         .     72 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Compiling entry function 'k2' for 'sm_90a'\n"
      "ptxas info    : Function properties for k2\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 24 registers, used 0 barriers\n"
      "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
      "ptxas info    : Function properties for k\n"
      "ptxas         .     0 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Used 10 registers, used 1 barriers, 256 bytes smem\n"
      "info    : 0 bytes gmem\n"
      "info    : Function properties for 'k':\n"
      "info    : used 10 registers, used 1 barriers, 0 stack, 1280 bytes smem, 548 bytes cmem[0], 0 bytes lmem\n"
      "info    : Function properties for 'k2':\n"
      "info    : used 46 registers, used 0 barriers, 72 stack, 0 bytes smem, 536 bytes cmem[0], 0 bytes lmem\n";
  const auto rs = parse_nvjitlink_resources(log);
  ASSERT_EQ(rs.size(), 3u);
  const FunctionResources* helper = find(rs, "_Z6helperf");
  ASSERT_NE(helper, nullptr);
  EXPECT_FALSE(helper->is_entry);
  EXPECT_EQ(helper->stack_frame, 72);
  const FunctionResources* k2 = find(rs, "k2");
  ASSERT_NE(k2, nullptr);
  EXPECT_EQ(k2->registers, 46);
  const FunctionResources* k = find(rs, "k");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->registers, 10);
  EXPECT_EQ(k->shared_bytes, 256);  // ptxas's static figure, not the linker's reserved total
  EXPECT_EQ(k->spill_stores, 8);
  EXPECT_EQ(k->spill_loads, 4);
}

TEST(NvJitLink, VersionIsThirteen) { EXPECT_EQ(nvjitlink_version().rfind("13.", 0), 0u) << nvjitlink_version(); }

}  // namespace
}  // namespace ptxevo::evaluator
