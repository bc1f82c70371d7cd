// Degenerate rows through the gate's own fill (evaluator::fill_inputs) and its own output check:
// an RMSNorm forward in fp32 arithmetic with eps passes them; the same without eps (what
// known_bad/eps_dropped.cu does) passes every other distribution and fails these, NaN on a zero
// row. The rows the op declares are the ones the gate draws.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "evaluator/gate.hpp"
#include "evaluator/gpu_evaluation.hpp"
#include "kernels/rmsnorm/rmsnorm_fwd_op.hpp"

namespace ptxevo::kernels {
namespace {

using namespace evaluator;

Shape shape(std::int64_t m, std::int64_t n) { return {{"M", m}, {"N", n}}; }

// out = bf16(x * rsqrt(mean(x^2) + eps) * w), fp32 arithmetic as a kernel does it.
HostTensor forward(const HostTensor& x, const HostTensor& w, std::int64_t m, std::int64_t n, float eps) {
  HostTensor out("out", DType::BF16, {m, n});
  for (std::int64_t r = 0; r < m; ++r) {
    float ss = 0;
    for (std::int64_t c = 0; c < n; ++c) ss = std::fma(static_cast<float>(x.get(r * n + c)), static_cast<float>(x.get(r * n + c)), ss);
    const float rs = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
    for (std::int64_t c = 0; c < n; ++c)
      out.set(r * n + c, static_cast<float>(x.get(r * n + c)) * rs * static_cast<float>(w.get(c)));
  }
  return out;
}

OutputCheck judge(Distribution d, std::int64_t m, std::int64_t n, float eps, const OpConfig& cfg = {}) {
  const RmsNormFwdOp op;
  const auto descs = op.tensors(shape(m, n), cfg);
  std::vector<HostTensor> ts;
  for (const auto& desc : descs) ts.emplace_back(desc.name, desc.dtype, desc.shape);
  fill_inputs(op, descs, d, 1234 + static_cast<std::uint64_t>(m * n), ts);
  std::vector<HostTensor> refs;
  op.reference(shape(m, n), cfg, ts, refs);
  const HostTensor out = forward(ts[0], ts[1], m, n, eps);
  for (const auto& r : refs)
    if (r.name == "out") return check_output(out, r, op.tolerance("out", cfg), 0);
  ADD_FAILURE() << "no reference named out";
  return {};
}

TEST(RmsNormDegenerateRows, TheOpDeclaresThemOnXOnly) {
  const RmsNormFwdOp op;
  for (const auto& d : op.tensors(shape(4, 8), {})) {
    if (d.name == "x") {
      EXPECT_EQ(d.degenerate_rows, (std::vector<DegenerateRow>{DegenerateRow::Zero, DegenerateRow::Constant,
                                                               DegenerateRow::Tiny, DegenerateRow::Denormal}));
    } else {
      EXPECT_TRUE(d.degenerate_rows.empty()) << d.name;
    }
  }
  // fp16 without a residual can take the largest finite values: no fp32 sum of their squares overflows.
  const auto fp16 = op.tensors(shape(4, 8), {{"x_dtype", "fp16"}});
  EXPECT_EQ(fp16[0].degenerate_rows.back(), DegenerateRow::LargestFinite);
}

TEST(RmsNormDegenerateRows, AKernelWithEpsPassesThemAndOneWithoutFails) {
  for (const auto& [m, n] : std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 7}, {12, 1000}, {10, 4097}}) {
    SCOPED_TRACE("M=" + std::to_string(m) + " N=" + std::to_string(n));
    for (const Distribution d : all_distributions()) {
      EXPECT_TRUE(judge(d, m, n, 1e-6f).passed) << to_string(d);
      // The loophole: without eps every ordinary distribution still passes.
      const OutputCheck no_eps = judge(d, m, n, 0.0f);
      EXPECT_TRUE(no_eps.passed) << to_string(d) << ": " << no_eps.reason;
    }
    const OutputCheck with_eps = judge(Distribution::DegenerateRows, m, n, 1e-6f);
    EXPECT_TRUE(with_eps.passed) << with_eps.reason;
    const OutputCheck no_eps = judge(Distribution::DegenerateRows, m, n, 0.0f);
    EXPECT_FALSE(no_eps.passed);
    EXPECT_EQ(reason_code(no_eps.reason), "nonfinite-output") << no_eps.reason;
  }
  // fp16 with rows of the largest finite values: a correct fp32 kernel passes them too.
  EXPECT_TRUE(judge(Distribution::DegenerateRows, 10, 4096, 1e-6f, {{"x_dtype", "fp16"}}).passed);
}

}  // namespace
}  // namespace ptxevo::kernels
