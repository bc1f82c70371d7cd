// The RMSNorm forward and backward fp64 references as device code (Op::device_reference_*):
// the same formulas as the host references in rmsnorm_fwd_op.cpp / rmsnorm_bwd_op.cpp, one CTA
// per row with fp64 tree sums, and dw summed over row slices into fp64 partials, then over the
// slices, so the result does not depend on timing. The evaluator trusts them only after they
// agree with the host references on the spec's small shapes.
#pragma once

#include <cstdint>
#include <string>

#include "evaluator/op.hpp"

namespace ptxevo::kernels {

struct RmsNormFwdRefConfig {
  evaluator::DType x, w, b, residual_out;
  bool has_weight, has_bias, has_residual, store_rstd;
  double eps;  // as the kernel receives it (a float)
};
std::string rmsnorm_fwd_device_reference_source(const RmsNormFwdRefConfig& c);
evaluator::DeviceReferencePlan rmsnorm_fwd_device_reference_plan(const RmsNormFwdRefConfig& c, std::int64_t m,
                                                                 std::int64_t n);

std::string rmsnorm_bwd_device_reference_source(evaluator::DType x, evaluator::DType w, bool has_weight);
evaluator::DeviceReferencePlan rmsnorm_bwd_device_reference_plan(bool has_weight, std::int64_t m, std::int64_t n);

}  // namespace ptxevo::kernels
