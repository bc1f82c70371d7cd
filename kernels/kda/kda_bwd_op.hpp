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
// Shapes and options are the forward's (kda_shape.hpp, KdaFwdOp::Config). The seeds are the
// recurrent kda_bwd.cu (knobs BV, CKPT, SUB, PREP) and the chunked kda_bwd_chunked.cu (knobs CHUNK,
// BV); kernels/kda/README.md documents the contract.
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
  // With CHUNK, the chunked seed (kda_bwd_chunked.cu: knobs CHUNK, BV, MMA, MMA_TERMS, SLICE_LOOP
  // CHAIN_PREFETCH and FINISH_IN_SLICES only; CHAIN_PREFETCH changes no plan, FINISH_IN_SLICES drops
  // kda_bwd_chunk_finish from it).
  struct Geometry {
    std::int64_t bv = 16, ckpt = 64, sub = 8;
    bool prep = false;       // PREP: a prepare kernel saves each token's pre-processing for the recurrence
    std::int64_t chunk = 0;  // CHUNK: tokens per chunk of the chunked seed; 0: the recurrent seed
    bool mma = false;        // MMA (chunked seed): its products on tensor cores
    std::int64_t mma_terms = 3;  // MMA_TERMS (chunked seed, MMA 1): bf16 terms per product, 3 or 1
    bool slice_loop = false;     // SLICE_LOOP (chunked seed, MMA 1, CHUNK 32): one slices CTA per (chunk, head)
    bool finish_in_slices = false;  // FINISH_IN_SLICES (with SLICE_LOOP): the finish runs in the slices CTAs
    bool finish_lean = false;       // FINISH_LEAN: the finish keeps no q and no P in shared memory
    std::int64_t chain_threads = 128;  // CHAIN_THREADS (MMA 1, no CHAIN_PREFETCH): threads of the chunk-serial CTAs
  };
  // Throws std::invalid_argument for unknown knobs or values the template cannot build.
  static Geometry geometry(const evaluator::Knobs& k);
  static evaluator::Knobs knob_defaults();
  // Assignments that cover the template's paths: every BV, CKPT and SUB value, both gates come
  // from the specs (the build test builds each under every option set).
  static std::vector<evaluator::Knobs> covering_knobs();
  // The chunked seed's defaults and the assignments that cover its paths (every CHUNK, every BV).
  static evaluator::Knobs chunked_knob_defaults();
  static std::vector<evaluator::Knobs> chunked_covering_knobs();
  // The chunked seed's workspace (kda_bwd_chunked.cu, ChunkArgs), fp32 words: the state entering
  // each chunk and the state gradient leaving it ([H][slots][slices][K][BV] each, slots = T_total /
  // CHUNK + N), each token-head's record (normalised q, k, in-chunk cumulative log-decay, beta's
  // sigmoid), Y = V - Kd S0 per token-head, X, M, P per chunk-head, the slices' shares of
  // 3 x 128 + 2 CHUNK + 1 words per token-head (128 / BV shares, or one with SLICE_LOOP), and the
  // chunk sums per slot and head. Sequence n's chunk c is slot n + bos_n / CHUNK + c.
  struct ChunkedLayout {
    std::int64_t slots = 0;
    std::int64_t dstate_off = 0, prep_off = 0, y_off = 0, mat_off = 0, share_off = 0, sums_off = 0, words = 0;
  };
  static ChunkedLayout chunked_layout(const KdaDims& d, std::int64_t chunk, std::int64_t bv,
                                      bool slice_loop = false);
  // Dynamic shared memory of a chunked entry in bytes (the kernel's k*Smem enumerators).
  static std::uint32_t chunked_shared_bytes(const std::string& entry, std::int64_t chunk, std::int64_t bv,
                                            bool slice_loop = false, bool finish_in_slices = false,
                                            bool finish_lean = false);
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
  // The fp32 words of workspace the plan of geometry g uses (workspace_words: the largest).
  static std::int64_t plan_words(const KdaDims& d, const Geometry& g);
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
  // The chunked seed's entries, in launch order (then kReduceEntry).
  static constexpr const char* kChunkPrepareEntry = "kda_bwd_chunk_prepare";
  static constexpr const char* kChunkStatesEntry = "kda_bwd_chunk_states";
  static constexpr const char* kChunkDstatesEntry = "kda_bwd_chunk_dstates";
  static constexpr const char* kChunkSlicesEntry = "kda_bwd_chunk_slices";
  static constexpr const char* kChunkFinishEntry = "kda_bwd_chunk_finish";

  // The outputs, in tensor order, for these options.
  static std::vector<std::string> outputs(const Config& c);

  std::string name() const override { return "kda_bwd"; }
  std::string validate(const evaluator::OpConfig& cfg) const override;
  std::vector<evaluator::TensorDesc> tensors(const evaluator::Shape& s, const evaluator::OpConfig& cfg) const override;
  // The workspace sized for the knobs' seed and geometry (plan_words), not the largest of all.
  std::vector<evaluator::TensorDesc> build_tensors(const evaluator::Shape& s, const evaluator::OpConfig& cfg,
                                                   const evaluator::Knobs& k) const override;
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
  static evaluator::LaunchPlan chunked_plan(const KdaDims& d, const Config& c, const Geometry& g);
  KdaFwdOp forward_;
};

}  // namespace ptxevo::kernels
