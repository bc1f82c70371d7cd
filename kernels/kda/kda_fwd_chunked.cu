// kda_fwd chunked seed template: Kimi Delta Attention forward by chunks of CHUNK tokens
// (docs/kda.md 2.1, the WY / UT-transform form), the state GEMMs on bf16 tensor cores (mma.sync
// m16n8k16, fp32 accumulation), the state itself in fp32 registers for the whole sequence.
//
// Same contract and tensors as kda_fwd.cu (kernels/kda/README.md); entry kda_fwd_chunked, launched
// by KdaFwdOp::launch_plan when the knobs name a CHUNK:
//   grid = (N sequences, H heads, 128 / BV value slices), block = WARPS * 32 threads,
//   dynamic shared memory = KdaFwdOp::chunked_smem_bytes (the layout below; checked at entry).
// A CTA owns value columns [z BV, z BV + BV) of one (sequence, head) and runs its chunks in order.
// Per chunk (tokens past the sequence's end are padding: k = q = v = beta = 0, a = 0, so they
// change nothing and the chunk's total decay is that of its last real token):
//   1. pre-process: L2 norms of q, k (scale folded into q), the gate in log2 units, sigmoid(beta)
//   2. G = inclusive cumsum of the log2-decays over the chunk (fp32), dec = 2^Gtot, Gtot = G[C-1]
//   3. bf16 operands Kd = k 2^G, Qd = q 2^G, KrT = (k 2^(Gtot - G))^T; the intra-chunk matrices
//      L_ij = beta_i sum_d k_id k_jd 2^(G_id - G_jd) (i > j, fp32) and
//      M_ij = sum_d q_id k_jd 2^(G_id - G_jd) (i >= j, two bf16 terms hi + lo) on CUDA cores, one
//      exponential per term; S^T as two bf16 terms (hi + lo) in shared memory for the reads below
//   4. tensor cores: W = Kd S, Qs = Qd S (kept in registers); U' = beta (V - W)
//   5. the UT transform U = (I + L)^-1 U' by forward substitution (fp32, one thread per column),
//      U stored as two bf16 terms (hi + lo)
//   6. tensor cores: out = bf16(Qs + M U) (M_hi U_hi + M_hi U_lo + M_lo U_hi: one bf16 rounding
//      of M_ij would err coherently along a whole row of out); S <- diag(dec) S + KrT U (in the
//      state's registers)
// Every exponential is of G_i - G_j with i >= j, of Gtot - G_i or of G_i: never positive, so no
// gate (the softplus one is unbounded below) overflows; fp32 2^x of a very negative x is 0.
// kernels/tests/kda_chunked_emulation_test.cpp models exactly this blocking and rounding on the
// CPU against the fp64 recurrent reference.
//
// The kernels live in parts under chunked/ (layout, ptx primitives, fused, solve, prepare,
// recurrence, combine), which ptxevo expands into this file when it reads the template (see
// evaluator/template_source.hpp): every build, agent prompt and export sees one source.
//
// Knobs (defaults match KdaFwdOp::ChunkedGeometry):
//   CHUNK   tokens per chunk: 16, 32 or 64
//   BV      value columns per CTA: 16, 32, 64 or 128 (128 / BV CTAs per (sequence, head))
//   WARPS   warps per CTA: 4 or 8; warp w holds state rows [w 128 / WARPS, (w + 1) 128 / WARPS)
//   LM_TENSOR_CORES
//           1: with the lower-bound gate and CHUNK = 16, L and M come from tensor-core products of
//           factors about the reference token r = 7 instead of one ex2 per term: x_i = 2^(G_i - G_r),
//           y_j = 2^(G_r - G_j) (y = 1 / x elementwise), L_ij = beta_i sum_d (k_i x_i)(k_j y_j),
//           M_ij = sum_d (q_i x_i)(k_j y_j), each factor as hi + lo bf16 terms (hi hi + hi lo + lo hi).
//           Safe because the gate bounds a decay to 5 nats (7.22 in log2) a token: |G_i - G_r| <= 8
//           tokens' worth, 2^58, far inside fp32 and bf16 (entries above the diagonal, up to 2^109,
//           are discarded). 4x fewer ex2 than the direct form; ignored for the softplus gate.
//   STAGE   1: the next chunk's raw q, k, g, v rows are copied into a shared staging buffer with
//           cp.async (and its beta logits into registers) while this chunk computes, so that step
//           1 reads shared memory; 0: step 1 loads from global memory directly
// FUSED = 0 (the prepare + recurrence pair; kernels/kda/README.md documents every knob) adds
// U0_BITS, KSPLIT, PREFETCH_CHUNKS, WY_TENSOR_CORES, STATE_HI_LO, LMTERMS, and the recurrence's MMA
// (sync: mma.sync; wgmma: warpgroup MMAs with B operands in wgmma's core-matrix layout, which the
// prepare then writes) and BULK (1: its chunk copies as cp.async.bulk completing on an mbarrier a
// buffer; 0: cp.async by every thread), PREPARE_CTAS (> 0: the prepare as PREPARE_CTAS persistent
// CTAs running beside the recurrence, which waits on a per-chunk flag instead of the prepare's end;
// 0: one prepare CTA a chunk, then the recurrence).
#include <cuda_bf16.h>

// The knobs' old names: refused, so that an old -D is never silently ignored (KdaFwdOp::knob_renames
// maps them where specs, command lines and trace databases give knobs).
#ifdef LMTC
#error "knob LMTC was renamed LM_TENSOR_CORES"
#endif
#ifdef WYTC
#error "knob WYTC was renamed WY_TENSOR_CORES"
#endif
#ifdef SLO
#error "knob SLO was renamed STATE_HI_LO"
#endif
#ifdef ULO
#error "knob ULO was renamed U_HI_LO"
#endif
#ifdef UPREC
#error "knob UPREC was renamed U0_BITS"
#endif
#ifdef PGRID
#error "knob PGRID was renamed PREPARE_CTAS"
#endif
#ifdef WYREC
#error "knob WYREC was renamed WY_IN_RECURRENCE"
#endif
#ifdef PF
#error "knob PF was renamed PREFETCH_CHUNKS"
#endif

#ifndef KDA_GATE_SOFTPLUS
#define KDA_GATE_SOFTPLUS 0
#endif
#ifndef HAS_INITIAL_STATE
#define HAS_INITIAL_STATE 1
#endif
#ifndef HAS_FINAL_STATE
#define HAS_FINAL_STATE 1
#endif
#ifndef CHUNK
#define CHUNK 16
#endif
#ifndef BV
#define BV 32
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef STAGE
#define STAGE 1
#endif
#ifndef LM_TENSOR_CORES
#define LM_TENSOR_CORES 1
#endif
#ifndef FUSED
#define FUSED 1
#endif
#ifndef KSPLIT
#define KSPLIT 1
#endif
#ifndef PREFETCH_CHUNKS
#define PREFETCH_CHUNKS 0
#endif
#ifndef U0_BITS
#define U0_BITS 32
#endif
#ifndef WY_TENSOR_CORES
#define WY_TENSOR_CORES 0
#endif
#ifndef STATE_HI_LO
#define STATE_HI_LO 1
#endif
#ifndef BULK
#define BULK 0
#endif
#ifndef PREPARE_CTAS
#define PREPARE_CTAS 0
#endif
#ifndef U_HI_LO
#define U_HI_LO 1
#endif
// LMTERMS: the prepare's one-pass L and M products (CHUNK 16, LM_TENSOR_CORES 1, lower-bound gate)
// as 3 bf16 terms (hi hi + hi lo + lo hi), 2 (the right factor k 2^(G_7 - G) as its bf16 rounding
// alone) or 1 (both factors single bf16 terms, as FLA's bf16 operands: a third of the products,
// half the factor stores); other forms take 3.
#ifndef LMTERMS
#define LMTERMS 3
#endif
// WY_IN_RECURRENCE (FUSED = 0, MMA sync, KSPLIT 1): the WY form applied in the recurrence. The
// prepare writes Kd = k 2^G and T' = (I + L)^-1 diag(beta) (C x C, hi + lo bf16) instead of W0 = T'
// Kd and U0 = T' V, and the recurrence forms U = T' (V - Kd S) from v's rows (copied from the
// input, as FlashKDA's second kernel reads v): the prepare neither reads v nor substitutes 256
// columns, and the workspace loses U0 (1120 -> 928 bytes a token-head at CHUNK 16), for one C x C x
// 16 product more a warp on the chain. WY_IN_RECURRENCE 2 (CHUNK 16) folds T' into the recurrence's
// other operands instead: the prepare writes Kr2 = T'^T Kr and M2 = M T' (U = T' U' enters only the
// state update S <- D S + Kr^T U and out = Qd S + M U), so the chain is WY_IN_RECURRENCE 0's with V
// in U0's place, and the workspace holds 864 bytes a token-head.
#ifndef WY_IN_RECURRENCE
#define WY_IN_RECURRENCE 0
#endif
// SEQSPLIT (FUSED = 0, WY_IN_RECURRENCE 1, PREPARE_CTAS 0): the most segments a sequence's chain is
// split into when the (sequence, head) chains are few (KdaFwdOp::seq_segments picks the count from
// the shape; 1: never). A chunk maps the state affinely, S -> A S + B V, so a segment of chunks
// ends at A_j S_in + S0_j. Pass 1 runs segments 0 .. P-2 over 256 value columns: S0_j (v, from a
// zero state; segment 0 from the initial state, writing its out) and A_j (v = 0, from the
// identity), into the workspace; kda_fwd_seg_combine forms each segment's entering state in order,
// E_(j+1) = A_j E_j + S0_j; pass 3 runs segments 1 .. P-1 from them, writing out and the final
// state (kda_segmented_reference is the fp64 model). 1: the code is not compiled.
#ifndef SEQSPLIT
#define SEQSPLIT 1
#endif
#define KDA_WY_FOLD (WY_IN_RECURRENCE == 2)
#define KDA_LM_TC (LM_TENSOR_CORES && !KDA_GATE_SOFTPLUS && CHUNK == 16)
// The recurrence's out rows through shared memory (stmatrix, then whole 16-byte row segments a
// chunk later) at CHUNK 16; larger chunks store from the accumulators (their registers are full:
// the staging spilled at CHUNK 64).
#define KDA_OUT_STAGED (CHUNK == 16)
// The matrix unit of the recurrence's state products (knob MMA): sync (mma.sync, default) or
// wgmma (Hopper's warpgroup MMA; FUSED = 0, BV 64 or 128, KSPLIT 1, STATE_HI_LO 0; sm_90a only).
#define KDA_MMA_ID_sync 1
#define KDA_MMA_ID_wgmma 2
#define KDA_MMA_CAT_(a, b) a##b
#define KDA_MMA_CAT(a, b) KDA_MMA_CAT_(a, b)
#ifndef MMA
#define MMA sync
#endif
#undef KDA_WGMMA  // (the host tests include this file once per configuration)
#undef wgmma_nc
#if KDA_MMA_CAT(KDA_MMA_ID_, MMA) == KDA_MMA_ID_wgmma
#define KDA_WGMMA 1
#elif KDA_MMA_CAT(KDA_MMA_ID_, MMA) == KDA_MMA_ID_sync
#define KDA_WGMMA 0
#else
#error "kda_fwd_chunked.cu implements knob MMA=sync or MMA=wgmma (MMA=tcgen05 is kda_fwd_chunked_tcgen05.cu)"
#endif
#if KDA_WGMMA && (FUSED || KSPLIT != 1 || STATE_HI_LO != 0 || (BV != 64 && BV != 128))
#error "MMA=wgmma needs FUSED=0, KSPLIT=1, STATE_HI_LO=0 and BV 64 or 128 (whole warpgroups of 16-column warps)"
#endif
#if WY_IN_RECURRENCE == 2 && CHUNK != 16
#error "WY_IN_RECURRENCE=2 needs CHUNK=16 (the prepare folds T' into Kr and M with one 16-token step)"
#endif
#if SEQSPLIT > 1 && (WY_IN_RECURRENCE != 1 || PREPARE_CTAS)
#error "SEQSPLIT > 1 needs WY_IN_RECURRENCE=1 and PREPARE_CTAS=0 (pass 1 zeroes the transition columns' v rows as they are copied)"
#endif
#if WY_IN_RECURRENCE && (FUSED || KDA_WGMMA || KSPLIT != 1 || WY_TENSOR_CORES)
#error "WY_IN_RECURRENCE=1 or 2 needs FUSED=0, MMA=sync, KSPLIT=1 and WY_TENSOR_CORES=0 (U = T' (V - Kd S) is formed in each 16-column warp)"
#endif
#if KDA_WGMMA && LMTERMS != 3
#error "LMTERMS=1 or 2 needs MMA=sync (M's exact diagonal is reduced in the mma.sync layout's one-pass step)"
#endif
#if KDA_WGMMA && defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "MMA=wgmma needs sm_90a (wgmma.mma_async exists only there)"
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
#define KDA_ARCH_SM100 1
#else
#define KDA_ARCH_SM100 0
#endif
// The prepare's one-pass form (CHUNK 16, factored diagonal, mma.sync layout, WY by substitution)
// keeps each thread's normalised q in registers from the pre-processing to the Qd / factor pass,
// which reads exactly the tokens and channel pairs it loaded: no fp32 q rows in shared memory
// (8.25 KB less: six CTAs a SM at 80 registers; no spills since the paired substitution,
// KDA_WY_PAIRED). H200: 3-4% faster plans on all six scenarios (bench/results/
// 2026-12-01-h200-kda-overlap, run 5).
#undef KDA_Q_REGS
#define KDA_Q_REGS (!FUSED && CHUNK == 16 && LM_TENSOR_CORES && !KDA_GATE_SOFTPLUS && !KDA_WGMMA && !WY_TENSOR_CORES)

namespace kda_chunked {

#include "chunked/layout.cuh"

#include "chunked/ptx.cuh"

struct Args {
  const __nv_bfloat16* __restrict__ q;
  const __nv_bfloat16* __restrict__ k;
  const __nv_bfloat16* __restrict__ v;
  const __nv_bfloat16* __restrict__ g;
  const __nv_bfloat16* __restrict__ beta;
  const float* __restrict__ a_log;
  const float* __restrict__ dt_bias;
  const long long* __restrict__ cu_seqlens;  // null: fixed rows of T tokens
  const float* __restrict__ initial_state;   // [N, H, V, K]
  __nv_bfloat16* __restrict__ out;
  float* __restrict__ final_state;           // [N, H, V, K]
  long long T;
  int H;
  float scale, lower_bound;
};

#if FUSED
#include "chunked/fused.cuh"
#else
#include "chunked/solve.cuh"
#include "chunked/prepare.cuh"
#include "chunked/recurrence.cuh"
#include "chunked/combine.cuh"
#endif  // FUSED

}  // namespace kda_chunked

#if FUSED
#ifndef KDA_HOST_EMULATION
extern "C" __global__ void __launch_bounds__(WARPS * 32) kda_fwd_chunked(
    const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k, const __nv_bfloat16* __restrict__ v,
    const __nv_bfloat16* __restrict__ g, const __nv_bfloat16* __restrict__ beta, const float* __restrict__ a_log,
    const float* __restrict__ dt_bias, const long long* __restrict__ cu_seqlens,
    const float* __restrict__ initial_state, __nv_bfloat16* __restrict__ out, float* __restrict__ final_state,
    long long T, int H, float scale, float lower_bound) {
  kda_chunked::kda_chunked_body(
      {q, k, v, g, beta, a_log, dt_bias, cu_seqlens, initial_state, out, final_state, T, H, scale, lower_bound});
}
#endif  // KDA_HOST_EMULATION
#else
#ifndef KDA_HOST_EMULATION
extern "C" __global__ void __launch_bounds__(WARPS * 32, kda_chunked::kPMinBlocks) kda_fwd_prepare(
    const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k, const __nv_bfloat16* __restrict__ v,
    const __nv_bfloat16* __restrict__ g, const __nv_bfloat16* __restrict__ beta, const float* __restrict__ a_log,
    const float* __restrict__ dt_bias, const long long* __restrict__ cu_seqlens, unsigned char* __restrict__ ws,
    long long T, int H, int nseq, float scale, float lower_bound) {
  kda_chunked::kda_prepare_body(
      {q, k, v, g, beta, a_log, dt_bias, cu_seqlens, nullptr, nullptr, nullptr, T, H, scale, lower_bound}, ws, nseq);
}
#if PREPARE_CTAS
extern "C" __global__ void __launch_bounds__(KDA_RESET_THREADS) kda_fwd_flags_reset(
    unsigned char* __restrict__ ws, const long long* __restrict__ cu_seqlens, long long T, int H, int nseq) {
  kda_chunked::kda_flags_reset_body(
      {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, cu_seqlens, nullptr, nullptr, nullptr, T, H, 0.f, 0.f},
      ws, nseq);
}
#endif
extern "C" __global__ void __launch_bounds__(BV * 2 * KSPLIT, kda_chunked::kRMinBlocks) kda_fwd_recurrence(
    const unsigned char* __restrict__ ws, const long long* __restrict__ cu_seqlens,
    const float* __restrict__ initial_state, __nv_bfloat16* __restrict__ out, float* __restrict__ final_state,
    long long T, int H, int nseq, float scale, float lower_bound, const __nv_bfloat16* __restrict__ v, int nseg,
    int pass) {
  // v: read only with WY_IN_RECURRENCE = 1 (the op passes it to every recurrence); nseg, pass:
  // SEQSPLIT > 1.
  kda_chunked::kda_recurrence_body({nullptr, nullptr, v, nullptr, nullptr, nullptr, nullptr, cu_seqlens,
                                    initial_state, out, final_state, T, H, scale, lower_bound},
                                   ws, nseq, nseg, pass);
}
#if SEQSPLIT > 1
extern "C" __global__ void __launch_bounds__(KDA_COMBINE_THREADS) kda_fwd_seg_combine(
    unsigned char* __restrict__ ws, const long long* __restrict__ cu_seqlens, long long T, int H, int nseq, int nseg) {
  kda_chunked::kda_seg_combine_body(
      {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, cu_seqlens, nullptr, nullptr, nullptr, T, H, 0.f, 0.f},
      ws, nseq, nseg);
}
#endif
#endif  // KDA_HOST_EMULATION
#endif  // FUSED
