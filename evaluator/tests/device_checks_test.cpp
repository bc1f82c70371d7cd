// The GPU-side gate kernels are trusted code: they must build for every arch the engine targets,
// with the entries the evaluator launches, and their rules must agree with the host's. The GPU
// results themselves are compared with check_output in tests/gpu (GpuEval.DeviceChecks*).
#include "evaluator/device_checks.hpp"

#include <gtest/gtest.h>

#include "evaluator/builder.hpp"
#include "evaluator/eval_types.hpp"
#include "evaluator/gate.hpp"

namespace ptxevo::evaluator {
namespace {

class DeviceChecksBuild : public ::testing::TestWithParam<std::string> {};

TEST_P(DeviceChecksBuild, BuildsWithEveryEntry) {
  Builder builder(nullptr);
  BuildRequest req;
  req.name = "device_checks";
  req.source = device_checks_source();
  req.source_path = "device_checks.cu";
  req.arch = GetParam();
  const BuildResult b = builder.build(req);
  ASSERT_TRUE(b.ok) << b.stage << ": " << b.error;
  for (const char* e : {"ptxevo_stats_f64", "ptxevo_stats_f32", "ptxevo_stats_f16", "ptxevo_stats_bf16",
                        "ptxevo_fingerprint", "ptxevo_fill", "ptxevo_random", "ptxevo_degenerate", "ptxevo_occupy"})
    EXPECT_NE(b.ptx.find(std::string(".entry ") + e), std::string::npos) << e;
  for (const auto& f : b.resources) EXPECT_EQ(f.spill_stores, 0) << f.name;
}

INSTANTIATE_TEST_SUITE_P(Archs, DeviceChecksBuild, ::testing::Values("sm_90a", "sm_100a"));

TEST(DeviceChecks, SupportsFloatingPointOutputsOnly) {
  EXPECT_TRUE(DeviceChecks::supports(DType::BF16));
  EXPECT_TRUE(DeviceChecks::supports(DType::F16));
  EXPECT_TRUE(DeviceChecks::supports(DType::F32));
  EXPECT_TRUE(DeviceChecks::supports(DType::F64));
  EXPECT_FALSE(DeviceChecks::supports(DType::I32));
}

// judge_output is the rule book both paths share: the host's check_output must equal it on the
// figures it accumulated.
TEST(DeviceChecks, JudgeMatchesHostRulesOnSyntheticFigures) {
  OutputStats s;
  s.counted = 100;
  s.sum_r2 = 100;
  s.sum_o2 = 100;
  s.sum_d2 = 1e-6;
  s.max_d = 1e-3;
  s.max_r = 3;
  s.out_min = -3;
  s.out_max = 3;
  s.ref_min = -3;
  s.ref_max = 3;
  EXPECT_TRUE(judge_output("out", DType::BF16, 100, s, {1e-2, 1e-1}).passed);
  OutputStats uw = s;
  uw.unwritten = 4;
  EXPECT_EQ(reason_code(judge_output("out", DType::BF16, 100, uw, {1e-2, 1e-1}).reason), "unwritten-output");
  OutputStats far = s;
  far.sum_d2 = 4;  // rel_l2 0.2
  EXPECT_EQ(reason_code(judge_output("out", DType::BF16, 100, far, {1e-2, 1e-1}).reason), "tolerance");
  OutputStats flat = s;
  flat.out_min = flat.out_max = 0.5;
  EXPECT_EQ(reason_code(judge_output("out", DType::BF16, 100, flat, {1e-2, 1e-1}).reason), "trivial-output");
  // A reference below what the output dtype can hold (KDA with beta logits of -670: ~1e-292)
  // rounds to zero: an all-zero output is right, any other constant is not, and a zero output of
  // a reference the dtype does hold stays trivial.
  OutputStats tiny;
  tiny.counted = 100;
  tiny.sum_r2 = 0;  // (1e-292)^2 underflows in double
  tiny.ref_min = -8e-292;
  tiny.ref_max = 8e-292;
  tiny.max_r = 8e-292;
  EXPECT_TRUE(judge_output("out", DType::BF16, 100, tiny, {1e-2, 1e-1}).passed);
  EXPECT_TRUE(judge_output("out", DType::F32, 100, tiny, {1e-2, 1e-1}).passed);
  OutputStats tiny_wrong = tiny;
  tiny_wrong.out_min = tiny_wrong.out_max = 0.25;
  tiny_wrong.sum_o2 = 6.25;
  tiny_wrong.sum_d2 = 6.25;
  tiny_wrong.max_d = 0.25;
  EXPECT_FALSE(judge_output("out", DType::BF16, 100, tiny_wrong, {1e-2, 1e-1}).passed);
  OutputStats small_ok = tiny;
  small_ok.ref_min = -1e-30;  // representable in bf16 (its range reaches ~1e-38)
  small_ok.ref_max = 1e-30;
  small_ok.sum_r2 = 100 * 1e-60;
  small_ok.sum_d2 = small_ok.sum_r2;
  small_ok.max_d = 1e-30;
  EXPECT_FALSE(judge_output("out", DType::BF16, 100, small_ok, {1e-2, 1e-1}).passed);
  // Below fp32's normal range (KDA's final state at T = 1 with a beta logit of -100: ~1e-42, an
  // fp32 subnormal) a kernel with flushed subnormals writes zeros: right for fp32 and bf16; an
  // output of normal magnitude is not, and fp16 (whose normal range ends at 6e-5) keeps its rule.
  OutputStats subnormal = tiny;
  subnormal.ref_min = -4e-42;
  subnormal.ref_max = 4e-42;
  subnormal.max_r = 4e-42;
  subnormal.sum_d2 = 100 * 16e-84;  // every element off by all of it: rel_l2 1
  subnormal.sum_r2 = 100 * 16e-84;
  subnormal.max_d = 4e-42;
  EXPECT_TRUE(judge_output("final_state", DType::F32, 100, subnormal, {1e-2, 1e-1}).passed);
  EXPECT_TRUE(judge_output("out", DType::BF16, 100, subnormal, {1e-2, 1e-1}).passed);
  OutputStats subnormal_wrong = subnormal;
  subnormal_wrong.out_min = -1e-20;
  subnormal_wrong.out_max = 1e-20;
  EXPECT_FALSE(judge_output("final_state", DType::F32, 100, subnormal_wrong, {1e-2, 1e-1}).passed);
  // Built from flushed terms or factors: KDA's backward on large-uniform inputs at the gate's seeds
  // 1796632158636762973 (T = 1: a beta logit of -95, dk up to 1.46e-38) and 1796630035976832492
  // (T = 33, H = 1: dA_log -1.31e-37, a sum of 2112 terms near 1e-40). An fp32 kernel with ftz
  // writes zeros there; the same magnitudes written as 1e-20 stay wrong.
  for (const double r : {1.46e-38, 1.31e-37}) {
    OutputStats flushed = tiny;
    flushed.ref_min = -r;
    flushed.ref_max = r;
    flushed.max_r = r;
    flushed.sum_r2 = flushed.sum_d2 = 100 * r * r;
    flushed.max_d = r;
    EXPECT_TRUE(judge_output("dk", DType::F32, 100, flushed, {1e-2, 1e-1}).passed) << r;
    flushed.out_max = 1e-20;
    EXPECT_FALSE(judge_output("dk", DType::F32, 100, flushed, {1e-2, 1e-1}).passed) << r;
  }
  OutputStats fp16_small = small_ok;  // 1e-30 rounds to zero in fp16 already
  fp16_small.ref_min = -1e-6;         // but 1e-6 is an fp16 subnormal: a zero output stays wrong
  fp16_small.ref_max = 1e-6;
  fp16_small.max_r = 1e-6;
  fp16_small.sum_r2 = 100 * 1e-12;
  fp16_small.sum_d2 = fp16_small.sum_r2;
  fp16_small.max_d = 1e-6;
  EXPECT_FALSE(judge_output("out", DType::F16, 100, fp16_small, {1e-2, 1e-1}).passed);

  HostTensor out("out", DType::F32, {3}), ref("out", DType::F64, {3});
  for (int i = 0; i < 3; ++i) {
    out.set(i, i + 1.0);
    ref.set(i, i + 1.0);
  }
  poison(out, 0);
  const auto host = check_output(out, ref, {1e-2, 1e-1}, 0);
  EXPECT_EQ(reason_code(host.reason), "unwritten-output");
  EXPECT_EQ(host.unwritten, 3);
}

}  // namespace
}  // namespace ptxevo::evaluator
