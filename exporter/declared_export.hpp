// The host side of an exported declared op, generated from its declaration: a launcher that
// evaluates the launch plan's expressions for the dims it is given (options and knobs baked in)
// and launches each kernel with cudaLaunchKernelExC, and a PyTorch extension whose arguments are
// the op's tensors (dtype, shape, device and contiguity checked), registered as a torch.library
// custom op so torch.compile and CUDA graphs can use it. Tensor-map arguments are not exported
// yet (ExportError).
#pragma once

#include <set>
#include <string>

#include "declared_ops/declared_op.hpp"
#include "evaluator/spec.hpp"
#include "exporter/op_launcher.hpp"
#include "exporter/torch_export.hpp"

namespace ptxevo::exporter {

// Throws ExportError for options or knobs the op rejects, or arguments export cannot pass.
// `defined`: the entries the candidate's PTX defines (a template may define only those its knobs
// can reach); a launch of another entry becomes an error at run time, not a missing symbol. When
// it defines none of the plan's entries, every entry is listed (and cuda_export names the first).
OpLauncher declared_launcher(const declared_ops::DeclaredOp& op, const evaluator::OpConfig& cfg,
                             const evaluator::Knobs& knobs, const std::set<std::string>& defined);

// Throws ExportError like torch_export.
TorchFiles declared_torch_export(const declared_ops::DeclaredOp& op, const evaluator::Spec& spec,
                                 const std::string& cu_name, const std::string& tag,
                                 const std::string& launcher_prototype, const std::string& description);

}  // namespace ptxevo::exporter
