// The host side of an exported kernel, per op: the C++ signature its entries share, and a host
// launcher `ptxevo_<op>_launch(..., cudaStream_t, const char** why)` that checks its arguments and
// reproduces the op's launch plan (entry, grid, block, dynamic shared memory, cluster) for any
// shape, with the candidate's knobs baked in. Ops declared in files get one generated from their
// declaration; ops compiled in write their own (Op::host_export, evaluator/op_export.hpp:
// rmsnorm_fwd's mirrors RmsNormFwdOp's plan, kda_fwd's pastes the plan code KdaFwdOp runs).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "evaluator/op.hpp"
#include "exporter/inline_ptx.hpp"

namespace ptxevo::exporter {

struct OpLauncher {
  std::vector<KernelParam> kernel_params;  // every entry's parameters, in PTX order
  // Per entry, where entries differ (a declared op's plan); when set, only these entries are exported.
  std::map<std::string, std::vector<KernelParam>> params_by_entry;
  std::vector<std::string> entries;        // the entries the plan may name
  std::string code;                        // plan + launcher (host code, after the kernels)
  std::string prototype;                   // the launcher's declaration, for bindings
  std::string plan_prototype;              // the plan function's declaration
};

// Throws ExportError for an op without a launcher generator or knobs its op rejects. Ops
// declared in files get a launcher generated from their plan (declared_export.hpp).
// `defined`: the entries the candidate's PTX defines.
OpLauncher op_launcher(const evaluator::Op& op, const evaluator::OpConfig& cfg, const evaluator::Knobs& knobs,
                       const std::set<std::string>& defined);

}  // namespace ptxevo::exporter
