// RMSNorm backward (RMSNORM.md 1.2): dx and dw from x, weight, dout and rstd. dw is reduced on
// the device: a persistent kernel writes one fp32 partial row per CTA into scratch, a second
// kernel sums the partial rows. No host round trip.
#pragma once

#include "evaluator/op.hpp"

namespace ptxevo::kernels {

class RmsNormBwdOp : public evaluator::Op {
 public:
  // Scratch rows for the per-CTA dw partials: the most CTAs a launch plan may use.
  static constexpr std::int64_t kMaxPartialRows = 1024;

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
