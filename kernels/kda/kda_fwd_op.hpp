// Kimi Delta Attention forward (docs/kda.md), on the calling convention of the CUTLASS expert
// kernel (FlashKDA flash_kda.fwd): per (sequence, head) the state S (K x V) follows
//   S <- Diag(e^a_t) S;  r = v_t - k_t^T S;  S <- S + beta_t k_t r^T;  o_t = scale q_t^T S
// with q, k L2-normalised, beta = sigmoid(beta logits) and a_t the gate's log-decay, all fused.
// Tensors, in kernel-argument order (K = V = 128):
//   q, k, v, g      bf16 [B, T, H, 128]    in (g: raw gate input)
//   beta            bf16 [B, T, H]         in (logits)
//   A_log           fp32 [H]               in
//   dt_bias         fp32 [H, 128]          in
//   cu_seqlens      int64 [N + 1]          in, only for packed sequences (B = 1, N > 1)
//   initial_state   fp32 [N, H, 128, 128]  in, V-first (S^T), option initial_state
//   out             bf16 [B, T, H, 128]    out
//   final_state     fp32 [N, H, 128, 128]  out, V-first, option final_state
//   workspace       u8 [workspace_bytes]   scratch: the prepare + recurrence pair's (FUSED = 0)
// Shapes: kda_shape.hpp (B, T, H, N). kernels/kda/README.md documents the contract and knobs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "evaluator/op.hpp"
#include "kernels/kda/kda_plan.hpp"
#include "kernels/kda/kda_reference.hpp"
#include "kernels/kda/kda_shape.hpp"

namespace ptxevo::kernels {

// OpConfig keys and defaults: gate = lower_bound | softplus (lower_bound); lower_bound = a number in
// [-5, 0) (-5; lower_bound gate only); scale = a positive number (1/sqrt(128)); initial_state =
// true | false (true); final_state = true | false (true); head_dim = 128 (128; nothing else is
// supported). Two seed templates, told apart by their knobs: the recurrent kda_fwd.cu (BV, KSPLIT,
// TB, MIN_BLOCKS; geometry()) and the chunked kda_fwd_chunked.cu (CHUNK, BV, WARPS, STAGE,
// LM_TENSOR_CORES; chunked_geometry()). Knobs that name a CHUNK select the chunked entry; with
// MMA = "tcgen05" as well, its sm_100a variant kda_fwd_chunked_tcgen05.cu (kda_fwd_sm100a.spec).
class KdaFwdOp : public evaluator::Op {
 public:
  static constexpr std::int64_t kHeadDim = 128;

  struct Config {
    KdaGate gate = KdaGate::LowerBound;
    double lower_bound = -5.0;
    double scale = 0.08838834764831845;  // 1 / sqrt(128)
    bool initial_state = true;
    bool final_state = true;
  };
  // Throws std::invalid_argument with a user-facing message.
  static Config parse(const evaluator::OpConfig& cfg);

  // The seed's knobs after validation (defaults as in kda_fwd.cu).
  using Geometry = kda_plan::RecurrentGeometry;

  // Old knob names (knob_renames) are accepted. Throws std::invalid_argument for unknown knobs or
  // values the template cannot build.
  static Geometry geometry(const evaluator::Knobs& k);
  static evaluator::Knobs knob_defaults();
  static constexpr const char* kEntry = "kda_fwd_recurrent";

  // The chunked seed's knobs after validation (defaults as in kda_fwd_chunked.cu).
  using ChunkedGeometry = kda_plan::ChunkedGeometry;

  // True when the knobs are the chunked seed's (they name CHUNK).
  static bool is_chunked(const evaluator::Knobs& k);
  // Old knob names (knob_renames) are accepted. Throws std::invalid_argument for unknown knobs or
  // values the template cannot build.
  static ChunkedGeometry chunked_geometry(const evaluator::Knobs& k);
  // kda_fwd.spec's defaults for the chunked seed (the prepare + recurrence pair, FUSED = 0:
  // CHUNK 16, BV 64, WARPS 4, STAGE 2, LM_TENSOR_CORES 1, U0_BITS 16, KSPLIT 1, PREFETCH_CHUNKS 0,
  // WY_TENSOR_CORES 0, STATE_HI_LO 0, MMA sync, BULK 1, PREPARE_CTAS 0, U_HI_LO 0, LMTERMS 1,
  // WY_IN_RECURRENCE 1, SEQSPLIT 16).
  static evaluator::Knobs chunked_knob_defaults();
  // The fused kernel's defaults (FUSED = 1, CHUNK 16, BV 32, WARPS 4, STAGE 1, LM_TENSOR_CORES 1;
  // the split-only knobs at the values FUSED = 1 requires: U0_BITS 32, KSPLIT 1, PREFETCH_CHUNKS 0,
  // WY_TENSOR_CORES 0, STATE_HI_LO 1, MMA sync, BULK 0, PREPARE_CTAS 0, U_HI_LO 1, LMTERMS 3,
  // WY_IN_RECURRENCE 0).
  static evaluator::Knobs chunked_fused_knob_defaults();
  // 24 FUSED = 0 assignments that cover both kernels (the build and GPU tests build or gate them):
  // every (CHUNK, BV, STAGE 0 or not) of the recurrence, with (WARPS, LM_TENSOR_CORES, U0_BITS)
  // cycling through all eight per CHUNK for the prepare, and STAGE 1-3, KSPLIT, PREFETCH_CHUNKS,
  // WY_TENSOR_CORES and STATE_HI_LO varied along (STAGE 1, KSPLIT 1 where the deeper staging does
  // not fit a CTA's shared memory); then MMA = wgmma once a CHUNK, PREPARE_CTAS = 396 at the
  // defaults, WY_IN_RECURRENCE = 1 three times (the defaults, SEQSPLIT 16 among them; CHUNK 32 with
  // per-thread copies and the unfactored prepare; CHUNK 64), WY_IN_RECURRENCE = 2 once, and
  // SEQSPLIT 4 at WY_IN_RECURRENCE 1's CHUNK 32: 33 in all.
  static std::vector<evaluator::Knobs> split_covering_knobs();
  // The tcgen05 variant's defaults (kda_fwd_chunked_tcgen05.cu; MMA = "tcgen05").
  static evaluator::Knobs chunked_tcgen05_knob_defaults();
  // Dynamic shared memory of kda_fwd_chunked.cu's layout, or of kda_fwd_chunked_tcgen05.cu's when
  // g.tcgen05 (the kernels trap on less).
  // With g.fused false: the recurrence's (kda_fwd_recurrence) dynamic shared memory.
  static std::int64_t chunked_smem_bytes(const ChunkedGeometry& g);
  // kda_fwd_prepare's dynamic shared memory (FUSED = 0) for the gate (softplus or lower-bound).
  static std::int64_t prepare_smem_bytes(const ChunkedGeometry& g, bool softplus);
  // Bytes of one (head, chunk slot) of the workspace at chunk size c and U0 precision u0_bits, or
  // with WY_IN_RECURRENCE (T' in place of U0) (kda_fwd_chunked.cu, kWs*).
  static std::int64_t workspace_chunk_bytes(std::int64_t c, std::int64_t u0_bits = 32,
                                            std::int64_t wy_in_recurrence = 0);
  // The scratch tensor "workspace" (u8): H (N + T_total / C) chunk slots, the most any CHUNK needs,
  // their flags, and the sequence split's segment states (N H (P - 1) blocks of 128 KB, P the most
  // segments any SEQSPLIT gives the shape).
  static std::int64_t workspace_bytes(const KdaDims& d);
  // The segments the sequence split uses for a shape: SEQSPLIT capped so that the (sequence, head,
  // segment) chains stay within kSeqSplitChains and no segment is shorter than a chunk; 1 (no split)
  // when that leaves fewer than 4 (2 segments take as long as one: pass 1 runs the first half, pass
  // 3 the second; 3 save at most a third, less the combine and the busier SMs).
  static std::int64_t seq_segments(const KdaDims& d, std::int64_t chunk, std::int64_t seqsplit);
  static constexpr std::int64_t kSeqSplitChains = kda_plan::kSeqSplitChains;
  static constexpr std::int64_t kMaxSeqSplit = kda_plan::kMaxSeqSplit;
  // The plan's view of a shape (kda_plan.hpp): the longest packed sequence instead of cu_seqlens.
  static kda_plan::Dims plan_dims(const KdaDims& d);
  // The text of kda_plan.hpp, which an export pastes into its .cu (the launcher plans with it).
  static const char* plan_source();
  static constexpr const char* kSegCombineEntry = "kda_fwd_seg_combine";  // SEQSPLIT > 1
  static constexpr const char* kPrepareEntry = "kda_fwd_prepare";
  static constexpr const char* kRecurrenceEntry = "kda_fwd_recurrence";
  static constexpr const char* kFlagsResetEntry = "kda_fwd_flags_reset";  // PREPARE_CTAS > 0
  static constexpr const char* kChunkedEntry = "kda_fwd_chunked";
  static constexpr const char* kChunkedTcgen05Entry = "kda_fwd_chunked_tcgen05";

  // The chunked seed's knobs under their old names (LMTC, WYTC, SLO, ULO, UPREC, PGRID, WYREC, PF),
  // mapped to the current ones: specs, command lines and trace databases may still give them. The
  // templates refuse the old names with an #error.
  static evaluator::KnobAliases knob_renames();

  std::string name() const override { return "kda_fwd"; }
  evaluator::KnobAliases knob_aliases() const override { return knob_renames(); }
  std::string validate(const evaluator::OpConfig& cfg) const override;
  std::vector<evaluator::TensorDesc> tensors(const evaluator::Shape& s, const evaluator::OpConfig& cfg) const override;
  std::map<std::string, std::string> template_defines(const evaluator::OpConfig& cfg) const override;
  evaluator::LaunchPlan launch_plan(const evaluator::Shape& s, const evaluator::OpConfig& cfg,
                                    const evaluator::Knobs& k) const override;
  // The recurrent fp64 reference (kda_reference.hpp). Checks every tensor's dtype and size
  // against the shape (a wrong-size state is an error naming the expected shape) and the
  // cu_seqlens values (start at 0, strictly increasing, end at B * T).
  void reference(const evaluator::Shape& s, const evaluator::OpConfig& cfg,
                 const std::vector<evaluator::HostTensor>& tensors,
                 std::vector<evaluator::HostTensor>& reference) const override;
  double bytes(const evaluator::Shape& s, const evaluator::OpConfig& cfg) const override;
  double flops(const evaluator::Shape& s, const evaluator::OpConfig& cfg) const override;
  evaluator::Tolerance tolerance(const std::string& output, const evaluator::OpConfig& cfg) const override;
  // The recurrent fp64 reference on the GPU (kda_device_reference.hpp), with the float-rounded
  // scale and lower bound the host reference uses.
  std::string device_reference_source(const evaluator::OpConfig& cfg) const override;
  evaluator::DeviceReferencePlan device_reference_plan(const evaluator::Shape& s,
                                                       const evaluator::OpConfig& cfg) const override;
  // g, A_log, dt_bias and cu_seqlens are drawn here (see the .cpp for the ranges and why); q, k,
  // v, beta logits and the initial state follow the gate's distributions.
  void fill_fixed(const evaluator::TensorDesc& d, std::mt19937_64& rng, evaluator::HostTensor& t) const override;
  // The export (kda_fwd_export.cpp): ptxevo_kda_fwd_{workspace_bytes,plan,launch} around this
  // file's plan code, and a binding and module with FlashKDA's fwd, a torch custom op and a
  // flash-linear-attention backend (docs/export.md).
  std::optional<evaluator::HostExport> host_export(const evaluator::OpConfig& cfg, const evaluator::Knobs& k,
                                                   const std::set<std::string>& defined) const override;
  std::optional<evaluator::TorchExport> torch_export(const evaluator::OpConfig& cfg) const override;

  // The reference's view of `tensors` (shared with the tests).
  static KdaProblem problem(const KdaDims& d, const Config& c, const std::vector<evaluator::HostTensor>& tensors);
};

}  // namespace ptxevo::kernels
