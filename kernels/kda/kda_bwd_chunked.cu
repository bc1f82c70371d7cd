// kda_bwd seed template (chunked): the Kimi Delta Attention backward through chunks of CHUNK
// tokens (docs/kda.md 7.3), the same gradients as the recurrent kda_bwd.cu with the token-serial
// work cut to one small matrix step per chunk. fp32 throughout; the products go through one
// primitive over shared memory (chunk_mm in the part chunked_bwd/chunk_mm.cuh: CUDA cores, or
// tensor cores with MMA 1; chunk_mm3 runs three of one shape with one epilogue), the simple form a search can rewrite (staging,
// fewer barriers). docs/kda.md 7.7: what limits it on the GPU.
//
// Compiled by NVRTC with the op's defines (KDA_GATE_SOFTPLUS, HAS_INITIAL_STATE, HAS_FINAL_STATE)
// and the knobs below. KdaBwdOp::launch_plan launches, in order (no atomics: every output is the
// same bit for bit from run to run):
//   kda_bwd_chunk_prepare  grid (slots, H): each token's normalised q, k, in-chunk cumulative
//                          log-decay G and beta's sigmoid; per chunk P, M and X = (I + L)^-1
//   kda_bwd_chunk_states   grid (N, H, 128 / BV): the state entering every chunk and Y = V - Kd S0
//                          (the forward, chunk by chunk, on a BV-column slice of the state)
//   kda_bwd_chunk_dstates  grid (N, H, 128 / BV): the state gradient leaving every chunk (the
//                          backward's recurrence, chunk by chunk from the last) and the
//                          initial-state gradient
//   kda_bwd_chunk_slices   grid (slots, H x 128 / BV): per chunk and value slice, dv and the
//                          slice's shares of the gradients of q, k (normalised), G, M, L and beta
//                          (SLICE_LOOP: grid (slots, H), every slice, one share a token)
//   kda_bwd_chunk_finish   grid (slots, H; not with FINISH_IN_SLICES, where the slices CTA runs
//                          it): sums the shares in slice order, the terms through
//                          P and M, the log-decays' gradient (a reverse cumulative sum) and the
//                          pre-processing's backward (docs/kda.md 7.2) to dq, dk, dg, dbeta; the
//                          chunk's sums of the dA_log and ddt_bias terms
//   kda_bwd_reduce         grid H: dA_log and ddt_bias, the chunk sums in slot order
// A slot is a chunk's place: sequence n's chunk c is slot n + bos_n / CHUNK + c, so T_total / CHUNK
// + N slots hold every chunk of any packing (a per-chunk CTA finds its chunk by bisection over
// cu_seqlens; a slot between sequences holds none and its sums are zeros).
//
// Knobs:
//   CHUNK  tokens per chunk (32 or 64)
//   BV     value columns per state slice (16, 32 or 64; CHUNK * BV <= 2048 for kda_bwd_chunk_slices'
//          shared memory): 128 / BV CTAs per chain in the chunk-serial kernels
//   MMA    0: chunk_mm on CUDA cores (fp32 FMA); 1: on tensor cores (mma.sync m16n8k16, each fp32
//          operand split into bf16 hi + lo and the product taken as hi hi + hi lo + lo hi in fp32:
//          about 2^-16 relative per product, near fp32's), the slices kernel's three C x K
//          products of the shares too (with MMA 0 one fused SIMT loop)
//   MMA_TERMS  with MMA 1, the bf16 terms of the tensor-core products: 3 (hi hi + hi lo + lo hi,
//          near fp32) or 1 (each operand rounded to bf16 once, FLA's precision: a third of the
//          mma.sync and no lo halves) for the chunk-serial kernels' products and the slices
//          kernel's share products, most of the multiply-adds. The slices kernel's U, dU and dW
//          (dbeta = sum dW Y cancels: one term left it 2.8e-2 off on large-uniform inputs, past
//          the gate's 1e-2) and the dM, dL rows keep three.
//   SLICE_LOOP  0: kda_bwd_chunk_slices runs a CTA per (chunk, head, value slice), each writing
//          its slice's share of the token gradients (128 / BV shares a token for the finish to
//          add); 1 (applies with MMA 1 and CHUNK 32, ignored otherwise): a CTA per (chunk, head)
//          walks the value slices in turn and sums the share products in registers, so each token
//          gets one share, its record words and exponentials are taken once, and the finish reads
//          a quarter of the words (BV 32)
//   CHAIN_PREFETCH  1 (applies with CHUNK 32, ignored otherwise): kda_bwd_chunk_states and
//          _dstates load the next chunk's record words (k, G) into registers while this chunk's
//          products run (chunked_bwd/chain_prefetch.cuh); 2: as 1, but _dstates loads them after
//          its last product (in flight across the step's last barrier), whose tiles then go in
//          blocks without spilling; 0: each step loads its own after the barrier that starts it
//   FINISH_IN_SLICES  1 (applies with SLICE_LOOP, ignored otherwise): the slices CTA of a (chunk,
//          head) runs the finish's body right after writing the chunk's share (read back from L2 by
//          the same CTA), and kda_bwd_chunk_finish is neither built nor launched
//   PREPARE_PAIRS  1: the prepare's P and M sums go to lanes pair by pair over the lower triangle
//          only; 0: a lane per (row, column), the lanes of the upper triangle idle (half of them)
//   MMA_BLOCK  with MMA 1: 1, a warp takes a block of up to 2 x 4 of its 16 x 8 output tiles at once
//          and builds each A and B fragment once per k step for the block (the SLICE_LOOP share
//          products: 2 x 4 tiles a product); 0, each tile builds its own. Every element gets the
//          same products in the same order: the same bits either way
//   CHAIN_THREADS  threads of the chunk-serial kernels' CTAs, 128 or 256 (applies with MMA 1 and
//          without CHAIN_PREFETCH, 128 otherwise): with 256 each warp of a step has half the tiles
//          and staging to do, and three CTAs an SM hold 24 warps instead of 12
//   FINISH_REGISTERS  1 (applies with CHUNK 32, ignored otherwise): the finish's walk over the
//          chunk's token pairs keeps its key channel's k, G and running sums in registers, unrolled
//          over the 32 tokens (the same operations in the same order); 0: in shared memory
//   FINISH_ROWS  1, 2 or 4 (above 1 without FINISH_REGISTERS): the finish's walk takes that many
//          rows (tokens) at a time, so a column's words and running sums are read and written once
//          for all of them (the same operations in the same order; chunked_bwd/finish.cuh)
//   FINISH_LEAN  1: the finish keeps no q and no P in shared memory: the walk reads each token's
//          q from its record (global memory, L2) a token ahead, its dq goes where its k was (dead
//          once its row is walked), and the dbeta loop reads P from the workspace; at CHUNK 32
//          74.8 KB instead of 95.5 KB, three CTAs an SM instead of two (the same values in the
//          same order: the same bits)
#define KDA_BWD_CHUNKED 1
#ifndef CHUNK
#define CHUNK 64
#endif
#ifndef BV
#define BV 32
#endif
#ifndef MMA
#define MMA 0
#endif
#ifndef MMA_TERMS
#define MMA_TERMS 3
#endif
#ifndef SLICE_LOOP
#define SLICE_LOOP 0
#endif
// SLICE_LOOP where it applies: its accumulators fit the registers with MMA 1 and CHUNK 32 only.
#define KDA_BWD_SLICE_LOOP (SLICE_LOOP && MMA && CHUNK == 32)
#ifndef CHAIN_PREFETCH
#define CHAIN_PREFETCH 0
#endif
// CHAIN_PREFETCH where it applies: a chunk's words in registers at CHUNK 32 only.
#define KDA_BWD_CHAIN_PREFETCH (CHUNK == 32 ? CHAIN_PREFETCH : 0)
#ifndef FINISH_IN_SLICES
#define FINISH_IN_SLICES 0
#endif
#ifndef PREPARE_PAIRS
#define PREPARE_PAIRS 0
#endif
// FINISH_IN_SLICES where it applies: with the slice loop, a slices CTA is a finish CTA's (chunk, head).
#define KDA_BWD_FINISH_IN_SLICES (FINISH_IN_SLICES && KDA_BWD_SLICE_LOOP)
#ifndef MMA_BLOCK
#define MMA_BLOCK 0
#endif
#ifndef CHAIN_THREADS
#define CHAIN_THREADS 128
#endif
// CHAIN_THREADS where it applies: tensor-core products, without CHAIN_PREFETCH (its words are a
// whole column's).
#define KDA_BWD_CHAIN_THREADS (MMA && !KDA_BWD_CHAIN_PREFETCH ? CHAIN_THREADS : 128)
#ifndef FINISH_REGISTERS
#define FINISH_REGISTERS 0
#endif
// FINISH_REGISTERS where it applies: the walk unrolled over 32 tokens.
#define KDA_BWD_FINISH_REGISTERS (FINISH_REGISTERS && CHUNK == 32)
#ifndef FINISH_ROWS
#define FINISH_ROWS 1
#endif
// FINISH_ROWS where it applies: the walk in shared memory (not FINISH_REGISTERS').
#define KDA_BWD_FINISH_ROWS (KDA_BWD_FINISH_REGISTERS ? 1 : FINISH_ROWS)
#ifndef FINISH_LEAN
#define FINISH_LEAN 0
#endif
// kda_bwd.cu's recurrence knobs, unused here.
#define CKPT 32
#define SUB 2
#define PREP 0
#include "kda_bwd.cu"

namespace kda_bwd {

// Copies of kda_bwd.cu's constants in this enumeration (arithmetic across enumerations is
// deprecated C++).
enum : int {
  kK = kD,  // K = V
  kB = kBv,
  kS = kSlices,
  kShares = KDA_BWD_SLICE_LOOP ? 1 : kSlices,  // shares of the token gradients the slices kernel writes
  kW = kWarps,
  kC = CHUNK,
  kT = kD,        // threads of every chunked CTA but the chunk-serial ones
  kTc = KDA_BWD_CHAIN_THREADS,  // threads of kda_bwd_chunk_states and _dstates CTAs
  kWc = kTc / 32,
  kDp = kK + 1,   // row strides of shared arrays (+1: a column read by consecutive threads of
  kBp = kB + 1,  // one warp, or one row by threads of several rows, spreads over the banks)
  kCp = kC + 1,
  kPrepRec = 3 * kK + 1,                 // a token-head's record: q, k normalised, G, beta's sigmoid
  kShareWords = 3 * kK + 2 * kC + 1,     // a slice's share: dq, dk, da (K each), rows of dM, dL, dbeta
  kMatWords = 3 * kC * kC,               // a chunk-head's X, M, P
};
static_assert(kC == 32 || kC == 64, "CHUNK: 32 or 64");
static_assert(kB == 16 || kB == 32 || kB == 64, "BV: 16, 32 or 64");
static_assert(kC * kB <= 2048, "CHUNK * BV: at most 2048 (kda_bwd_chunk_slices' shared memory)");
static_assert(MMA == 0 || MMA == 1, "MMA: 0 or 1");
static_assert(MMA_TERMS == 3 || (MMA == 1 && MMA_TERMS == 1), "MMA_TERMS: 3, or 1 with MMA 1");
static_assert(SLICE_LOOP == 0 || SLICE_LOOP == 1, "SLICE_LOOP: 0 or 1");
static_assert(CHAIN_PREFETCH >= 0 && CHAIN_PREFETCH <= 2, "CHAIN_PREFETCH: 0, 1 or 2");
static_assert(FINISH_IN_SLICES == 0 || FINISH_IN_SLICES == 1, "FINISH_IN_SLICES: 0 or 1");
static_assert(PREPARE_PAIRS == 0 || PREPARE_PAIRS == 1, "PREPARE_PAIRS: 0 or 1");
static_assert(MMA_BLOCK == 0 || MMA_BLOCK == 1, "MMA_BLOCK: 0 or 1");
static_assert(FINISH_REGISTERS == 0 || FINISH_REGISTERS == 1, "FINISH_REGISTERS: 0 or 1");
static_assert(FINISH_ROWS == 1 || FINISH_ROWS == 2 || FINISH_ROWS == 4, "FINISH_ROWS: 1, 2 or 4");
static_assert(FINISH_LEAN == 0 || FINISH_LEAN == 1, "FINISH_LEAN: 0 or 1");
static_assert(CHAIN_THREADS == 128 || CHAIN_THREADS == 256, "CHAIN_THREADS: 128 or 256");

struct ChunkArgs {
  const __nv_bfloat16* __restrict__ q;
  const __nv_bfloat16* __restrict__ k;
  const __nv_bfloat16* __restrict__ v;
  const __nv_bfloat16* __restrict__ g;
  const __nv_bfloat16* __restrict__ beta;
  const float* __restrict__ a_log;
  const float* __restrict__ dt_bias;
  const long long* __restrict__ cu_seqlens;  // null: fixed rows of T tokens
  const float* __restrict__ initial_state;   // [N, H, V, K]
  const __nv_bfloat16* __restrict__ d_out;   // [T_total, H, V]
  const float* __restrict__ d_final_state;   // [N, H, V, K]
  float* __restrict__ dq;
  float* __restrict__ dk;
  float* __restrict__ dv;
  float* __restrict__ dg;
  float* __restrict__ dbeta;
  float* __restrict__ d_initial_state;
  // The workspace (KdaBwdOp::chunked_layout): the states entering each chunk [H][slots][slices]
  // [K][BV] from word 0, the state gradients leaving each chunk (same layout) from dstate_off;
  // token records [T_total][H][kPrepRec] from prep_off; Y [T_total][H][V] from y_off; X, M, P
  // [H][slots][3][C][C] from mat_off; the slices' shares [slices][T_total][H][kShareWords] from
  // share_off; the chunk sums [slots][H][K + 1] from sums_off. Sequence n's chunk c has slot
  // n + bos / C + c; the slots = T_total / C + N hold every chunk, and the few between sequences
  // none (their sums are zeros).
  float* __restrict__ ws;
  long long T;  // tokens per sequence (fixed rows)
  int H, nseq;
  long long slots;
  float scale, lower_bound;
  long long dstate_off, prep_off, y_off, mat_off, share_off, sums_off;
};

// A chunk: its first token, token count (0: no chunk) and slot.
struct Chunk {
  long long t0;
  int count;
  long long slot;
};

__device__ __forceinline__ void sequence(const ChunkArgs& p, int n, long long& bos, long long& eos) {
  bos = p.cu_seqlens ? p.cu_seqlens[n] : (long long)n * p.T;
  eos = p.cu_seqlens ? p.cu_seqlens[n + 1] : bos + p.T;
}

// Sequence n's first slot.
__device__ __forceinline__ long long first_slot(const ChunkArgs& p, int n) {
  return n + (p.cu_seqlens ? p.cu_seqlens[n] : (long long)n * p.T) / kC;
}

// Sequence n's chunk c.
__device__ __forceinline__ Chunk chunk_at(const ChunkArgs& p, int n, long long c) {
  long long bos, eos;
  sequence(p, n, bos, eos);
  Chunk ch;
  ch.t0 = bos + c * kC;
  const long long left = eos - ch.t0;
  ch.count = left <= 0 ? 0 : (left < kC ? (int)left : kC);
  ch.slot = n + bos / kC + c;
  return ch;
}

// The chunk in a slot (count 0 for a slot between sequences): the last sequence whose first slot
// is at or before it, by bisection over cu_seqlens.
__device__ __forceinline__ Chunk chunk_in_slot(const ChunkArgs& p, long long slot) {
  int lo = 0, hi = p.nseq - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (first_slot(p, mid) <= slot) lo = mid;
    else hi = mid - 1;
  }
  return chunk_at(p, lo, slot - first_slot(p, lo));
}

__device__ __forceinline__ const float* record(const ChunkArgs& p, long long tok, int h) {
  return p.ws + p.prep_off + (tok * p.H + h) * (long long)kPrepRec;
}
// A state slice's place (states from word 0, their gradients from dstate_off).
__device__ __forceinline__ float* state_slice(const ChunkArgs& p, long long off, int h, long long slot, int z) {
  return p.ws + off + (((long long)h * p.slots + slot) * kS + z) * (long long)(kK * kB);
}
__device__ __forceinline__ float* mats(const ChunkArgs& p, int h, long long slot) {
  return p.ws + p.mat_off + ((long long)h * p.slots + slot) * (long long)kMatWords;
}
// Share z of token tok's gradients (head h; z < kShares); th = T_total H.
__device__ __forceinline__ float* share_of(const ChunkArgs& p, long long th, int z, long long tok, int h) {
  return p.ws + p.share_off + ((long long)z * th + tok * p.H + h) * (long long)kShareWords;
}
__device__ __forceinline__ long long token_heads(const ChunkArgs& p) {
  return (p.cu_seqlens ? p.cu_seqlens[p.nseq] : (long long)p.nseq * p.T) * p.H;
}

#include "chunked_bwd/chunk_mm.cuh"

// The chunk's decayed keys and queries from the token records, rows past the chunk's end zero:
// Kr = k e^(Gtot - G), with kd Kd = k e^G, with qd Qd = scale q e^G; egt [2][kK]: e^Gtot, Gtot.
// Thread i, column i % 128, tokens i / 128 + NT / 128 n (NT threads).
template <int NT = kT>
__device__ __forceinline__ void decayed(const ChunkArgs& p, const Chunk& ch, int h, float* kd, float* kr, float* qd,
                                        float* egt) {
  const int i = NT == kK ? threadIdx.x : threadIdx.x % kK, t0 = NT == kK ? 0 : threadIdx.x / kK;
  const float gtot = record(p, ch.t0 + ch.count - 1, h)[2 * kK + i];
  if (t0 == 0) {
    egt[i] = exp_r(gtot);
    egt[kK + i] = gtot;
  }
#pragma unroll 8
  for (int t = t0; t < kC; t += NT / kK) {
    float k = 0.f, q = 0.f, eg = 0.f, er = 0.f;
    if (t < ch.count) {
      const float* rec = record(p, ch.t0 + t, h);
      const float G = rec[2 * kK + i];
      k = rec[kK + i];
      q = rec[i];
      eg = exp_r(G);
      er = exp_r(gtot - G);
    }
    if (kd) kd[t * kDp + i] = k * eg;
    kr[t * kDp + i] = k * er;
    if (qd) qd[t * kDp + i] = p.scale * q * eg;
  }
}

// Kd = k e^G alone, rows past the chunk's end zero (the same values as decayed's). Thread i,
// column i % 128, tokens i / 128 + NT / 128 n.
template <int NT = kT>
__device__ __forceinline__ void decayed_keys(const ChunkArgs& p, const Chunk& ch, int h, float* kd) {
  const int i = NT == kK ? threadIdx.x : threadIdx.x % kK;
#pragma unroll 8
  for (int t = NT == kK ? 0 : threadIdx.x / kK; t < kC; t += NT / kK) {
    float v = 0.f;
    if (t < ch.count) {
      const float* rec = record(p, ch.t0 + t, h);
      v = rec[kK + i] * exp_r(rec[2 * kK + i]);
    }
    kd[t * kDp + i] = v;
  }
}

// Beta's sigmoid per token (0 past the end) and X (or also M) of the chunk, from the prepare (NT
// threads).
template <int NT = kT>
__device__ __forceinline__ void chunk_mats(const ChunkArgs& p, const Chunk& ch, int h, float* b, float* x, float* m) {
  const float* src = mats(p, h, ch.slot);
#pragma unroll 8
  for (int n = 0; n < kC * kC / NT; ++n) {  // fixed trip count, unrolled: loads in flight together
    const int e = threadIdx.x + n * NT;
    x[(e / kC) * kCp + e % kC] = src[e];
    if (m) m[(e / kC) * kCp + e % kC] = src[kC * kC + e];
  }
  for (int t = threadIdx.x; t < kC; t += NT) b[t] = t < ch.count ? record(p, ch.t0 + t, h)[3 * kK] : 0.f;
}

// A state slice from shared memory [kK][kBp] to its workspace place [kK][kB], consecutive threads
// on consecutive words (a row a thread would spread each store instruction over 32 lines). It reads
// other threads' rows: a barrier orders their writes before it. NT threads.
template <int NT = kT>
__device__ __forceinline__ void store_slice(float* dst, const float* src) {
#pragma unroll 8
  for (int n = 0; n < kK * kB / NT; ++n) {
    const int e = threadIdx.x + n * NT;
    dst[e] = src[(e / kB) * kBp + e % kB];
  }
}

// Rows [0, count) of a [kC][BV] slice of a bf16 [T_total][H][128] tensor, the others zero (NT
// threads).
template <int NT = kT>
__device__ __forceinline__ void load_rows(const ChunkArgs& p, const __nv_bfloat16* src, const Chunk& ch, int h, int z,
                                          float* dst) {
#pragma unroll 8
  for (int n = 0; n < kC * kB / NT; ++n) {
    const int e = threadIdx.x + n * NT, t = e / kB, j = e % kB;
    dst[t * kBp + j] = t < ch.count ? load_bf16(src + ((ch.t0 + t) * p.H + h) * kK + z * kB + j) : 0.f;
  }
}

// ---- kda_bwd_chunk_prepare ----
// Shared: q, k, G [kC][kDp]; P [kC][kCp]; b [kC]; X [kC][kCp].
__device__ __forceinline__ void chunk_prepare_body(const ChunkArgs& p, float* sm) {
  const int h = blockIdx.y, i = threadIdx.x, warp = i / 32, lane = i % 32;
  const Chunk ch = chunk_in_slot(p, blockIdx.x);
  if (ch.count == 0) return;
  float* qs = sm;
  float* ks = qs + kC * kDp;
  float* gs = ks + kC * kDp;
  float* ps = gs + kC * kDp;
  float* bs = ps + kC * kCp;
  float* xs = bs + kC;
  const float ea_log = exp_r(p.a_log[h]);
  // A token a warp (tokens warp, warp + 4, ...), channels lane + 32 c a lane: the norms' sums are
  // warp shuffles, no block barrier per token.
  for (int t = warp; t < ch.count; t += kW) {
    const long long e = (ch.t0 + t) * p.H + h;
    float q[4], k[4], sq[2] = {0.f, 0.f};
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int d = lane + 32 * c;
      q[c] = load_bf16(p.q + e * kK + d);
      k[c] = load_bf16(p.k + e * kK + d);
      sq[0] = fmaf(q[c], q[c], sq[0]);
      sq[1] = fmaf(k[c], k[c], sq[1]);
      gs[t * kDp + d] = log_decay(load_bf16(p.g + e * kK + d) + p.dt_bias[h * kK + d], ea_log, p.lower_bound);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      sq[0] += shfl_bfly(sq[0], o);
      sq[1] += shfl_bfly(sq[1], o);
    }
    const float rq = rsqrt_r(sq[0] + 1e-6f), rk = rsqrt_r(sq[1] + 1e-6f);
    float* rec = p.ws + p.prep_off + e * kPrepRec;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int d = lane + 32 * c;
      qs[t * kDp + d] = rec[d] = q[c] * rq;
      ks[t * kDp + d] = rec[kK + d] = k[c] * rk;
    }
    if (lane == 0) bs[t] = rec[3 * kK] = sigmoid(load_bf16(p.beta + e));
  }
  __syncthreads();
  // G: the in-chunk cumulative sum of the log-decays, a channel a thread.
  {
    float G = 0.f;
    for (int t = 0; t < ch.count; ++t) {
      G += gs[t * kDp + i];
      gs[t * kDp + i] = G;
      p.ws[p.prep_off + ((ch.t0 + t) * p.H + h) * kPrepRec + 2 * kK + i] = G;
    }
  }
  __syncthreads();
  // P_ij = sum_d k_id k_jd e^(G_id - G_jd) (i > j), M_ij = scale sum_d q_id k_jd e^(G_id - G_jd)
  // (i >= j); zero elsewhere and past the chunk's end.
  float* out = mats(p, h, ch.slot);
#if PREPARE_PAIRS
  // Only the pairs j <= i (kC (kC + 1) / 2 of them) go to lanes, none left idle by the upper
  // triangle; the upper triangle is zeros. Each pair's sum is the same expression as below.
  for (int e = i; e < kC * kC; e += kT) {
    const int r = e / kC, c = e % kC;
    if (c > r) ps[r * kCp + c] = out[2 * kC * kC + e] = out[kC * kC + e] = 0.f;
  }
  for (int pe = i; pe < kC * (kC + 1) / 2; pe += kT) {
    int r = (int)((sqrtf(8.f * (float)pe + 1.f) - 1.f) * 0.5f);  // row of the pe-th lower pair
    if ((r + 1) * (r + 2) / 2 <= pe) ++r;
    if (r * (r + 1) / 2 > pe) --r;
    const int c = pe - r * (r + 1) / 2, e = r * kC + c;
    float pk = 0.f, mq = 0.f;
    if (r < ch.count) {
      for (int d = 0; d < kK; ++d) {
        const float kj = ks[c * kDp + d] * exp_r(gs[r * kDp + d] - gs[c * kDp + d]);
        pk = fmaf(ks[r * kDp + d], kj, pk);
        mq = fmaf(qs[r * kDp + d], kj, mq);
      }
    }
    ps[r * kCp + c] = out[2 * kC * kC + e] = c < r ? pk : 0.f;
    out[kC * kC + e] = p.scale * mq;
  }
#else
  for (int e = i; e < kC * kC; e += kT) {
    const int r = e / kC, c = e % kC;
    float pk = 0.f, mq = 0.f;
    if (c <= r && r < ch.count) {
      for (int d = 0; d < kK; ++d) {
        const float kj = ks[c * kDp + d] * exp_r(gs[r * kDp + d] - gs[c * kDp + d]);
        pk = fmaf(ks[r * kDp + d], kj, pk);
        mq = fmaf(qs[r * kDp + d], kj, mq);
      }
    }
    ps[r * kCp + c] = out[2 * kC * kC + e] = c < r ? pk : 0.f;
    out[kC * kC + e] = c <= r ? p.scale * mq : 0.f;
  }
#endif
  __syncthreads();
  // X = (I + L)^-1 with L = diag(b) P strictly lower, a column a thread (forward substitution
  // down the column: X_rc = [r == c] - b_r sum_{c <= m < r} P_rm X_mc); thread i reads and writes
  // only its own column of xs.
  if (i < kC) {
    for (int r = 0; r < kC; ++r) {
      float x = 0.f;
      if (r == i) {
        x = 1.f;
      } else if (r > i && r < ch.count) {
        float s = 0.f;
        for (int m = i; m < r; ++m) s = fmaf(ps[r * kCp + m], xs[m * kCp + i], s);
        x = -bs[r] * s;
      }
      xs[r * kCp + i] = x;
      out[r * kC + i] = x;
    }
  }
}

#if KDA_BWD_CHAIN_PREFETCH
#include "chunked_bwd/chain_prefetch.cuh"
#endif

// ---- kda_bwd_chunk_states ----
// The forward on value columns [z BV, z BV + BV) of chain (n, h), chunk by chunk: stores the state
// entering each chunk and Y = V - Kd S0; then U = X diag(b) Y and S <- diag(e^Gtot) S + Kr^T U.
// Shared: S [kK][kBp]; Kd, Kr [kC][kDp]; V, Y, U [kC][kBp]; X [kC][kCp]; b [kC]; e^Gtot [kK].
__device__ __forceinline__ void chunk_states_body(const ChunkArgs& p, float* sm) {
  const int n = blockIdx.x, h = blockIdx.y, z = blockIdx.z, i = threadIdx.x;
  constexpr int NT = kTc, NW = kWc;
  float* S = sm;
  float* kd = S + kK * kBp;
  float* kr = kd + kC * kDp;
  float* vs = kr + kC * kDp;
  float* ys = vs + kC * kBp;
  float* us = ys + kC * kBp;
  float* xs = us + kC * kBp;
  float* bs = xs + kC * kCp;
  float* egt = bs + kC;
  const long long state = (((long long)n * p.H + h) * kK + z * kB) * kK;  // [n][h][col][row]
  for (int e = i; e < kK * kB; e += NT)  // row e % kK, column e / kK: consecutive threads, consecutive rows
    S[(e % kK) * kBp + e / kK] = HAS_INITIAL_STATE ? p.initial_state[state + e] : 0.f;
  __syncthreads();
  long long bos, eos;
  sequence(p, n, bos, eos);
  const long long chunks = (eos - bos + kC - 1) / kC;
#if KDA_BWD_CHAIN_PREFETCH
  ChainWords w;
  if (chunks > 0) load_chain_words(p, chunk_at(p, n, 0), h, w);
#endif
  for (long long c = 0; c < chunks; ++c) {
    const Chunk ch = chunk_at(p, n, c);
    store_slice<NT>(state_slice(p, 0, h, ch.slot, z), S);
#if KDA_BWD_CHAIN_PREFETCH
    stage_decayed(p, ch, h, w, kd, kr, nullptr, egt);
    if (c + 1 < chunks) load_chain_words(p, chunk_at(p, n, c + 1), h, w);
#else
    decayed<NT>(p, ch, h, kd, kr, nullptr, egt);
#endif
    chunk_mats<NT>(p, ch, h, bs, xs, nullptr);
    load_rows<NT>(p, p.v, ch, h, z, vs);
    __syncthreads();
    chunk_mm<kC, kB, kK, MMA_TERMS, NW>([&](int r, int x) { return kd[r * kDp + x]; }, [&](int x, int c2) { return S[x * kBp + c2]; },
                          [&](int r, int c2, float acc) { ys[r * kBp + c2] = vs[r * kBp + c2] - acc; });
    __syncthreads();
    for (int e = i; e < ch.count * kB; e += NT) {
      const int t = e / kB, j = e % kB;
      p.ws[p.y_off + ((ch.t0 + t) * p.H + h) * kK + z * kB + j] = ys[t * kBp + j];
    }
    chunk_mm<kC, kB, kC, MMA_TERMS, NW>([&](int r, int x) { return xs[r * kCp + x]; },
                                        [&](int x, int c2) { return bs[x] * ys[x * kBp + c2]; },
                                        [&](int r, int c2, float acc) { us[r * kBp + c2] = acc; });
    __syncthreads();
    // Each thread reads and writes only its own elements of S here.
    chunk_mm<kK, kB, kC, MMA_TERMS, NW>([&](int r, int x) { return kr[x * kDp + r]; }, [&](int x, int c2) { return us[x * kBp + c2]; },
                          [&](int r, int c2, float acc) { S[r * kBp + c2] = fmaf(egt[r], S[r * kBp + c2], acc); });
    __syncthreads();
  }
}

// ---- kda_bwd_chunk_dstates ----
// The backward's recurrence on value columns [z BV, z BV + BV) of chain (n, h), from the last chunk:
// stores the state gradient dS leaving each chunk, then dU = M^T dO + Kr dS, dY = diag(b) X^T dU
// and dS <- diag(e^Gtot) dS + Qd^T dO - Kd^T dY; the initial state's gradient is the last dS.
// Shared: dS [kK][kBp]; Qd, Kr (then Kd) [kC][kDp]; dO, dU, dY [kC][kBp]; X, M [kC][kCp]; b;
// e^Gtot. Kd takes Kr's place once dU's product is done: two [kC][kDp] arrays instead of three
// let three CTAs share an SM (at CHUNK 32, BV 32), so H = 96 x 4 chains run in one wave.
__device__ __forceinline__ void chunk_dstates_body(const ChunkArgs& p, float* sm) {
  const int n = blockIdx.x, h = blockIdx.y, z = blockIdx.z, i = threadIdx.x;
  constexpr int NT = kTc, NW = kWc;
  float* dS = sm;
  float* qd = dS + kK * kBp;
  float* kr = qd + kC * kDp;
  float* kd = kr;
  float* dO = kr + kC * kDp;
  float* du = dO + kC * kBp;
  float* dy = du + kC * kBp;
  float* xs = dy + kC * kBp;
  float* ms = xs + kC * kCp;
  float* bs = ms + kC * kCp;
  float* egt = bs + kC;
  const long long state = (((long long)n * p.H + h) * kK + z * kB) * kK;  // [n][h][col][row]
  for (int e = i; e < kK * kB; e += NT) dS[(e % kK) * kBp + e / kK] = HAS_FINAL_STATE ? p.d_final_state[state + e] : 0.f;
  __syncthreads();
  long long bos, eos;
  sequence(p, n, bos, eos);
  const long long chunks = (eos - bos + kC - 1) / kC;
#if KDA_BWD_CHAIN_PREFETCH
  ChainWords w;
  if (chunks > 0) load_chain_words(p, chunk_at(p, n, chunks - 1), h, w);
#endif
  for (long long c = chunks - 1; c >= 0; --c) {
    const Chunk ch = chunk_at(p, n, c);
    store_slice<NT>(state_slice(p, p.dstate_off, h, ch.slot, z), dS);
#if KDA_BWD_CHAIN_PREFETCH
    stage_decayed(p, ch, h, w, nullptr, kr, qd, egt);
#else
    decayed<NT>(p, ch, h, nullptr, kr, qd, egt);
#endif
    chunk_mats<NT>(p, ch, h, bs, xs, ms);
    load_rows<NT>(p, p.d_out, ch, h, z, dO);
    __syncthreads();
    chunk_mm<kC, kB, kC + kK, MMA_TERMS, NW>(
        [&](int r, int x) { return x < kC ? ms[x * kCp + r] : kr[r * kDp + x - kC]; },
        [&](int x, int c2) { return x < kC ? dO[x * kBp + c2] : dS[(x - kC) * kBp + c2]; },
        [&](int r, int c2, float acc) { du[r * kBp + c2] = acc; });
    __syncthreads();
#if KDA_BWD_CHAIN_PREFETCH
    stage_decayed_keys(ch, w, kd);  // over Kr, read last by dU's product; dY's does not read it
#if KDA_BWD_CHAIN_PREFETCH == 1
    if (c > 0) load_chain_words(p, chunk_at(p, n, c - 1), h, w);  // after: w held Kd's words
#endif
#else
    decayed_keys<NT>(p, ch, h, kd);  // over Kr, read last by dU's product; dY's does not read it
#endif
    chunk_mm<kC, kB, kC, MMA_TERMS, NW>([&](int r, int x) { return xs[x * kCp + r]; },
                                        [&](int x, int c2) { return du[x * kBp + c2]; },
                                        [&](int r, int c2, float acc) { dy[r * kBp + c2] = bs[r] * acc; });
    __syncthreads();
    // With the prefetched words in registers, single tiles (blocks spilled under 168 registers).
    chunk_mm<kK, kB, 2 * kC, MMA_TERMS, NW, KDA_BWD_CHAIN_PREFETCH == 1 ? 0 : 2>(
        [&](int r, int x) { return x < kC ? qd[x * kDp + r] : -kd[(x - kC) * kDp + r]; },
        [&](int x, int c2) { return x < kC ? dO[x * kBp + c2] : dy[(x - kC) * kBp + c2]; },
        [&](int r, int c2, float acc) { dS[r * kBp + c2] = fmaf(egt[r], dS[r * kBp + c2], acc); });
#if KDA_BWD_CHAIN_PREFETCH == 2
    if (c > 0) load_chain_words(p, chunk_at(p, n, c - 1), h, w);  // in flight across the barrier
#endif
    __syncthreads();
  }
#if HAS_INITIAL_STATE
  for (int e = i; e < kK * kB; e += NT) p.d_initial_state[state + e] = dS[(e % kK) * kBp + e / kK];
#endif
}

// kda_bwd_chunk_slices' shared arrays (both forms): S0, dS [kK][kBp]; Kr (then the Kr terms)
// [kC][kDp]; Y, U, dO, dU, dW [kC][kBp]; X, M [kC][kCp]; b; e^Gtot [2][kK]; the dQd Qd + dKd Kd
// terms [kC][kDp]. SLICE_LOOP 1 adds its sums after them.
struct SlicesSmem {
  float *s0, *dS, *kr, *ys, *us, *dO, *du, *dw, *xs, *ms, *bs, *egt, *ga, *end;
  __device__ __forceinline__ explicit SlicesSmem(float* sm)
      : s0(sm),
        dS(s0 + kK * kBp),
        kr(dS + kK * kBp),
        ys(kr + kC * kDp),
        us(ys + kC * kBp),
        dO(us + kC * kBp),
        du(dO + kC * kBp),
        dw(du + kC * kBp),
        xs(dw + kC * kBp),
        ms(xs + kC * kCp),
        bs(ms + kC * kCp),
        egt(bs + kC),
        ga(egt + 2 * kK),
        end(ga + kC * kDp) {}
};

// Value slice z's S0 and dS.
__device__ __forceinline__ void load_slice_states(const ChunkArgs& p, const Chunk& ch, int h, int z,
                                                  const SlicesSmem& L) {
  const int i = threadIdx.x;
  const float* keep = state_slice(p, 0, h, ch.slot, z);
  const float* dkeep = state_slice(p, p.dstate_off, h, ch.slot, z);
  // Fixed trip counts, unrolled: eight loads in flight a thread rather than one.
#pragma unroll 8
  for (int n = 0; n < kK * kB / kT; ++n) {
    const int e = i + n * kT;
    L.s0[(e / kB) * kBp + e % kB] = keep[e];
    L.dS[(e / kB) * kBp + e % kB] = dkeep[e];
  }
}

// Value slice z's rows of Y and dO.
__device__ __forceinline__ void load_slice_rows(const ChunkArgs& p, const Chunk& ch, int h, int z,
                                                const SlicesSmem& L) {
  const int i = threadIdx.x;
#pragma unroll
  for (int n = 0; n < kC * kB / kT; ++n) {
    const int e = i + n * kT, t = e / kB, j = e % kB;
    L.ys[t * kBp + j] = t < ch.count ? p.ws[p.y_off + ((ch.t0 + t) * p.H + h) * kK + z * kB + j] : 0.f;
  }
  load_rows(p, p.d_out, ch, h, z, L.dO);
}

// U = X diag(b) Y, dU = M^T dO + Kr dS, dW = X^T dU on the loaded slice, each behind a barrier
// (the first orders the loads before them).
__device__ __forceinline__ void slice_products(const SlicesSmem& L) {
  __syncthreads();
  chunk_mm<kC, kB, kC, 3>([&](int r, int x) { return L.xs[r * kCp + x]; },
                          [&](int x, int c2) { return L.bs[x] * L.ys[x * kBp + c2]; },
                          [&](int r, int c2, float acc) { L.us[r * kBp + c2] = acc; });
  __syncthreads();
  chunk_mm<kC, kB, kC + kK, 3>(
      [&](int r, int x) { return x < kC ? L.ms[x * kCp + r] : L.kr[r * kDp + x - kC]; },
      [&](int x, int c2) { return x < kC ? L.dO[x * kBp + c2] : L.dS[(x - kC) * kBp + c2]; },
      [&](int r, int c2, float acc) { L.du[r * kBp + c2] = acc; });
  __syncthreads();
  chunk_mm<kC, kB, kC, 3>([&](int r, int x) { return L.xs[x * kCp + r]; },
                          [&](int x, int c2) { return L.du[x * kBp + c2]; },
                          [&](int r, int c2, float acc) { L.dw[r * kBp + c2] = acc; });
  __syncthreads();
}

#if !KDA_BWD_SLICE_LOOP
// ---- kda_bwd_chunk_slices ----
// Chunk (n, c) of head h on value columns [z BV, z BV + BV), from the state S0 entering it and the
// gradient dS of the one leaving it: U = X diag(b) Y, dU = M^T dO + Kr dS, dW = X^T dU; writes dv =
// diag(b) dW and the slice's share of each token's gradients (docs/kda.md 7.3): of q and k through
// Qd, Kd and Kr, of the log-decays (see below), the rows of dM = dO U^T and dL = -dW U^T, and
// of beta through W = diag(b) Y.
// The log-decay a_m's share, da_m = sum_{t >= m} (dQd Qd + dKd Kd)_t + sum_{t < m} (dKr Kr)_t +
// e^Gtot (dS . S0), is written whole: G_t depends on a_m for m <= t and Gtot - G_t for m > t, so a
// suffix sum and a prefix sum. Folding the Kr terms into one reverse cumulative sum (-dKr Kr at
// each token, their total at the last) cancels large equal terms: an input spike there left
// errors of 20% on a saturated gate's small gradient.
// Shared: S0, dS [kK][kBp]; Kr (then the Kr terms), the dQd Qd + dKd Kd terms [kC][kDp]; Y, U,
// dO, dU, dW [kC][kBp]; X, M [kC][kCp]; b; e^Gtot. The terms stay here for the suffix sums rather
// than going through the share in global memory and back (a serial walk of dependent loads).
__device__ __forceinline__ void chunk_slices_body(const ChunkArgs& p, float* sm) {
  const int h = blockIdx.y / kS, z = blockIdx.y % kS, i = threadIdx.x;
  const Chunk ch = chunk_in_slot(p, blockIdx.x);
  if (ch.count == 0) return;
  const long long th = token_heads(p);
  const SlicesSmem L(sm);
  load_slice_states(p, ch, h, z, L);
  decayed(p, ch, h, nullptr, L.kr, nullptr, L.egt);
  chunk_mats(p, ch, h, L.bs, L.xs, L.ms);
  load_slice_rows(p, ch, h, z, L);
  slice_products(L);
  for (int e = i; e < ch.count * kB; e += kT) {
    const int t = e / kB, j = e % kB;
    p.dv[((ch.t0 + t) * p.H + h) * kK + z * kB + j] = L.bs[t] * L.dw[t * kBp + j];
  }
  // dQd = dO S0^T, dKd = -diag(b) dW S0^T, dKr = U dS^T, [kC][kK], over this slice's columns; each
  // element's shares of dq and dk, its dQd Qd + dKd Kd (into ga) and its dKr Kr (into Kr's place:
  // Kr was last read by dU's product).
#if MMA
  // The three products in one pass (chunk_mm3): each element's record words (G, k, q) are loaded
  // before its tile's products and used once, its exponentials taken once, its share words
  // stored once.
  struct Words {
    float G[4], k[4], q[4];
  };
  chunk_mm3<kC, kK, kB>(
      [&](int r, int x) { return L.dO[r * kBp + x]; }, [&](int x, int c2) { return L.s0[c2 * kBp + x]; },
      [&](int r, int x) { return -L.bs[r] * L.dw[r * kBp + x]; }, [&](int x, int c2) { return L.s0[c2 * kBp + x]; },
      [&](int r, int x) { return L.us[r * kBp + x]; }, [&](int x, int c2) { return L.dS[c2 * kBp + x]; },
      [&](int r0, int c) {
        Words w;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int t = r0 + 8 * (e >> 1), d = c + (e & 1);
          w.G[e] = w.k[e] = w.q[e] = 0.f;
          if (t < ch.count) {
            const float* rec = record(p, ch.t0 + t, h);
            w.G[e] = rec[2 * kK + d];
            w.k[e] = rec[kK + d];
            w.q[e] = rec[d];
          }
        }
        return w;
      },
      [&](const Words& w, int r0, int c, const float* aq, const float* akd, const float* akr) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int t = r0 + 8 * (e >> 1), d = c + (e & 1);
          if (t >= ch.count) continue;
          const float eg = exp_r(w.G[e]), er = exp_r(L.egt[kK + d] - w.G[e]);
          const float k = w.k[e], qs = p.scale * w.q[e];
          float* sh = share_of(p, th, z, ch.t0 + t, h);
          sh[d] = p.scale * eg * aq[e];
          sh[kK + d] = fmaf(akr[e], er, akd[e] * eg);
          L.ga[t * kDp + d] = fmaf(akd[e], k * eg, aq[e] * qs * eg);
          L.kr[t * kDp + d] = akr[e] * k * er;
        }
      });
#else
  // Four rows at a time a thread, the three products at once.
  {
    const int ct = i % 32, rt = i / 32;
    for (int rb = 0; rb < kC; rb += 16) {
      float aq[4][4], akd[4][4], akr[4][4];
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c2 = 0; c2 < 4; ++c2) aq[r][c2] = akd[r][c2] = akr[r][c2] = 0.f;
#pragma unroll 2
      for (int x = 0; x < kB; ++x) {
        float sv[4], dv[4];
#pragma unroll
        for (int c2 = 0; c2 < 4; ++c2) {
          sv[c2] = L.s0[(ct + 32 * c2) * kBp + x];
          dv[c2] = L.dS[(ct + 32 * c2) * kBp + x];
        }
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int t = rb + rt + 4 * r;
          const float o = L.dO[t * kBp + x], w = L.bs[t] * L.dw[t * kBp + x], u = L.us[t * kBp + x];
#pragma unroll
          for (int c2 = 0; c2 < 4; ++c2) {
            aq[r][c2] = fmaf(o, sv[c2], aq[r][c2]);
            akd[r][c2] = fmaf(-w, sv[c2], akd[r][c2]);
            akr[r][c2] = fmaf(u, dv[c2], akr[r][c2]);
          }
        }
      }
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int t = rb + rt + 4 * r;
        if (t >= ch.count) continue;
        const float* rec = record(p, ch.t0 + t, h);
        float* sh = share_of(p, th, z, ch.t0 + t, h);
#pragma unroll
        for (int c2 = 0; c2 < 4; ++c2) {
          const int d = ct + 32 * c2;
          const float G = rec[2 * kK + d], eg = exp_r(G), er = exp_r(L.egt[kK + d] - G);
          const float k = rec[kK + d], qs = p.scale * rec[d];
          sh[d] = p.scale * eg * aq[r][c2];
          sh[kK + d] = fmaf(akd[r][c2], eg, akr[r][c2] * er);
          L.ga[t * kDp + d] = fmaf(akd[r][c2], k * eg, aq[r][c2] * qs * eg);
          L.kr[t * kDp + d] = akr[r][c2] * k * er;
        }
      }
    }
  }
#endif
  __syncthreads();
  {
    // Key channel i: the Kr terms' exclusive prefix sums in place, then the suffix sums of the ga
    // terms from the last token, e^Gtot (dS . S0) over the slice's columns added to every token
    // (Gtot depends on every a_m of the chunk), into the share's dG word. Other threads of this
    // block wrote kr and ga before the barrier.
    float pre = 0.f;
    for (int t = 0; t < ch.count; ++t) {
      const float x = L.kr[t * kDp + i];
      L.kr[t * kDp + i] = pre;
      pre += x;
    }
    float suf = 0.f;
    for (int j = 0; j < kB; ++j) suf = fmaf(L.dS[i * kBp + j], L.s0[i * kBp + j], suf);
    suf *= L.egt[i];
    for (int t = ch.count - 1; t >= 0; --t) {
      suf += L.ga[t * kDp + i];
      share_of(p, th, z, ch.t0 + t, h)[2 * kK + i] = suf + L.kr[t * kDp + i];
    }
  }
  // The rows of dM = dO U^T (j <= i) and dL = -dW U^T (j < i).
  chunk_mm<kC, kC, kB, 3>([&](int r, int x) { return L.dO[r * kBp + x]; }, [&](int x, int c2) { return L.us[c2 * kBp + x]; },
                        [&](int r, int c2, float acc) {
                          if (r < ch.count && c2 <= r) share_of(p, th, z, ch.t0 + r, h)[3 * kK + c2] = acc;
                        });
  chunk_mm<kC, kC, kB, 3>([&](int r, int x) { return L.dw[r * kBp + x]; }, [&](int x, int c2) { return L.us[c2 * kBp + x]; },
                        [&](int r, int c2, float acc) {
                          if (r < ch.count && c2 < r) share_of(p, th, z, ch.t0 + r, h)[3 * kK + kC + c2] = -acc;
                        });
  // beta through W = diag(b) Y: dW . Y per token.
  if (i < ch.count) {
    float db = 0.f;
    for (int j = 0; j < kB; ++j) db = fmaf(L.dw[i * kBp + j], L.ys[i * kBp + j], db);
    share_of(p, th, z, ch.t0 + i, h)[3 * kK + 2 * kC] = db;
  }
}
#else  // KDA_BWD_SLICE_LOOP
__device__ __forceinline__ void chunk_finish_body(const ChunkArgs& p, float* sm);
#include "chunked_bwd/slices_loop.cuh"
#endif  // KDA_BWD_SLICE_LOOP

#include "chunked_bwd/finish.cuh"

// Dynamic shared memory of each entry, in floats (KdaBwdOp::chunked_plan sets the same).
enum : int {
  kPrepareSmem = 3 * kC * kDp + 2 * kC * kCp + kC,
  kStatesSmem = kK * kBp + 2 * kC * kDp + 3 * kC * kBp + kC * kCp + kC + 2 * kK,
  kDstatesSmem = kK * kBp + 2 * kC * kDp + 3 * kC * kBp + 2 * kC * kCp + kC + 2 * kK,
  kFinishSmem = (FINISH_LEAN ? 4 : 5) * kC * kDp + (FINISH_LEAN ? 2 : 3) * kC * kCp + 2 * kC + 4 * kW,
  kSlicesOwnSmem = 2 * kK * kBp + 2 * kC * kDp + 5 * kC * kBp + 2 * kC * kCp + kC + 2 * kK +
                   (KDA_BWD_SLICE_LOOP ? 2 * kC * kCp : 0),  // + the dM, dL sums
  kSlicesSmem = KDA_BWD_FINISH_IN_SLICES && kFinishSmem > kSlicesOwnSmem ? kFinishSmem : kSlicesOwnSmem,

  kSmemLimit = 227 * 1024 / 4,  // an sm_90 CTA's most
};
static_assert(kPrepareSmem <= kSmemLimit && kStatesSmem <= kSmemLimit && kDstatesSmem <= kSmemLimit &&
                  kSlicesSmem <= kSmemLimit && kFinishSmem <= kSmemLimit,
              "shared memory");

}  // namespace kda_bwd

#ifndef KDA_HOST_EMULATION
#define KDA_BWD_CHUNK_ENTRY(name, body) KDA_BWD_CHUNK_ENTRY_BOUNDS(name, body, __launch_bounds__(kda_bwd::kT))
#define KDA_BWD_CHUNK_ENTRY_BOUNDS(name, body, bounds)                                                                  \
  extern "C" __global__ void bounds name(                                                                             \
      const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k, const __nv_bfloat16* __restrict__ v,  \
      const __nv_bfloat16* __restrict__ g, const __nv_bfloat16* __restrict__ beta, const float* __restrict__ a_log,   \
      const float* __restrict__ dt_bias, const long long* __restrict__ cu_seqlens,                                    \
      const float* __restrict__ initial_state, const __nv_bfloat16* __restrict__ d_out,                               \
      const float* __restrict__ d_final_state, float* __restrict__ dq, float* __restrict__ dk,                        \
      float* __restrict__ dv, float* __restrict__ dg, float* __restrict__ dbeta,                                      \
      float* __restrict__ d_initial_state, float* __restrict__ ws, long long T, int H, int nseq,                     \
      long long slots, float scale, float lower_bound, long long dstate_off, long long prep_off, long long y_off,     \
      long long mat_off, long long share_off, long long sums_off) {                                                   \
    extern __shared__ float smem[];                                                                                   \
    kda_bwd::body({q,     k,           v,          g,        beta,    a_log,   dt_bias,  cu_seqlens,                \
                   initial_state, d_out, d_final_state, dq,   dk,      dv,      dg,       dbeta,                     \
                   d_initial_state, ws,  T,            H,      nseq,  slots, scale,                            \
                   lower_bound,   dstate_off, prep_off, y_off, mat_off, share_off, sums_off},                         \
                  smem);                                                                                              \
  }
KDA_BWD_CHUNK_ENTRY(kda_bwd_chunk_prepare, chunk_prepare_body)
#if KDA_BWD_CHAIN_PREFETCH || (MMA && MMA_BLOCK) || KDA_BWD_CHAIN_THREADS != 128
// Three CTAs an SM (their shared memory allows it), so the 384 chains of H = 96 x four slices run
// in one wave: the prefetched words and the blocks' fragments must fit 168 registers a thread (85
// with 256 threads).
KDA_BWD_CHUNK_ENTRY_BOUNDS(kda_bwd_chunk_states, chunk_states_body, __launch_bounds__(kda_bwd::kTc, 3))
KDA_BWD_CHUNK_ENTRY_BOUNDS(kda_bwd_chunk_dstates, chunk_dstates_body, __launch_bounds__(kda_bwd::kTc, 3))
#else
KDA_BWD_CHUNK_ENTRY(kda_bwd_chunk_states, chunk_states_body)
KDA_BWD_CHUNK_ENTRY(kda_bwd_chunk_dstates, chunk_dstates_body)
#endif
KDA_BWD_CHUNK_ENTRY(kda_bwd_chunk_slices, chunk_slices_body)
#if !KDA_BWD_FINISH_IN_SLICES
KDA_BWD_CHUNK_ENTRY(kda_bwd_chunk_finish, chunk_finish_body)
#endif
#undef KDA_BWD_CHUNK_ENTRY
#undef KDA_BWD_CHUNK_ENTRY_BOUNDS
#endif  // KDA_HOST_EMULATION
