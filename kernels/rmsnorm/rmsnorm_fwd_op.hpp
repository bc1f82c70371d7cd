// RMSNorm forward (QuACK semantics, no residual or bias; RMSNORM.md section 1.1):
//   out[m, n] = x[m, n] * rstd[m] * w[n],   rstd[m] = 1 / sqrt(sum_n x[m, n]^2 / N + eps)
// x is [M, N] (bf16, fp16 or fp32), w is [N] (fp32 or x's dtype, optional), out is [M, N] in x's
// dtype, rstd is [M] fp32 (optional). kernels/rmsnorm/README.md documents the kernel contract.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "evaluator/op.hpp"

namespace ptxevo::kernels {

// OpConfig keys and defaults: x_dtype = bf16 | fp16 | fp32 (bf16); w_dtype = fp32 | same (fp32;
// "same" = x's dtype); has_weight = true | false (true); store_rstd = true | false (false);
// eps = a finite float >= 0 (1e-6). Shape dims: M, N (both >= 1).
// Knobs (int): VEC, THREADS, TPR, ITEMS, MIN_BLOCKS, LOAD_HINT, STORE_HINT (see knob_defaults()).
class RmsNormFwdOp : public evaluator::Op {
 public:
  // The parsed, validated config. parse() throws std::invalid_argument with a user-facing message.
  struct Config {
    evaluator::DType x = evaluator::DType::BF16;
    evaluator::DType w = evaluator::DType::F32;
    bool has_weight = true;
    bool store_rstd = false;
    double eps = 1e-6;
  };
  static Config parse(const evaluator::OpConfig& cfg);

  // Launch geometry for a knob assignment, after validation (same defaults as rmsnorm_fwd.cu).
  struct Geometry {
    std::int64_t vec = 8, threads = 256, tpr = 256, items = 2, min_blocks = 0, load_hint = 0, store_hint = 0;
    std::int64_t rows_per_cta() const { return threads / tpr; }
  };
  // Throws std::invalid_argument for unknown knobs or impossible values.
  static Geometry geometry(const Config& c, const evaluator::Knobs& k);
  // Default knob values for x's dtype (VEC = 16 bytes / sizeof(x)).
  static evaluator::Knobs knob_defaults(evaluator::DType x);

  std::string name() const override { return "rmsnorm_fwd"; }
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
  // The weight is drawn near 1 (1 + 0.5 N(0,1)): a gate distribution such as U(-1e3, 1e3) on w
  // would overflow a correct fp16 output.
  void fill_fixed(const evaluator::TensorDesc& d, std::mt19937_64& rng, evaluator::HostTensor& t) const override;
};

}  // namespace ptxevo::kernels
