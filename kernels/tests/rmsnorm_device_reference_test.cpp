// The RMSNorm device references are trusted code: they must build for every target arch, and
// each launch of their plans must name an entry the source defines, with as many arguments as
// it declares parameters, and only tensors the evaluator provides. Their numbers are compared
// with the host references on the GPU (tests/gpu/device_reference_test.cpp) and again by every
// GPU worker before first use.
#include <gtest/gtest.h>

#include <set>

#include "evaluator/builder.hpp"
#include "kernels/tests/ptx_entry_params.hpp"
#include "kernels/rmsnorm/rmsnorm_bwd_op.hpp"
#include "kernels/rmsnorm/rmsnorm_fwd_op.hpp"

namespace ptxevo::kernels {
namespace {

using evaluator::OpConfig;
using evaluator::Shape;

using testing::entry_params;

void check_op(const evaluator::Op& op, const OpConfig& cfg, const std::string& arch) {
  SCOPED_TRACE(op.name() + " on " + arch);
  evaluator::Builder builder(nullptr);
  evaluator::BuildRequest req;
  req.name = "ref";
  req.source = op.device_reference_source(cfg);
  ASSERT_FALSE(req.source.empty());
  req.source_path = "ref.cu";
  req.arch = arch;
  const evaluator::BuildResult b = builder.build(req);
  ASSERT_TRUE(b.ok) << b.stage << ": " << b.error;
  for (const auto& f : b.resources) EXPECT_EQ(f.spill_stores, 0) << f.name;
  for (const Shape& s : {Shape{{"M", 1}, {"N", 1}}, Shape{{"M", 7}, {"N", 4097}}, Shape{{"M", 100000}, {"N", 256}}}) {
    const auto descs = op.tensors(s, cfg);
    const auto plan = op.device_reference_plan(s, cfg);
    std::set<std::string> names;
    for (const auto& d : descs) {
      if (d.role == evaluator::Role::In) names.insert(d.name);
    }
    for (const auto& o : plan.outputs) {
      bool is_out = false;
      for (const auto& d : descs) is_out |= d.name == o && d.role == evaluator::Role::Out;
      EXPECT_TRUE(is_out) << o << " is not an output of the op";
      names.insert("ref:" + o);
    }
    for (const auto& sd : plan.scratch) names.insert(sd.name);
    ASSERT_FALSE(plan.plan.kernels.empty());
    for (const auto& k : plan.plan.kernels) {
      EXPECT_EQ(entry_params(b.ptx, k.entry), static_cast<int>(k.args.size())) << k.entry;
      EXPECT_GE(k.grid.x, 1u);
      EXPECT_LE(k.grid.y, 65535u);
      for (const auto& a : k.args) {
        if (const auto* t = std::get_if<evaluator::ArgTensor>(&a)) {
          EXPECT_TRUE(t->name.empty() || names.count(t->name)) << k.entry << " names unknown tensor " << t->name;
        }
      }
    }
  }
}

class RmsNormDeviceReference : public ::testing::TestWithParam<std::string> {};

TEST_P(RmsNormDeviceReference, ForwardBuildsForEveryConfigWithConsistentPlans) {
  RmsNormFwdOp op;
  check_op(op, {}, GetParam());
  check_op(op, {{"x_dtype", "fp16"}, {"has_bias", "true"}, {"has_residual", "true"}, {"store_rstd", "true"},
                {"residual_out_dtype", "fp32"}},
           GetParam());
  check_op(op, {{"x_dtype", "fp32"}, {"has_weight", "false"}}, GetParam());
}

TEST_P(RmsNormDeviceReference, BackwardBuildsWithAndWithoutWeight) {
  RmsNormBwdOp op;
  check_op(op, {}, GetParam());
  check_op(op, {{"x_dtype", "fp16"}, {"has_weight", "false"}}, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Archs, RmsNormDeviceReference, ::testing::Values("sm_90a", "sm_100a"));

TEST(RmsNormDeviceReferencePlan, BackwardDwSlicesNeverExceedTheRows) {
  RmsNormBwdOp op;
  const auto plan = op.device_reference_plan({{"M", 3}, {"N", 100}}, {});
  ASSERT_EQ(plan.scratch.size(), 1u);
  EXPECT_EQ(plan.scratch[0].shape[0], 3);
  const auto big = op.device_reference_plan({{"M", 32768}, {"N", 16384}}, {});
  EXPECT_EQ(big.scratch[0].shape[0], 64);
}

}  // namespace
}  // namespace ptxevo::kernels
