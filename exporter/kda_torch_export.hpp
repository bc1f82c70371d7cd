// kda_fwd as a PyTorch extension: a binding that checks tensors against the options the kernels
// were built for and launches on the current stream, and a module with
// - fwd(q, k, v, g, beta, scale, out, A_log, dt_bias, lower_bound, initial_state=None,
//   final_state=None, cu_seqlens=None, max_seqlen=None): FlashKDA's flash_kda.fwd (out and
//   final_state written in place; states bf16 or fp32), through a torch.library custom op (so
//   torch.compile and CUDA graphs see a mutating op, not Python);
// - chunk_kda(...): FLA's chunk_kda arguments for the fused path, returning (o, final_state);
// - register_fla_backend(): a backend of flash-linear-attention's dispatch (fla.ops.backends), so
//   FLA's chunk_kda runs these kernels where it would run FlashKDA's (no gradients, bf16,
//   K = V = 128, the three in-kernel flags, V-first states).
#pragma once

#include <string>

#include "evaluator/spec.hpp"
#include "exporter/torch_export.hpp"

namespace ptxevo::exporter {

// Throws ExportError for a spec kda_fwd rejects.
TorchFiles kda_torch_export(const evaluator::Spec& spec, const std::string& cu_name, const std::string& tag,
                            const std::string& launcher_prototype, const std::string& description);

}  // namespace ptxevo::exporter
