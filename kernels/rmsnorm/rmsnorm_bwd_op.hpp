// RMSNorm backward (kernels/rmsnorm/README.md, "QuACK's backward"): dx and dw from x, weight, dout
// and rstd. dw is reduced on the device: a persistent kernel writes one fp32 partial row per row
// group (a CTA or a cluster) into scratch, a second kernel sums the partial rows. No host round
// trip.
#pragma once

#include "evaluator/op.hpp"

namespace ptxevo::kernels {

class RmsNormBwdOp : public evaluator::Op {
 public:
  // Scratch rows for the per-group dw partials: the most groups a launch plan may use.
  static constexpr std::int64_t kMaxPartialRows = 1024;

  // What the launch plan runs for one shape (kernels/rmsnorm/README.md, backward).
  struct Dispatch {
    std::string entry;              // rmsnorm_bwd, rmsnorm_bwd_ring(_cluster(_long)) or rmsnorm_bwd_regs
    std::int64_t cluster = 1;       // CTAs per group (a cluster when > 1)
    std::int64_t groups = 1;        // row groups = dw partial rows; grid.x = groups * cluster
    std::int64_t slice = 0;         // ring: 16-byte units per CTA slice, ceil(N / VEC / cluster)
    std::int64_t stages = 0;        // ring: shared-memory stages
    std::int64_t shared_bytes = 0;  // ring: stages * slice * 32 (x and dout)
    std::int64_t threads = 0;       // the entry's CTA (THREADS, or LONG_THREADS for the long entry)
    std::int64_t items = 0;         // its units a thread (ITEMS or LONG_ITEMS)
  };
  // Knob defaults, the same as the spec's and the template's.
  static evaluator::Knobs knob_defaults();
  // Throws std::invalid_argument for unknown knobs and values the template cannot take.
  static Dispatch dispatch(const evaluator::OpConfig& cfg, const evaluator::Knobs& k, std::int64_t m, std::int64_t n);
  // The entries a module built with these knobs has (besides rmsnorm_bwd_dw_reduce).
  static std::vector<std::string> entries(const evaluator::Knobs& k);

  std::string name() const override { return "rmsnorm_bwd"; }
  std::string validate(const evaluator::OpConfig& cfg) const override;
  std::vector<evaluator::TensorDesc> tensors(const evaluator::Shape& s, const evaluator::OpConfig& cfg) const override;
  std::map<std::string, std::string> template_defines(const evaluator::OpConfig& cfg) const override;
  evaluator::LaunchPlan launch_plan(const evaluator::Shape& s, const evaluator::OpConfig& cfg,
                                    const evaluator::Knobs& k) const override;
  void reference(const evaluator::Shape& s, const evaluator::OpConfig& cfg,
                 const std::vector<evaluator::HostTensor>& tensors,
                 std::vector<evaluator::HostTensor>& reference) const override;
  double bytes(const evaluator::Shape& s, const evaluator::OpConfig& cfg) const override;
  double flops(const evaluator::Shape& s, const evaluator::OpConfig& cfg) const override;
  evaluator::Tolerance tolerance(const std::string& output, const evaluator::OpConfig& cfg) const override;
  std::string device_reference_source(const evaluator::OpConfig& cfg) const override;
  evaluator::DeviceReferencePlan device_reference_plan(const evaluator::Shape& s,
                                                       const evaluator::OpConfig& cfg) const override;
  void fill_fixed(const evaluator::TensorDesc& d, std::mt19937_64& rng, evaluator::HostTensor& t) const override;
};

}  // namespace ptxevo::kernels
