// Kimi Delta Attention backward (docs/kda.md section 7): from the forward's inputs, the output
// gradient and the final-state gradient, the gradients of every input, on the forward's calling
// convention (kda_fwd_op.hpp). Tensors, in kernel-argument order (K = V = 128):
//   q, k, v, g      bf16 [B, T, H, 128]    in (g: raw gate input)
//   beta            bf16 [B, T, H]         in (logits)
//   A_log           fp32 [H]               in
//   dt_bias         fp32 [H, 128]          in
//   cu_seqlens      int64 [N + 1]          in, only for packed sequences (B = 1, N > 1)
//   initial_state   fp32 [N, H, 128, 128]  in, V-first (S^T), option initial_state
//   d_out           bf16 [B, T, H, 128]    in: the gradient of out
//   d_final_state   fp32 [N, H, 128, 128]  in, V-first, option final_state (the forward returned it)
//   dq, dk, dv, dg  fp32 [B, T, H, 128]    out (dg: of the raw gate input)
//   dbeta           fp32 [B, T, H]         out (of the logits)
//   dA_log          fp32 [H]               out
//   ddt_bias        fp32 [H, 128]          out
//   d_initial_state fp32 [N, H, 128, 128]  out, V-first, option initial_state
//   workspace       fp32 [words]           scratch: the states the forward pass keeps, each value
//                                          slice's share of dq, dk, dg, dbeta, and per-chunk sums
// Shapes and options are the forward's (kda_shape.hpp, KdaFwdOp::Config). The seed is the
// recurrent kda_bwd.cu (knobs BV, CKPT, SUB); kernels/kda/README.md documents the contract.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "evaluator/op.hpp"
#include "kernels/kda/kda_backward_reference.hpp"
#include "kernels/kda/kda_fwd_op.hpp"
#include "kernels/kda/kda_shape.hpp"

namespace ptxevo::kernels {

class KdaBwdOp : public evaluator::Op {
 public:
  static constexpr std::int64_t kHeadDim = 128;
  using Config = KdaFwdOp::Config;

  // The seed's knobs after validation (defaults as in kda_bwd.cu).
  struct Geometry {
    std::int64_t bv = 16, ckpt = 64, sub = 8;
    bool prep = false;  // PREP: a prepare kernel saves each token's pre-processing for the recurrence
  };
  // Throws std::invalid_argument for unknown knobs or values the template cannot build.
  static Geometry geometry(const evaluator::Knobs& k);
  static evaluator::Knobs knob_defaults();
  // Assignments that cover the template's paths: every BV, CKPT and SUB value, both gates come
  // from the specs (the build test builds each under every option set).
  static std::vector<evaluator::Knobs> covering_knobs();
  // The workspace in fp32 words (kda_bwd.cu's Args::ws): the checkpoint slots of the smallest
  // CKPT (32) for every head; from share_offset, kMaxSlices value slices' shares of dq, dk, the
  // log-decay's gradient and dbeta for every token-head; from sums_offset, the ddt_bias and dA_log
  // sums of every chunk of kFinishTokens tokens. With no atomics, the outputs are the same from run
  // to run bit for bit; the price is the shares' memory (12 KB + 32 B per token-head).
  // The shares' region holds `slices` (128 / BV) value slices. layout_words: checkpoints, shares and
  // sums; with PREP the saved pre-processing (prep_words) follows them. The tensor is sized for
  // kMaxSlices and PREP, so every knob assignment fits.
  static std::int64_t share_offset(const KdaDims& d);
  static std::int64_t sums_offset(const KdaDims& d, std::int64_t slices);
  static std::int64_t layout_words(const KdaDims& d, std::int64_t slices);
  static std::int64_t prep_words(const KdaDims& d);
  static std::int64_t workspace_words(const KdaDims& d);
  static std::int64_t finish_chunks(const KdaDims& d);
  // The device reference's knobs: two slices of 64 columns, so its fp64 shares and checkpoints
  // take 8 GB of scratch at T = 8192, H = 96 (22.6 GB at BV 16, which an H100 could not give it
  // beside the candidates); the state slice partly lives in local memory (a few KB of spills).
  static Geometry reference_geometry() { return {64, 32, 4, false}; }
  static constexpr std::int64_t kMaxSlices = 8;      // 128 / the smallest BV
  static constexpr std::int64_t kFinishTokens = 32;  // tokens per kda_bwd_finish CTA

  static constexpr const char* kRecurrentEntry = "kda_bwd_recurrent";
  static constexpr const char* kFinishEntry = "kda_bwd_finish";
  static constexpr const char* kReduceEntry = "kda_bwd_reduce";
  static constexpr const char* kPrepareEntry = "kda_bwd_prepare";  // PREP only

  // The outputs, in tensor order, for these options.
  static std::vector<std::string> outputs(const Config& c);

  std::string name() const override { return "kda_bwd"; }
  std::string validate(const evaluator::OpConfig& cfg) const override;
  std::vector<evaluator::TensorDesc> tensors(const evaluator::Shape& s, const evaluator::OpConfig& cfg) const override;
  std::map<std::string, std::string> template_defines(const evaluator::OpConfig& cfg) const override;
  evaluator::LaunchPlan launch_plan(const evaluator::Shape& s, const evaluator::OpConfig& cfg,
                                    const evaluator::Knobs& k) const override;
  // kda_backward (kda_backward_reference.hpp) on the inputs widened to fp64.
  void reference(const evaluator::Shape& s, const evaluator::OpConfig& cfg,
                 const std::vector<evaluator::HostTensor>& tensors,
                 std::vector<evaluator::HostTensor>& reference) const override;
  double bytes(const evaluator::Shape& s, const evaluator::OpConfig& cfg) const override;
  double flops(const evaluator::Shape& s, const evaluator::OpConfig& cfg) const override;
  evaluator::Tolerance tolerance(const std::string& output, const evaluator::OpConfig& cfg) const override;
  // The fp64 device reference: kda_bwd.cu compiled with KDA_BWD_REFERENCE (double, exact math,
  // entries ptxevo_ref_*) at the default knobs, its shares in the F64 scratch "ref_workspace".
  std::string device_reference_source(const evaluator::OpConfig& cfg) const override;
  evaluator::DeviceReferencePlan device_reference_plan(const evaluator::Shape& s,
                                                       const evaluator::OpConfig& cfg) const override;
  // `ptxevo export` (kda_bwd_export.cpp): the launcher of the three kernels and a PyTorch module
  // with bwd() and attach_forward(), which makes an autograd function with an exported kda_fwd.
  std::optional<evaluator::HostExport> host_export(const evaluator::OpConfig& cfg, const evaluator::Knobs& k,
                                                   const std::set<std::string>& defined) const override;
  std::optional<evaluator::TorchExport> torch_export(const evaluator::OpConfig& cfg) const override;
  // g, A_log, dt_bias and cu_seqlens as the forward draws them (KdaFwdOp::fill_fixed).
  void fill_fixed(const evaluator::TensorDesc& d, std::mt19937_64& rng, evaluator::HostTensor& t) const override;

  // The reference's inputs: the forward's problem (KdaFwdOp::problem) widened, the output
  // gradient and, with option final_state, the final-state gradient, all fp64.
  struct Problem {
    KdaInputs inputs;
    std::vector<double> d_out, d_final_state;
  };
  static Problem problem(const KdaDims& d, const Config& c, const std::vector<evaluator::HostTensor>& tensors);

 private:
  // The three launches; `reference` names the device reference's entries, outputs ("ref:<name>"),
  // scratch and double scalars instead of the candidate's.
  static evaluator::LaunchPlan plan(const KdaDims& d, const Config& c, const Geometry& g, bool reference);
  KdaFwdOp forward_;
};

}  // namespace ptxevo::kernels
