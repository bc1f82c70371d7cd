// A test-only op whose launch plan passes a TMA tensor map: out = x for an f32 [M, N] tensor,
// copied tile by tile through the bulk tensor copy engine. It exercises ArgTensorMap end to end
// (host validation, cuTensorMapEncodeTiled, the 128-byte __grid_constant__ parameter).
#pragma once

#include "evaluator/op.hpp"

namespace ptxevo::tests {

class TmaCopyOp : public evaluator::Op {
 public:
  static constexpr int kTile = 32;
  std::string name() const override { return "tma_copy_2d"; }
  std::string validate(const evaluator::OpConfig& cfg) const override;
  std::vector<evaluator::TensorDesc> tensors(const evaluator::Shape& s, const evaluator::OpConfig& cfg) const override;
  std::map<std::string, std::string> template_defines(const evaluator::OpConfig&) const override { return {}; }
  evaluator::LaunchPlan launch_plan(const evaluator::Shape& s, const evaluator::OpConfig& cfg,
                                    const evaluator::Knobs& k) const override;
  void reference(const evaluator::Shape& s, const evaluator::OpConfig& cfg,
                 const std::vector<evaluator::HostTensor>& tensors,
                 std::vector<evaluator::HostTensor>& reference) const override;
  double bytes(const evaluator::Shape& s, const evaluator::OpConfig&) const override;
  double flops(const evaluator::Shape&, const evaluator::OpConfig&) const override { return 0; }
  evaluator::Tolerance tolerance(const std::string&, const evaluator::OpConfig&) const override { return {1e-12, 1e-12}; }
};

}  // namespace ptxevo::tests
