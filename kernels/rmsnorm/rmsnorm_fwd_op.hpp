// RMSNorm forward (QuACK semantics: kernels/rmsnorm/README.md, "QuACK's forward"), with optional
// residual and bias:
//   h[m, n]            = x[m, n] + residual[m, n]      (h = x without a residual)
//   residual_out[m, n] = h[m, n]                        (only with a residual)
//   out[m, n]          = h[m, n] * rstd[m] * w[n] + b[n],   rstd[m] = 1 / sqrt(sum_n h[m, n]^2 / N + eps)
// x, residual are [M, N] (bf16, fp16 or fp32); w and b are [N] (fp32 or x's dtype, each optional);
// out is [M, N] in x's dtype; residual_out is [M, N] in x's dtype or fp32; rstd is [M] fp32
// (optional). The norm uses the unrounded fp32 h. kernels/rmsnorm/README.md documents the kernel
// contract.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "evaluator/op.hpp"

namespace ptxevo::kernels {

// OpConfig keys and defaults: x_dtype = bf16 | fp16 | fp32 (bf16); w_dtype = fp32 | same (fp32;
// "same" = x's dtype); has_weight = true | false (true); has_bias = true | false (false);
// b_dtype = fp32 | same (fp32; only with has_bias); has_residual = true | false (false);
// residual_out_dtype = x | fp32 (x; only with has_residual); store_rstd = true | false (false);
// eps = a finite float >= 0 (1e-6). Shape dims: M, N (both >= 1).
// Knobs (int): VEC, THREADS, TPR, ITEMS, CLUSTER, STAGE_KB, MIN_BLOCKS, LOAD_HINT, STORE_HINT and the
// path knobs after them (see knob_defaults() and the README).
class RmsNormFwdOp : public evaluator::Op {
 public:
  // The parsed, validated config. parse() throws std::invalid_argument with a user-facing message.
  struct Config {
    evaluator::DType x = evaluator::DType::BF16;
    evaluator::DType w = evaluator::DType::F32;
    evaluator::DType b = evaluator::DType::F32;
    evaluator::DType residual_out = evaluator::DType::BF16;  // x's dtype unless "fp32"
    bool has_weight = true;
    bool has_bias = false;
    bool has_residual = false;
    bool store_rstd = false;
    double eps = 1e-6;
  };
  static Config parse(const evaluator::OpConfig& cfg);

  // The knobs, after validation (same defaults as rmsnorm_fwd.cu).
  struct Geometry {
    std::int64_t vec = 8, threads = 512, tpr = 8, items = 8, cluster = 4, stage_kb = 0, min_blocks = 2,
                 load_hint = 0, store_hint = 0, spread_ctas = 0, weight_early = 0, early_launch = 0,
                 persistent_ctas = 0, wide_rows = 0, min_cluster = 1, small_threads = 0, small_items = 1,
                 small_min_blocks = 0, small_min_rows = 4096, small_weight_prefetch = 0,
                 small_min_ctas = 0, small_stage = 0;
  };
  // Throws std::invalid_argument for unknown knobs or impossible values.
  static Geometry geometry(const Config& c, const evaluator::Knobs& k);
  // SMALL_STAGE 1: the shared memory that `elems` elements of x take (and the residual's with it).
  static std::int64_t small_stage_bytes(const Config& c, std::int64_t elems);
  // Default knob values for x's dtype (VEC = 16 bytes / sizeof(x)).
  static evaluator::Knobs knob_defaults(evaluator::DType x);

  // The per-N choice of launch_plan: which entry, how many threads per row and rows per CTA, how
  // many CTAs per row (a cluster) and how much dynamic shared memory (the stage).
  struct Dispatch {
    std::string entry;
    std::int64_t tpr = 0;           // threads per row
    std::int64_t rows_per_cta = 0;  // THREADS / tpr
    std::int64_t cluster = 1;       // CTAs per row (1: no cluster)
    std::int64_t shared_bytes = 0;  // dynamic shared memory per CTA
    std::int64_t threads = 0;       // block size: THREADS, kWideThreads (rmsnorm_fwd_wide) or SMALL_THREADS
  };
  static Dispatch dispatch(const Config& c, const Geometry& g, std::int64_t m, std::int64_t n);
  // Every entry the template defines for these knobs (a superset of what dispatch() returns).
  static std::vector<std::string> entries(const Geometry& g);
  // Dynamic shared memory a CTA may have: 227 KB on sm_90a and sm_100a, less 1 KB kept for the
  // kernel's static shared memory (reduction slots). sm_80 allows 163 KB.
  static constexpr std::int64_t kMaxStageKb = 226;
  // Threads of rmsnorm_fwd_wide's CTA (WIDE_ROWS): one row each.
  static constexpr std::int64_t kWideThreads = 1024;

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
  std::string device_reference_source(const evaluator::OpConfig& cfg) const override;
  evaluator::DeviceReferencePlan device_reference_plan(const evaluator::Shape& s,
                                                       const evaluator::OpConfig& cfg) const override;
  // The export (rmsnorm_fwd_export.cpp): a launcher whose plan mirrors dispatch() and
  // launch_plan(), and a binding and QuACK-compatible module (docs/export.md).
  std::optional<evaluator::HostExport> host_export(const evaluator::OpConfig& cfg, const evaluator::Knobs& k,
                                                   const std::set<std::string>& defined) const override;
  std::optional<evaluator::TorchExport> torch_export(const evaluator::OpConfig& cfg) const override;
  // The weight is drawn near 1 (1 + 0.5 N(0,1)) and the bias as 0.5 N(0,1): a gate distribution
  // such as U(-1e3, 1e3) on w would overflow a correct fp16 output, and on b it would swamp the
  // normalised part of out (and so hide errors in it).
  void fill_fixed(const evaluator::TensorDesc& d, std::mt19937_64& rng, evaluator::HostTensor& t) const override;
};

}  // namespace ptxevo::kernels
