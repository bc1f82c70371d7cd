// The host side of an exported kernel, per op: the C++ signature its entries share, and a host
// launcher `ptxevo_<op>_launch(..., cudaStream_t, const char** why)` that checks its arguments and
// reproduces the op's launch plan (entry, grid, block, dynamic shared memory, cluster) for any
// shape, with the candidate's knobs baked in. Only rmsnorm_fwd has one so far; its plan code
// mirrors RmsNormFwdOp::dispatch and launch_plan, and exporter/tests checks the two agree.
#pragma once

#include <string>
#include <vector>

#include "evaluator/op.hpp"
#include "exporter/inline_ptx.hpp"

namespace ptxevo::exporter {

struct OpLauncher {
  std::vector<KernelParam> kernel_params;  // every entry's parameters, in PTX order
  std::vector<std::string> entries;        // the entries the plan may name
  std::string code;                        // plan + launcher (host code, after the kernels)
  std::string prototype;                   // the launcher's declaration, for bindings
  std::string plan_prototype;              // the plan function's declaration
};

// Throws ExportError for an op without a launcher generator or knobs its op rejects.
OpLauncher op_launcher(const std::string& op, const evaluator::OpConfig& cfg, const evaluator::Knobs& knobs);

}  // namespace ptxevo::exporter
