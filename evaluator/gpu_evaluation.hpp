// The worker side of an evaluation: the correctness gate on every shape and distribution,
// then paired, interleaved timing of candidate and baseline on the benchmark shapes, with the
// outputs of the timed runs checked again. Runs inside a worker process (see runner.hpp).
#pragma once

#include <vector>

#include <memory>
#include <string>

#include "evaluator/device_checks.hpp"
#include "evaluator/device_reference.hpp"
#include "evaluator/eval_types.hpp"
#include "evaluator/gpu_lock.hpp"
#include "evaluator/gpu_context.hpp"
#include "evaluator/op.hpp"

namespace ptxevo::evaluator {

class GpuEvaluator {
 public:
  explicit GpuEvaluator(GpuContext& ctx) : ctx_(ctx), lock_(ctx.info().ordinal) {}
  // Throws GpuError when the candidate faults (the caller records it and, for sticky errors,
  // ends the process).
  EvalReport evaluate(const Op& op, const EvalRequest& req);
  // Reports in candidate order. A sticky fault (the context is lost) throws for the whole batch;
  // other launch failures fail only their candidate.
  std::vector<EvalReport> evaluate_batch(const Op& op, const BatchEvalRequest& req);
  double copy_bandwidth();  // measured once per process

 private:
  GpuContext& ctx_;
  GpuLock lock_;  // held while the GPU works for this worker (see gpu_lock.hpp)
  double copy_bw_ = 0;
  // The trusted checking kernels, built on first use; without them outputs are checked on the host.
  std::unique_ptr<DeviceChecks> checks_;
  bool checks_tried_ = false;
  std::string checks_unavailable_;
  // The op's device reference per (op, config), verified on first use; null where unavailable
  // (devref_why_ says why, or how it was verified).
  DeviceReference* device_reference(const Op& op, const EvalRequest& req, std::string* why);
  std::map<std::string, std::unique_ptr<DeviceReference>> devrefs_;
  std::map<std::string, std::string> devref_why_;
};

// Fills the op's inputs from `d` in parallel (each chunk its own generator seeded from `seed`),
// and its fixed-distribution inputs through the op.
void fill_inputs(const Op& op, const std::vector<TensorDesc>& descs, Distribution d, std::uint64_t seed,
                 std::vector<HostTensor>& tensors);

}  // namespace ptxevo::evaluator
