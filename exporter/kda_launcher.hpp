// The host side of an exported kda_fwd kernel: the launch plan of kernels/kda/kda_plan.hpp pasted
// in verbatim (the plan KdaFwdOp timed), the knobs baked in, and
//   ptxevo_kda_fwd_workspace_bytes(B, T, H, N, longest)
//   ptxevo_kda_fwd_plan(B, T, H, N, longest, &plan, &why)
//   ptxevo_kda_fwd_launch(q, k, v, g, beta, A_log, dt_bias, cu_seqlens, initial_state, out,
//                         final_state, workspace, workspace_bytes, B, T, H, N, longest, scale,
//                         lower_bound, stream, &why)
// which checks its arguments against the options the kernels were built for and launches every
// kernel of the plan (the prepare, the recurrence, the sequence split's combine) on the stream.
#pragma once

#include <set>
#include <string>

#include "evaluator/op.hpp"
#include "exporter/op_launcher.hpp"

namespace ptxevo::exporter {

// Throws ExportError for knobs KdaFwdOp rejects or an entry the plan needs that `defined` lacks.
OpLauncher kda_fwd_launcher(const evaluator::OpConfig& cfg, const evaluator::Knobs& knobs,
                            const std::set<std::string>& defined);

}  // namespace ptxevo::exporter
