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
// Knobs (defaults match KdaFwdOp::ChunkedGeometry):
//   CHUNK   tokens per chunk: 16, 32 or 64
//   BV      value columns per CTA: 16, 32, 64 or 128 (128 / BV CTAs per (sequence, head))
//   WARPS   warps per CTA: 4 or 8; warp w holds state rows [w 128 / WARPS, (w + 1) 128 / WARPS)
//   LMTC    1: with the lower-bound gate and CHUNK = 16, L and M come from tensor-core products of
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
// UPREC, KSPLIT, PF, WYTC, SLO, LMTERMS, and the recurrence's MMA (sync: mma.sync; wgmma: warpgroup MMAs with
// B operands in wgmma's core-matrix layout, which the prepare then writes) and BULK (1: its chunk
// copies as cp.async.bulk completing on an mbarrier a buffer; 0: cp.async by every thread), PGRID
// (> 0: the prepare as PGRID persistent CTAs running beside the recurrence, which waits on a
// per-chunk flag instead of the prepare's end; 0: one prepare CTA a chunk, then the recurrence).
#include <cuda_bf16.h>

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
#ifndef LMTC
#define LMTC 1
#endif
#ifndef FUSED
#define FUSED 1
#endif
#ifndef KSPLIT
#define KSPLIT 1
#endif
#ifndef PF
#define PF 0
#endif
#ifndef UPREC
#define UPREC 32
#endif
#ifndef WYTC
#define WYTC 0
#endif
#ifndef SLO
#define SLO 1
#endif
#ifndef BULK
#define BULK 0
#endif
#ifndef PGRID
#define PGRID 0
#endif
#ifndef ULO
#define ULO 1
#endif
// LMTERMS: the prepare's one-pass L and M products (CHUNK 16, LMTC 1, lower-bound gate) as 3 bf16
// terms (hi hi + hi lo + lo hi), 2 (the right factor k 2^(G_7 - G) as its bf16 rounding alone) or
// 1 (both factors single bf16 terms, as FLA's bf16 operands: a third of the products, half the
// factor stores); other forms take 3.
#ifndef LMTERMS
#define LMTERMS 3
#endif
// WYREC (FUSED = 0, MMA sync, KSPLIT 1): the WY form applied in the recurrence. The prepare writes
// Kd = k 2^G and T' = (I + L)^-1 diag(beta) (C x C, hi + lo bf16) instead of W0 = T' Kd and
// U0 = T' V, and the recurrence forms U = T' (V - Kd S) from v's rows (copied from the input, as
// FlashKDA's second kernel reads v): the prepare neither reads v nor substitutes 256 columns, and
// the workspace loses U0 (1120 -> 928 bytes a token-head at CHUNK 16), for one C x C x 16 product
// more a warp on the chain. WYREC 2 (CHUNK 16) folds T' into the recurrence's other operands
// instead: the prepare writes Kr2 = T'^T Kr and M2 = M T' (U = T' U' enters only the state update
// S <- D S + Kr^T U and out = Qd S + M U), so the chain is WYREC 0's with V in U0's place, and the
// workspace holds 864 bytes a token-head.
#ifndef WYREC
#define WYREC 0
#endif
// SEQSPLIT (FUSED = 0, WYREC 1, PGRID 0): the most segments a sequence's chain is split into when
// the (sequence, head) chains are few (KdaFwdOp::seq_segments picks the count from the shape; 1:
// never). A chunk maps the state affinely, S -> A S + B V, so a segment of chunks ends at
// A_j S_in + S0_j. Pass 1 runs segments 0 .. P-2 over 256 value columns: S0_j (v, from a zero state;
// segment 0 from the initial state, writing its out) and A_j (v = 0, from the identity), into the
// workspace; kda_fwd_seg_combine forms each segment's entering state in order,
// E_(j+1) = A_j E_j + S0_j; pass 3 runs segments 1 .. P-1 from them, writing out and the final
// state (kda_segmented_reference is the fp64 model). 1: the code is not compiled.
#ifndef SEQSPLIT
#define SEQSPLIT 1
#endif
#define KDA_WY_FOLD (WYREC == 2)
#define KDA_LM_TC (LMTC && !KDA_GATE_SOFTPLUS && CHUNK == 16)
// The recurrence's out rows through shared memory (stmatrix, then whole 16-byte row segments a
// chunk later) at CHUNK 16; larger chunks store from the accumulators (their registers are full:
// the staging spilled at CHUNK 64).
#define KDA_OUT_STAGED (CHUNK == 16)
// The matrix unit of the recurrence's state products (knob MMA): sync (mma.sync, default) or
// wgmma (Hopper's warpgroup MMA; FUSED = 0, BV 64 or 128, KSPLIT 1, SLO 0; sm_90a only).
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
#if KDA_WGMMA && (FUSED || KSPLIT != 1 || SLO != 0 || (BV != 64 && BV != 128))
#error "MMA=wgmma needs FUSED=0, KSPLIT=1, SLO=0 and BV 64 or 128 (whole warpgroups of 16-column warps)"
#endif
#if WYREC == 2 && CHUNK != 16
#error "WYREC=2 needs CHUNK=16 (the prepare folds T' into Kr and M with one 16-token step)"
#endif
#if SEQSPLIT > 1 && (WYREC != 1 || PGRID)
#error "SEQSPLIT > 1 needs WYREC=1 and PGRID=0 (pass 1 zeroes the transition columns' v rows as they are copied)"
#endif
#if WYREC && (FUSED || KDA_WGMMA || KSPLIT != 1 || WYTC)
#error "WYREC=1 or 2 needs FUSED=0, MMA=sync, KSPLIT=1 and WYTC=0 (U = T' (V - Kd S) is formed in each 16-column warp)"
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
#define KDA_Q_REGS (!FUSED && CHUNK == 16 && LMTC && !KDA_GATE_SOFTPLUS && !KDA_WGMMA && !WYTC)

namespace kda_chunked {

#if FUSED
// Compile-time constants as enumerators (namespace-scope constexpr variables would become .global
// variables in the PTX, and a candidate must have none).
enum : int {
  kD = 128,  // K = V
  kC = CHUNK,
  kBv = BV,
  kWarps = WARPS,
  kThreads = WARPS * 32,
  kRowsPerWarp = kD / WARPS,         // state rows per warp
  kMt = kRowsPerWarp / 16,           // m16 tiles of state rows per warp
  kNt = kBv / 8,                     // n8 tiles of value columns
  kOutTiles = (kC / 16) * kNt,       // 16 x 8 tiles of a chunk's C x BV outputs
  kTilesPerWarp = (kOutTiles + kWarps - 1) / kWarps,
  kLd = kD + 1,                      // fp32 [C][K] rows (odd stride: column walks hit distinct banks)
  kPadK = kD + 8,                    // bf16 [.][K] rows: fragment loads hit 32 distinct banks
  kPadC = kC + 8,                    // bf16 [.][C] rows
  kPairs = kC * (kC + 1) / 2,        // (i, j) pairs with j <= i of L and M
  // Lanes that share one pair's 128-channel dot product (adjacent lanes, combined by shuffles):
  // enough that the pairs fill whole rounds of the CTA's threads.
  kPairLanes = kC == 16 ? 8 : kC == 32 ? 4 : 1,
  kPairRounds = (kPairs * kPairLanes + kThreads - 1) / kThreads,
  kStageSegs = 48 + kBv / 8,         // 16-byte cp.async segments per token: q, k, g rows and v's slice
};

static_assert(kC == 16 || kC == 32 || kC == 64, "CHUNK: 16, 32 or 64");
static_assert(kBv == 16 || kBv == 32 || kBv == 64 || kBv == 128, "BV: 16, 32, 64 or 128");
static_assert(kWarps == 4 || kWarps == 8, "WARPS: 4 or 8");
static_assert(STAGE == 0 || STAGE == 1, "STAGE: 0 or 1");
static_assert(LMTC == 0 || LMTC == 1, "LMTC: 0 or 1");

// Dynamic shared memory, in bytes from the base (every offset a multiple of 16). Region A holds
// the fp32 pre-processed chunk (steps 1-3); region B (steps 4-6) reuses it.
enum : int {
  kOffQ = 0,                                   // fp32 [C][kLd]   q * scale / |q|
  kOffK = kOffQ + ((kC * kLd * 4 + 15) / 16) * 16,  // fp32 [C][kLd] k / |k|
  kOffG = kOffK + ((kC * kLd * 4 + 15) / 16) * 16,  // fp32 [C][kLd] log2-decays, then their cumsum
  kRegionA = kOffG + ((kC * kLd * 4 + 15) / 16) * 16,
  kOffU = 0,                                   // fp32 [C][BV]    U' then U              (region B)
  kOffUhi = kOffU + kC * kBv * 4,              // bf16 [BV][kPadC] U^T, high bf16 term    (region B)
  kOffUlo = kOffUhi + kBv * kPadC * 2,         // bf16 [BV][kPadC] U^T - high term        (region B)
  kRegionB = kOffUlo + kBv * kPadC * 2,
  kOffV = kRegionA,                            // fp32 [C][BV]    this CTA's value columns
  kOffBeta = kOffV + kC * kBv * 4,             // fp32 [C]
  kOffDec = kOffBeta + ((kC * 4 + 15) / 16) * 16,  // fp32 [K]  2^Gtot
  kOffKd = kOffDec + kD * 4,                   // bf16 [C][kPadK]
  kOffQd = kOffKd + kC * kPadK * 2,            // bf16 [C][kPadK]
  kOffKrT = kOffQd + kC * kPadK * 2,           // bf16 [K][kPadC]
  kOffShi = kOffKrT + kD * kPadC * 2,          // bf16 [BV][kPadK] S^T, high term
  kOffSlo = kOffShi + kBv * kPadK * 2,         // bf16 [BV][kPadK] S^T - high term
  kOffL = kOffSlo + kBv * kPadK * 2,           // fp32 [C][C]
  kOffMhi = kOffL + kC * kC * 4,               // bf16 [C][kPadC] M, high term
  kOffMlo = kOffMhi + kC * kPadC * 2,          // bf16 [C][kPadC] M - high term
  kOffRq = kOffMlo + kC * kPadC * 2,           // bf16 [C][K]  staged raw q      (STAGE = 1)
  kOffRk = kOffRq + kC * kD * 2,               // bf16 [C][K]  staged raw k
  kOffRg = kOffRk + kC * kD * 2,               // bf16 [C][K]  staged raw g
  kOffRv = kOffRg + kC * kD * 2,               // bf16 [C][BV] staged v slice
  kSmemBytes = STAGE ? kOffRv + kC * kBv * 2 : kOffRq,
};
static_assert(kRegionB <= kRegionA, "region B must fit in region A");
// LMTC's partial L and M sums (4 channel quarters x 2 x 16 x 16 fp32) use the S^T area before 3c.
static_assert(!KDA_LM_TC || 4 * 2 * 16 * 16 * 4 <= 2 * kBv * kPadK * 2, "LMTC scratch must fit the S^T area");
static_assert(kSmemBytes <= 232448, "at most 227 KB of shared memory per CTA");

#else
// FUSED = 0: the prepare + recurrence pair (header comment, "FUSED = 0"). kda_fwd_prepare runs
// with WARPS * 32 threads, kda_fwd_recurrence with BV / 16 warps (one warp per 16 value columns).
enum : int {
  kD = 128,  // K = V
  kC = CHUNK,
  kBv = BV,
  kNb = kC / 16,                   // 16-token blocks of a chunk
  kPThreads = WARPS * 32,          // prepare
  kPWarps = WARPS,
  kKs = KSPLIT,                    // recurrence warps a 16-column group (key channels split)
  kDw = kD / KSPLIT,               // key channels a recurrence warp holds
  kRWarps = BV / 16 * KSPLIT,      // recurrence
  kRThreads = kRWarps * 32,
  kLd = kD + 4,                    // fp32 [C][K] rows of the prepare (16-byte aligned: vector accesses)
  kPadK = kD + 8,                  // bf16 [.][K] rows in shared memory
  // Channels a round of the prepare's L / M factors holds: CHUNK 16 writes and multiplies them in
  // two rounds of 64 (half the factor area: five CTAs a SM instead of four), larger chunks in one.
  kFk = kC == 16 ? 64 : kD,
  kPadF = kFk + 8,                 // bf16 factor rows (stride 36 words: conflict-free fragments)
  kNtC = kC / 8,                   // n8 tiles over a chunk's tokens
  kKsC = kC / 16,                  // k16 steps over a chunk's tokens
  // The workspace of one (head, chunk slot), in bytes (every offset a multiple of 16); Qd, W0,
  // Kr^T and M in fragment order (swzf), U0^T with 16-byte chunks swizzled (swz).
  kWsQd = 0,                       // bf16 [C][K]  Qd = scale q 2^G
  kWsW = kWsQd + kC * kD * 2,      // bf16 [C][K]  W0 = (I + L)^-1 diag(beta) Kd
  kWsKrT = kWsW + kC * kD * 2,     // bf16 [K][C]  Kr^T = (k 2^(Gtot - G))^T
  kWsMhi = kWsKrT + kD * kC * 2,   // bf16 [C][C]  M (zero above the diagonal), high term
  kWsMlo = kWsMhi + kC * kC * 2,   // bf16 [C][C]  M - high term
  // WYREC 1 and 2: kWsW holds -Kd = -k 2^G instead of W0, and there is no U0^T; WYREC 1: T' =
  // (I + L)^-1 diag(beta) follows M (hi + lo, zero above the diagonal, fragment order as M);
  // WYREC 2: kWsKrT holds (T'^T Kr)^T and kWsMhi / kWsMlo M T' (T' folded in).
  kWsThi = kWsMlo + kC * kC * 2,   // bf16 [C][C]  T' (WYREC 1), high term
  kWsTlo = kWsThi + kC * kC * 2,   // bf16 [C][C]  T' - high term
  kWsDec = WYREC == 1 ? kWsTlo + kC * kC * 2 : kWsMlo + kC * kC * 2,  // fp32 [K]     2^Gtot
  kUBytes = UPREC / 8,             // U0^T elements: fp32 (UPREC 32) or bf16 (UPREC 16)
  kWsU = kWsDec + kD * 4,          // [V][C]  U0^T = ((I + L)^-1 diag(beta) V)^T
  kWsChunkBytes = kWsU + (WYREC ? 0 : kD * kC * kUBytes),
  kWyrec = WYREC,
  // Prepare shared memory (bytes).
  kPOffQ = 0,                                    // fp32 [C][kLd] scale q / |q|
  kPOffK = kPOffQ + (KDA_Q_REGS ? 0 : ((kC * kLd * 4 + 15) / 16) * 16),  // fp32 [C][kLd] k / |k|
  kPOffG = kPOffK + ((kC * kLd * 4 + 15) / 16) * 16,   // fp32 [C][kLd] log2-decays, then G
  kPOffBeta = kPOffG + ((kC * kLd * 4 + 15) / 16) * 16,  // fp32 [C]
  kPOffL = kPOffBeta + ((kC * 4 + 15) / 16) * 16,  // fp32 [C][C] L (beta folded in)
  kPOffXh = kPOffL + kC * kC * 4,                // bf16 [16][kPadF] left factors of one block, k
  kPOffXl = kPOffXh + 16 * kPadF * 2,
  kPOffQh = kPOffXl + 16 * kPadF * 2,            // bf16 [16][kPadF] left factors, q
  kPOffQl = kPOffQh + 16 * kPadF * 2,
  kPOffYh = kPOffQl + 16 * kPadF * 2,            // bf16 [C][kPadF] right factors
  kPOffYl = kPOffYh + kC * kPadF * 2,
  kPOffV = kPOffYl + kC * kPadF * 2,             // bf16 [C][K] raw v rows (step 5), copied in step 0
  // WYREC 2 (step 5): M and T' in fp32 and T' as hi + lo bf16 [C][kLdT] after the factor area,
  // where v's rows were (the recurrence reads v).
  kPOffMf = kPOffV,
  kPOffTf = kPOffMf + kC * kC * 4,
  kPOffFTh = kPOffTf + kC * kC * 4,
  kPOffFTl = kPOffFTh + kC * (kC + 8) * 2,
  kPSmemBytes = kPOffV + (WYREC == 1 ? 0 : WYREC == 2 ? 2 * kC * kC * 4 + 2 * kC * (kC + 8) * 2 : kC * kD * 2),
  // WYTC = 1, step 5: T' = (I + L)^-1 diag(beta) as hi + lo bf16 [C][kLdT] over q's rows (dead
  // after step 4), Kd^T as hi + lo bf16 [K][kLdKd] over the factor area (free after step 4). The
  // pads keep the fragment loads conflict-free.
  kLdT = kC + 8,
  kLdKd = kC + 8,
  kPOffTh = kPOffQ,
  kPOffTl = kPOffTh + kC * kLdT * 2,
  kPOffKdh = kPOffXh,
  kPOffKdl = kPOffKdh + kD * kLdKd * 2,
  // The prepare's CTAs a SM as its shared memory allows (228 KB less 1 KB a CTA for the system),
  // asked of ptxas as __launch_bounds__'s minimum so that registers do not lower it further;
  // capped at 102 registers a thread (640 / threads CTAs: five of 128 threads; sm_90a's ptxas needs
  // 96) so that nothing spills; for sm_100a (compiled only, never run) at 128, where the 102 cap
  // spilled 64 bytes.
  kPSmemCtas = 233472 / (kPSmemBytes + 1024),
  kPCtaCap = KDA_ARCH_SM100 ? 512 / kPThreads : (KDA_Q_REGS ? 768 : 640) / kPThreads,
  // The softplus gate's diagonal blocks (one ex2 a term) need more: there the bound is left to ptxas.
  kPMinBlocks = KDA_GATE_SOFTPLUS || kPSmemCtas < 1 ? 1 : (kPSmemCtas < kPCtaCap ? kPSmemCtas : kPCtaCap),
  // Recurrence shared memory: STAGE ? 2 : 1 buffers of one chunk's operands, each the
  // workspace's own dense (swizzled, see swz) layout of Qd, W0, Kr^T, M and 2^Gtot, then this
  // CTA's BV rows of U0^T: two linear copies a chunk.
  kROffQd = kWsQd,
  kROffW = kWsW,
  kROffKrT = kWsKrT,
  kROffMhi = kWsMhi,
  kROffMlo = kWsMlo,
  kROffDec = kWsDec,
  kROffU = kWsU,
  // WYREC: in U0^T's place the slice's C rows of v (bf16, BV values a row padded by 16 bytes, so
  // that ldmatrix's eight rows of a phase hit distinct banks), copied from the input by cp.async.
  kVRow = kBv * 2 + 16,
  kROffV = kWsU,
  kRStageBytes = kWsU + (WYREC ? kC * kVRow : kBv * kC * kUBytes),
  kRBuffers = STAGE + 1,           // chunks in flight: STAGE ahead of the one computed
  kRSmemBytes = kRBuffers * kRStageBytes,
  kSegShared = kWsU / 16,             // 16-byte segments of Qd .. 2^Gtot
  kSegU = WYREC ? 0 : kBv * kC * kUBytes / 16,  // and of the slice's U0^T rows
  // KSPLIT > 1: each warp's partial W^T and Qs^T (2 x C / 8 tiles of 4 floats a lane), two
  // buffers by chunk parity, after the stage buffers.
  kXFloats = 2 * (kC / 8) * 4,
  kROffX = kRSmemBytes,
  // out^T staging (CHUNK 16, KDA_OUT_STAGED): two buffers (by chunk parity) of C token rows of
  // the slice's BV bf16 values, each row padded by 16 bytes so that stmatrix's eight rows of a
  // phase hit distinct banks; a chunk's rows leave as 16-byte stores during the next chunk.
  kORow = kBv * 2 + 16,
  kOBufBytes = KDA_OUT_STAGED ? kC * kORow : 0,
  kROffO = kRSmemBytes + (KSPLIT > 1 ? 2 * kRWarps * 32 * kXFloats * 4 : 0),
  // BULK = 1: one mbarrier a stage buffer (8 bytes each, 32 reserved) after everything else.
  kROffBar = kROffO + 2 * kOBufBytes,
  kRSmemTotal = kROffBar + (BULK ? 32 : 0),
  // The recurrence's CTAs a SM that its registers must allow (CHUNK 16): at 168 registers (the
  // most that keep three 128-thread CTAs within the 64K register file) scenarios 3 and 6 run three
  // CTAs a SM; above it (the chunk loop unrolled by buffer: 170) only two. Larger chunks need
  // more registers than that cap leaves (they spill under it).
  kRMinBlocks = kC == 16 && 65536 / (kRThreads * 168) > 0 ? 65536 / (kRThreads * 168) : 1,
};
static_assert(kC == 16 || kC == 32 || kC == 64, "CHUNK: 16, 32 or 64");
static_assert(kBv == 16 || kBv == 32 || kBv == 64 || kBv == 128, "BV: 16, 32, 64 or 128");
static_assert(WARPS == 4 || WARPS == 8, "WARPS: 4 or 8");
static_assert(STAGE >= 0 && STAGE <= 3, "STAGE: 0 to 3 (the recurrence's chunks in flight ahead)");
static_assert(PF == 0 || PF == 2 || PF == 4 || PF == 8, "PF: 0, 2, 4 or 8");
static_assert(LMTC == 0 || LMTC == 1, "LMTC: 0 or 1");
static_assert(UPREC == 16 || UPREC == 32, "UPREC: 16 or 32");
static_assert(KSPLIT == 1 || KSPLIT == 2 || KSPLIT == 4, "KSPLIT: 1, 2 or 4");
static_assert(WYTC == 0 || WYTC == 1, "WYTC: 0 or 1");
static_assert(SLO == 0 || SLO == 1, "SLO: 0 or 1");
static_assert(BULK == 0 || BULK == 1, "BULK: 0 or 1");
static_assert(ULO == 0 || ULO == 1, "ULO: 0 or 1");
static_assert(PGRID == 0 || BULK == 1, "PGRID > 0 needs BULK = 1 (the one issuing thread waits on each chunk's flag)");
static_assert(kRBuffers * 8 <= 32, "BULK: the mbarriers' reserved bytes");
static_assert(kPSmemBytes <= 232448 && kRSmemTotal <= 232448, "at most 227 KB of shared memory per CTA");
static_assert(3 * kC * kD * 2 <= kPOffV - kPOffXh, "the prepare's raw q, k, g rows must fit the factor area");
static_assert((kC * 64) % kPThreads == 0 && (16 * kD / 2) % kPThreads == 0 && kPThreads % 64 == 0,
              "the prepare's unrolled loops");
static_assert(!WYTC || 2 * kC * kLdT * 2 <= kPOffK - kPOffQ, "WYTC: T's two terms must fit q's rows");
static_assert((8 * kNb) % kPWarps == 0, "WYTC: whole W0 jobs a warp");
static_assert(kPOffKdl + kD * kLdKd * 2 <= kPOffV, "WYTC: Kd^T's two terms must fit the factor area");
static_assert(!KDA_WY_FOLD || kPOffKdl + kD * kLdKd * 2 <= kPOffV, "WYREC 2: Kr^T's two terms must fit the factor area");
#endif  // FUSED

// Two words of bf16 pairs (the lower element in the low half) as four floats.
__device__ __forceinline__ void unpack_bf16x4(unsigned int w0, unsigned int w1, float* f) {
  f[0] = __uint_as_float(w0 << 16);
  f[1] = __uint_as_float(w0 & 0xffff0000u);
  f[2] = __uint_as_float(w1 << 16);
  f[3] = __uint_as_float(w1 & 0xffff0000u);
}
// The PTX primitives. kernels/tests/kda_host_emulation.hpp defines KDA_HOST_EMULATION and
// supplies CPU versions of exactly these (an emulated warp for shfl and mma), so that the rest of
// this file, the kernel's own indexing and control flow, runs on the CPU against the reference.
#ifndef KDA_HOST_EMULATION
__device__ __forceinline__ float ex2(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float lg2(float x) {
  float r;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float rcp(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float rsqrt(float x) {
  float r;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float shfl_bfly(float v, int lane_mask) {
  float r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r) : "f"(v), "r"(lane_mask));
  return r;
}
__device__ __forceinline__ float shfl_idx(float v, int src_lane) {
  float r;
  asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r) : "f"(v), "r"(src_lane));
  return r;
}

#endif  // KDA_HOST_EMULATION
// Tells the compiler a thread index is in range: with it, signed index arithmetic (idx / 64,
// idx % 64 of an unrolled loop) folds into per-thread constants instead of ~1,000 sign fix-ups a
// chunk in the prepare (measured on the H200).
#ifndef KDA_HOST_EMULATION
#define KDA_ASSUME(x) __builtin_assume(x)
#else
#define KDA_ASSUME(x) ((void)0)
#endif
#define KDA_LOG2E 1.4426950408889634f
#define KDA_LN2 0.6931471805599453f

__device__ __forceinline__ float sigmoid(float z) { return rcp(1.f + ex2(-z * KDA_LOG2E)); }

// The gate (docs/kda.md 1.2): log-decay a <= 0 (nats) from x = g + dt_bias, ea = exp(A_log).
__device__ __forceinline__ float log_decay(float x, float ea, float lower_bound) {
#if KDA_GATE_SOFTPLUS
  const float sp = x > 20.f ? x : KDA_LN2 * lg2(1.f + ex2(x * KDA_LOG2E));  // FLA's threshold 20
  (void)lower_bound;
  return -ea * sp;
#else
  return lower_bound * sigmoid(ea * x);
#endif
}

#ifndef KDA_HOST_EMULATION
// Raw bf16 pairs / quads (converted where used, so that loads of several tokens fly together).
__device__ __forceinline__ unsigned int load_bf16x2_raw(const __nv_bfloat16* p) {
  unsigned int w;
  asm("ld.global.nc.u32 %0, [%1];" : "=r"(w) : "l"(p));
  return w;
}
__device__ __forceinline__ uint2 load_bf16x4_raw(const __nv_bfloat16* p) {
  uint2 w;
  asm("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(w.x), "=r"(w.y) : "l"(p));
  return w;
}
__device__ __forceinline__ void load_bf16x4(const __nv_bfloat16* p, float* f) {
  const uint2 w = load_bf16x4_raw(p);
  unpack_bf16x4(w.x, w.y, f);
}
__device__ __forceinline__ float load_bf16(const __nv_bfloat16* p) {
  unsigned short h;
  asm("ld.global.nc.u16 %0, [%1];" : "=h"(h) : "l"(p));
  return __uint_as_float((unsigned int)h << 16);
}
__device__ __forceinline__ unsigned short bf16_bits(float x) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}
// Two floats as one bf16 pair, lo in the low half (cvt.rn.bf16x2.f32 puts its first operand in
// the upper half): one instruction where two cvt and a shift-or were.
__device__ __forceinline__ unsigned int pack_bf16x2(float lo, float hi) {
  unsigned int d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}
#endif  // KDA_HOST_EMULATION
__device__ __forceinline__ float bf16_value(unsigned short h) { return __uint_as_float((unsigned int)h << 16); }
// Two floats as hi + lo bf16 pairs (element 0 in the low half, as fragments want it).
__device__ __forceinline__ void split_bf16x2(float v0, float v1, unsigned int& hi, unsigned int& lo) {
  hi = pack_bf16x2(v0, v1);
  lo = pack_bf16x2(v0 - __uint_as_float(hi << 16), v1 - __uint_as_float(hi & 0xffff0000u));
}
#ifndef KDA_HOST_EMULATION
__device__ __forceinline__ void store_bf16x2(__nv_bfloat16* p, float lo, float hi) {
  asm volatile("st.global.u32 [%0], %1;" ::"l"(p), "r"(pack_bf16x2(lo, hi)) : "memory");
}

// The intrinsic rather than inline cvta: the compiler folds base + constant offsets through it.
__device__ __forceinline__ unsigned int smem_addr(const void* p) { return (unsigned int)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
// A shared-memory destination as its 32-bit window address, converted once and stepped by
// constants: converting a generic pointer per copy costs ~10 instructions (S2R of the CTA's
// window, shifts, adds), ~100 a chunk in the recurrence (measured on the H200).
typedef unsigned int SmemAddr;
__device__ __forceinline__ SmemAddr smem_at(void* p) { return smem_addr(p); }
// stmatrix .x4 .trans: lanes 8 m .. 8 m + 7 give the row addresses of matrix m (8 rows of 16
// bytes); register m of lane l holds the matrix's elements (row 2 (l % 4), column l / 4) and
// (row 2 (l % 4) + 1, column l / 4), the lower row in the low half: an mma accumulator tile
// (rows l / 4, columns 2 (l % 4) ..) stored transposed.
__device__ __forceinline__ void stmatrix_x4_trans(SmemAddr row_addr, unsigned int r0, unsigned int r1, unsigned int r2,
                                                  unsigned int r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(row_addr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}
// ldmatrix .x4 .trans: the inverse of stmatrix_x4_trans above (lanes 8 m .. 8 m + 7 give matrix
// m's row addresses; register m of lane l gets (row 2 (l % 4), column l / 4) in its low half and
// (row 2 (l % 4) + 1, column l / 4) in its high half): token rows read as an A fragment whose
// rows are value columns.
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned int (&r)[4], SmemAddr row_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(row_addr)
               : "memory");
}
// An 8-byte fragment load from a 32-bit shared address, and that address hidden from the
// optimiser: a base it cannot see through stays one register that loads add immediates to,
// instead of being re-associated into one loop-invariant sum a load plus one add a load a chunk.
__device__ __forceinline__ void lds_b64(unsigned int* b, SmemAddr addr) {
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(b[0]), "=r"(b[1]) : "r"(addr));
}
__device__ __forceinline__ SmemAddr opaque(SmemAddr x) {
  asm volatile("" : "+r"(x));
  return x;
}
__device__ __forceinline__ void cp_async16_at(SmemAddr dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }
// Waits until at most N of this thread's committed cp.async groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
// BULK = 1: the recurrence's stage copies on the bulk copy engine, one thread issuing, completion
// counted in bytes by the stage's mbarrier (PTX ISA: cp.async.bulk, mbarrier).
__device__ __forceinline__ void mbar_init(SmemAddr bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
}
// The initialised barriers, visible to the copies' complete_tx (the async proxy).
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n\tfence.proxy.async.shared::cta;" ::: "memory");
}
// The arrive comes first, so the phase cannot complete before the byte count is set.
__device__ __forceinline__ void mbar_expect_tx(SmemAddr bar, unsigned int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk_copy(SmemAddr dst, const void* src, unsigned int bytes, SmemAddr bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
__device__ __forceinline__ void mbar_wait(SmemAddr bar, unsigned int parity) {
  unsigned int done = 0;
  do {
    asm volatile(
        "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
// Asks the copy engine to bring `bytes` (a multiple of 16, 16-byte aligned) into L2.
__device__ __forceinline__ void prefetch_l2(const void* p, unsigned int bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}
// PGRID > 0: the prepare lets the recurrence's grid start at once (programmatic dependent launch;
// KdaFwdOp launches the recurrence with programmatic stream serialization) and publishes each
// chunk with a release at GPU scope after a CTA barrier (the CUTLASS semaphore pattern); the
// recurrence's issuing thread acquires the flag, then orders its bulk copies (async proxy) after
// the generic-proxy stores it now sees.
__device__ __forceinline__ void griddep_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
__device__ __forceinline__ void flag_release(unsigned int* p) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(1u) : "memory");
}
__device__ __forceinline__ unsigned int flag_acquire(const unsigned int* p) {
  unsigned int v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }
#endif  // KDA_HOST_EMULATION
// 4 staged bf16 (8 bytes of shared memory) as floats.
__device__ __forceinline__ void load_shared_bf16x4(const unsigned short* p, float* f) {
  const uint2 w = *reinterpret_cast<const uint2*>(p);
  unpack_bf16x4(w.x, w.y, f);
}

#ifndef KDA_HOST_EMULATION
__device__ __forceinline__ unsigned int dynamic_smem_bytes() {
  unsigned int r;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void trap_now() { asm volatile("trap;"); }
// Spins until the prepare released the flag. 2^24 polls (each an L2 round trip, ~0.5 us, plus a
// short sleep: about 10 s) mean the chunk never comes (a bug, or a launch without the prepare):
// the trap turns a hang into a launch error the gate reports. (No clock: the gate rejects
// candidates that read one.)
__device__ __forceinline__ void flag_wait(const unsigned int* p) {
  for (unsigned int polls = 0; !flag_acquire(p); ++polls) {
    asm volatile("nanosleep.u32 64;");
    if (polls == (1u << 24)) trap_now();
  }
}

// D += A B on one m16n8k16 tile: A row-major bf16 (4 regs), B column-major bf16 (2 regs), fp32.
__device__ __forceinline__ void mma_bf16(float* d, const unsigned int* a, const unsigned int* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

#if KDA_WGMMA
// Warpgroup MMA (MMA = wgmma): D (64 x N, fp32, the m16n8k16 accumulator layout per warp and n8
// tile) += A (64 x 16, bf16 in registers, the m16n8k16 A layout per warp) B (16 x N, bf16 in shared
// memory through a descriptor, K-major). Asynchronous: wg_fence before the first one after other
// instructions wrote its registers, wg_commit, then wg_wait before the results are read.
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// After wg_wait: a register the wgmma wrote, passed through an empty asm so that no read of it is
// scheduled above the wait (the compiler does not know the wait is what completes the write).
__device__ __forceinline__ void wg_keep(float& r) { asm volatile("" : "+f"(r)::"memory"); }
// Shared memory written by cp.async (the generic proxy) must be fenced before wgmma (the async
// proxy) reads it.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// A shared-memory matrix descriptor (PTX ISA, "matrix descriptor"): start address, leading byte
// offset (between core matrices adjacent in K: 128, they are contiguous) and stride byte offset
// (between core matrices adjacent in N), all in 16-byte units; no swizzle.
typedef unsigned long long WgDesc;
__device__ __forceinline__ WgDesc wg_desc(unsigned int addr, int sbo) {
  return (WgDesc)((addr & 0x3FFFFu) >> 4) | ((WgDesc)(128 >> 4) << 16) | ((WgDesc)(sbo >> 4) << 32);
}
// The descriptor `bytes` further on (a k step is 256 bytes: two core matrices along K).
__device__ __forceinline__ WgDesc wg_desc_at(WgDesc d, int bytes) { return d + (WgDesc)(bytes >> 4); }
__device__ __forceinline__ void wgmma_n16(float* d, const unsigned int* a, unsigned long long desc) {
  asm volatile(
      "{ .reg .pred p; setp.eq.u32 p, 1, 1; wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7}, "
      "{%8, %9, %10, %11}, %12, p, 1, 1, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}
__device__ __forceinline__ void wgmma_n32(float* d, const unsigned int* a, unsigned long long desc) {
  asm volatile(
      "{ .reg .pred p; setp.eq.u32 p, 1, 1; wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
      "{%16, %17, %18, %19}, %20, p, 1, 1, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}
__device__ __forceinline__ void wgmma_n64(float* d, const unsigned int* a, unsigned long long desc) {
  asm volatile(
      "{ .reg .pred p; setp.eq.u32 p, 1, 1; wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}
__device__ __forceinline__ void wgmma_n128(float* d, const unsigned int* a, unsigned long long desc) {
  asm volatile(
      "{ .reg .pred p; setp.eq.u32 p, 1, 1; wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}
#endif  // KDA_WGMMA

#endif  // KDA_HOST_EMULATION

// Fragments from shared memory. `base` is a bf16 matrix with row stride `ld` elements.
// A (16 x 16 at row r0, column k0, row-major): lane (g = lane / 4, t = lane % 4) holds
// (r0 + g, k0 + 2t..), (r0 + g + 8, k0 + 2t..), (r0 + g, k0 + 8 + 2t..), (r0 + g + 8, k0 + 8 + 2t..).
__device__ __forceinline__ void load_a(unsigned int* a, const unsigned short* base, int ld, int r0, int k0, int lane) {
  const int g = lane >> 2, t = lane & 3;
  const unsigned short* p = base + (r0 + g) * ld + k0 + 2 * t;
  a[0] = *reinterpret_cast<const unsigned int*>(p);
  a[1] = *reinterpret_cast<const unsigned int*>(p + 8 * ld);
  a[2] = *reinterpret_cast<const unsigned int*>(p + 8);
  a[3] = *reinterpret_cast<const unsigned int*>(p + 8 * ld + 8);
}
// Element offset of (r, c) in a [rows][n] array whose 16-byte chunks (epc elements each) are
// XOR-permuted within each row by a function of r, so that the eight rows g = 0..7 that one
// fragment load touches read eight different chunks (conflict-free, as padding would be) while
// the array stays dense: the prepare writes the workspace so and the recurrence copies a chunk's
// operands with one linear loop.
__device__ __forceinline__ int swz(int r, int c, int n, int epc) {
  const int nch = n / epc;  // chunks a row: 2 .. 16
  const int x = nch >= 8 ? (r & 7) : ((r >> (nch == 2 ? 2 : 1)) & (nch - 1));
  return r * n + (((c / epc) ^ x) * epc) + (c % epc);
}
// B (16 x 8 at k0, column n0) from its transpose stored row-major [n][k]: lane holds
// (k0 + 2t.., n0 + g) and (k0 + 8 + 2t.., n0 + g).
__device__ __forceinline__ void load_b(unsigned int* b, const unsigned short* base_t, int ld, int n0, int k0, int lane) {
  const int g = lane >> 2, t = lane & 3;
  const unsigned short* p = base_t + (n0 + g) * ld + k0 + 2 * t;
  b[0] = *reinterpret_cast<const unsigned int*>(p);
  b[1] = *reinterpret_cast<const unsigned int*>(p + 8);
}

// The recurrence's B operands (W0, Qd, Kr^T, M) in fragment order: within each 16-column block
// the four columns lane t needs (2t, 2t + 1, 8 + 2t, 9 + 2t) sit together at 4t .. 4t + 3, so one
// 8-byte load fills a fragment; and the blocks (32 bytes) XOR-permuted by the row so that the
// four rows of each 16-lane phase of that load hit distinct banks. Element offset of (r, c) in a
// bf16 [rows][n] array so laid out:
__device__ __forceinline__ int swzf(int r, int c, int n) {
  const int nu = n / 16;  // 32-byte blocks a row: 1 .. 8
  const int x = nu >= 4 ? (r & 3) : (nu == 2 ? ((r >> 1) & 1) : 0);
  const int k = c & 15;
  return r * n + (((c >> 4) ^ x) << 4) + ((k & 7) >> 1) * 4 + (k >> 3) * 2 + (k & 1);
}
#if KDA_WGMMA
// The m64nC variant (N = the chunk's tokens).
#if CHUNK == 16
#define wgmma_nc wgmma_n16
#elif CHUNK == 32
#define wgmma_nc wgmma_n32
#else
#define wgmma_nc wgmma_n64
#endif
#endif
// MMA = wgmma: the recurrence's B operands in wgmma's canonical K-major layout without swizzle
// instead: 8 x 8 core matrices of 128 contiguous bytes (8 rows of 16 bytes), core matrix (r / 8,
// c / 8) of a bf16 [rows][n] array at r / 8 * 8 n + c / 8 * 64 elements, so that a descriptor
// walks K by 128 bytes and N by 16 n bytes. Element offset of (r, c); `wsb` is the layout the
// prepare writes and the recurrence reads (fragment order or this).
__device__ __forceinline__ int wgl(int r, int c, int n) { return (r >> 3) * (n * 8) + (c >> 3) * 64 + (r & 7) * 8 + (c & 7); }
__device__ __forceinline__ int wsb(int r, int c, int n) {
#if KDA_WGMMA
  return wgl(r, c, n);
#else
  return swzf(r, c, n);
#endif
}
// load_b from a fragment-order (swzf) bf16 [n][ld] array: one 8-byte load.
__device__ __forceinline__ void load_b_frag(unsigned int* b, const unsigned short* base_t, int ld, int n0, int k0,
                                            int lane) {
  const int g = lane >> 2, t = lane & 3;
  const uint2 v = *reinterpret_cast<const uint2*>(base_t + swzf(n0 + g, k0 + 2 * t, ld));
  b[0] = v.x;
  b[1] = v.y;
}

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
__device__ __forceinline__ void kda_chunked_body(const Args& a) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* sQ = reinterpret_cast<float*>(smem + kOffQ);
  float* sK = reinterpret_cast<float*>(smem + kOffK);
  float* sG = reinterpret_cast<float*>(smem + kOffG);
  float* sU = reinterpret_cast<float*>(smem + kOffU);
  unsigned short* sUhi = reinterpret_cast<unsigned short*>(smem + kOffUhi);
  unsigned short* sUlo = reinterpret_cast<unsigned short*>(smem + kOffUlo);
  float* sV = reinterpret_cast<float*>(smem + kOffV);
  float* sBeta = reinterpret_cast<float*>(smem + kOffBeta);
  float* sDec = reinterpret_cast<float*>(smem + kOffDec);
  unsigned short* sKd = reinterpret_cast<unsigned short*>(smem + kOffKd);
  unsigned short* sQd = reinterpret_cast<unsigned short*>(smem + kOffQd);
  unsigned short* sKrT = reinterpret_cast<unsigned short*>(smem + kOffKrT);
  unsigned short* sShi = reinterpret_cast<unsigned short*>(smem + kOffShi);
  unsigned short* sSlo = reinterpret_cast<unsigned short*>(smem + kOffSlo);
  float* sL = reinterpret_cast<float*>(smem + kOffL);
  unsigned short* sMhi = reinterpret_cast<unsigned short*>(smem + kOffMhi);
  unsigned short* sMlo = reinterpret_cast<unsigned short*>(smem + kOffMlo);

  // A launch with less dynamic shared memory than this layout needs is a plan error: stop loudly.
  if (dynamic_smem_bytes() < (unsigned int)kSmemBytes) trap_now();

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g8 = lane >> 2, t4 = lane & 3;  // fragment coordinates
  const long long n = blockIdx.x;
  const int h = blockIdx.y;
  const int col0 = blockIdx.z * kBv;
  long long bos, eos;
  if (a.cu_seqlens) {
    bos = a.cu_seqlens[n];
    eos = a.cu_seqlens[n + 1];
  } else {
    bos = n * a.T;
    eos = bos + a.T;
  }
  float dtb[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) dtb[e] = a.dt_bias[h * kD + lane * 4 + e];
  const float ea = ex2(a.a_log[h] * KDA_LOG2E);

  // The state slice S[row][col0 + col] as accumulator fragments: warp w, tile (mt, nt) holds
  // rows w * kRowsPerWarp + mt * 16 + g8 (+ 8) and columns nt * 8 + 2 t4 (+ 1).
  const int row0 = warp * kRowsPerWarp;
  const long long sbase = (n * a.H + h) * (long long)kD * kD + (long long)col0 * kD;  // V-first [j][i]
  float s[kMt][kNt][4];
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = row0 + mt * 16 + g8 + (e >> 1) * 8, c = nt * 8 + 2 * t4 + (e & 1);
#if HAS_INITIAL_STATE
        s[mt][nt][e] = a.initial_state[sbase + (long long)c * kD + r];
#else
        s[mt][nt][e] = 0.f;
        (void)r;
        (void)c;
#endif
      }

#if STAGE
  unsigned short* sRq = reinterpret_cast<unsigned short*>(smem + kOffRq);
  unsigned short* sRk = reinterpret_cast<unsigned short*>(smem + kOffRk);
  unsigned short* sRg = reinterpret_cast<unsigned short*>(smem + kOffRg);
  unsigned short* sRv = reinterpret_cast<unsigned short*>(smem + kOffRv);
  // Starts the copies of chunk [t1, t1 + C) into the staging buffer (rows past eos are not
  // copied: step 1 zeroes them) and loads its beta logits, thread tt holding token tt's.
  float beta_raw = 0.f;
  auto stage = [&](long long t1) {
    if (t1 < eos) {
      const int cn = (int)(eos - t1 < kC ? eos - t1 : (long long)kC);
      for (int idx = tid; idx < cn * kStageSegs; idx += kThreads) {
        const int tt = idx / kStageSegs, sg = idx % kStageSegs;
        const long long tokrow = ((t1 + tt) * a.H + h) * (long long)kD;
        if (sg < 48) {
          const int which = sg >> 4, seg = sg & 15;
          const __nv_bfloat16* src = (which == 0 ? a.q : which == 1 ? a.k : a.g) + tokrow + seg * 8;
          unsigned short* dst = (which == 0 ? sRq : which == 1 ? sRk : sRg) + tt * kD + seg * 8;
          cp_async16(dst, src);
        } else {
          const int seg = sg - 48;
          cp_async16(sRv + tt * kBv + seg * 8, a.v + tokrow + col0 + seg * 8);
        }
      }
      if (tid < cn) beta_raw = load_bf16(a.beta + (t1 + tid) * a.H + h);
    }
    cp_async_commit();
  };
  stage(bos);
#endif

  for (long long t0 = bos; t0 < eos; t0 += kC) {
    const int count = (int)(eos - t0 < kC ? eos - t0 : (long long)kC);
#if STAGE
    cp_async_wait_all();
    __syncthreads();
#endif
    // 1. Pre-processing, one warp per token; padding rows are zero (a = 0: no decay).
    for (int tt = warp; tt < kC; tt += kWarps) {
      float q[4] = {0.f, 0.f, 0.f, 0.f}, k[4] = {0.f, 0.f, 0.f, 0.f}, ld[4] = {0.f, 0.f, 0.f, 0.f};
      float rq = 0.f, rk = 0.f;
      if (tt < count) {
        float gg[4];
#if STAGE
        load_shared_bf16x4(sRq + tt * kD + lane * 4, q);
        load_shared_bf16x4(sRk + tt * kD + lane * 4, k);
        load_shared_bf16x4(sRg + tt * kD + lane * 4, gg);
#else
        const long long row = ((t0 + tt) * a.H + h) * (long long)kD + lane * 4;
        load_bf16x4(a.q + row, q);
        load_bf16x4(a.k + row, k);
        load_bf16x4(a.g + row, gg);
#endif
        float sq = 0.f, sk = 0.f;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          sq = fmaf(q[e], q[e], sq);
          sk = fmaf(k[e], k[e], sk);
          ld[e] = log_decay(gg[e] + dtb[e], ea, a.lower_bound) * KDA_LOG2E;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
          sq += shfl_bfly(sq, o);
          sk += shfl_bfly(sk, o);
        }
        rq = rsqrt(sq + 1e-6f) * a.scale;
        rk = rsqrt(sk + 1e-6f);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sQ[tt * kLd + lane * 4 + e] = q[e] * rq;
        sK[tt * kLd + lane * 4 + e] = k[e] * rk;
        sG[tt * kLd + lane * 4 + e] = ld[e];
      }
    }
    for (int i = tid; i < kC * kBv; i += kThreads) {
      const int tt = i / kBv, j = i % kBv;
#if STAGE
      sV[i] = tt < count ? bf16_value(sRv[i]) : 0.f;
#else
      sV[i] = tt < count ? load_bf16(a.v + ((t0 + tt) * a.H + h) * (long long)kD + col0 + j) : 0.f;
#endif
      (void)j;
    }
    if (tid < kC) {
#if STAGE
      sBeta[tid] = tid < count ? sigmoid(beta_raw) : 0.f;
#else
      sBeta[tid] = tid < count ? sigmoid(load_bf16(a.beta + (t0 + tid) * a.H + h)) : 0.f;
#endif
    }
    __syncthreads();
#if STAGE
    // The staging buffer and beta_raw are consumed: copy the next chunk while this one computes.
    stage(t0 + kC);
#endif
    // 2. Chunk-local inclusive cumsum of the log2-decays, one thread per key channel.
    for (int d = tid; d < kD; d += kThreads) {
      float gsum = 0.f;
#pragma unroll 8
      for (int i = 0; i < kC; ++i) {
        gsum += sG[i * kLd + d];
        sG[i * kLd + d] = gsum;
      }
      sDec[d] = ex2(gsum);
    }
    __syncthreads();
    // 3a. Decayed bf16 operands.
    for (int i = tid; i < kC * kD; i += kThreads) {
      const int r = i / kD, d = i % kD;
      const float gi = sG[r * kLd + d], gt = sG[(kC - 1) * kLd + d];
      const float kk = sK[r * kLd + d], e = ex2(gi);
      sKd[r * kPadK + d] = bf16_bits(kk * e);
      sQd[r * kPadK + d] = bf16_bits(sQ[r * kLd + d] * e);
      sKrT[d * kPadC + r] = bf16_bits(kk * ex2(gt - gi));
    }
#if KDA_LM_TC
    // 3b (tensor cores, LMTC). Warp w < 4 takes channels [32 w, 32 w + 32) of every entry of L and
    // M: its lane holds rows g8 and g8 + 8 at channels 2 t4 (+1, +8, +9) of each k step, which are
    // also the (channel, j) pairs of its B fragments for the n tiles j < 8 and j >= 8, so y = 1 / x
    // of the same elements. Partial sums go to the S^T area (free until 3c).
    {
      float* part = reinterpret_cast<float*>(smem + kOffShi);  // [4][2][16][16]
      if (warp < 4) {
        float accl[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
        float accm[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll 1
        for (int ks = 0; ks < 2; ++ks) {
          const int k0 = warp * 32 + ks * 16;
          unsigned int akh[4], akl[4], aqh[4], aql[4], byh[2][2], byl[2][2];
#pragma unroll
          for (int rs = 0; rs < 2; ++rs)
#pragma unroll
            for (int cp = 0; cp < 2; ++cp) {
              const int i = g8 + 8 * rs, d = k0 + 2 * t4 + 8 * cp;
              float kx[2], qx[2], ky[2];
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const float gd = sG[i * kLd + d + e] - sG[7 * kLd + d + e];
                const float x = ex2(gd), y = ex2(-gd), kk = sK[i * kLd + d + e];
                kx[e] = kk * x;
                qx[e] = sQ[i * kLd + d + e] * x;
                ky[e] = kk * y;
              }
              split_bf16x2(kx[0], kx[1], akh[rs + 2 * cp], akl[rs + 2 * cp]);
              split_bf16x2(qx[0], qx[1], aqh[rs + 2 * cp], aql[rs + 2 * cp]);
              split_bf16x2(ky[0], ky[1], byh[rs][cp], byl[rs][cp]);
            }
#pragma unroll
          for (int nt = 0; nt < 2; ++nt) {
            mma_bf16(accl[nt], akh, byh[nt]);
            mma_bf16(accl[nt], akh, byl[nt]);
            mma_bf16(accl[nt], akl, byh[nt]);
            mma_bf16(accm[nt], aqh, byh[nt]);
            mma_bf16(accm[nt], aqh, byl[nt]);
            mma_bf16(accm[nt], aql, byh[nt]);
          }
        }
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int i = g8 + (e >> 1) * 8, j = nt * 8 + 2 * t4 + (e & 1);
            part[((warp * 2 + 0) * 16 + i) * 16 + j] = accl[nt][e];
            part[((warp * 2 + 1) * 16 + i) * 16 + j] = accm[nt][e];
          }
      }
      __syncthreads();
      // The four quarters in a fixed order (deterministic); zeros above the diagonal.
      for (int x = tid; x < 256; x += kThreads) {
        const int i = x >> 4, j = x & 15;
        float lk = 0.f, mq = 0.f;
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          lk += part[((w * 2 + 0) * 16 + i) * 16 + j];
          mq += part[((w * 2 + 1) * 16 + i) * 16 + j];
        }
        sL[i * kC + j] = j < i ? sBeta[i] * lk : 0.f;
        const unsigned short mhi = j <= i ? bf16_bits(mq) : (unsigned short)0;
        sMhi[i * kPadC + j] = mhi;
        sMlo[i * kPadC + j] = j <= i ? bf16_bits(mq - bf16_value(mhi)) : (unsigned short)0;
      }
      __syncthreads();  // 3c overwrites the partial sums
    }
#else
    // 3b. L and M: kPairLanes adjacent lanes share one (i, j) pair with j <= i (each takes every
    // kPairLanes-th channel; shuffles combine them), in whole rounds of the CTA so that every lane
    // of a warp reaches the shuffles; zeros above the diagonal.
#pragma unroll 1
    for (int round = 0; round < kPairRounds; ++round) {
      const int item = round * kThreads + tid;
      const int p = item / kPairLanes, part = item % kPairLanes;
      const bool valid = p < kPairs;
      const int pc = valid ? p : 0;
      int i = (int)((sqrtf(8.f * (float)pc + 1.f) - 1.f) * 0.5f);
      while ((i + 1) * (i + 2) / 2 <= pc) ++i;
      while (i * (i + 1) / 2 > pc) --i;
      const int j = pc - i * (i + 1) / 2;
      const float* gi = sG + i * kLd;
      const float* gj = sG + j * kLd;
      const float* ki = sK + i * kLd;
      const float* kj = sK + j * kLd;
      const float* qi = sQ + i * kLd;
      float lk = 0.f, mq = 0.f;
#pragma unroll 8
      for (int d = part; d < kD; d += kPairLanes) {
        const float x = ex2(gi[d] - gj[d]);
        const float kx = kj[d] * x;
        lk = fmaf(ki[d], kx, lk);
        mq = fmaf(qi[d], kx, mq);
      }
#pragma unroll
      for (int o = kPairLanes / 2; o > 0; o >>= 1) {
        lk += shfl_bfly(lk, o);
        mq += shfl_bfly(mq, o);
      }
      if (valid && part == 0) {
        sL[i * kC + j] = j < i ? sBeta[i] * lk : 0.f;
        const unsigned short mhi = bf16_bits(mq);
        sMhi[i * kPadC + j] = mhi;
        sMlo[i * kPadC + j] = bf16_bits(mq - bf16_value(mhi));
        if (j < i) {
          sL[j * kC + i] = 0.f;
          sMhi[j * kPadC + i] = 0;
          sMlo[j * kPadC + i] = 0;
        }
      }
    }
#endif
    // 3c. S^T as hi + lo bf16 terms for the tensor-core reads of the chunk-start state.
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = row0 + mt * 16 + g8 + (e >> 1) * 8, c = nt * 8 + 2 * t4 + (e & 1);
          const unsigned short hi = bf16_bits(s[mt][nt][e]);
          sShi[c * kPadK + r] = hi;
          sSlo[c * kPadK + r] = bf16_bits(s[mt][nt][e] - bf16_value(hi));
        }
    __syncthreads();
    // 4. W = Kd S and Qs = Qd S per 16 x 8 output tile; U' = beta (V - W) to shared memory.
    float qs[kTilesPerWarp][4];
#pragma unroll
    for (int tw = 0; tw < kTilesPerWarp; ++tw) {
      const int ot = warp + tw * kWarps;
#pragma unroll
      for (int e = 0; e < 4; ++e) qs[tw][e] = 0.f;
      if (ot < kOutTiles) {
        const int mi = ot / kNt, ni = ot % kNt;
        float w[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 2
        for (int k0 = 0; k0 < kD; k0 += 16) {
          unsigned int ak[4], aq[4], bh[2], bl[2];
          load_a(ak, sKd, kPadK, mi * 16, k0, lane);
          load_a(aq, sQd, kPadK, mi * 16, k0, lane);
          load_b(bh, sShi, kPadK, ni * 8, k0, lane);
          load_b(bl, sSlo, kPadK, ni * 8, k0, lane);
          mma_bf16(w, ak, bh);
          mma_bf16(w, ak, bl);
          mma_bf16(qs[tw], aq, bh);
          mma_bf16(qs[tw], aq, bl);
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = mi * 16 + g8 + (e >> 1) * 8, j = ni * 8 + 2 * t4 + (e & 1);
          sU[i * kBv + j] = sBeta[i] * (sV[i * kBv + j] - w[e]);
        }
      }
    }
    __syncthreads();
    // 5. U = (I + L)^-1 U' by forward substitution down each column; U^T as hi + lo bf16.
    for (int j = tid; j < kBv; j += kThreads) {
      for (int i = 0; i < kC; ++i) {
        float u = sU[i * kBv + j];
        for (int m = 0; m < i; ++m) u = fmaf(-sL[i * kC + m], sU[m * kBv + j], u);
        sU[i * kBv + j] = u;
        const unsigned short hi = bf16_bits(u);
        sUhi[j * kPadC + i] = hi;
        sUlo[j * kPadC + i] = bf16_bits(u - bf16_value(hi));
      }
    }
    __syncthreads();
    // 6a. out = Qs + M U (M is lower triangular: k blocks up to the tile's own row block).
#pragma unroll
    for (int tw = 0; tw < kTilesPerWarp; ++tw) {
      const int ot = warp + tw * kWarps;
      if (ot < kOutTiles) {
        const int mi = ot / kNt, ni = ot % kNt;
        for (int k0 = 0; k0 <= mi * 16; k0 += 16) {
          unsigned int ah[4], al[4], bh[2], bl[2];
          load_a(ah, sMhi, kPadC, mi * 16, k0, lane);
          load_a(al, sMlo, kPadC, mi * 16, k0, lane);
          load_b(bh, sUhi, kPadC, ni * 8, k0, lane);
          load_b(bl, sUlo, kPadC, ni * 8, k0, lane);
          mma_bf16(qs[tw], ah, bh);
          mma_bf16(qs[tw], ah, bl);
          mma_bf16(qs[tw], al, bh);
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int i = mi * 16 + g8 + half * 8, j = ni * 8 + 2 * t4;
          if (i < count)
            store_bf16x2(a.out + ((t0 + i) * a.H + h) * (long long)kD + col0 + j, qs[tw][2 * half],
                         qs[tw][2 * half + 1]);
        }
      }
    }
    // 6b. S <- diag(2^Gtot) S + KrT U.
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) {
      const float d0 = sDec[row0 + mt * 16 + g8], d1 = sDec[row0 + mt * 16 + g8 + 8];
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt) {
        s[mt][nt][0] *= d0;
        s[mt][nt][1] *= d0;
        s[mt][nt][2] *= d1;
        s[mt][nt][3] *= d1;
      }
#pragma unroll
      for (int k0 = 0; k0 < kC; k0 += 16) {
        unsigned int ar[4];
        load_a(ar, sKrT, kPadC, row0 + mt * 16, k0, lane);
#pragma unroll
        for (int nt = 0; nt < kNt; ++nt) {
          unsigned int bh[2], bl[2];
          load_b(bh, sUhi, kPadC, nt * 8, k0, lane);
          load_b(bl, sUlo, kPadC, nt * 8, k0, lane);
          mma_bf16(s[mt][nt], ar, bh);
          mma_bf16(s[mt][nt], ar, bl);
        }
      }
    }
    // The next chunk's pre-processing overwrites region A (U's hi and lo terms live there); with
    // STAGE the barrier after cp.async.wait_all at the top of the loop already separates them.
#if !STAGE
    __syncthreads();
#endif
  }
#if HAS_FINAL_STATE
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = row0 + mt * 16 + g8 + (e >> 1) * 8, c = nt * 8 + 2 * t4 + (e & 1);
        a.final_state[sbase + (long long)c * kD + r] = s[mt][nt][e];
      }
#endif
  (void)sbase;
}

#else
// Tokens [bos, eos) of sequence n.
__device__ __forceinline__ void seq_range(const Args& a, long long n, long long& bos, long long& eos) {
  if (a.cu_seqlens) {
    bos = a.cu_seqlens[n];
    eos = a.cu_seqlens[n + 1];
  } else {
    bos = n * a.T;
    eos = bos + a.T;
  }
}
// Chunk slots a head has in the workspace: chunk c of sequence n is slot n + bos_n / C + c. Slots
// of consecutive sequences never overlap (ceil(len / C) <= floor(len / C) + 1) and the last one is
// below N + T_total / C, without a pass over the lengths; KdaFwdOp sizes the workspace the same way.
__device__ __forceinline__ long long ws_slots(const Args& a, int nseq) {
  const long long total = a.cu_seqlens ? a.T : (long long)nseq * a.T;
  return nseq + total / kC;
}

// x <- (I + L)^-1 x for the chunk's strictly lower-triangular fp32 L (C x C, row-major in shared
// memory), x in registers; L's rows by 16-byte reads (every thread of the CTA reads the same row:
// broadcasts), 4x fewer loads. Each row's dot product in four partial sums (one a component of
// the 16-byte read): dependent FMA chains of about i / 4 instead of i, C (C - 1) / 8 + 2 C FMA
// latencies a column instead of C (C - 1) / 2 (with WYREC 1 the prepare's last step is this
// substitution by one half-warp while the rest of the CTA has left).
__device__ __forceinline__ void forward_substitute(float (&xv)[kC], const float* pL) {
#pragma unroll
  for (int i = 1; i < kC; ++i) {
    float u0 = xv[i], u1 = 0.f, u2 = 0.f, u3 = 0.f;
#pragma unroll
    for (int m = 0; m < i; m += 4) {
      const float4 l = *reinterpret_cast<const float4*>(pL + i * kC + m);
      u0 = fmaf(-l.x, xv[m], u0);
      if (m + 1 < i) u1 = fmaf(-l.y, xv[m + 1], u1);
      if (m + 2 < i) u2 = fmaf(-l.z, xv[m + 2], u2);
      if (m + 3 < i) u3 = fmaf(-l.w, xv[m + 3], u3);
    }
    xv[i] = (u0 + u1) + (u2 + u3);
  }
}

// Column j of T' = (I + L)^-1 diag(beta) (the WY form's C x C factor), into xv: 0 on padding
// tokens (beta 0), whose columns vanish.
__device__ __forceinline__ void tprime_column(float (&xv)[kC], int j, const float* pL, const float* pBeta) {
#pragma unroll
  for (int i = 0; i < kC; ++i) xv[i] = i == j ? 1.f : 0.f;
  forward_substitute(xv, pL);
  const float bj = pBeta[j];
#pragma unroll
  for (int i = 0; i < kC; ++i) xv[i] *= bj;
}

// forward_substitute for two right-hand sides at once (one read of each float4 of L for both).
__device__ __forceinline__ void forward_substitute2(float (&xa)[kC], float (&xb)[kC], const float* pL) {
#pragma unroll
  for (int i = 1; i < kC; ++i) {
    float ua = xa[i], ub = xb[i];
#pragma unroll
    for (int m = 0; m < i; m += 4) {
      const float4 l = *reinterpret_cast<const float4*>(pL + i * kC + m);
      ua = fmaf(-l.x, xa[m], ua);
      ub = fmaf(-l.x, xb[m], ub);
      if (m + 1 < i) {
        ua = fmaf(-l.y, xa[m + 1], ua);
        ub = fmaf(-l.y, xb[m + 1], ub);
      }
      if (m + 2 < i) {
        ua = fmaf(-l.z, xa[m + 2], ua);
        ub = fmaf(-l.z, xb[m + 2], ub);
      }
      if (m + 3 < i) {
        ua = fmaf(-l.w, xa[m + 3], ua);
        ub = fmaf(-l.w, xb[m + 3], ub);
      }
    }
    xa[i] = ua;
    xb[i] = ub;
  }
}

// One (n8 tile, L or M) job of step 4: k steps [ks0, ks1) of the left factors (rows 0-15 of fh /
// fl) against the right factors' rows n0 .. n0 + 7, three accumulators (hi hi, hi lo, lo hi).
// kTerms 2 drops hi lo (the right factor as its bf16 rounding alone), 1 also lo hi.
template <int kTerms = 3>
__device__ __forceinline__ void lm_tile_mma(float (&c0)[4], float (&c1)[4], float (&c2)[4], const unsigned short* fh,
                                            const unsigned short* fl, const unsigned short* yh_base,
                                            const unsigned short* yl_base, int ld, int n0, int ks0, int ks1,
                                            int lane) {
#pragma unroll 4
  for (int ks = ks0; ks < ks1; ++ks) {
    unsigned int xh[4], xl[4], yh[2], yl[2];
    load_a(xh, fh, ld, 0, ks * 16, lane);
    load_b(yh, yh_base, ld, n0, ks * 16, lane);
    mma_bf16(c0, xh, yh);
    if (kTerms >= 3) {
      load_b(yl, yl_base, ld, n0, ks * 16, lane);
      mma_bf16(c1, xh, yl);
    }
    if (kTerms >= 2) {
      load_a(xl, fl, ld, 0, ks * 16, lane);
      mma_bf16(c2, xl, yh);
    }
  }
}
// Its result: L (beta folded in, zero on and above the diagonal) to shared memory, or M (zero above
// the diagonal, hi + lo bf16) to the workspace, for rows i0 + g8 (+ 8), columns j0 + 2 t4 (+ 1);
// M's diagonal from pDiag where given (one-pass form with LMTERMS < 3).
__device__ __forceinline__ void lm_tile_store(const float (&c0)[4], const float (&c1)[4], const float (&c2)[4],
                                              bool is_m, int i0, int j0, int g8, int t4, float* pL,
                                              const float* pBeta, unsigned short* wMhi, unsigned short* wMlo,
                                              const float* pDiag = nullptr, float* pMf = nullptr) {
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int i = i0 + g8 + (e >> 1) * 8, j = j0 + 2 * t4 + (e & 1);
    const float v = c0[e] + (c1[e] + c2[e]);
    if (!is_m) {
      pL[i * kC + j] = j < i ? pBeta[i] * v : 0.f;
    } else {
      const float m = j < i ? v : j == i ? (pDiag != nullptr ? pDiag[i] : v) : 0.f;
      if (pMf != nullptr) {  // WYREC 2: M in fp32 for M2 = M T' (step 5)
        pMf[i * kC + j] = m;
        continue;
      }
      const unsigned short mh = bf16_bits(m);
      wMhi[wsb(i, j, kC)] = mh;
      wMlo[wsb(i, j, kC)] = bf16_bits(m - bf16_value(mh));
    }
  }
}

#define KDA_SPLIT_FACTOR_DIAG (LMTC && !KDA_GATE_SOFTPLUS)
#define KDA_ONE_PASS (CHUNK == 16 && KDA_SPLIT_FACTOR_DIAG)
// WY by substitution with both of a thread's columns in one pass (CHUNK 16, one Kd and one V
// column a thread).
#define KDA_WY_PAIRED (CHUNK == 16 && WARPS == 4 && !WYTC && !WYREC)
// Kr^T written by the cumsum step (CHUNK 16 in swzf's fragment order: 16 G values a thread).
#define KDA_KRT_IN_CUMSUM (CHUNK == 16 && !KDA_WGMMA)
// The paired substitution's right-hand side beta Kd = beta k 2^G written over k's fp32 rows by the
// one-pass step, which already holds k and 2^G (for Qd) of its pairs: the substitution then reads
// one value a token instead of beta, k and G and an exponential. Only with Kr^T from the cumsum
// step: the separate Kr^T pass reads other threads' k pairs with no barrier before the one-pass.
#define KDA_KD_IN_ONE_PASS (KDA_ONE_PASS && KDA_WY_PAIRED && KDA_KRT_IN_CUMSUM)
// Step 1's L2 norms of four tokens a warp reduced together (CHUNK 16 with four warps, CHUNK 32
// with eight).
#define KDA_NORM_BATCHED (CHUNK / WARPS == 4)
// Step 1 loads its q, k, g straight from global memory into registers (a warp's four tokens in
// flight at once) rather than through shared-memory staging: 12 KB less written to and read from
// shared memory a chunk (the prepare is bound by its L1 / shared-memory pipe); only v is staged.
#define KDA_DIRECT_QKG (KDA_NORM_BATCHED && KDA_Q_REGS)

// kda_fwd_prepare's work for one (chunk slot x, head h): everything of the chunk that does not
// depend on the state, written to the workspace (layout kWs*); false for a slot no chunk uses
// (then `release` is not released).
// PGRID: thread 0 releases `release` (the previous item's flag, or null) once this item's loads
// are in flight: a release waits for the CTA's earlier stores to complete, which right after them
// stalled the whole CTA (the next barrier waits for thread 0).
__device__ __forceinline__ bool kda_prepare_item(const Args& a, unsigned char* __restrict__ ws, int nseq, long long x,
                                                 int h, unsigned int* release) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* pQ = reinterpret_cast<float*>(smem + kPOffQ);
#if KDA_Q_REGS
  (void)pQ;  // no fp32 q rows: the one-pass step reads q from registers
#endif
  float* pK = reinterpret_cast<float*>(smem + kPOffK);
  float* pG = reinterpret_cast<float*>(smem + kPOffG);
  float* pBeta = reinterpret_cast<float*>(smem + kPOffBeta);
  float* pL = reinterpret_cast<float*>(smem + kPOffL);
  unsigned short* pXh = reinterpret_cast<unsigned short*>(smem + kPOffXh);
  unsigned short* pXl = reinterpret_cast<unsigned short*>(smem + kPOffXl);
  unsigned short* pQh = reinterpret_cast<unsigned short*>(smem + kPOffQh);
  unsigned short* pQl = reinterpret_cast<unsigned short*>(smem + kPOffQl);
  unsigned short* pYh = reinterpret_cast<unsigned short*>(smem + kPOffYh);
  unsigned short* pYl = reinterpret_cast<unsigned short*>(smem + kPOffYl);
  if (dynamic_smem_bytes() < (unsigned int)kPSmemBytes) trap_now();

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  KDA_ASSUME(tid >= 0 && tid < kPThreads);
  const int g8 = lane >> 2, t4 = lane & 3;
  // The sequence whose slots hold x: the last n with n + bos_n / C <= x (increasing in n).
  int lo = 0, hi = nseq - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    long long b, e;
    seq_range(a, mid, b, e);
    if (mid + b / kC <= x) lo = mid;
    else hi = mid - 1;
  }
  long long bos, eos;
  seq_range(a, lo, bos, eos);
  const long long t0 = bos + (x - lo - bos / kC) * kC;
  if (t0 >= eos) return false;  // a slot no chunk uses (the whole CTA leaves before any barrier)
  const int count = (int)(eos - t0 < kC ? eos - t0 : (long long)kC);
  unsigned char* wsc = ws + ((long long)h * ws_slots(a, nseq) + x) * kWsChunkBytes;

  // 0. The chunk's raw q, k, g rows into shared memory with cp.async, all at once (step 1 would
  // otherwise have one token's rows a warp in flight: too few bytes to keep DRAM busy); they use
  // the factor area of step 4, which is free until then.
  // v goes to its own area (step 5 reads it after the factors are used): its load latency is
  // then hidden here rather than exposed at the end.
  unsigned short* rawq = reinterpret_cast<unsigned short*>(smem + kPOffXh);
  unsigned short* rawk = rawq + kC * kD;
  unsigned short* rawg = rawk + kC * kD;
  unsigned short* rawv = reinterpret_cast<unsigned short*>(smem + kPOffV);
  // Loops of this kernel run a fixed number of rounds (the layout's sizes are multiples of the
  // thread count), fully unrolled: the indexing then folds into per-thread constants. Here a
  // thread always copies the same 16-byte segment of the same tensor (kPThreads is a multiple of
  // the 64 segments of a token), every kPThreads / 64 tokens: its source and destination are
  // chosen once and stepped by constants (per-copy selects and 64-bit index products cost ~1,500
  // instructions a chunk, measured on the H200).
#if KDA_DIRECT_QKG
  static_assert(kPThreads == 128, "direct q, k, g loads: four warps");
  if (!WYREC) {  // WYREC: the recurrence reads v
    const int seg = tid & 15, tt0 = tid >> 4;  // eight tokens of v a round
    const __nv_bfloat16* src = a.v + ((t0 + tt0) * a.H + h) * (long long)kD + seg * 8;
    const long long src_step = 8LL * a.H * kD;
    const SmemAddr sdst = smem_at(rawv + tt0 * kD + seg * 8);
#pragma unroll
    for (int it = 0; it < kC / 8; ++it)
      if (tt0 + it * 8 < count) cp_async16_at(sdst + it * 8 * kD * 2, src + it * src_step);
  }
  cp_async_commit();
  // This warp's four tokens: q at the one-pass step's channel pairs, k and g as quads.
  unsigned int qraw[4][2];
  uint2 kraw[4], graw[4];
#pragma unroll
  for (int it = 0; it < 4; ++it) {
    const int tt = warp + it * kPWarps;
    qraw[it][0] = qraw[it][1] = 0u;
    kraw[it] = graw[it] = make_uint2(0u, 0u);
    if (tt < count) {
      const long long base = ((t0 + tt) * a.H + h) * (long long)kD;
      qraw[it][0] = load_bf16x2_raw(a.q + base + 2 * lane);
      qraw[it][1] = load_bf16x2_raw(a.q + base + 64 + 2 * lane);
      kraw[it] = load_bf16x4_raw(a.k + base + lane * 4);
      graw[it] = load_bf16x4_raw(a.g + base + lane * 4);
    }
  }
#else
  {
    constexpr int kTokStep = kPThreads / 64;
    const int which = (tid & 63) >> 4, tt0 = tid >> 6, seg = tid & 15;
    const __nv_bfloat16* src = which == 0 ? a.q : which == 1 ? a.k : which == 2 ? a.g : a.v;
    src += ((t0 + tt0) * a.H + h) * (long long)kD + seg * 8;
    const long long src_step = (long long)kTokStep * a.H * kD;
    unsigned short* dst = (which == 0 ? rawq : which == 1 ? rawk : which == 2 ? rawg : rawv) + tt0 * kD + seg * 8;
    const SmemAddr sdst = smem_at(dst);
#pragma unroll
    for (int it = 0; it < kC / kTokStep; ++it) {
      if (tt0 + it * kTokStep < count && !(WYREC && which == 3)) {
        cp_async16_at(sdst + it * kTokStep * kD * 2, src + it * src_step);
      }
#if WYTC
      // Step 5's products read every v row: padding rows must be zeros, not stale shared memory
      // (their weights are 0, but 0 x NaN is NaN).
      else if (which == 3) {
        *reinterpret_cast<uint4*>(dst + it * kTokStep * kD) = make_uint4(0u, 0u, 0u, 0u);
      }
#endif
    }
  }
  cp_async_commit();
#endif  // KDA_DIRECT_QKG
  // The small per-head and per-token inputs load while the copies fly.
  float dtb[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) dtb[e] = a.dt_bias[h * kD + lane * 4 + e];
  const float ea = ex2(a.a_log[h] * KDA_LOG2E);
#if !KDA_GATE_SOFTPLUS
  // The lower-bound gate in log2 units, lb log2(e) sigmoid(ea (g + dt_bias)), with the constants
  // folded per lane: one FFMA, two MUFU, an FADD and an FMUL an element (eight before).
  const float gc = -ea * KDA_LOG2E, lbl = a.lower_bound * KDA_LOG2E;
  float dtc[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) dtc[e] = dtb[e] * gc;
#endif
  const float beta_logit = tid < count ? load_bf16(a.beta + (t0 + tid) * a.H + h) : 0.f;
#if PGRID
  if (release != nullptr && tid == 0) flag_release(release);
#else
  (void)release;
#endif
#if !KDA_DIRECT_QKG
  cp_async_wait_all();
  __syncthreads();
#endif
  // 1. Pre-processing, one warp per token (as the fused kernel); padding rows are zero, a = 0.
#if KDA_Q_REGS
  // q's channels 2 lane, 2 lane + 1, 64 + 2 lane, 65 + 2 lane: the one-pass step's pairs.
  float qr[kC / kPWarps][4];
#endif
  // One token's four channels of this lane: q's and k's partial sums of squares and the gate's
  // log2-decays.
  auto channel_quad = [&](const float (&q)[4], const float (&k)[4], const float (&gg)[4], float& sq, float& sk,
                          float (&ld)[4]) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      sq = fmaf(q[e], q[e], sq);
      sk = fmaf(k[e], k[e], sk);
#if KDA_GATE_SOFTPLUS
      ld[e] = log_decay(gg[e] + dtb[e], ea, a.lower_bound) * KDA_LOG2E;
#else
      ld[e] = lbl * rcp(1.f + ex2(fmaf(gg[e], gc, dtc[e])));
#endif
    }
  };
#if KDA_NORM_BATCHED
  // Four tokens a warp: the eight sums of squares (q and k of each) reduced together by recursive
  // halving (each butterfly level sends half the values still held), then one rsqrt a lane and
  // eight broadcasts: 17 shuffles and 9 adds a warp instead of 40 and 40.
  {
    float kv[4][4], ss[8];
#pragma unroll
    for (int it = 0; it < 4; ++it) {
      const int tt = warp + it * kPWarps;
      float q[4] = {0.f, 0.f, 0.f, 0.f}, ld[4] = {0.f, 0.f, 0.f, 0.f};
      float sq = 0.f, sk = 0.f;
#pragma unroll
      for (int e = 0; e < 4; ++e) kv[it][e] = 0.f;
      if (tt < count) {
        float gg[4];
#if KDA_DIRECT_QKG
        unpack_bf16x4(qraw[it][0], qraw[it][1], q);
        unpack_bf16x4(kraw[it].x, kraw[it].y, kv[it]);
        unpack_bf16x4(graw[it].x, graw[it].y, gg);
#else
#if KDA_Q_REGS
        unpack_bf16x4(*reinterpret_cast<const unsigned int*>(rawq + tt * kD + 2 * lane),
                      *reinterpret_cast<const unsigned int*>(rawq + tt * kD + 64 + 2 * lane), q);
#else
        load_shared_bf16x4(rawq + tt * kD + lane * 4, q);
#endif
        load_shared_bf16x4(rawk + tt * kD + lane * 4, kv[it]);
        load_shared_bf16x4(rawg + tt * kD + lane * 4, gg);
#endif
        channel_quad(q, kv[it], gg, sq, sk, ld);
      }
#if KDA_Q_REGS
#pragma unroll
      for (int e = 0; e < 4; ++e) qr[it][e] = q[e];
#else
      *reinterpret_cast<float4*>(pQ + tt * kLd + lane * 4) = make_float4(q[0], q[1], q[2], q[3]);
#endif
      *reinterpret_cast<float4*>(pG + tt * kLd + lane * 4) = make_float4(ld[0], ld[1], ld[2], ld[3]);
      ss[2 * it] = sq;
      ss[2 * it + 1] = sk;
    }
    // Value v = 2 it + (k ? 1 : 0) ends in the lanes with (lane >> 2) & 7 == v.
    const bool b4 = (lane & 16) != 0, b3 = (lane & 8) != 0, b2 = (lane & 4) != 0;
    float s4[4], s2[2];
#pragma unroll
    for (int j = 0; j < 4; ++j) s4[j] = (b4 ? ss[j + 4] : ss[j]) + shfl_bfly(b4 ? ss[j] : ss[j + 4], 16);
#pragma unroll
    for (int j = 0; j < 2; ++j) s2[j] = (b3 ? s4[j + 2] : s4[j]) + shfl_bfly(b3 ? s4[j] : s4[j + 2], 8);
    float s1 = (b2 ? s2[1] : s2[0]) + shfl_bfly(b2 ? s2[0] : s2[1], 4);
    s1 += shfl_bfly(s1, 2);
    s1 += shfl_bfly(s1, 1);
    const float rs = rsqrt(s1 + 1e-6f) * (b2 ? 1.f : a.scale);  // odd v (b2): k's, no scale
#pragma unroll
    for (int it = 0; it < 4; ++it) {
      const int tt = warp + it * kPWarps;
      const float rq = shfl_idx(rs, 8 * it), rk = shfl_idx(rs, 8 * it + 4);
#if KDA_Q_REGS
#pragma unroll
      for (int e = 0; e < 4; ++e) qr[it][e] *= rq;
#else
      float4* pq = reinterpret_cast<float4*>(pQ + tt * kLd + lane * 4);
      const float4 qv = *pq;
      *pq = make_float4(qv.x * rq, qv.y * rq, qv.z * rq, qv.w * rq);
#endif
      *reinterpret_cast<float4*>(pK + tt * kLd + lane * 4) =
          make_float4(kv[it][0] * rk, kv[it][1] * rk, kv[it][2] * rk, kv[it][3] * rk);
    }
  }
#else
#pragma unroll
  for (int it = 0; it < kC / kPWarps; ++it) {
    const int tt = warp + it * kPWarps;
    float q[4] = {0.f, 0.f, 0.f, 0.f}, k[4] = {0.f, 0.f, 0.f, 0.f}, ld[4] = {0.f, 0.f, 0.f, 0.f};
    float rq = 0.f, rk = 0.f;
    if (tt < count) {
      float gg[4];
#if KDA_Q_REGS
      unpack_bf16x4(*reinterpret_cast<const unsigned int*>(rawq + tt * kD + 2 * lane),
                    *reinterpret_cast<const unsigned int*>(rawq + tt * kD + 64 + 2 * lane), q);
#else
      load_shared_bf16x4(rawq + tt * kD + lane * 4, q);
#endif
      load_shared_bf16x4(rawk + tt * kD + lane * 4, k);
      load_shared_bf16x4(rawg + tt * kD + lane * 4, gg);
      float sq = 0.f, sk = 0.f;
      channel_quad(q, k, gg, sq, sk, ld);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        sq += shfl_bfly(sq, o);
        sk += shfl_bfly(sk, o);
      }
      rq = rsqrt(sq + 1e-6f) * a.scale;
      rk = rsqrt(sk + 1e-6f);
    }
#if KDA_Q_REGS
#pragma unroll
    for (int e = 0; e < 4; ++e) qr[it][e] = q[e] * rq;
#else
    *reinterpret_cast<float4*>(pQ + tt * kLd + lane * 4) = make_float4(q[0] * rq, q[1] * rq, q[2] * rq, q[3] * rq);
#endif
    *reinterpret_cast<float4*>(pK + tt * kLd + lane * 4) = make_float4(k[0] * rk, k[1] * rk, k[2] * rk, k[3] * rk);
    *reinterpret_cast<float4*>(pG + tt * kLd + lane * 4) = make_float4(ld[0], ld[1], ld[2], ld[3]);
  }
#endif  // KDA_NORM_BATCHED
  if (tid < kC) pBeta[tid] = tid < count ? sigmoid(beta_logit) : 0.f;
  __syncthreads();
  // 2. G = chunk-local inclusive cumsum of the log2-decays; 2^Gtot to the workspace.
  unsigned short* wKrT = reinterpret_cast<unsigned short*>(wsc + kWsKrT);
#if KDA_KRT_IN_CUMSUM
  // With Kr^T: the thread owning channel d holds its 16 G values, so row d of Kr^T = (k 2^(Gtot -
  // G))^T comes from registers and one read of k's column, and leaves as two 16-byte stores (the
  // fragment order of swzf permutes within the row's 32 bytes) instead of a later pass that read
  // k and G again (with two-way bank conflicts) and stored 4 bytes at a time.
  if (tid < kD) {
    const int d = tid;
    float gv[kC];
    float gsum = 0.f;
#pragma unroll
    for (int i = 0; i < kC; ++i) {
      gsum += pG[i * kLd + d];
      gv[i] = gsum;
      pG[i * kLd + d] = gsum;
    }
    reinterpret_cast<float*>(wsc + kWsDec)[d] = ex2(gsum);
#if KDA_WY_FOLD  // WYREC 2: Kr2^T = Kr^T T' in step 5
    (void)wKrT;
    (void)gv;
#else
    unsigned int wv[8];
#pragma unroll
    for (int r = 0; r < kC; r += 2) {
      // swzf's position of the pair (r, r + 1) in the row: ((r & 7) >> 1) * 4 + (r >> 3) * 2.
      wv[((r & 7) >> 1) * 2 + (r >> 3)] =
          pack_bf16x2(pK[r * kLd + d] * ex2(gsum - gv[r]), pK[(r + 1) * kLd + d] * ex2(gsum - gv[r + 1]));
    }
    uint4* dst = reinterpret_cast<uint4*>(wKrT + swzf(d, 0, kC));
    dst[0] = make_uint4(wv[0], wv[1], wv[2], wv[3]);
    dst[1] = make_uint4(wv[4], wv[5], wv[6], wv[7]);
#endif
  }
#else
  for (int d = tid; d < kD; d += kPThreads) {
    float gsum = 0.f;
#pragma unroll 8
    for (int i = 0; i < kC; ++i) {
      gsum += pG[i * kLd + d];
      pG[i * kLd + d] = gsum;
    }
    reinterpret_cast<float*>(wsc + kWsDec)[d] = ex2(gsum);
  }
#endif
  __syncthreads();
  // 3. Qd = q 2^G (scale folded into q) and Kr^T = (k 2^(Gtot - G))^T, bf16 pairs (WYREC: and
  // -Kd = -k 2^G, in W0's place: the recurrence's accumulators start at V^T and end at U'^T with
  // no negation on its chain).
  unsigned short* wQd = reinterpret_cast<unsigned short*>(wsc + kWsQd);
#if WYREC
  unsigned short* wKd = reinterpret_cast<unsigned short*>(wsc + kWsW);
#endif
#if !KDA_ONE_PASS
#pragma unroll
  for (int it = 0; it < kC * kD / 2 / kPThreads; ++it) {
    const int idx = tid + it * kPThreads;
#if KDA_WGMMA
    // Pair idx is the pair at element 2 idx of the core-matrix layout: a warp's stores are
    // contiguous (the row-major walk would put 4 bytes in each of eight core matrices).
    const int p = 2 * idx, cm = p >> 6;
    const int r = (cm / (kD / 8)) * 8 + ((p & 63) >> 3), d = (cm % (kD / 8)) * 8 + (p & 7);
#else
    const int r = idx / (kD / 2), d = 2 * (idx % (kD / 2));
#endif
    const float2 qq = *reinterpret_cast<const float2*>(pQ + r * kLd + d);
    const float2 gg = *reinterpret_cast<const float2*>(pG + r * kLd + d);
    const float e0 = ex2(gg.x), e1 = ex2(gg.y);
    *reinterpret_cast<unsigned int*>(wQd + wsb(r, d, kD)) = pack_bf16x2(qq.x * e0, qq.y * e1);
#if WYREC
    const float2 kk = *reinterpret_cast<const float2*>(pK + r * kLd + d);
    *reinterpret_cast<unsigned int*>(wKd + wsb(r, d, kD)) = pack_bf16x2(-kk.x * e0, -kk.y * e1);  // -Kd
#endif
  }
#endif
#if !KDA_KRT_IN_CUMSUM
#pragma unroll
  for (int it = 0; it < kD * kC / 2 / kPThreads; ++it) {
    const int idx = tid + it * kPThreads;
#if KDA_WGMMA
    const int p = 2 * idx, cm = p >> 6;  // as Qd: contiguous stores
    const int d = (cm / (kC / 8)) * 8 + ((p & 63) >> 3), r = (cm % (kC / 8)) * 8 + (p & 7);
#else
    const int d = idx / (kC / 2), r = 2 * (idx % (kC / 2));
#endif
    const float gt = pG[(kC - 1) * kLd + d];
    const float v0 = pK[r * kLd + d] * ex2(gt - pG[r * kLd + d]);
    const float v1 = pK[(r + 1) * kLd + d] * ex2(gt - pG[(r + 1) * kLd + d]);
    *reinterpret_cast<unsigned int*>(wKrT + wsb(d, r, kC)) = pack_bf16x2(v0, v1);
  }
#endif
#if KDA_ONE_PASS
  // 3 + 4 for CHUNK 16 with the factored diagonal block (one 16-token block, pivot token 7; the
  // general form is step 4 below): one pass over (token, channel pair) writes Qd and the block's
  // left factors (k, q) 2^(G - G_7) and right factors k 2^(G_7 - G) (hi + lo bf16, the expressions
  // of step 4's loops: bit-identical results), each q, k, G pair read once instead of three times;
  // in two rounds of 64 channels, each followed by its half of the L and M products (one (n8 tile,
  // L or M) job a warp, accumulated across the rounds), so that the factors take half the area:
  // five CTAs a SM instead of four.
  {
    const int nt = (warp >> 1) & 1, is_m = warp & 1;  // the warp's job when warp < 4
    const unsigned short* fh = is_m ? pQh : pXh;
    const unsigned short* fl = is_m ? pQl : pXl;
    float c0[4] = {0.f, 0.f, 0.f, 0.f}, c1[4] = {0.f, 0.f, 0.f, 0.f}, c2[4] = {0.f, 0.f, 0.f, 0.f};
#if LMTERMS < 3
    // M's diagonal q_i . k_i (its decays cancel) in fp32 rather than from single bf16 factors: at
    // T = 1 it is the whole output, and the factors' rounding over a small q . k was a large
    // relative error (H200: 8.3e-3 at T = 1 with LMTERMS 1). Token warp + it kPWarps a lane's pairs,
    // reduced after the last round into the right factors' lo area (unused below 3 terms).
    float qkd[16 * 32 / kPThreads];
#pragma unroll
    for (int it = 0; it < 16 * 32 / kPThreads; ++it) qkd[it] = 0.f;
    float* pDiag = reinterpret_cast<float*>(smem + kPOffYl);
#else
    const float* pDiag = nullptr;
#endif
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (h == 1) __syncthreads();  // round 0's products have read the factors round 1 overwrites
#if !KDA_WGMMA
      // d = 64 h + 2 (tid % 32) in every iteration: G_7's pair loaded once a round.
      const float2 gp = *reinterpret_cast<const float2*>(pG + 7 * kLd + 64 * h + 2 * (tid % 32));
#endif
#pragma unroll
      for (int it = 0; it < 16 * 32 / kPThreads; ++it) {
        const int idx = tid + it * kPThreads;
#if KDA_WGMMA
        // Pair idx of the round is the pair at element 2 idx of its two 512-element halves of the
        // core-matrix layout (row group e / 512, core matrices 8 h .. 8 h + 7): contiguous stores.
        const int e = 2 * idx, rg = e >> 9, q = e & 511;
        const int r = rg * 8 + ((q & 63) >> 3), d = (8 * h + (q >> 6)) * 8 + (q & 7);
        const float2 gp = *reinterpret_cast<const float2*>(pG + 7 * kLd + d);
#else
        const int r = idx / 32, d = 64 * h + 2 * (idx % 32);
#endif
        const int df = d - 64 * h;  // the pair's column in the round's factor rows
#if KDA_Q_REGS
        const float2 qq = make_float2(qr[it][2 * h], qr[it][2 * h + 1]);  // r = warp + it kPWarps, d = 64 h + 2 lane
#else
        const float2 qq = *reinterpret_cast<const float2*>(pQ + r * kLd + d);
#endif
        const float2 gg = *reinterpret_cast<const float2*>(pG + r * kLd + d);
        const float2 kk = *reinterpret_cast<const float2*>(pK + r * kLd + d);
#if LMTERMS < 3
        qkd[it] = fmaf(qq.x, kk.x, fmaf(qq.y, kk.y, qkd[it]));
#endif
        const float e0 = ex2(gg.x), e1 = ex2(gg.y);
        *reinterpret_cast<unsigned int*>(wQd + wsb(r, d, kD)) = pack_bf16x2(qq.x * e0, qq.y * e1);
#if KDA_KD_IN_ONE_PASS
        // This thread's pair of k is read here for the last time before step 5.
        const float br = pBeta[r];
        *reinterpret_cast<float2*>(pK + r * kLd + d) = make_float2(br * kk.x * e0, br * kk.y * e1);
#endif
#if WYREC
        *reinterpret_cast<unsigned int*>(wKd + wsb(r, d, kD)) = pack_bf16x2(-kk.x * e0, -kk.y * e1);  // -Kd
#endif
        const float f0 = ex2(gg.x - gp.x), f1 = ex2(gg.y - gp.y);
        unsigned int wh, wl;
        split_bf16x2(kk.x * f0, kk.y * f1, wh, wl);
        *reinterpret_cast<unsigned int*>(pXh + r * kPadF + df) = wh;
        if (LMTERMS >= 2) *reinterpret_cast<unsigned int*>(pXl + r * kPadF + df) = wl;
        split_bf16x2(qq.x * f0, qq.y * f1, wh, wl);
        *reinterpret_cast<unsigned int*>(pQh + r * kPadF + df) = wh;
        if (LMTERMS >= 2) *reinterpret_cast<unsigned int*>(pQl + r * kPadF + df) = wl;
        split_bf16x2(kk.x * ex2(gp.x - gg.x), kk.y * ex2(gp.y - gg.y), wh, wl);
        *reinterpret_cast<unsigned int*>(pYh + r * kPadF + df) = wh;
        if (LMTERMS >= 3) *reinterpret_cast<unsigned int*>(pYl + r * kPadF + df) = wl;
      }
#if LMTERMS < 3
      if (h == 1) {
#pragma unroll
        for (int it = 0; it < 16 * 32 / kPThreads; ++it) {
          float v = qkd[it];
#pragma unroll
          for (int o = 16; o > 0; o >>= 1) v += shfl_bfly(v, o);
          if (lane == 0) pDiag[warp + it * kPWarps] = v;
        }
      }
#endif
      __syncthreads();
      if (warp < 4) lm_tile_mma<LMTERMS>(c0, c1, c2, fh, fl, pYh, pYl, kPadF, nt * 8, 0, kFk / 16, lane);
    }
    if (warp < 4)
      lm_tile_store(c0, c1, c2, is_m, 0, nt * 8, g8, t4, pL, pBeta,
                    reinterpret_cast<unsigned short*>(wsc + kWsMhi), reinterpret_cast<unsigned short*>(wsc + kWsMlo), pDiag,
                    KDA_WY_FOLD ? reinterpret_cast<float*>(smem + kPOffMf) : nullptr);
#if KDA_DIRECT_QKG
    cp_async_wait_all();  // v's rows (step 5), in flight since step 0
#endif
    __syncthreads();  // L is complete; the factor area is free for step 5
  }
#else
  // 4. L (fp32, shared memory) and M (hi + lo bf16, workspace) by 16-token row blocks. For rows
  // i of block I and columns j of an earlier block, 2^(G_i - G_j) = 2^(G_i - G_p) 2^(G_p - G_j)
  // with the pivot p = I's first token: both factors <= 1 for any gate, so the dot products run on
  // tensor cores (factors as hi + lo bf16 terms, hi hi + hi lo + lo hi) without overflow. The
  // diagonal block: with KDA_SPLIT_FACTOR_DIAG (lower-bound gate, LMTC = 1) the same with the
  // pivot p = I's token 7 (the gate bounds a token's decay to 5 nats, so both factors stay within
  // 2^58, as in the fused kernel's LMTC); otherwise term by term with one ex2 each.
  unsigned short* wMhi = reinterpret_cast<unsigned short*>(wsc + kWsMhi);
  unsigned short* wMlo = reinterpret_cast<unsigned short*>(wsc + kWsMlo);
  for (int idx = tid; idx < kC * kC; idx += kPThreads)
    if ((idx % kC) / 16 > (idx / kC) / 16) {
      wMhi[wsb(idx / kC, idx % kC, kC)] = 0;
      wMlo[wsb(idx / kC, idx % kC, kC)] = 0;
    }
#pragma unroll 1
  for (int bi = 0; bi < kNb; ++bi) {
    const int b0 = bi * 16;
    const int piv = KDA_SPLIT_FACTOR_DIAG ? b0 + 7 : b0;
    const int ny = KDA_SPLIT_FACTOR_DIAG ? b0 + 16 : b0;  // right-factor rows
    // Left factors of block bi serve the column blocks before it (and its own when factored):
    // none for the first block otherwise (CHUNK 16's factor area holds only 64 channels).
    if (KDA_SPLIT_FACTOR_DIAG || bi > 0) {
#pragma unroll
    for (int it = 0; it < 16 * kD / 2 / kPThreads; ++it) {
      const int idx = tid + it * kPThreads;
      const int il = idx / (kD / 2), d = 2 * (idx % (kD / 2)), i = b0 + il;
      const float2 gi = *reinterpret_cast<const float2*>(pG + i * kLd + d);
      const float2 gp = *reinterpret_cast<const float2*>(pG + piv * kLd + d);
      const float2 ki = *reinterpret_cast<const float2*>(pK + i * kLd + d);
      const float2 qi = *reinterpret_cast<const float2*>(pQ + i * kLd + d);
      const float f0 = ex2(gi.x - gp.x), f1 = ex2(gi.y - gp.y);
      const float kx[2] = {ki.x * f0, ki.y * f1}, qx[2] = {qi.x * f0, qi.y * f1};
      unsigned int wh, wl;
      split_bf16x2(kx[0], kx[1], wh, wl);
      *reinterpret_cast<unsigned int*>(pXh + il * kPadK + d) = wh;
      *reinterpret_cast<unsigned int*>(pXl + il * kPadK + d) = wl;
      split_bf16x2(qx[0], qx[1], wh, wl);
      *reinterpret_cast<unsigned int*>(pQh + il * kPadK + d) = wh;
      *reinterpret_cast<unsigned int*>(pQl + il * kPadK + d) = wl;
    }
    }
    for (int idx = tid; idx < ny * kD / 2; idx += kPThreads) {
      const int j = idx / (kD / 2), d = 2 * (idx % (kD / 2));
      const float2 kj = *reinterpret_cast<const float2*>(pK + j * kLd + d);
      const float2 gp = *reinterpret_cast<const float2*>(pG + piv * kLd + d);
      const float2 gj = *reinterpret_cast<const float2*>(pG + j * kLd + d);
      const float ky[2] = {kj.x * ex2(gp.x - gj.x), kj.y * ex2(gp.y - gj.y)};
      unsigned int wh, wl;
      split_bf16x2(ky[0], ky[1], wh, wl);
      *reinterpret_cast<unsigned int*>(pYh + j * kPadK + d) = wh;
      *reinterpret_cast<unsigned int*>(pYl + j * kPadK + d) = wl;
    }
    __syncthreads();
    const int nblocks = KDA_SPLIT_FACTOR_DIAG ? bi + 1 : bi;  // column blocks on tensor cores
    // Four jobs a column block, one a warp: (n8 tile, L or M); three accumulators (hi hi, hi lo,
    // lo hi) so that no chain of dependent mma.sync is longer than the k loop.
    for (int job = warp; job < nblocks * 4; job += kPWarps) {
      const int bj = job >> 2, nt = (job >> 1) & 1, is_m = job & 1;
      const unsigned short* fh = is_m ? pQh : pXh;
      const unsigned short* fl = is_m ? pQl : pXl;
      float c0[4] = {0.f, 0.f, 0.f, 0.f}, c1[4] = {0.f, 0.f, 0.f, 0.f}, c2[4] = {0.f, 0.f, 0.f, 0.f};
      lm_tile_mma(c0, c1, c2, fh, fl, pYh, pYl, kPadK, bj * 16 + nt * 8, 0, kD / 16, lane);
      lm_tile_store(c0, c1, c2, is_m, b0, bj * 16 + nt * 8, g8, t4, pL, pBeta, wMhi, wMlo, nullptr,
                    KDA_WY_FOLD ? reinterpret_cast<float*>(smem + kPOffMf) : nullptr);
    }
#if !KDA_SPLIT_FACTOR_DIAG
    for (int idx = tid; idx < 256; idx += kPThreads) {
      const int i = b0 + (idx >> 4), j = b0 + (idx & 15);
      float lk = 0.f, mq = 0.f;
      if (j <= i) {
#pragma unroll 4
        for (int d = 0; d < kD; ++d) {
          const float kx = pK[j * kLd + d] * ex2(pG[i * kLd + d] - pG[j * kLd + d]);
          lk = fmaf(pK[i * kLd + d], kx, lk);
          mq = fmaf(pQ[i * kLd + d], kx, mq);
        }
      }
      pL[i * kC + j] = j < i ? pBeta[i] * lk : 0.f;
#if KDA_WY_FOLD
      reinterpret_cast<float*>(smem + kPOffMf)[i * kC + j] = mq;  // M2 = M T' in step 5
#else
      const unsigned short mh = bf16_bits(mq);
      wMhi[wsb(i, j, kC)] = mh;
      wMlo[wsb(i, j, kC)] = bf16_bits(mq - bf16_value(mh));
#endif
    }
#endif
    __syncthreads();  // the next block overwrites the factors
  }
#endif  // KDA_ONE_PASS
#if KDA_WY_FOLD
  // 5. T' = (I + L)^-1 diag(beta) (C x C, one thread a column of the identity) folded into the
  // recurrence's other operands: Kr2^T = Kr^T T' (128 x C, on tensor cores: Kr^T and T' as hi + lo
  // bf16 terms) and M2 = M T' (fp32 on CUDA cores), as bf16 in Kr^T's and M's places (the
  // recurrence's accumulators hold U'). Kr^T's rows are recomputed here from k and G
  // (the cumsum step skips them).
  {
    float* pMf = reinterpret_cast<float*>(smem + kPOffMf);
    float* pTf = reinterpret_cast<float*>(smem + kPOffTf);
    unsigned short* pTh = reinterpret_cast<unsigned short*>(smem + kPOffFTh);
    unsigned short* pTl = reinterpret_cast<unsigned short*>(smem + kPOffFTl);
    unsigned short* pKrh = reinterpret_cast<unsigned short*>(smem + kPOffKdh);
    unsigned short* pKrl = reinterpret_cast<unsigned short*>(smem + kPOffKdl);
    constexpr int kLdF = kC + 8;
    if (tid < kC) {
      float xv[kC];
      tprime_column(xv, tid, pL, pBeta);
#pragma unroll
      for (int i = 0; i < kC; ++i) {
        const float t = xv[i];
        const unsigned short th = bf16_bits(t);
        pTf[i * kC + tid] = t;
        pTh[tid * kLdF + i] = th;  // B[k = j][n = i] = T'[j][i], stored [n][k]: T'^T row-major
        pTl[tid * kLdF + i] = bf16_bits(t - bf16_value(th));
      }
    }
    if (tid < kD) {  // Kr^T's row d as hi + lo bf16 (A of Kr2^T = Kr^T T')
      const int d = tid;
      const float gt = pG[(kC - 1) * kLd + d];
#pragma unroll
      for (int j = 0; j < kC; j += 2) {
        unsigned int wh, wl;
        split_bf16x2(pK[j * kLd + d] * ex2(gt - pG[j * kLd + d]), pK[(j + 1) * kLd + d] * ex2(gt - pG[(j + 1) * kLd + d]),
                     wh, wl);
        *reinterpret_cast<unsigned int*>(pKrh + d * kLdF + j) = wh;
        *reinterpret_cast<unsigned int*>(pKrl + d * kLdF + j) = wl;
      }
    }
    __syncthreads();
    // Kr2^T: 8 row blocks of 16 key channels x 2 n8 tiles of tokens, one k step (C = 16).
    unsigned short* wKrT2 = reinterpret_cast<unsigned short*>(wsc + kWsKrT);
#pragma unroll
    for (int job = warp; job < 16; job += kPWarps) {
      const int mb = job >> 1, nt = job & 1;
      unsigned int ah[4], al[4], bh[2], bl[2];
      load_a(ah, pKrh, kLdF, mb * 16, 0, lane);
      load_a(al, pKrl, kLdF, mb * 16, 0, lane);
      load_b(bh, pTh, kLdF, nt * 8, 0, lane);
      load_b(bl, pTl, kLdF, nt * 8, 0, lane);
      float c0[4] = {0.f, 0.f, 0.f, 0.f}, c1[4] = {0.f, 0.f, 0.f, 0.f};
      mma_bf16(c0, ah, bh);
      mma_bf16(c1, ah, bl);
      mma_bf16(c1, al, bh);
#pragma unroll
      for (int hr = 0; hr < 2; ++hr)
        *reinterpret_cast<unsigned int*>(wKrT2 + swzf(mb * 16 + g8 + hr * 8, nt * 8 + 2 * t4, kC)) =
            pack_bf16x2(c0[2 * hr] + c1[2 * hr], c0[2 * hr + 1] + c1[2 * hr + 1]);
    }
    // M2 = M T' (lower triangular): element (i, j) = sum over j <= m <= i of M[i][m] T'[m][j].
    unsigned short* wMhi = reinterpret_cast<unsigned short*>(wsc + kWsMhi);
    unsigned short* wMlo = reinterpret_cast<unsigned short*>(wsc + kWsMlo);
#pragma unroll
    for (int it = 0; it < kC * kC / kPThreads; ++it) {
      const int idx = tid + it * kPThreads, i = idx / kC, j = idx % kC;
      float m2 = 0.f;
      for (int m = j; m <= i; ++m) m2 = fmaf(pMf[i * kC + m], pTf[m * kC + j], m2);
      const unsigned short mh = bf16_bits(m2);
      wMhi[wsb(i, j, kC)] = mh;
      wMlo[wsb(i, j, kC)] = bf16_bits(m2 - bf16_value(mh));
    }
  }
  return true;
#elif WYREC
  // 5. T' = (I + L)^-1 diag(beta) (C x C) by forward substitution, one thread a column of the
  // identity, as hi + lo bf16 in M's fragment order; the recurrence applies it to V - Kd S.
  if (tid < kC) {
    float xv[kC];
    tprime_column(xv, tid, pL, pBeta);
    unsigned short* wTh = reinterpret_cast<unsigned short*>(wsc + kWsThi);
    unsigned short* wTl = reinterpret_cast<unsigned short*>(wsc + kWsTlo);
#pragma unroll
    for (int i = 0; i < kC; ++i) {
      const float t = xv[i];
      const unsigned short th = bf16_bits(t);
      wTh[wsb(i, tid, kC)] = th;
      wTl[wsb(i, tid, kC)] = bf16_bits(t - bf16_value(th));
    }
  }
  return true;
#else
  // 5. The WY form: [W0 | U0] = (I + L)^-1 diag(beta) [Kd | V].
  unsigned short* wW = reinterpret_cast<unsigned short*>(wsc + kWsW);
  unsigned char* wU = wsc + kWsU;
#if WYTC
  // On tensor cores (as FLA's solve_tril + bf16 GEMMs): T' = (I + L)^-1 diag(beta) once (C x C,
  // fp32 forward substitution, one thread per column of the identity), then W0 = T' Kd and
  // U0^T = V^T T'^T by mma.sync with T' and Kd as hi + lo bf16 terms (V is bf16 already), so the
  // products stay near fp32; the C (C - 1) / 2 FMAs a column of the substitution below become
  // about 3 C / 16 mma.sync per 16 x 8 tile.
  unsigned short* pTh = reinterpret_cast<unsigned short*>(smem + kPOffTh);
  unsigned short* pTl = reinterpret_cast<unsigned short*>(smem + kPOffTl);
  unsigned short* pKdh = reinterpret_cast<unsigned short*>(smem + kPOffKdh);
  unsigned short* pKdl = reinterpret_cast<unsigned short*>(smem + kPOffKdl);
  if (tid < kC) {
    float xv[kC];
    tprime_column(xv, tid, pL, pBeta);
    // Split once here (hi + lo bf16), not at every fragment load of every job.
#pragma unroll
    for (int i = 0; i < kC; ++i) {
      const float t = xv[i];
      const unsigned short th = bf16_bits(t);
      pTh[i * kLdT + tid] = th;
      pTl[i * kLdT + tid] = bf16_bits(t - bf16_value(th));
    }
  }
  // Kd^T = (k 2^G)^T as hi + lo bf16, token pairs a thread (the B operand of W0 = T' Kd).
#pragma unroll
  for (int it = 0; it < kD * kC / 2 / kPThreads; ++it) {
    const int idx = tid + it * kPThreads;
    const int d = idx / (kC / 2), r = 2 * (idx % (kC / 2));
    const float v0 = pK[r * kLd + d] * ex2(pG[r * kLd + d]);
    const float v1 = pK[(r + 1) * kLd + d] * ex2(pG[(r + 1) * kLd + d]);
    unsigned int wh, wl;
    split_bf16x2(v0, v1, wh, wl);
    *reinterpret_cast<unsigned int*>(pKdh + d * kLdKd + r) = wh;
    *reinterpret_cast<unsigned int*>(pKdl + d * kLdKd + r) = wl;
  }
  __syncthreads();
  // Jobs, a fixed number a warp (unrolled): the first 8 C / 16 are W0 tiles (16 tokens x 16 key
  // channels), the rest U0^T tiles (16 value columns x 16 tokens). T' is lower triangular, so k
  // steps past the tile's token block are zero and skipped. One job at a time (not unrolled): the
  // unrolled jobs' accumulators pushed the prepare past the 128 registers that keep four CTAs a SM.
#pragma unroll 1
  for (int jj = 0; jj < 16 * kNb / kPWarps; ++jj) {
    constexpr int kWJobs = 8 * kNb / kPWarps;  // W0 jobs a warp; the rest are U0^T jobs
    const bool is_u = jj >= kWJobs;
    const int jb = warp + (is_u ? jj - kWJobs : jj) * kPWarps;
    const int tb = jb >> 3, cb = jb & 7;  // token block, 16-column block
    float c0[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
    float c1[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll 1
    for (int ks = 0; ks < (kNb == 1 ? 1 : tb + 1); ++ks) {
      if (!is_u) {
        // A = T' rows [16 tb, +16), k = tokens [16 ks, +16) (hi, lo); B = Kd^T's two terms.
        unsigned int ah[4], al[4];
        load_a(ah, pTh, kLdT, tb * 16, ks * 16, lane);
        load_a(al, pTl, kLdT, tb * 16, ks * 16, lane);
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          unsigned int bh[2], bl[2];
          load_b(bh, pKdh, kLdKd, cb * 16 + n * 8, ks * 16, lane);
          load_b(bl, pKdl, kLdKd, cb * 16 + n * 8, ks * 16, lane);
          mma_bf16(c0[n], ah, bh);
          mma_bf16(c1[n], ah, bl);
          mma_bf16(c1[n], al, bh);
        }
      } else {
        // A = V^T rows (value columns [16 cb, +16)), k = tokens [16 ks, +16), gathered from v's
        // rows; B = T'^T (B[m][i] = T'[i][m], columns i = tokens [16 tb, +16)): T' row-major is
        // its transpose stored row-major, as load_b wants.
        unsigned int av[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const unsigned short* p = rawv + (ks * 16 + (r >> 1) * 8 + 2 * t4) * kD + cb * 16 + g8 + (r & 1) * 8;
          av[r] = (unsigned int)p[0] | ((unsigned int)p[kD] << 16);
        }
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          unsigned int bh[2], bl[2];
          load_b(bh, pTh, kLdT, tb * 16 + n * 8, ks * 16, lane);
          load_b(bl, pTl, kLdT, tb * 16 + n * 8, ks * 16, lane);
          mma_bf16(c0[n], av, bh);
          mma_bf16(c1[n], av, bl);
        }
      }
    }
    if (!is_u) {
      // Lane holds tokens (16 tb + g8, + 8) x columns (2 t4, + 1) of both n8 tiles: in fragment
      // order (swzf) those four columns are adjacent, one 8-byte store a row.
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        uint2 w;
        w.x = pack_bf16x2(c0[0][2 * hr] + c1[0][2 * hr], c0[0][2 * hr + 1] + c1[0][2 * hr + 1]);
        w.y = pack_bf16x2(c0[1][2 * hr] + c1[1][2 * hr], c0[1][2 * hr + 1] + c1[1][2 * hr + 1]);
#if KDA_WGMMA
        // wgmma's layout: the two column pairs sit in adjacent core matrices.
        *reinterpret_cast<unsigned int*>(wW + wgl(tb * 16 + g8 + hr * 8, cb * 16 + 2 * t4, kD)) = w.x;
        *reinterpret_cast<unsigned int*>(wW + wgl(tb * 16 + g8 + hr * 8, cb * 16 + 8 + 2 * t4, kD)) = w.y;
#else
        *reinterpret_cast<uint2*>(wW + swzf(tb * 16 + g8 + hr * 8, cb * 16 + 2 * t4, kD)) = w;
#endif
      }
    } else {
      // Lane holds value columns (16 cb + g8, + 8) x tokens (16 tb + 8 n + 2 t4, + 1): token pairs.
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          const int col = cb * 16 + g8 + hr * 8, tok = tb * 16 + n * 8 + 2 * t4;
          const float u0 = c0[n][2 * hr] + c1[n][2 * hr], u1 = c0[n][2 * hr + 1] + c1[n][2 * hr + 1];
#if UPREC == 32
          *reinterpret_cast<float2*>(reinterpret_cast<float*>(wU) + swz(col, tok, kC, 4)) = make_float2(u0, u1);
#else
          *reinterpret_cast<unsigned int*>(reinterpret_cast<unsigned short*>(wU) + swz(col, tok, kC, 8)) =
              pack_bf16x2(u0, u1);
#endif
        }
    }
  }
#else
  // By forward substitution in fp32, one thread per column (128 of Kd, then 128 of V), the column
  // in registers. W0's column as bf16 (fragment order), U0^T's row as fp32 or bf16 pairs.
  auto store_w = [&](int col, const float (&xv)[kC]) {
#pragma unroll
    for (int i = 0; i < kC; ++i) wW[wsb(i, col, kD)] = bf16_bits(xv[i]);
  };
  auto store_u = [&](int vc, const float (&xv)[kC]) {
#if UPREC == 32
    float* dst = reinterpret_cast<float*>(wU);
#pragma unroll
    for (int i = 0; i < kC; i += 4) {
      float4 f;
      f.x = xv[i];
      f.y = xv[i + 1];
      f.z = xv[i + 2];
      f.w = xv[i + 3];
      *reinterpret_cast<float4*>(dst + swz(vc, i, kC, 4)) = f;
    }
#else
    // bf16 pairs (FLA keeps u in bf16): 256 fewer workspace bytes a token-head each way.
    unsigned short* dst = reinterpret_cast<unsigned short*>(wU);
#pragma unroll
    for (int i = 0; i < kC; i += 8) {
      uint4 f;
      f.x = pack_bf16x2(xv[i], xv[i + 1]);
      f.y = pack_bf16x2(xv[i + 2], xv[i + 3]);
      f.z = pack_bf16x2(xv[i + 4], xv[i + 5]);
      f.w = pack_bf16x2(xv[i + 6], xv[i + 7]);
      *reinterpret_cast<uint4*>(dst + swz(vc, i, kC, 8)) = f;
    }
#endif
  };
#if KDA_WY_PAIRED
  // One thread a Kd column and the V column of the same index, substituted together: each float4
  // of L read from shared memory serves both (half the broadcast reads).
  {
    const int col = tid;
    float xk[kC], xu[kC];
#pragma unroll
    for (int i = 0; i < kC; ++i) {
#if KDA_KD_IN_ONE_PASS
      xk[i] = pK[i * kLd + col];  // beta k 2^G, from the one-pass step
#else
      xk[i] = pBeta[i] * pK[i * kLd + col] * ex2(pG[i * kLd + col]);
#endif
      xu[i] = i < count ? pBeta[i] * bf16_value(rawv[i * kD + col]) : 0.f;
    }
    forward_substitute2(xk, xu, pL);
    store_w(col, xk);
    store_u(col, xu);
  }
#else
  for (int col = tid; col < 2 * kD; col += kPThreads) {
    float xv[kC];
    if (col < kD) {  // one branch a column, not one a token
#pragma unroll
      for (int i = 0; i < kC; ++i) xv[i] = pBeta[i] * pK[i * kLd + col] * ex2(pG[i * kLd + col]);
    } else {
#pragma unroll
      for (int i = 0; i < kC; ++i) xv[i] = i < count ? pBeta[i] * bf16_value(rawv[i * kD + col - kD]) : 0.f;
    }
    forward_substitute(xv, pL);
    if (col < kD) store_w(col, xv);
    else store_u(col - kD, xv);
  }
#endif
#endif  // WYTC
  return true;
#endif  // WYREC
}

// The flags of PGRID > 0, one word a (head, chunk slot), after the workspace's chunks.
__device__ __forceinline__ unsigned int* ws_flags(const Args& a, const unsigned char* ws, int nseq) {
  return reinterpret_cast<unsigned int*>(const_cast<unsigned char*>(ws) + (long long)a.H * ws_slots(a, nseq) * kWsChunkBytes);
}

// The sequence split's segment states (SEQSPLIT > 1), after the flags, 16-byte aligned: for each
// (sequence, head) and segment j < P - 1 a block of 256 x 128 fp32, V-first: rows 0..127 segment j's
// end state from its pass-1 start (S0_j^T; the combine overwrites it with E_(j+1)^T, the state
// entering segment j + 1), rows 128..255 its transition as X_j[m][d] = A_j[d][m].
enum : int { kSegRows = 2 * kD };
__device__ __forceinline__ float* ws_seg(const Args& a, const unsigned char* ws, int nseq) {
  const long long at = (long long)a.H * ws_slots(a, nseq) * (kWsChunkBytes + 4);
  return reinterpret_cast<float*>(const_cast<unsigned char*>(ws) + (at + 15) / 16 * 16);
}
// Segment seg's chunks [c0, c1) of a sequence of nch chunks split into nseg (empty past the end).
__device__ __forceinline__ void seg_chunks(int nch, int nseg, int seg, int& c0, int& c1) {
  const int per = (nch + nseg - 1) / nseg;
  c0 = seg * per < nch ? seg * per : nch;
  c1 = c0 + per < nch ? c0 + per : nch;
}

// kda_fwd_prepare. PGRID = 0: one CTA per (chunk slot, head). PGRID > 0: persistent CTAs taking
// (slot, head) items in slot-major order (the order the recurrence's chains consume them), each
// chunk released to the recurrence by its flag once the whole CTA has written it.
__device__ __forceinline__ void kda_prepare_body(const Args& a, unsigned char* __restrict__ ws, int nseq) {
#if PGRID
  // Every CTA of this grid is resident once all have run this: the recurrence, whose CTAs may then
  // take the remaining room, can never keep a prepare CTA from starting, so its waits end.
  griddep_launch_dependents();
  const long long slots = ws_slots(a, nseq), items = slots * a.H;
  unsigned int* flags = ws_flags(a, ws, nseq);
  unsigned int* pending = nullptr;  // the last item's flag, released during the next item
  for (long long i = blockIdx.x; i < items; i += gridDim.x) {
    const long long x = i / a.H;
    const int h = (int)(i - x * a.H);
    if (kda_prepare_item(a, ws, nseq, x, h, pending)) {
      __syncthreads();  // every thread's stores of the chunk before the release; shared memory free again
      pending = flags + (long long)h * slots + x;
    } else if (pending != nullptr) {  // an unused slot (rare): release now
      if (threadIdx.x == 0) flag_release(pending);
      pending = nullptr;
    }
  }
  if (pending != nullptr && threadIdx.x == 0) flag_release(pending);
#else
  (void)kda_prepare_item(a, ws, nseq, blockIdx.x, blockIdx.y, nullptr);
#endif
}

// kda_fwd_flags_reset (PGRID > 0, before the prepare): every flag to 0. The workspace is scratch
// (the gate poisons it), so each run of the plan starts from here.
#define KDA_RESET_THREADS 256
__device__ __forceinline__ void kda_flags_reset_body(const Args& a, unsigned char* __restrict__ ws, int nseq) {
  const long long n = (long long)a.H * ws_slots(a, nseq);
  unsigned int* flags = ws_flags(a, ws, nseq);
  for (long long i = (long long)blockIdx.x * KDA_RESET_THREADS + threadIdx.x; i < n; i += (long long)gridDim.x * KDA_RESET_THREADS)
    flags[i] = 0u;
}

// kda_fwd_recurrence: one CTA per (sequence, head, value slice of BV columns), warp w owning value
// columns [col0 + 16 w, col0 + 16 w + 16) of the state for all 128 key channels, as S^T in
// accumulator fragments (rows: value column, columns: key channel), so that S^T serves as the A
// operand of the next products straight from registers (hi + lo bf16) and U^T stays in the warp:
// the warps never exchange data, the only barrier is the one that hands over a staged chunk.
// SEQSPLIT > 1: pass 0 runs whole sequences; pass 1 and pass 3 the segments of the sequence split
// (SEQSPLIT above): the grid's x then counts (sequence, segment) pairs, and pass 1's z covers 256
// value columns (slices past 128 / BV hold the transition's columns).
__device__ __forceinline__ void kda_recurrence_body(const Args& a, const unsigned char* __restrict__ ws, int nseq,
                                                    int nseg, int pass) {
  extern __shared__ __align__(16) unsigned char smem[];
  if (dynamic_smem_bytes() < (unsigned int)kRSmemTotal) trap_now();
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  KDA_ASSUME(tid >= 0 && tid < kRThreads);
  const int g8 = lane >> 2, t4 = lane & 3;
  // Longest chains first: the block scheduler starts CTAs in linear order (x fastest), so the
  // linear index L = x + N (y + H z) is read as (rank r = L / (H S), head, slice) and, for up to 16
  // packed sequences, rank r as the r-th longest sequence (ties by index): every head and slice of
  // the longest sequence starts in the first wave and short sequences fill the tail. The slices of
  // one (sequence, head) are adjacent, so they run at the same time and the later ones read that
  // chain's shared operands (Qd, W0, Kr^T, M) from L2 rather than DRAM when the grid needs several
  // waves. A permutation of the grid, so every (sequence, head, slice) still runs once.
  constexpr int kSlices = kD / kBv;
#if SEQSPLIT > 1
  // Pass 1: segments 0 .. P-2, pass 3: 1 .. P-1, adjacent in the linear order (a sequence's
  // segments start together); pass 1's slices kSlices .. 2 kSlices - 1 are the transition's.
  const int segs = pass == 0 ? 1 : nseg - 1;
  const int slices = pass == 1 ? 2 * kSlices : kSlices;
#else
  constexpr int slices = kSlices;
  (void)nseg;
  (void)pass;
#endif
  const long long hs = (long long)a.H * slices;
#if SEQSPLIT > 1
  const long long lin = blockIdx.x + (long long)nseq * segs * (blockIdx.y + (long long)a.H * blockIdx.z);
  const long long rank = lin / hs / segs;
  const int h = (int)((lin % hs) / slices);
  const int slice = (int)((lin % hs) % slices);
  const int col0 = (slice % kSlices) * kBv;
  const int seg = (int)(lin / hs % segs) + (pass == 3 ? 1 : 0);
  const bool amat = slice >= kSlices;  // pass 1: a column of A_j (v = 0, from the identity)
  if (amat && seg == 0) return;        // segment 0 starts from the true state: no transition
#else
  // The unsplit decode kept as it was: the one above with segs = 1 still costs integer work (NVVM
  // cannot prove slice < kSlices), and the default build's SASS stays the measured one.
  const long long lin = blockIdx.x + (long long)nseq * (blockIdx.y + (long long)a.H * blockIdx.z);
  const long long rank = lin / hs;
  const int h = (int)((lin % hs) / kSlices);
  const int col0 = (int)((lin % hs) % kSlices) * kBv;
#endif
  long long n = rank;
  if (a.cu_seqlens && nseq <= 16) {  // N^2 comparisons by every thread: a few hundred at most
    for (int m = 0; m < nseq; ++m) {
      const long long lm = a.cu_seqlens[m + 1] - a.cu_seqlens[m];
      long long r = 0;
      for (int j = 0; j < nseq; ++j) {
        const long long lj = a.cu_seqlens[j + 1] - a.cu_seqlens[j];
        r += (lj > lm || (lj == lm && j < m)) ? 1 : 0;
      }
      if (r == rank) n = m;
    }
  }
  long long bos, eos;
  seq_range(a, n, bos, eos);
#if SEQSPLIT > 1
  // The segment's chunks as a sequence of their own (its tokens, its workspace slots).
  int c0 = 0, c1 = 0;
  seg_chunks((int)((eos - bos + kC - 1) / kC), pass == 0 ? 1 : nseg, pass == 0 ? 0 : seg, c0, c1);
  const unsigned char* wsh = ws + ((long long)h * ws_slots(a, nseq) + n + bos / kC + c0) * kWsChunkBytes;
  eos = bos + (long long)c1 * kC < eos ? bos + (long long)c1 * kC : eos;
  bos += (long long)c0 * kC;
  if (bos > eos) bos = eos;
  // Pass 1's segment-state block of this chain and segment (ws_seg).
  float* const segst = ws_seg(a, ws, nseq) + ((n * a.H + h) * (long long)(nseg - 1) + (seg - (pass == 3 ? 1 : 0))) *
                                                 (long long)kSegRows * kD;
#else
  const unsigned char* wsh = ws + ((long long)h * ws_slots(a, nseq) + n + bos / kC) * kWsChunkBytes;
#endif
#if PGRID
  const unsigned int* flags = ws_flags(a, ws, nseq) + (long long)h * ws_slots(a, nseq) + n + bos / kC;  // chunk 0's
#endif
  const int nchunks = (int)((eos - bos + kC - 1) / kC);
  // The sequence's tokens (int: a workspace of 2^31 tokens would not fit the GPU) and the
  // elements between one chunk's rows and the next's in [T, H, 128] inputs and outputs: the chunk
  // loop's global addresses are per-thread bases plus c times this, and its row bounds 32-bit
  // compares (the 64-bit index products and bounds cost ~40 instructions a warp a chunk on the
  // chain, H200 SASS).
  const int len = (int)(eos - bos);
  const long long tok_step = (long long)kC * a.H * kD;
  // KSPLIT warps share a group of 16 value columns, warp kh of them holding key channels
  // [kh kDw, kh kDw + kDw): the chain's per-warp work shrinks by KSPLIT at the price of one
  // exchange of partial W^T and Qs^T through shared memory (and one more barrier) a chunk.
  const int jw = (warp / kKs) * 16;  // the warp's first value column within the slice
  const int kh = warp % kKs, d0 = kh * kDw;
  const long long sbase = (n * a.H + h) * (long long)kD * kD;  // V-first [j][d]

  // S^T: tile nt holds rows (value columns) col0 + jw + g8 (+ 8), key channels d0 + nt * 8 + 2 t4 (+ 1).
  float s[kDw / 8][4];
#pragma unroll
  for (int nt = 0; nt < kDw / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int j = col0 + jw + g8 + (e >> 1) * 8, d = d0 + nt * 8 + 2 * t4 + (e & 1);
#if SEQSPLIT > 1
      // Pass 3: the entering state the combine left in the previous segment's block; pass 1: the
      // identity for A_j's columns, zero for S0_j past segment 0.
      if (pass == 3) {
        s[nt][e] = segst[(long long)j * kD + d];
        continue;
      }
      if (pass == 1 && (amat || seg > 0)) {
        s[nt][e] = amat && j == d ? 1.f : 0.f;
        continue;
      }
#endif
#if HAS_INITIAL_STATE
      s[nt][e] = a.initial_state[sbase + (long long)j * kD + d];
#else
      s[nt][e] = 0.f;
      (void)j;
      (void)d;
#endif
    }
#if SEQSPLIT > 1
  // Out is written by pass 0, pass 3, and pass 1's segment 0 (it starts from the true state); A_j's
  // columns take v = 0 (no rows copied, all masked).
  const bool wout = pass != 1 || (seg == 0 && !amat);
  const int vlen = pass == 1 && amat ? 0 : len;
#else
  constexpr bool wout = true;
  const int vlen = len;
#endif
  (void)vlen;

  // Copies chunk c's operands into buffer buf with cp.async: the workspace already holds them in
  // the layout the reads below want (dense, swizzled), so two linear loops of 16-byte segments.
  const SmemAddr smem0 = smem_at(smem);
#if BULK
  const SmemAddr bar0 = smem0 + kROffBar;
  if (tid == 0) {
    for (int i = 0; i < kRBuffers; ++i) mbar_init(bar0 + 8 * i);
    mbar_init_fence();
  }
  __syncthreads();  // the barriers are initialised before any thread waits on them
  unsigned int wpar = 0;  // the parity of the current round of uses of the buffers
#endif
#if WYREC
  // v's row 0 of the sequence at this head and slice (the copy adds the row and segment).
  const __nv_bfloat16* vbase = a.v + (bos * a.H + h) * (long long)kD + col0;
#endif
  auto stage = [&](int c, int buf) {
    const unsigned char* src = wsh + (long long)c * kWsChunkBytes;
    const SmemAddr dst = smem0 + buf * kRStageBytes;
#if BULK
    // Two bulk copies by one thread: Qd .. 2^Gtot, then this CTA's rows of U0^T.
    if (tid == 0) {
      const SmemAddr bar = bar0 + 8 * buf;
#if PGRID
      flag_wait(flags + c);
      fence_proxy_async_global();
#endif
      mbar_expect_tx(bar, kWsU + kSegU * 16);
      bulk_copy(dst, src, kWsU, bar);
      if (kSegU > 0) bulk_copy(dst + kROffU, src + kWsU + col0 * (kC * kUBytes), kSegU * 16, bar);
    }
#else
    // Fixed trip counts, unrolled by 8 (fully, it overflows CHUNK 64's registers): each copy's
    // offsets are constants from one base.
#pragma unroll 8
    for (int i = 0; i < (kSegShared + kRThreads - 1) / kRThreads; ++i) {
      const int idx = tid + i * kRThreads;
      if (kSegShared % kRThreads == 0 || idx < kSegShared) cp_async16_at(dst + idx * 16, src + idx * 16);
    }
    const unsigned char* srcu = src + kWsU + col0 * (kC * kUBytes);
#pragma unroll 8
    for (int i = 0; i < (kSegU + kRThreads - 1) / kRThreads; ++i) {
      const int idx = tid + i * kRThreads;
      if (kSegU % kRThreads == 0 || idx < kSegU) cp_async16_at(dst + kROffU + idx * 16, srcu + idx * 16);
    }
#endif
#if WYREC
    // The slice's v rows of chunk c (16-byte segments, one a thread at CHUNK 16), straight from
    // the input; rows past the sequence are not copied (the products mask them).
    {
      constexpr int kSegRow = kBv / 8, kSegV = kC * kSegRow;
      const __nv_bfloat16* vc = vbase + (long long)c * tok_step;
#pragma unroll
      for (int i = 0; i < (kSegV + kRThreads - 1) / kRThreads; ++i) {
        const int idx = tid + i * kRThreads;
        const int r = idx / kSegRow, sg = idx % kSegRow;
        if ((kSegV % kRThreads == 0 || idx < kSegV) && c * kC + r < vlen)
          cp_async16_at(dst + kROffV + r * kVRow + sg * 16, vc + ((long long)r * a.H) * kD + sg * 8);
      }
    }
#endif
#if !BULK || WYREC
    cp_async_commit();
#endif
  };
  // Chunk cc's out rows (tokens t0c .. t0c + countc - 1, this slice's columns) from its staging
  // buffer to global memory: one 16-byte segment a thread, whole rows of BV values (coalesced;
  // the per-lane 4-byte stores of the accumulator layout cost ~12% of the recurrence, H200).
  // Called after a barrier that follows the buffer's stmatrix.
#if KDA_OUT_STAGED
  __nv_bfloat16* const obase = a.out + (bos * a.H + h) * (long long)kD + col0;
  auto flush_out = [&](int cc, int countc) {
    const unsigned char* ob = smem + kROffO + (cc & 1) * kOBufBytes;
    __nv_bfloat16* oc = obase + (long long)cc * tok_step;
    constexpr int kSegs = kC * (kBv / 8);  // 16-byte row segments: one a thread at KSPLIT 1
#pragma unroll
    for (int it = 0; it < (kSegs + kRThreads - 1) / kRThreads; ++it) {
      const int idx = tid + it * kRThreads;
      const int i = idx / (kBv / 8), seg = idx % (kBv / 8);
      if ((kSegs % kRThreads == 0 || idx < kSegs) && i < countc)
        *reinterpret_cast<uint4*>(oc + ((long long)i * a.H) * kD + seg * 8) =
            *reinterpret_cast<const uint4*>(ob + i * kORow + seg * 16);
    }
  };
#endif
  // The chain waits on memory once a chunk unless its operands were asked for early enough:
  // STAGE chunks are copied ahead into their own buffers (one cp.async group each, empty past the
  // end, so the wait count is a constant), and with PF the copy engine prefetches into L2 the
  // chunk PF ahead.
#if PF
  if (tid == 0)
    for (int p = STAGE; p < PF && p < nchunks; ++p) {
      prefetch_l2(wsh + (long long)p * kWsChunkBytes, kWsU);
      if (kSegU > 0) prefetch_l2(wsh + (long long)p * kWsChunkBytes + kWsU + col0 * (kC * kUBytes), kSegU * 16);
    }
#endif
#if STAGE
  for (int p = 0; p < STAGE; ++p) {
    if (p < nchunks) stage(p, p);
#if !BULK || WYREC
    else cp_async_commit();
#endif
  }
#endif
  // CHUNK 16: chunks in rounds of kRBuffers, the round's loop unrolled: chunk c is in buffer
  // c % kRBuffers = ub, a constant in each unrolled copy, so the shared-memory addresses below are
  // per-lane bases plus immediates (with a run-time buffer index ptxas recomputed the swizzled
  // addresses of every chunk: about 100 integer instructions of a warp's ~450 a chunk). Larger
  // chunks keep one copy (unrolled, they need more registers: spills at CHUNK 64), and so do
  // STAGE 2 and 3 (three or four copies of the body measured slower on the H200: 0.566 and 0.617
  // against 0.552 ms at scenario 1, instruction fetch).
  constexpr int kRUnroll = kC == 16 && kRBuffers <= 2 ? kRBuffers : 1;
  // Otherwise chunk c's buffer c % kRBuffers, counted rather than divided (a division by 3 at
  // STAGE 2, three times a chunk).
  int rbuf = 0;
#if !KDA_WGMMA && KSPLIT == 1
  // W0's and Qd's B fragments (swzf, K = 128: block b of 16 columns of row r at block b ^ (r & 3)):
  // for n tile nt and k step ks (block ks) lane (g8, t4) reads element (nt 8 + g8) 128 +
  // ((ks ^ (g8 & 3)) << 4) + 4 t4 = xo[ks & 3] + nt 1024 + (ks & 4) 16: four per-lane offsets
  // (bytes) and immediates.
  unsigned int xo[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) xo[j] = 2u * (unsigned int)(g8 * kD + ((j ^ (g8 & 3)) << 4) + 4 * t4);
#endif
  for (int cb = 0; cb < nchunks; cb += kRUnroll) {
#pragma unroll
  for (int ub = 0; ub < kRUnroll; ++ub) {
    const int c = cb + ub;
    if (c >= nchunks) break;
#if !KDA_OUT_STAGED
    const long long t0 = bos + (long long)c * kC;
    const int count = (int)(eos - t0 < kC ? eos - t0 : (long long)kC);
#endif
#if BULK
    const int buf = kRUnroll == kRBuffers ? ub : rbuf;
#if !STAGE
    stage(c, 0);
#endif
    mbar_wait(bar0 + 8 * buf, wpar);
    if (buf == kRBuffers - 1) wpar ^= 1u;
#if WYREC
    cp_async_wait_group<(STAGE > 0 ? STAGE - 1 : 0)>();  // this thread's v rows of chunk c
#endif
#elif STAGE
    const int buf = kRUnroll == kRBuffers ? ub : rbuf;
    cp_async_wait_group<STAGE - 1>();
#else
    const int buf = 0;
    stage(c, 0);
    cp_async_wait_group<0>();
#endif
#if KDA_WGMMA && !BULK
    fence_proxy_async();  // this thread's landed copies, visible to the wgmma reads below
#endif
    __syncthreads();  // chunk c is staged; every warp is done with chunk c - 1 (its buffer is free)
    // Chunk c - 1's out rows (its stmatrix came before the barrier above; a full chunk: only the
    // last can be short). Buffer c & 1, written below, was flushed during chunk c - 1, before it.
#if KDA_OUT_STAGED
    if (c > 0 && wout) flush_out(c - 1, kC);
#endif
#if STAGE
    if (c + STAGE < nchunks) stage(c + STAGE, buf == 0 ? STAGE : buf - 1);  // (buf + STAGE) % (STAGE + 1)
#if !BULK || WYREC
    else cp_async_commit();
#endif
#endif
#if PF
    if (tid == 0 && c + PF < nchunks) {
      prefetch_l2(wsh + (long long)(c + PF) * kWsChunkBytes, kWsU);
      if (kSegU > 0) prefetch_l2(wsh + (long long)(c + PF) * kWsChunkBytes + kWsU + col0 * (kC * kUBytes), kSegU * 16);
    }
#endif
    const unsigned char* sb = smem + buf * kRStageBytes;
#if !KDA_WGMMA
#if KSPLIT == 1
    SmemAddr xb[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) xb[j] = opaque(smem0 + buf * kRStageBytes + xo[j]);
#else
    const unsigned short* sQd = reinterpret_cast<const unsigned short*>(sb + kROffQd);
    const unsigned short* sW = reinterpret_cast<const unsigned short*>(sb + kROffW);
#endif
    const unsigned short* sKrT = reinterpret_cast<const unsigned short*>(sb + kROffKrT);
    const unsigned short* sMhi = reinterpret_cast<const unsigned short*>(sb + kROffMhi);
    const unsigned short* sMlo = reinterpret_cast<const unsigned short*>(sb + kROffMlo);
#endif
    const float* sDec = reinterpret_cast<const float*>(sb + kROffDec);
#if WYREC
#elif UPREC == 32
    const float* sU = reinterpret_cast<const float*>(sb + kROffU);
#else
    const unsigned short* sU = reinterpret_cast<const unsigned short*>(sb + kROffU);
#endif

#if KDA_WGMMA
    // MMA = wgmma: the warpgroup (4 warps, 64 value columns) multiplies S^T (64 x 128, its bf16
    // rounding from the accumulators, SLO 0) by W0^T and Qd^T straight from the staged buffer
    // (descriptors; no fragment loads), one wgmma a 16-key step, both products in flight at once.
    const SmemAddr sa = smem0 + buf * kRStageBytes;
    const WgDesc dW = wg_desc(sa + kROffW, kD * 16), dQ = wg_desc(sa + kROffQd, kD * 16);
    const WgDesc dK = wg_desc(sa + kROffKrT, kC * 16);
    const WgDesc dMh = wg_desc(sa + kROffMhi, kC * 16), dMl = wg_desc(sa + kROffMlo, kC * 16);
    unsigned int ah[kD / 16][4];
    // W^T in one accumulator: four round-robin accumulators (a chain of 2 dependent wgmmas, not 8)
    // measured slower on the H200 (recurrence 0.737 against 0.698 ms at scenario 1).
    float w[kNtC][4], qs[kNtC][4];
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      ah[ks][0] = pack_bf16x2(s[2 * ks][0], s[2 * ks][1]);
      ah[ks][1] = pack_bf16x2(s[2 * ks][2], s[2 * ks][3]);
      ah[ks][2] = pack_bf16x2(s[2 * ks + 1][0], s[2 * ks + 1][1]);
      ah[ks][3] = pack_bf16x2(s[2 * ks + 1][2], s[2 * ks + 1][3]);
    }
#pragma unroll
    for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        // Each zero its own register, defined above the fence (copies of one zero register sunk
        // between the wgmmas make ptxas serialise them).
        w[nt][e] = qs[nt][e] = 0.f;
        wg_keep(w[nt][e]);
        wg_keep(qs[nt][e]);
      }
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) wgmma_nc(&w[0][0], ah[ks], wg_desc_at(dW, ks * 256));
    wg_commit();
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) wgmma_nc(&qs[0][0], ah[ks], wg_desc_at(dQ, ks * 256));
    wg_commit();
    wg_wait<1>();  // W^T (the older group) is complete; Qs^T may still be in flight
#pragma unroll
    for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) wg_keep(w[nt][e]);
#else
    // W^T = S^T W0^T and Qs^T = S^T Qd^T (16 value columns x C tokens), S^T as hi + lo terms
    // (SLO = 1) or its bf16 rounding alone (SLO = 0: as FLA's bf16 state operands; half the
    // products and a sixth of the conversions, at about one more bf16 rounding of error on W
    // and Qs, the same size as W0's and Qd's own).
    // W^T is on the chain's critical path (U, then the state update, need it): two accumulators
    // (S^T's hi and lo terms, or with SLO = 0 even and odd k steps) halve its dependent mma.sync.
    float w[kNtC][4], w2[kNtC][4], qs[kNtC][4];
#pragma unroll
    for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        w[nt][e] = 0.f;
        w2[nt][e] = 0.f;
        qs[nt][e] = 0.f;
      }
#if WYREC
    // W^T's accumulators start at V^T, so that they end at V^T - W^T = U'^T with no subtraction
    // or negation on the chain (the prepare stores -Kd). V^T's A-layout fragments straight from
    // the staged token rows by ldmatrix.trans (matrix m: tokens 16 ks + 8 (m >> 1) .., value columns
    // jw + 8 (m & 1) ..), before the products so that its latency hides behind them; rows past the
    // sequence masked to zero (stale shared memory may hold NaN, and 0 x NaN is NaN even where T'
    // is zero).
    {
      const int vcount = vlen - c * kC < kC ? vlen - c * kC : kC;
#pragma unroll
      for (int ks = 0; ks < kKsC; ++ks) {
        unsigned int vr[4];
        const int m = lane >> 3;
        ldmatrix_x4_trans(vr, smem0 + buf * kRStageBytes + kROffV + (ks * 16 + (m >> 1) * 8 + (lane & 7)) * kVRow +
                                  (jw + (m & 1) * 8) * 2);
        if (vcount < kC) {
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const int tk = ks * 16 + (r >> 1) * 8 + 2 * t4;
            if (tk >= vcount) vr[r] &= 0xffff0000u;
            if (tk + 1 >= vcount) vr[r] &= 0x0000ffffu;
          }
        }
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          w[2 * ks + (r >> 1)][2 * (r & 1)] = __uint_as_float(vr[r] << 16);
          w[2 * ks + (r >> 1)][2 * (r & 1) + 1] = __uint_as_float(vr[r] & 0xffff0000u);
        }
      }
    }
#endif
#pragma unroll
    for (int ks = 0; ks < kDw / 16; ++ks) {
      unsigned int ah[4];
#if SLO
      unsigned int al[4];
      split_bf16x2(s[2 * ks][0], s[2 * ks][1], ah[0], al[0]);
      split_bf16x2(s[2 * ks][2], s[2 * ks][3], ah[1], al[1]);
      split_bf16x2(s[2 * ks + 1][0], s[2 * ks + 1][1], ah[2], al[2]);
      split_bf16x2(s[2 * ks + 1][2], s[2 * ks + 1][3], ah[3], al[3]);
#else
      ah[0] = pack_bf16x2(s[2 * ks][0], s[2 * ks][1]);
      ah[1] = pack_bf16x2(s[2 * ks][2], s[2 * ks][3]);
      ah[2] = pack_bf16x2(s[2 * ks + 1][0], s[2 * ks + 1][1]);
      ah[3] = pack_bf16x2(s[2 * ks + 1][2], s[2 * ks + 1][3]);
#endif
#pragma unroll
      for (int nt = 0; nt < kNtC; ++nt) {
        unsigned int bw[2], bq[2];
#if KSPLIT == 1
        const int imm = 2 * (nt * 8 * kD + ((ks & 4) << 4));
        lds_b64(bw, xb[ks & 3] + kROffW + imm);
        lds_b64(bq, xb[ks & 3] + kROffQd + imm);
#else
        load_b_frag(bw, sW, kD, nt * 8, d0 + ks * 16, lane);
        load_b_frag(bq, sQd, kD, nt * 8, d0 + ks * 16, lane);
#endif
#if SLO
        mma_bf16(w[nt], ah, bw);
        mma_bf16(w2[nt], al, bw);
        mma_bf16(qs[nt], ah, bq);
        mma_bf16(qs[nt], al, bq);
#else
        mma_bf16((ks & 1) ? w2[nt] : w[nt], ah, bw);
        mma_bf16(qs[nt], ah, bq);
#endif
      }
    }
#pragma unroll
    for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) w[nt][e] += w2[nt][e];
#if KSPLIT > 1
    // Every warp of the group writes its partials and sums all of them in the same order, so the
    // group's warps hold bit-identical W^T and Qs^T (and so the same U).
    {
      float* xb = reinterpret_cast<float*>(smem + kROffX) + (c & 1) * (kRWarps * 32 * kXFloats);
#pragma unroll
      for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          xb[((warp * kXFloats) + nt * 4 + e) * 32 + lane] = w[nt][e];
          xb[((warp * kXFloats) + kXFloats / 2 + nt * 4 + e) * 32 + lane] = qs[nt][e];
        }
      __syncthreads();
      const int w0 = warp - kh;
#pragma unroll
      for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float sw = 0.f, sq = 0.f;
#pragma unroll
          for (int r = 0; r < kKs; ++r) {
            sw += r == kh ? w[nt][e] : xb[(((w0 + r) * kXFloats) + nt * 4 + e) * 32 + lane];
            sq += r == kh ? qs[nt][e] : xb[(((w0 + r) * kXFloats) + kXFloats / 2 + nt * 4 + e) * 32 + lane];
          }
          w[nt][e] = sw;
          qs[nt][e] = sq;
        }
    }
#endif
#endif  // KDA_WGMMA
#if WYREC == 2
    // WYREC 2: T' is folded into Kr2 and M2 (the prepare): U'^T enters the updates as it is.
#elif WYREC
    // U^T = U'^T T'^T: W^T's accumulators hold U'^T (above), as its bf16 rounding; T' as hi + lo
    // terms (two accumulators, no dependent pair).
    {
      unsigned int up[kKsC][4];
#pragma unroll
      for (int ks = 0; ks < kKsC; ++ks) {
        up[ks][0] = pack_bf16x2(w[2 * ks][0], w[2 * ks][1]);
        up[ks][1] = pack_bf16x2(w[2 * ks][2], w[2 * ks][3]);
        up[ks][2] = pack_bf16x2(w[2 * ks + 1][0], w[2 * ks + 1][1]);
        up[ks][3] = pack_bf16x2(w[2 * ks + 1][2], w[2 * ks + 1][3]);
      }
      const unsigned short* sThi = reinterpret_cast<const unsigned short*>(sb + kWsThi);
      const unsigned short* sTlo = reinterpret_cast<const unsigned short*>(sb + kWsTlo);
#pragma unroll
      for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          w[nt][e] = 0.f;
          w2[nt][e] = 0.f;
        }
#pragma unroll
      for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
        for (int ks = 0; ks < kKsC; ++ks)
          if (ks <= nt / 2) {
            unsigned int bh[2], bl[2];
            load_b_frag(bh, sThi, kC, nt * 8, ks * 16, lane);
            load_b_frag(bl, sTlo, kC, nt * 8, ks * 16, lane);
            mma_bf16(w[nt], up[ks], bh);
            mma_bf16(w2[nt], up[ks], bl);
          }
#pragma unroll
      for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) w[nt][e] += w2[nt][e];
    }
#else
    // U^T = U0^T - W^T, as hi + lo A fragments over the chunk's tokens (one read per pair). ULO 0
    // (knob): U^T enters the state update and out^T as its bf16 rounding alone (FLA's bf16 v_new),
    // the lo terms unused (the compiler drops them).
#pragma unroll
    for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int jl = jw + g8 + hf * 8, i = nt * 8 + 2 * t4;
#if UPREC == 32
        const float2 u = *reinterpret_cast<const float2*>(sU + swz(jl, i, kC, 4));
        w[nt][2 * hf] = u.x - w[nt][2 * hf];
        w[nt][2 * hf + 1] = u.y - w[nt][2 * hf + 1];
#else
        const unsigned int u = *reinterpret_cast<const unsigned int*>(sU + swz(jl, i, kC, 8));
        w[nt][2 * hf] = __uint_as_float(u << 16) - w[nt][2 * hf];
        w[nt][2 * hf + 1] = __uint_as_float(u & 0xffff0000u) - w[nt][2 * hf + 1];
#endif
      }
#endif  // WYREC
    unsigned int uh[kKsC][4], ul[kKsC][4];
#pragma unroll
    for (int ks = 0; ks < kKsC; ++ks) {
      split_bf16x2(w[2 * ks][0], w[2 * ks][1], uh[ks][0], ul[ks][0]);
      split_bf16x2(w[2 * ks][2], w[2 * ks][3], uh[ks][1], ul[ks][1]);
      split_bf16x2(w[2 * ks + 1][0], w[2 * ks + 1][1], uh[ks][2], ul[ks][2]);
      split_bf16x2(w[2 * ks + 1][2], w[2 * ks + 1][3], uh[ks][3], ul[ks][3]);
    }
#if KDA_WGMMA
    // S^T <- S^T diag(2^Gtot) + U^T Kr (one m64n128 wgmma a 16-token step and U term) and out^T =
    // Qs^T + U^T M^T (the whole C x C M: wgmma has no per-tile skip), both groups in flight.
#pragma unroll
    for (int nt = 0; nt < kD / 8; ++nt) {
      const float2 dec = *reinterpret_cast<const float2*>(sDec + nt * 8 + 2 * t4);
      s[nt][0] *= dec.x;
      s[nt][1] *= dec.y;
      s[nt][2] *= dec.x;
      s[nt][3] *= dec.y;
    }
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < kKsC; ++ks) {
      wgmma_n128(&s[0][0], uh[ks], wg_desc_at(dK, ks * 256));
#if ULO
      wgmma_n128(&s[0][0], ul[ks], wg_desc_at(dK, ks * 256));
#endif
    }
    wg_commit();
#pragma unroll
    for (int ks = 0; ks < kKsC; ++ks) {
      wgmma_nc(&qs[0][0], uh[ks], wg_desc_at(dMh, ks * 256));
#if ULO
      wgmma_nc(&qs[0][0], ul[ks], wg_desc_at(dMh, ks * 256));
#endif
      wgmma_nc(&qs[0][0], uh[ks], wg_desc_at(dMl, ks * 256));
    }
    wg_commit();
    wg_wait<0>();
#pragma unroll
    for (int nt = 0; nt < kD / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) wg_keep(s[nt][e]);
#pragma unroll
    for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) wg_keep(qs[nt][e]);
#endif  // KDA_WGMMA
    // out^T = Qs^T + U^T M^T (M lower triangular: token blocks up to the output tile's own), by
    // the group's first warp.
    if (kh == 0) {
#if !KDA_WGMMA
#pragma unroll
    for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
      for (int ks = 0; ks < kKsC; ++ks)
        if (ks <= nt / 2) {
          unsigned int bh[2], bl[2];
          load_b_frag(bh, sMhi, kC, nt * 8, ks * 16, lane);
          load_b_frag(bl, sMlo, kC, nt * 8, ks * 16, lane);
          mma_bf16(qs[nt], uh[ks], bh);
#if ULO
          mma_bf16(qs[nt], ul[ks], bh);
#endif
          mma_bf16(qs[nt], uh[ks], bl);
        }
#endif
#if KDA_OUT_STAGED
    // out^T's bf16 tile into this chunk's staging buffer, transposed to token rows by stmatrix
    // (four 8 x 8 matrices: n8 tiles nt, nt + 1 x value columns jw .. + 7, jw + 8 .. + 15); the
    // rows leave as 16-byte stores during the next chunk (flush_out).
    {
      const SmemAddr ob = smem0 + kROffO + (c & 1) * kOBufBytes;
      const int m = lane >> 3, mi = lane & 7;
#pragma unroll
      for (int nt = 0; nt < kNtC; nt += 2)
        stmatrix_x4_trans(ob + ((nt + (m >> 1)) * 8 + mi) * kORow + (jw + (m & 1) * 8) * 2,
                          pack_bf16x2(qs[nt][0], qs[nt][1]), pack_bf16x2(qs[nt][2], qs[nt][3]),
                          pack_bf16x2(qs[nt + 1][0], qs[nt + 1][1]), pack_bf16x2(qs[nt + 1][2], qs[nt + 1][3]));
    }
#else
    // Stores: lanes g8 and g8 ^ 1 swap one value so that each stores two adjacent value columns
    // of one token (even g8: token 2 t4, odd g8: token 2 t4 + 1).
    const int odd = g8 & 1;
#pragma unroll
    for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float v0 = qs[nt][2 * half], v1 = qs[nt][2 * half + 1];
        const float other = shfl_bfly(odd ? v0 : v1, 4);
        const int i = nt * 8 + 2 * t4 + odd, j = col0 + jw + g8 + 8 * half - odd;
        if (wout && i < count)
          store_bf16x2(a.out + ((t0 + i) * a.H + h) * (long long)kD + j, odd ? other : v0, odd ? v1 : other);
      }
#endif
    }
#if !KDA_WGMMA
    // S^T <- S^T diag(2^Gtot) + U^T Kr.
#pragma unroll
    for (int nt = 0; nt < kDw / 8; ++nt) {
      const float2 dec = *reinterpret_cast<const float2*>(sDec + d0 + nt * 8 + 2 * t4);
      s[nt][0] *= dec.x;
      s[nt][1] *= dec.y;
      s[nt][2] *= dec.x;
      s[nt][3] *= dec.y;
#pragma unroll
      for (int ks = 0; ks < kKsC; ++ks) {
        unsigned int bk[2];
        load_b_frag(bk, sKrT, kC, d0 + nt * 8, ks * 16, lane);
        mma_bf16(s[nt], uh[ks], bk);
#if ULO
        mma_bf16(s[nt], ul[ks], bk);
#endif
      }
    }
#endif
#if !STAGE
    __syncthreads();  // the next chunk's copies overwrite the only buffer
#endif
    rbuf = rbuf == kRBuffers - 1 ? 0 : rbuf + 1;
  }
  }
#if KDA_OUT_STAGED
  if (nchunks > 0 && wout) {  // the last chunk's out rows
    __syncthreads();  // its stmatrix
    flush_out(nchunks - 1, len - (nchunks - 1) * kC);
  }
#endif
#if SEQSPLIT > 1
  // Pass 1: S0_j or A_j's columns into the segment's block; pass 3: only the last segment's end
  // is the final state.
  if (pass == 1) {
#pragma unroll
    for (int nt = 0; nt < kDw / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = col0 + jw + g8 + (e >> 1) * 8, d = d0 + nt * 8 + 2 * t4 + (e & 1);
        segst[(long long)((amat ? kD : 0) + j) * kD + d] = s[nt][e];
      }
    return;
  }
  if (pass == 3 && seg != nseg - 1) return;
#endif
#if HAS_FINAL_STATE
#pragma unroll
  for (int nt = 0; nt < kDw / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int j = col0 + jw + g8 + (e >> 1) * 8, d = d0 + nt * 8 + 2 * t4 + (e & 1);
      a.final_state[sbase + (long long)j * kD + d] = s[nt][e];
    }
#endif
  (void)sbase;
}

// kda_fwd_seg_combine (SEQSPLIT > 1, between the recurrence's passes 1 and 3): per (sequence, head)
// and 8 value columns (a CTA of 256 threads, grid (N, H, 16)), the states entering the segments in
// order, E_1 = S0_0 (segment 0 ran from the initial state) and E_(j+1)^T = E_j^T X_j + S0_j^T, each
// written over S0_j^T in segment j's block, where pass 3's segment j + 1 reads it. The chain of
// P - 2 steps is serial, so each step's X_j (64 KB) is copied into shared memory with cp.async
// during the step before (two buffers); a step is then 128 x 4 fp32 FMA a thread from shared
// memory (H200: with X read from global memory in the loop, 11 us a step, 0.34 ms at 32 segments).
#define KDA_COMBINE_THREADS 256
enum : int {
  kCombineRows = 8,                                   // E^T rows (value columns) a CTA
  kCombineSmem = 2 * kD * kD * 4 + kCombineRows * kD * 4  // dynamic shared memory (KdaFwdOp's plan gives it)
};
__device__ __forceinline__ void kda_seg_combine_body(const Args& a, unsigned char* __restrict__ ws, int nseq, int nseg) {
  extern __shared__ __align__(16) unsigned char smem[];
  if (dynamic_smem_bytes() < (unsigned int)kCombineSmem) trap_now();
  const float* sx = reinterpret_cast<const float*>(smem);                        // X: two buffers
  float(*se)[kD] = reinterpret_cast<float(*)[kD]>(smem + 2 * kD * kD * 4);       // E_j^T's rows
  const int tid = threadIdx.x, row = tid / 32, c4 = (tid % 32) * 4;  // a warp a row: E broadcasts
  const long long chain = (long long)blockIdx.x * a.H + blockIdx.y;
  const int r0 = blockIdx.z * kCombineRows;
  float* const blocks = ws_seg(a, ws, nseq) + chain * (nseg - 1) * (long long)kSegRows * kD;
  const SmemAddr sx0 = smem_at(smem);
  // X_j into buffer j & 1: 16-byte copies, 16 a thread; one commit group a step (empty past the end).
  auto load_x = [&](int j) {
    if (j + 1 < nseg) {
      const float* x = blocks + (long long)j * kSegRows * kD + (long long)kD * kD;
#pragma unroll
      for (int i = 0; i < kD * kD / 4 / KDA_COMBINE_THREADS; ++i) {
        const int idx = tid + i * KDA_COMBINE_THREADS;
        cp_async16_at(sx0 + (j & 1) * (kD * kD * 4) + idx * 16, x + idx * 4);
      }
    }
    cp_async_commit();
  };
  load_x(1);
  // E_1 = S0_0: this thread's four values.
#pragma unroll
  for (int i = 0; i < 4; ++i) se[row][c4 + i] = blocks[(long long)(r0 + row) * kD + c4 + i];
  for (int j = 1; j + 1 < nseg; ++j) {
    load_x(j + 1);  // its buffer was last read in step j - 1, before that step's second barrier
    float* const dst = blocks + (long long)j * kSegRows * kD + (long long)(r0 + row) * kD + c4;
    float acc[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[i] = dst[i];  // S0_j^T
    cp_async_wait_group<1>();  // this thread's copies of X_j
    __syncthreads();           // everyone's, and E_j^T complete
    const float* x = sx + (j & 1) * kD * kD + c4;
#pragma unroll 8
    for (int m = 0; m < kD; ++m) {
      const float e = se[row][m];
      const float4 xv = *reinterpret_cast<const float4*>(x + m * kD);
      acc[0] += e * xv.x;
      acc[1] += e * xv.y;
      acc[2] += e * xv.z;
      acc[3] += e * xv.w;
    }
    __syncthreads();  // every read of E_j^T and of X_j's buffer is done
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      se[row][c4 + i] = acc[i];
      dst[i] = acc[i];  // E_(j+1)^T
    }
  }
  cp_async_wait_group<0>();
}
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
#if PGRID
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
  // v: read only with WYREC = 1 (the op passes it to every recurrence); nseg, pass: SEQSPLIT > 1.
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
