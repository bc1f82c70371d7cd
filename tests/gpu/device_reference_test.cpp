// The device-side gate inputs and fp64 references on a real GPU: every RMSNorm configuration's
// and the KDA forward's device reference agrees with the host reference on small shapes and every
// distribution; a deliberately wrong one is caught; the device-drawn inputs have the
// distributions' statistics and depend only on their seed. Without a GPU every test skips and says why.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "evaluator/cuda_driver.hpp"
#include "evaluator/device_checks.hpp"
#include "evaluator/device_reference.hpp"
#include "evaluator/gpu_context.hpp"
#include "kernels/kda/kda_fwd_op.hpp"
#include "kernels/rmsnorm/rmsnorm_bwd_op.hpp"
#include "kernels/rmsnorm/rmsnorm_fwd_op.hpp"

namespace ptxevo::evaluator {
namespace {

class DeviceReferenceGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    load_ = load_cuda_driver();
    if (!load_.driver) GTEST_SKIP() << "no GPU: " << load_.reason;
    ctx_.emplace(load_.driver, 0);
    std::string why;
    checks_ = DeviceChecks::create(*ctx_, &why);
    ASSERT_TRUE(checks_) << why;
  }
  std::string verify(const Op& op, const OpConfig& cfg, const std::vector<Shape>& shapes) {
    std::string why;
    auto ref = DeviceReference::create(*ctx_, op, cfg, &why);
    if (!ref) return "create: " + why;
    return ref->verify(shapes, *checks_, 1234);
  }
  DriverLoad load_;
  std::optional<GpuContext> ctx_;
  std::unique_ptr<DeviceChecks> checks_;
};

const std::vector<Shape> kShapes = {{{"M", 1}, {"N", 1}},    {{"M", 3}, {"N", 7}},      {{"M", 5}, {"N", 1000}},
                                    {{"M", 7}, {"N", 4097}}, {{"M", 300}, {"N", 256}},  {{"M", 33}, {"N", 16384}},
                                    {{"M", 2}, {"N", 65536}}};

TEST_F(DeviceReferenceGpu, ForwardAgreesWithTheHostInEveryConfiguration) {
  kernels::RmsNormFwdOp op;
  for (const OpConfig& cfg : std::vector<OpConfig>{
           {},
           {{"x_dtype", "fp16"}, {"has_bias", "true"}, {"has_residual", "true"}, {"store_rstd", "true"}},
           {{"x_dtype", "bf16"}, {"has_residual", "true"}, {"residual_out_dtype", "fp32"}, {"w_dtype", "same"}},
           {{"x_dtype", "fp32"}, {"has_weight", "false"}, {"eps", "1e-5"}}}) {
    EXPECT_EQ(verify(op, cfg, kShapes), "") << cfg.size();
  }
}

TEST_F(DeviceReferenceGpu, BackwardAgreesWithTheHostWithAndWithoutWeight) {
  kernels::RmsNormBwdOp op;
  EXPECT_EQ(verify(op, {}, kShapes), "");
  EXPECT_EQ(verify(op, {{"x_dtype", "fp16"}, {"has_weight", "false"}}, kShapes), "");
  EXPECT_EQ(verify(op, {{"x_dtype", "fp32"}, {"w_dtype", "same"}}, {{{"M", 2000}, {"N", 2048}}}), "");
}

// The KDA forward's fp64 recurrence on the GPU against the host's, batched and packed shapes (a
// sequence of one token, partial value blocks none: V = 128), both gates, every state option.
TEST_F(DeviceReferenceGpu, KdaForwardAgreesWithTheHostInEveryConfiguration) {
  kernels::KdaFwdOp op;
  const std::vector<Shape> shapes = {{{"B", 1}, {"T", 1}, {"H", 1}, {"N", 1}},
                                     {{"B", 2}, {"T", 37}, {"H", 3}, {"N", 2}},
                                     {{"B", 1}, {"T", 8192}, {"H", 2}, {"N", 6}}};
  for (const OpConfig& cfg : std::vector<OpConfig>{{},
                                                   {{"gate", "softplus"}, {"initial_state", "false"}},
                                                   {{"final_state", "false"}, {"lower_bound", "-2.5"}}}) {
    EXPECT_EQ(verify(op, cfg, shapes), "") << cfg.size();
  }
}

// A device reference that computes something else (eps 1 instead of 1e-6) must not pass.
class WrongEpsForward : public kernels::RmsNormFwdOp {
 public:
  DeviceReferencePlan device_reference_plan(const Shape& s, const OpConfig& cfg) const override {
    DeviceReferencePlan p = RmsNormFwdOp::device_reference_plan(s, cfg);
    p.plan.kernels[0].args.back() = 1.0;
    return p;
  }
};

TEST_F(DeviceReferenceGpu, AWrongDeviceReferenceIsCaught) {
  WrongEpsForward op;
  const std::string r = verify(op, {}, {{{"M", 5}, {"N", 1000}}});
  EXPECT_NE(r.find("output 'out'"), std::string::npos) << r;
}

TEST_F(DeviceReferenceGpu, DrawnInputsHaveTheDistributionsStatisticsAndDependOnlyOnTheSeed) {
  const std::int64_t n = 1 << 22;
  DeviceBuffer b(&ctx_->api(), n * sizeof(float));
  auto draw = [&](Distribution d, std::uint64_t seed) {
    checks_->random_fill(b.ptr(), DType::F32, n, d, seed);
    ctx_->synchronize();
    std::vector<float> v(static_cast<std::size_t>(n));
    b.download(v.data(), v.size() * sizeof(float));
    return v;
  };
  auto moments = [](const std::vector<float>& v) {
    double s = 0, s2 = 0;
    for (float x : v) {
      s += x;
      s2 += static_cast<double>(x) * x;
    }
    const double mean = s / static_cast<double>(v.size());
    return std::pair{mean, std::sqrt(s2 / static_cast<double>(v.size()) - mean * mean)};
  };
  const auto normal = draw(Distribution::Normal, 7);
  const auto [m, sd] = moments(normal);
  EXPECT_NEAR(m, 0.0, 5e-3);
  EXPECT_NEAR(sd, 1.0, 5e-3);
  EXPECT_EQ(draw(Distribution::Normal, 7), normal);
  EXPECT_NE(draw(Distribution::Normal, 8), normal);
  const auto uni = draw(Distribution::LargeUniform, 9);
  const auto [um, usd] = moments(uni);
  EXPECT_NEAR(um, 0.0, 2.0);
  EXPECT_NEAR(usd, 2e3 / std::sqrt(12.0), 2.0);
  for (float x : uni) ASSERT_LE(std::fabs(x), 1e3f);
  const auto spikes = draw(Distribution::SparseSpikes, 10);
  std::int64_t nspikes = 0;
  for (float x : spikes) nspikes += std::fabs(x) == 100.0f;
  EXPECT_NEAR(static_cast<double>(nspikes), 1e-3 * n, 5 * std::sqrt(1e-3 * n));
  const auto heavy = draw(Distribution::HeavyTail, 11);
  std::int64_t far = 0;
  for (float x : heavy) {
    ASSERT_TRUE(std::isfinite(x));
    far += std::fabs(x) > 100.0f;
  }
  // Student-t with 2 degrees of freedom: P(|t| > 100) = 1 - 100 / sqrt(2 + 100^2) ~ 1.0e-4
  // (about 420 of 2^22 draws, so 2e-5 is four standard deviations).
  EXPECT_NEAR(static_cast<double>(far) / n, 1.0 - 100.0 / std::sqrt(10002.0), 2e-5);
}

}  // namespace
}  // namespace ptxevo::evaluator
