// The KDA forward's launch plan in plain C++ (<cstdint> and nothing of ptxevo): which kernels run,
// their grids, blocks, dynamic shared memory and workspace. KdaFwdOp plans every launch it times
// with it, and `ptxevo export` pastes this file into the exported .cu, so an exported launcher
// computes the very plan that was measured (one plan, two users).
#pragma once

#include <cstdint>

namespace ptxevo::kda_plan {

inline constexpr std::int64_t kHeadDim = 128;
// The sequence split aims at about one (sequence, head, segment) chain a SM of an H100 / H200 (132).
inline constexpr std::int64_t kSeqSplitChains = 128;
inline constexpr std::int64_t kMaxSeqSplit = 32;
inline constexpr std::int64_t kMaxSharedBytes = 227 * 1024;  // a CTA's dynamic shared memory on sm_90 / sm_100

// The recurrent seed's knobs (kda_fwd.cu) after validation.
struct RecurrentGeometry {
  std::int64_t bv = 32;         // value columns per CTA: the grid has 128 / BV CTAs per (sequence, head)
  std::int64_t ksplit = 4;      // threads per value column; each holds 128 / KSPLIT state rows
  std::int64_t tb = 8;          // tokens pre-processed per stage (staged in shared memory)
  std::int64_t min_blocks = 0;  // second __launch_bounds__ argument (0: none)
};

// The chunked seed's knobs (kda_fwd_chunked.cu) after validation (KdaFwdOp::chunked_geometry).
struct ChunkedGeometry {
  std::int64_t chunk = 16;  // tokens per chunk: 16, 32, 64
  std::int64_t bv = 32;     // value columns per CTA: 16, 32, 64, 128
  std::int64_t warps = 4;   // warps per CTA: 4, 8
  std::int64_t stage = 1;   // 1: the next chunk's inputs are staged in shared memory with cp.async
  std::int64_t lm_tensor_cores = 1;  // 1: L and M on tensor cores (lower-bound gate, CHUNK = 16 only)
  // Knob MMA, the matrix unit of the state GEMMs: "sync" (absent: mma.sync, kda_fwd_chunked.cu,
  // any arch) or "tcgen05" (tcgen05.mma with tensor-memory accumulators,
  // kda_fwd_chunked_tcgen05.cu, sm_100a only: the source refuses other arches with an #error
  // naming the knob and the arch, since launch plans do not see the arch; compile-only, never run).
  bool tcgen05 = false;
  // Knob FUSED: 1 (absent: 1) the one fused kernel kda_fwd_chunked; 0 the prepare + recurrence
  // pair kda_fwd_prepare (parallel over chunks: everything that does not depend on the state,
  // into the workspace) and kda_fwd_recurrence (per chunk only tensor-core products with the
  // state). With FUSED = 0, WARPS is the prepare's warps, the recurrence runs BV / 16 warps,
  // STAGE = 1 double-buffers the recurrence's operands (cp.async) and LM_TENSOR_CORES = 1 factors
  // the diagonal blocks of L and M about a pivot token (lower-bound gate, any CHUNK).
  bool fused = true;
  // Knob U0_BITS (FUSED = 0 only; absent: 32, kda_fwd.spec's default 16): the workspace's U0 in
  // fp32 (32) or bf16 (16).
  std::int64_t u0_bits = 32;
  // Knob KSPLIT (FUSED = 0 only; absent: 1): recurrence warps a group of 16 value columns, each
  // holding 128 / KSPLIT key channels of the state (1, 2, 4); they exchange partial products
  // through shared memory once a chunk.
  std::int64_t ksplit = 1;
  // Knob PREFETCH_CHUNKS (FUSED = 0 only; absent: 0): the recurrence asks the copy engine to
  // prefetch into L2 the chunk PREFETCH_CHUNKS ahead (0, 2, 4, 8). With FUSED = 0, STAGE (0-3) is
  // how many chunks the recurrence copies ahead into shared-memory buffers (the fused kernel:
  // 0 or 1).
  std::int64_t prefetch_chunks = 0;
  // Knob WY_TENSOR_CORES (FUSED = 0 only; absent: 0, kda_fwd.spec's default 1): the prepare's WY
  // form on tensor cores (T' = (I + L)^-1 diag(beta) once, then W0 = T' Kd and U0 = T' V by
  // mma.sync) instead of one fp32 forward substitution per column.
  std::int64_t wy_tensor_cores = 0;
  // Knob STATE_HI_LO (FUSED = 0 only; absent: 1): 1 the recurrence multiplies S^T as hi + lo bf16
  // terms into W^T and Qs^T, 0 as its bf16 rounding alone (half those products).
  std::int64_t state_hi_lo = 1;
  // Knob U_HI_LO (FUSED = 0 only; absent: 1, kda_fwd.spec's default 0): 1 the recurrence's U^T
  // enters the state update and out^T as hi + lo bf16 terms, 0 as its bf16 rounding alone (FLA's
  // bf16 v_new).
  std::int64_t u_hi_lo = 1;
  // Knob LMTERMS (absent: 3, kda_fwd.spec's default 1): the prepare's one-pass L and M products
  // (FUSED = 0, CHUNK 16, LM_TENSOR_CORES 1, lower-bound gate) as 3 bf16 terms (hi hi + hi lo +
  // lo hi), 2 (the right factor's bf16 rounding alone) or 1 (both factors single bf16 terms).
  std::int64_t lmterms = 3;
  // Knob WY_IN_RECURRENCE (FUSED = 0, MMA sync, KSPLIT 1, WY_TENSOR_CORES 0; absent: 0): 1 the
  // prepare writes Kd and T' = (I + L)^-1 diag(beta) instead of W0 and U0, and the recurrence
  // forms U = T' (V - Kd S) from v's rows (it then takes v, and its stage buffers hold v's rows
  // instead of U0^T's); 2 (CHUNK 16) the prepare folds T' into Kr and M instead (Kr2 = T'^T Kr,
  // M2 = M T'), so the recurrence's updates take V - Kd S as it is.
  std::int64_t wy_in_recurrence = 0;
  // Knob MMA = "wgmma" (FUSED = 0 only, sm_90a): the recurrence's state products on warpgroup
  // MMAs (wgmma.mma_async, B operands from shared memory in wgmma's core-matrix layout, which the
  // prepare then writes); BV 64 or 128, KSPLIT 1, STATE_HI_LO 0.
  bool wgmma = false;
  // Knob BULK (FUSED = 0 only; absent: 0): 1 the recurrence's stage copies on the bulk copy
  // engine (two cp.async.bulk by one thread a chunk, an mbarrier a buffer counting the bytes);
  // 0 per-thread 16-byte cp.async.
  std::int64_t bulk = 0;
  // Knob PREPARE_CTAS (FUSED = 0, BULK = 1; absent: 0): > 0 runs the prepare as min(PREPARE_CTAS,
  // items) persistent CTAs beside the recurrence (programmatic dependent launch), the recurrence
  // waiting on a flag a chunk in the workspace; a flag-reset kernel runs first. 0: the prepare
  // one CTA a chunk, the recurrence after it.
  std::int64_t prepare_ctas = 0;
  // Knob SEQSPLIT (FUSED = 0, WY_IN_RECURRENCE 1, PREPARE_CTAS 0; absent: 1): the most segments
  // each sequence's chain is split into where the (sequence, head) chains are few (seq_segments
  // picks the count for a shape): the recurrence then runs in two passes around
  // kda_fwd_seg_combine (1, 2, 4, 8, 16, 32; 1: never split).
  std::int64_t seqsplit = 1;
};

// A problem as the plan sees it: B rows of T tokens, H heads, N sequences (N == B, or B == 1 and
// N packed sequences of T tokens in all, the longest `longest` tokens).
struct Dims {
  std::int64_t batch = 1, tokens = 1, heads = 1, sequences = 1;
  std::int64_t longest = 1;
  bool packed = false;
  std::int64_t total_tokens() const { return batch * tokens; }
};

enum class Kernel : int { Recurrent, Chunked, ChunkedTcgen05, Prepare, Recurrence, SegCombine, FlagsReset };

inline const char* entry_name(Kernel k) {
  switch (k) {
    case Kernel::Recurrent: return "kda_fwd_recurrent";
    case Kernel::Chunked: return "kda_fwd_chunked";
    case Kernel::ChunkedTcgen05: return "kda_fwd_chunked_tcgen05";
    case Kernel::Prepare: return "kda_fwd_prepare";
    case Kernel::Recurrence: return "kda_fwd_recurrence";
    case Kernel::SegCombine: return "kda_fwd_seg_combine";
    case Kernel::FlagsReset: return "kda_fwd_flags_reset";
  }
  return "";
}

// One launch. Arguments are fixed per kernel (KdaFwdOp::launch_plan and the exported launcher list
// them); `segments` and `pass` are the recurrence's last two (the sequence split).
struct Launch {
  Kernel kernel = Kernel::Chunked;
  std::uint32_t grid[3] = {1, 1, 1};
  std::uint32_t block[3] = {1, 1, 1};
  std::uint32_t shared_bytes = 0;
  bool programmatic = false;  // launched as a programmatic dependent of the launch before it
  std::int32_t segments = 1;
  std::int32_t pass = 0;
};

struct Plan {
  int count = 0;
  Launch launches[4];
};

inline std::int64_t round16(std::int64_t b) { return (b + 15) / 16 * 16; }
inline std::int64_t min64(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
inline std::int64_t max64(std::int64_t a, std::int64_t b) { return a > b ? a : b; }

// Dynamic shared memory of kda_fwd_chunked.cu's layout, or kda_fwd_chunked_tcgen05.cu's when
// g.tcgen05; with g.fused false, the recurrence's (kda_fwd_recurrence): STAGE + 1 buffers of the
// workspace's chunk layout, the KSPLIT exchange, out's staging and the bulk copies' mbarriers.
inline std::int64_t chunked_smem_bytes(const ChunkedGeometry& g) {
  const std::int64_t D = kHeadDim, c = g.chunk, bv = g.bv;
  if (!g.fused)
    return (g.stage + 1) * (3 * c * D * 2 + 2 * c * c * 2 + D * 4 +
                            (g.wy_in_recurrence == 1   ? 2 * c * c * 2 + c * (2 * bv + 16)
                             : g.wy_in_recurrence == 2 ? c * (2 * bv + 16)
                                                       : bv * c * (g.u0_bits / 8))) +
           (g.ksplit > 1 ? 16 * bv * g.ksplit * c : 0) +  // 2 buffers x BV / 16 x KSPLIT warps x 32 lanes x C floats
           (c == 16 ? 2 * c * (2 * bv + 16) : 0) +          // out's staging
           (g.bulk ? 32 : 0);                              // BULK: the stage buffers' mbarriers
  const std::int64_t region_a = 3 * round16(c * (D + 1) * 4);
  if (g.tcgen05) {
    const std::int64_t b1 = 2 * 128 * D * 2, b2 = c * bv * 4 + 2 * 128 * c * 2;
    const std::int64_t un = (max64(region_a, max64(b1, b2)) + 1023) / 1024 * 1024;
    const std::int64_t staging = g.stage ? 3 * c * D * 2 + c * bv * 2 : 0;
    return un + c * bv * 4 + round16(c * 4) + D * 4 + 2 * c * D * 2 + D * c * 2 + c * c * 4 + 2 * c * c * 2 + 16 +
           staging;
  }
  const std::int64_t staging = g.stage ? 3 * c * D * 2 + c * bv * 2 : 0;
  return region_a + c * bv * 4 + round16(c * 4) + D * 4 + 2 * c * (D + 8) * 2 + D * (c + 8) * 2 +
         2 * bv * (D + 8) * 2 + c * c * 4 + 2 * c * (c + 8) * 2 + staging;
}

// kda_fwd_prepare's layout: fp32 q, k and G rows of 132 floats (each array rounded up to 16
// bytes), beta (fp32 C, rounded up), L (fp32 C x C), the left factors of one 16-token block (four
// bf16 arrays of 16 rows of F + 8) and the right factors (two bf16 arrays of C rows of F + 8), F
// the channels of one round of factors (64 at CHUNK 16, which writes them in two rounds; else 128),
// and the raw v rows (bf16 C x 128). Without q's rows where the kernel keeps q in registers
// (CHUNK 16, LM_TENSOR_CORES 1, the lower-bound gate, MMA sync, WY_TENSOR_CORES 0).
inline std::int64_t prepare_smem_bytes(const ChunkedGeometry& g, bool softplus) {
  const std::int64_t D = kHeadDim, c = g.chunk, f = c == 16 ? 64 : D;
  const bool q_regs = c == 16 && g.lm_tensor_cores == 1 && !softplus && !g.wgmma && g.wy_tensor_cores == 0;
  return (q_regs ? 2 : 3) * round16(c * (D + 4) * 4) + round16(c * 4) + c * c * 4 + 4 * 16 * (f + 8) * 2 +
         2 * c * (f + 8) * 2 +
         (g.wy_in_recurrence == 1   ? 0
          : g.wy_in_recurrence == 2 ? 2 * c * c * 4 + 2 * c * (c + 8) * 2
                                    : c * D * 2);
}

// Bytes of one (head, chunk slot) of the workspace at chunk size c and U0 precision u0_bits, or
// with WY_IN_RECURRENCE (T' in place of U0): Qd, W0 (bf16 C x 128), Kr^T (bf16 128 x C), M's two
// terms (bf16 C x C), 2^Gtot (fp32 128), U0^T (fp32 or bf16 128 x C).
inline std::int64_t workspace_chunk_bytes(std::int64_t c, std::int64_t u0_bits = 32, std::int64_t wy_in_recurrence = 0) {
  const std::int64_t D = kHeadDim;
  return 3 * c * D * 2 + 2 * c * c * 2 + D * 4 +
         (wy_in_recurrence == 1   ? 2 * c * c * 2
          : wy_in_recurrence == 2 ? 0
                                  : D * c * (u0_bits / 8));
}

// The segments the sequence split uses for a shape: SEQSPLIT capped so that the (sequence, head,
// segment) chains stay within kSeqSplitChains and no segment is shorter than a chunk; 1 (no split)
// when that leaves fewer than 4 (2 segments take as long as one: pass 1 runs the first half, pass
// 3 the second; 3 save at most a third, less the combine and the busier SMs).
inline std::int64_t seq_segments(const Dims& d, std::int64_t chunk, std::int64_t seqsplit) {
  if (seqsplit <= 1) return 1;
  const std::int64_t longest = d.packed ? d.longest : d.tokens;
  const std::int64_t p = min64(seqsplit, min64(kSeqSplitChains / (d.sequences * d.heads), (longest + chunk - 1) / chunk));
  return p >= 4 ? p : 1;
}

// The scratch every kernel of the op gets (sized without the knobs): the largest chunk layout, then
// PREPARE_CTAS's flags (a word a (head, slot) of CHUNK 16, the most slots), then (16-byte aligned)
// the sequence split's segment states for the most segments the shape gets.
inline std::int64_t workspace_bytes(const Dims& d) {
  const std::int64_t D = kHeadDim;
  std::int64_t most = 0;
  for (const std::int64_t c : {16, 32, 64})
    most = max64(most, d.heads * (d.sequences + d.total_tokens() / c) * workspace_chunk_bytes(c));
  const std::int64_t segs = seq_segments(d, 16, kMaxSeqSplit);
  const std::int64_t seg_bytes = segs > 1 ? d.sequences * d.heads * (segs - 1) * (2 * D * D * 4) + 16 : 0;
  return most + d.heads * (d.sequences + d.total_tokens() / 16) * 4 + seg_bytes;
}

inline constexpr std::int64_t kMaxGridX = (std::int64_t{1} << 31) - 1;

// The chunked seed's launches; nullptr, or why the shape cannot be launched.
inline const char* chunked_plan(const Dims& d, const ChunkedGeometry& g, bool softplus, Plan* plan) {
  const std::int64_t D = kHeadDim;
  plan->count = 0;
  if (d.sequences > kMaxGridX) return "N needs too many CTAs";
  Launch l;
  l.grid[0] = static_cast<std::uint32_t>(d.sequences);
  l.grid[1] = static_cast<std::uint32_t>(d.heads);
  l.grid[2] = static_cast<std::uint32_t>(D / g.bv);
  l.shared_bytes = static_cast<std::uint32_t>(chunked_smem_bytes(g));
  if (g.fused) {  // one CTA per (sequence, head, value slice)
    l.kernel = g.tcgen05 ? Kernel::ChunkedTcgen05 : Kernel::Chunked;
    l.block[0] = static_cast<std::uint32_t>(g.warps * 32);
    plan->launches[plan->count++] = l;
    return nullptr;
  }
  // kda_fwd_prepare: one CTA per (chunk slot, head), slots as the workspace counts them; slots
  // that no chunk uses return at once. Then kda_fwd_recurrence per (sequence, head, slice), KSPLIT
  // warps per 16 value columns.
  const std::int64_t slots = d.sequences + d.total_tokens() / g.chunk;
  if (slots > kMaxGridX) return "T needs too many CTAs";
  Launch prep;
  prep.kernel = Kernel::Prepare;
  prep.grid[0] = static_cast<std::uint32_t>(slots);
  prep.grid[1] = static_cast<std::uint32_t>(d.heads);
  prep.block[0] = static_cast<std::uint32_t>(g.warps * 32);
  prep.shared_bytes = static_cast<std::uint32_t>(prepare_smem_bytes(g, softplus));
  l.kernel = Kernel::Recurrence;
  l.block[0] = static_cast<std::uint32_t>(g.bv * 2 * g.ksplit);
  if (const std::int64_t segs = seq_segments(d, g.chunk, g.seqsplit); segs > 1) {
    // The sequence split: pass 1 (segments 0 .. P-2, 256 value columns: the segment from zero
    // and its transition), the combine, pass 3 (segments 1 .. P-1 from their entering states).
    if (d.sequences * (segs - 1) > kMaxGridX) return "N needs too many CTAs";
    const auto x = static_cast<std::uint32_t>(d.sequences * (segs - 1));
    Launch pass1 = l, pass3 = l, comb;
    pass1.grid[0] = x;
    pass1.grid[2] = 2 * l.grid[2];
    pass1.segments = static_cast<std::int32_t>(segs);
    pass1.pass = 1;
    pass3.grid[0] = x;
    pass3.segments = static_cast<std::int32_t>(segs);
    pass3.pass = 3;
    comb.kernel = Kernel::SegCombine;
    comb.grid[0] = static_cast<std::uint32_t>(d.sequences);
    comb.grid[1] = static_cast<std::uint32_t>(d.heads);
    comb.grid[2] = 16;
    comb.block[0] = 256;
    comb.segments = static_cast<std::int32_t>(segs);
    comb.shared_bytes = 2 * D * D * 4 + 8 * D * 4;  // X_j double-buffered, 8 rows of E^T
    plan->launches[plan->count++] = prep;
    plan->launches[plan->count++] = pass1;
    plan->launches[plan->count++] = comb;
    plan->launches[plan->count++] = pass3;
    return nullptr;
  }
  if (g.prepare_ctas > 0) {
    // The flags to 0, then the prepare as persistent CTAs (never more than its items), then the
    // recurrence launched programmatically: it starts once every prepare CTA is running.
    const std::int64_t flags = slots * d.heads;
    Launch reset;
    reset.kernel = Kernel::FlagsReset;
    reset.grid[0] = static_cast<std::uint32_t>(min64((flags + 255) / 256, 1024));
    reset.block[0] = 256;
    plan->launches[plan->count++] = reset;
    prep.grid[0] = static_cast<std::uint32_t>(min64(g.prepare_ctas, flags));
    prep.grid[1] = 1;
    l.programmatic = true;
  }
  plan->launches[plan->count++] = prep;
  plan->launches[plan->count++] = l;
  return nullptr;
}

// The recurrent seed's one launch: a CTA per (sequence, head, value slice).
inline const char* recurrent_plan(const Dims& d, const RecurrentGeometry& g, Plan* plan) {
  plan->count = 0;
  if (d.sequences > kMaxGridX) return "N needs too many CTAs";
  Launch l;
  l.kernel = Kernel::Recurrent;
  l.grid[0] = static_cast<std::uint32_t>(d.sequences);
  l.grid[1] = static_cast<std::uint32_t>(d.heads);
  l.grid[2] = static_cast<std::uint32_t>(kHeadDim / g.bv);
  l.block[0] = static_cast<std::uint32_t>(g.bv * g.ksplit);
  plan->launches[plan->count++] = l;
  return nullptr;
}

}  // namespace ptxevo::kda_plan
