// The KDA forward's fp64 reference as device code (Op::device_reference_*): the token-serial
// recurrence of docs/kda.md 1.3, as kda_recurrent_reference computes it on the host, one CTA per
// (sequence, head, block of 16 value columns) and one thread per key channel holding its row of
// those columns in fp64 registers; column sums are warp shuffles then a fixed-order sum over the
// four warps, so results do not depend on timing. On the host a benchmark shape's reference took
// most of a KDA campaign's time (448 of 556 s of worker time on the H200). The evaluator trusts
// it only after it agrees with the host reference on the spec's small shapes.
#pragma once

#include <string>

#include "evaluator/op.hpp"
#include "kernels/kda/kda_shape.hpp"

namespace ptxevo::kernels {

struct KdaRefConfig {
  bool softplus_gate = false;
  double lower_bound = -5.0;
  double scale = 0.08838834764831845;
  bool initial_state = true, final_state = true;
};

std::string kda_fwd_device_reference_source(const KdaRefConfig& c);
evaluator::DeviceReferencePlan kda_fwd_device_reference_plan(const KdaRefConfig& c, const KdaDims& d);

}  // namespace ptxevo::kernels
