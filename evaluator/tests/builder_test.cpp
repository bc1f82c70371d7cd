#include "evaluator/builder.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace ptxevo::evaluator {
namespace {

namespace fs = std::filesystem;

// A template in the shape of the op kernels: knobs arrive as -D, a missing one is an error.
// With VEC = 32 every loaded value stays live until the sum is known, which needs well over
// 32 registers; that makes a register cap visible in the resources.
const char* kTemplate = R"(#ifndef VEC
#error VEC required
#endif
#ifndef SCALE_T
#define SCALE_T float
#endif
#ifdef BOUNDS
#define LAUNCH_BOUNDS __launch_bounds__(BOUNDS)
#else
#define LAUNCH_BOUNDS
#endif
extern "C" __global__ void LAUNCH_BOUNDS scale(float* __restrict__ out, const float* __restrict__ in,
                                                        SCALE_T s, int n) {
  const int base = (blockIdx.x * blockDim.x + threadIdx.x) * VEC;
  float v[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) v[k] = base + k < n ? in[base + k] : 0.f;
  float acc = 0.f;
#pragma unroll
  for (int k = 0; k < VEC; ++k) acc += v[k] * v[k];
#pragma unroll
  for (int k = 0; k < VEC; ++k)
    if (base + k < n) out[base + k] = v[k] * (float)s * acc;
}
)";

BuildRequest request(std::int64_t vec, const std::string& arch = "sm_90a") {
  BuildRequest r;
  r.name = "scale_vec" + std::to_string(vec);
  r.source = kTemplate;
  r.source_path = "scale.cu";
  r.knobs = {{"VEC", vec}, {"BOUNDS", std::int64_t{128}}};
  r.arch = arch;
  return r;
}

const FunctionResources* find(const BuildResult& r, const std::string& name) {
  for (const auto& f : r.resources)
    if (f.name == name) return &f;
  return nullptr;
}

// A private cache directory per test.
class BuilderCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("ptxevo-builder-test-" + std::to_string(getpid()) + "-" + info->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST(Builder, BuildsForEachArch) {
  Builder b(nullptr);
  for (const char* arch : {"sm_80", "sm_90a", "sm_100a"}) {
    BuildResult r = b.build(request(4, arch));
    ASSERT_TRUE(r.ok) << arch << " [" << r.stage << "] " << r.error;
    EXPECT_EQ(r.stage, "");
    EXPECT_NE(r.ptx.find(std::string(".target ") + arch), std::string::npos) << arch;
    ASSERT_NE(r.module, nullptr);
    EXPECT_NE(r.module->find_function("scale"), nullptr);
    EXPECT_GT(r.cubin.size(), 100u);
    const FunctionResources* f = find(r, "scale");
    ASSERT_NE(f, nullptr) << arch;
    EXPECT_GT(f->registers, 0);
    EXPECT_EQ(r.key.size(), 64u);
    EXPECT_FALSE(r.cache_hit);
    EXPECT_GT(r.seconds, 0.0);
  }
}

TEST(Builder, KnobsChangeThePtx) {
  Builder b(nullptr);
  BuildResult a = b.build(request(4));
  BuildResult c = b.build(request(8));
  ASSERT_TRUE(a.ok && c.ok) << a.error << c.error;
  EXPECT_NE(a.ptx, c.ptx);
  EXPECT_NE(a.key, c.key);
  // A string knob is passed as written.
  BuildRequest d = request(4);
  d.knobs["SCALE_T"] = std::string("double");
  BuildResult e = b.build(d);
  ASSERT_TRUE(e.ok) << e.error;
  EXPECT_NE(e.ptx.find(".f64"), std::string::npos);
}

TEST(Builder, ReportsCompileErrorsWithTheSourceLine) {
  Builder b(nullptr);
  BuildRequest r = request(4);
  r.knobs.erase("VEC");
  BuildResult res = b.build(r);
  EXPECT_FALSE(res.ok);
  EXPECT_EQ(res.stage, "nvrtc");
  EXPECT_NE(res.error.find("scale.cu(2)"), std::string::npos) << res.error;
  EXPECT_NE(res.error.find("VEC required"), std::string::npos) << res.error;
  EXPECT_TRUE(res.cubin.empty());

  r = request(4);
  r.source = std::string(kTemplate) + "int broken = ;\n";
  res = b.build(r);
  EXPECT_EQ(res.stage, "nvrtc");
  const auto line = std::count(r.source.begin(), r.source.end(), '\n');
  EXPECT_NE(res.error.find("scale.cu(" + std::to_string(line) + ")"), std::string::npos) << res.error;
}

TEST(Builder, RejectsBadOrDoublySetDefines) {
  Builder b(nullptr);
  BuildRequest r = request(4);
  r.defines = {{"VEC", "2"}};
  BuildResult res = b.build(r);
  EXPECT_EQ(res.stage, "nvrtc");
  EXPECT_NE(res.error.find("VEC"), std::string::npos) << res.error;
  r = request(4);
  r.knobs["NOT A NAME"] = std::int64_t{1};
  res = b.build(r);
  EXPECT_EQ(res.stage, "nvrtc");
  EXPECT_NE(res.error.find("invalid knob name"), std::string::npos) << res.error;
}

TEST(Builder, PtxOverrideSkipsNvrtcAndReportsParseErrors) {
  Builder b(nullptr);
  BuildResult base = b.build(request(4));
  ASSERT_TRUE(base.ok) << base.error;

  BuildRequest r;
  r.name = "override";
  r.source_path = "cand.ptx";
  r.ptx_override = base.ptx;
  BuildResult same = b.build(r);
  ASSERT_TRUE(same.ok) << same.error;
  EXPECT_EQ(same.key, base.key);  // the printer is canonical: same PTX, same key
  EXPECT_EQ(same.cubin, base.cubin);

  r.ptx_override = ".version 8.7\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n  ret\n}\n";
  BuildResult bad = b.build(r);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.stage, "parse");
  EXPECT_EQ(bad.error.rfind("cand.ptx:", 0), 0u) << bad.error;
  EXPECT_NE(bad.error.find(": error: "), std::string::npos) << bad.error;
}

TEST(Builder, PtxPassLandsInTheCubin) {
  Builder b(nullptr);
  BuildResult base = b.build(request(32));
  ASSERT_TRUE(base.ok) << base.error;
  const FunctionResources* f0 = find(base, "scale");
  ASSERT_NE(f0, nullptr);
  ASSERT_GT(f0->registers, 32) << "the test kernel should need more than 32 registers";

  BuildRequest r = request(32);
  r.ptx_pass = [](ir::Module& m) -> std::string {
    ir::Function* f = m.find_function("scale");
    if (!f) return "no kernel 'scale'";
    f->perf.push_back({".maxnreg", {"32"}});
    return "";
  };
  BuildResult capped = b.build(r);
  ASSERT_TRUE(capped.ok) << capped.stage << ": " << capped.error;
  EXPECT_NE(capped.ptx.find(".maxnreg 32"), std::string::npos);
  ASSERT_NE(capped.module->find_function("scale")->find_perf(".maxnreg"), nullptr);
  const FunctionResources* f1 = find(capped, "scale");
  ASSERT_NE(f1, nullptr);
  EXPECT_LE(f1->registers, 32);
  EXPECT_NE(capped.key, base.key);
  EXPECT_NE(capped.cubin, base.cubin);
}

// A PTX-level child shares its parent's knobs: NVRTC runs once for both, and a pass that
// refuses costs no compile. Other knobs compile again; a failed compile is never remembered.
TEST(Builder, ReusesNvrtcOutputForTheSameSourceAndKnobs) {
  Builder b(nullptr);
  ASSERT_TRUE(b.build(request(4)).ok);
  EXPECT_EQ(b.nvrtc_runs(), 1);
  BuildRequest child = request(4);
  child.ptx_pass = [](ir::Module& m) -> std::string {
    m.find_function("scale")->perf.push_back({".maxnreg", {"40"}});
    return "";
  };
  const BuildResult c = b.build(child);
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_NE(c.ptx.find(".maxnreg 40"), std::string::npos);
  BuildRequest refused = request(4);
  refused.ptx_pass = [](ir::Module&) -> std::string { return "nothing to do"; };
  EXPECT_EQ(b.build(refused).stage, "pass");
  EXPECT_EQ(b.nvrtc_runs(), 1);
  // The parent again: the pass above edited its own copy of the module, not the memo.
  const BuildResult again = b.build(request(4));
  EXPECT_EQ(again.ptx.find(".maxnreg"), std::string::npos);
  EXPECT_EQ(b.nvrtc_runs(), 1);
  ASSERT_TRUE(b.build(request(8)).ok);
  EXPECT_EQ(b.nvrtc_runs(), 2);
  BuildRequest bad = request(4);
  bad.source += "\nthis is not C++\n";
  EXPECT_EQ(b.build(bad).stage, "nvrtc");
  EXPECT_EQ(b.build(bad).stage, "nvrtc");
  EXPECT_EQ(b.nvrtc_runs(), 4);
}

// ptxas ignores -maxrregcount for kernels with launch bounds (.maxntid), so this one has none.
TEST(Builder, RegisterCapOptionLandsInTheCubin) {
  Builder b(nullptr);
  BuildRequest r = request(32);
  r.knobs.erase("BOUNDS");
  r.max_registers = 32;
  BuildResult res = b.build(r);
  ASSERT_TRUE(res.ok) << res.error;
  const FunctionResources* f = find(res, "scale");
  ASSERT_NE(f, nullptr);
  EXPECT_LE(f->registers, 32);
}

TEST(Builder, PassFailuresAndLinkFailuresNameTheirStage) {
  Builder b(nullptr);
  BuildRequest r = request(4);
  r.ptx_pass = [](ir::Module&) { return std::string("mutation target 17 not found"); };
  BuildResult res = b.build(r);
  EXPECT_EQ(res.stage, "pass");
  EXPECT_EQ(res.error, "mutation target 17 not found");

  r.ptx_pass = [](ir::Module&) -> std::string { throw std::runtime_error("boom"); };
  res = b.build(r);
  EXPECT_EQ(res.stage, "pass");
  EXPECT_NE(res.error.find("boom"), std::string::npos);

  // An edit the parser accepts but ptxas rejects: an opcode that does not exist.
  r.ptx_pass = [](ir::Module& m) -> std::string {
    for (auto& st : m.find_function("scale")->body)
      if (auto* ins = std::get_if<ir::Instruction>(&st.node); ins && ins->opcode == "mul") {
        ins->opcode = "mulx";
        return "";
      }
    return "no mul";
  };
  res = b.build(r);
  EXPECT_FALSE(res.ok);
  EXPECT_EQ(res.stage, "link");
  EXPECT_NE(res.error.find("mulx"), std::string::npos) << res.error;
}

TEST_F(BuilderCacheTest, SecondBuildIsACacheHit) {
  BuildCache cache(dir_);
  Builder b(&cache);
  BuildResult first = b.build(request(8));
  ASSERT_TRUE(first.ok) << first.error;
  EXPECT_FALSE(first.cache_hit);
  EXPECT_EQ(first.cache_warning, "");
  EXPECT_TRUE(fs::exists(cache.cubin_path(first.key)));

  BuildResult second = b.build(request(8));
  ASSERT_TRUE(second.ok) << second.error;
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(second.key, first.key);
  EXPECT_EQ(second.cubin, first.cubin);
  EXPECT_EQ(second.ptx, first.ptx);
  ASSERT_EQ(second.resources.size(), first.resources.size());
  EXPECT_EQ(second.resources[0].registers, first.resources[0].registers);

  // Another builder (another process, in effect) sees the same entry.
  Builder other(&cache);
  EXPECT_TRUE(other.build(request(8)).cache_hit);
}

TEST_F(BuilderCacheTest, CorruptEntryIsAMissAndIsRepaired) {
  BuildCache cache(dir_);
  Builder b(&cache);
  BuildResult first = b.build(request(8));
  ASSERT_TRUE(first.ok) << first.error;
  std::ofstream(cache.cubin_path(first.key), std::ios::binary | std::ios::trunc) << "not a cubin";

  BuildResult second = b.build(request(8));
  ASSERT_TRUE(second.ok) << second.error;
  EXPECT_FALSE(second.cache_hit);
  EXPECT_EQ(second.cubin, first.cubin);
  EXPECT_TRUE(b.build(request(8)).cache_hit);
}

TEST_F(BuilderCacheTest, LinkFailuresAreRemembered) {
  BuildCache cache(dir_);
  Builder b(&cache);
  BuildRequest r = request(4);
  r.ptx_pass = [](ir::Module& m) -> std::string {
    for (auto& st : m.find_function("scale")->body)
      if (auto* ins = std::get_if<ir::Instruction>(&st.node); ins && ins->opcode == "mul") ins->opcode = "mulx";
    return "";
  };
  BuildResult first = b.build(r);
  EXPECT_EQ(first.stage, "link");
  EXPECT_FALSE(first.cache_hit);
  BuildResult second = b.build(r);
  EXPECT_EQ(second.stage, "link");
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(second.error, first.error);
}

TEST(Builder, KeyDependsOnArchAndOptions) {
  Builder b(nullptr);
  BuildRequest r = request(4);
  r.ptx_override = b.build(request(4)).ptx;  // same PTX text for every variant
  const std::string base = b.build(r).key;
  ASSERT_EQ(base.size(), 64u);
  BuildRequest v = r;
  v.arch = "sm_90";
  EXPECT_NE(b.build(v).key, base);
  v = r;
  v.opt_level = 1;
  BuildResult o1 = b.build(v);
  EXPECT_TRUE(o1.ok) << o1.error;
  EXPECT_NE(o1.key, base);
  v = r;
  v.max_registers = 64;
  EXPECT_NE(b.build(v).key, base);
  EXPECT_EQ(b.build(r).key, base);
  EXPECT_NE(b.toolchain().find("nvJitLink 13."), std::string::npos) << b.toolchain();
}

TEST_F(BuilderCacheTest, BuildAllKeepsOrderAndLinksDuplicatesOnce) {
  BuildCache cache(dir_);
  Builder b(&cache);
  std::vector<BuildRequest> reqs;
  const char* archs[] = {"sm_80", "sm_90a", "sm_100a"};
  for (int i = 0; i < 8; ++i) reqs.push_back(request(1 << (i % 6), archs[i % 3]));
  reqs[5].knobs.clear();  // a failure in the middle stays in its place
  reqs[7] = reqs[1];      // a duplicate links once

  std::vector<BuildResult> out = b.build_all(reqs);
  ASSERT_EQ(out.size(), reqs.size());
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    if (i == 5) {
      EXPECT_FALSE(out[i].ok);
      EXPECT_EQ(out[i].stage, "nvrtc");
      continue;
    }
    ASSERT_TRUE(out[i].ok) << i << ": " << out[i].error;
    EXPECT_NE(out[i].ptx.find(".target " + reqs[i].arch), std::string::npos) << i;
    // Same key as a build of that request on its own: nothing was swapped.
    EXPECT_EQ(out[i].key, Builder(nullptr).build(reqs[i]).key) << i;
  }
  EXPECT_NE(out[1].cache_hit, out[7].cache_hit);  // whichever got there first linked
  EXPECT_EQ(out[7].cubin, out[1].cubin);
  EXPECT_EQ(out[7].key, out[1].key);
}

TEST(Builder, BuildAllWithoutCache) {
  Builder b(nullptr);
  std::vector<BuildRequest> reqs = {request(2), request(4), request(2)};
  auto out = b.build_all(reqs);
  ASSERT_EQ(out.size(), 3u);
  for (const auto& r : out) ASSERT_TRUE(r.ok) << r.error;
  EXPECT_NE(out[0].key, out[1].key);
  EXPECT_EQ(out[0].cubin, out[2].cubin);
  EXPECT_NE(out[0].cache_hit, out[2].cache_hit);
  EXPECT_FALSE(out[1].cache_hit);
  EXPECT_TRUE(b.build_all({}).empty());
}

}  // namespace
}  // namespace ptxevo::evaluator
