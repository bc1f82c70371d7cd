#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "evaluator/nvrtc_compiler.hpp"
#include "evaluator/ptxas.hpp"
#include "evaluator/spec.hpp"
#include "kernels/builtin_ops.hpp"
#include "kernels/rmsnorm/rmsnorm_bwd_op.hpp"

namespace ptxevo::kernels {
namespace {

using namespace evaluator;

const OpConfig kBf16 = {{"x_dtype", "bf16"}, {"w_dtype", "fp32"}};

HostTensor filled(const std::string& name, DType t, std::vector<std::int64_t> shape, const std::vector<double>& v) {
  HostTensor h(name, t, std::move(shape));
  for (std::size_t i = 0; i < v.size(); ++i) h.set(static_cast<std::int64_t>(i), v[i]);
  return h;
}

TEST(RmsNormBwd, ReferenceMatchesAHandComputation) {
  RmsNormBwdOp op;
  const Shape s = {{"M", 2}, {"N", 2}};
  const OpConfig cfg = {{"x_dtype", "fp32"}};
  std::vector<HostTensor> in = {filled("x", DType::F32, {2, 2}, {1, 2, 3, -1}),
                                filled("w", DType::F32, {2}, {2, 0.5}),
                                filled("dout", DType::F32, {2, 2}, {1, -1, 0.5, 2}),
                                filled("rstd", DType::F32, {2}, {0.5, 0.25})};
  std::vector<HostTensor> ref;
  op.reference(s, cfg, in, ref);
  ASSERT_EQ(ref.size(), 2u);
  // Row 0: x_hat = (0.5, 1), wdy = (2, -0.5), c1 = (1 - 0.5) / 2 = 0.25,
  // dx = ((2 - 0.125) * 0.5, (-0.5 - 0.25) * 0.5) = (0.9375, -0.375).
  EXPECT_DOUBLE_EQ(ref[0].get(0), 0.9375);
  EXPECT_DOUBLE_EQ(ref[0].get(1), -0.375);
  // Row 1: x_hat = (0.75, -0.25), wdy = (1, 1), c1 = (0.75 - 0.25) / 2 = 0.25,
  // dx = ((1 - 0.1875) * 0.25, (1 + 0.0625) * 0.25).
  EXPECT_DOUBLE_EQ(ref[0].get(2), 0.203125);
  EXPECT_DOUBLE_EQ(ref[0].get(3), 0.265625);
  // dw = sum over rows of dout * x_hat: (0.5 + 0.375, -1 - 0.5).
  EXPECT_EQ(ref[1].name, "dw");
  EXPECT_DOUBLE_EQ(ref[1].get(0), 0.875);
  EXPECT_DOUBLE_EQ(ref[1].get(1), -1.5);
}

TEST(RmsNormBwd, TensorsAndTwoKernelPlan) {
  RmsNormBwdOp op;
  const Shape s = {{"M", 100}, {"N", 4096}};
  auto ts = op.tensors(s, kBf16);
  ASSERT_EQ(ts.size(), 7u);
  EXPECT_EQ(ts.back().name, "dw_partial");
  EXPECT_EQ(ts.back().role, Role::Scratch);
  LaunchPlan p = op.launch_plan(s, kBf16, {{"THREADS", std::int64_t{128}}, {"BLOCKS", std::int64_t{264}}});
  ASSERT_EQ(p.kernels.size(), 2u);
  EXPECT_EQ(p.kernels[0].grid.x, 100u) << "never more CTAs than rows";
  EXPECT_EQ(p.kernels[0].block.x, 128u);
  EXPECT_EQ(p.kernels[1].entry, "rmsnorm_bwd_dw_reduce");
  EXPECT_EQ(std::get<std::int64_t>(p.kernels[1].args[2]), 100);
  EXPECT_THROW(op.launch_plan(s, kBf16, {{"BLOCKS", std::int64_t{5000}}}), std::invalid_argument);
  EXPECT_THROW(op.launch_plan(s, kBf16, {{"THREADS", std::int64_t{48}}}), std::invalid_argument);
  const OpConfig no_w = {{"x_dtype", "bf16"}, {"has_weight", "false"}};
  EXPECT_EQ(op.tensors(s, no_w).size(), 4u);
  EXPECT_EQ(op.launch_plan(s, no_w, {}).kernels.size(), 1u);
}

TEST(RmsNormBwd, ValidatesOptionsAndCountsBytes) {
  RmsNormBwdOp op;
  EXPECT_EQ(op.validate(kBf16), "");
  EXPECT_NE(op.validate({{"x_dtype", "int8"}}), "");
  EXPECT_NE(op.validate({{"residual", "true"}}), "");
  EXPECT_DOUBLE_EQ(op.bytes({{"M", 32768}, {"N", 16384}}, kBf16), 3.0 * 32768 * 16384 * 2 + 4.0 * 32768 + 4.0 * 16384);
  EXPECT_DOUBLE_EQ(op.tolerance("dw", kBf16).rel_l2, 1e-4);
}

TEST(RmsNormBwd, SpecLoadsAndSeedBuildsForHopperAndBlackwell) {
  const OpRegistry reg = builtin_ops();
  SpecResult sr = load_spec(PTXEVO_SOURCE_DIR "/kernels/rmsnorm/rmsnorm_bwd.spec", reg);
  ASSERT_TRUE(sr.spec) << sr.error->format();
  EXPECT_EQ(sr.spec->benchmark_shapes.size(), 4u);
  std::ifstream in(sr.spec->seeds.at(0).source_path);
  std::stringstream ss;
  ss << in.rdbuf();
  RmsNormBwdOp op;
  for (const OpConfig& cfg : {kBf16, OpConfig{{"x_dtype", "fp32"}}, OpConfig{{"x_dtype", "fp16"}, {"has_weight", "false"}}}) {
    std::vector<std::string> opts = {"-DTHREADS=256"};
    for (const auto& [k, v] : op.template_defines(cfg)) opts.push_back("-D" + k + "=" + v);
    for (const char* arch : {"sm_90a", "sm_100a"}) {
      NvrtcResult r = compile_to_ptx(ss.str(), "rmsnorm_bwd.cu", arch, opts);
      ASSERT_TRUE(r.ok) << arch << ": " << r.log;
      EXPECT_NE(r.ptx.find(".entry rmsnorm_bwd("), std::string::npos);
      EXPECT_NE(r.ptx.find(".entry rmsnorm_bwd_dw_reduce("), std::string::npos);
      PtxasResult a = run_ptxas(r.ptx, arch);
      EXPECT_TRUE(a.ok) << arch << ": " << a.log;
    }
  }
}

}  // namespace
}  // namespace ptxevo::kernels

namespace ptxevo::kernels {
namespace {

// Every spec shipped for RMSNorm (bf16, fp16, fp32 forward; backward) loads and validates.
TEST(RmsNormSpecs, AllShippedSpecsLoad) {
  const evaluator::OpRegistry reg = builtin_ops();
  int n = 0;
  for (const char* name : {"rmsnorm_fwd", "rmsnorm_fwd_fp16", "rmsnorm_fwd_fp32", "rmsnorm_bwd"}) {
    evaluator::SpecResult sr =
        evaluator::load_spec(std::string(PTXEVO_SOURCE_DIR "/kernels/rmsnorm/") + name + ".spec", reg);
    EXPECT_TRUE(sr.spec.has_value()) << name << ": " << (sr.error ? sr.error->format() : "");
    n += sr.spec.has_value();
  }
  EXPECT_EQ(n, 4);
}

}  // namespace
}  // namespace ptxevo::kernels
