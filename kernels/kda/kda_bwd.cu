// kda_bwd seed template (recurrent): the Kimi Delta Attention backward, token by token
// (docs/kda.md section 7). From q, k, v, g, the beta logits, A_log, dt_bias, the optional initial
// state, the output gradient dO and the optional final-state gradient, the gradients of q, k, v,
// g, the beta logits, A_log, dt_bias and the initial state (all fp32).
//
// Compiled by NVRTC (device code only) with the op's defines (KDA_GATE_SOFTPLUS,
// HAS_INITIAL_STATE, HAS_FINAL_STATE) and the knobs below. KdaBwdOp::launch_plan
// (kernels/kda/kda_bwd_op.cpp) launches three entries in order (four with PREP); none uses
// atomics, so every output is the same bit for bit from run to run (the gate checks it):
//   kda_bwd_prepare    (PREP = 1 only) grid (T_total / 32 chunks, H), 128 threads: each token's
//                      normalised q and k, decay e^a and beta's sigmoid, saved in the workspace
//                      for the recurrence, which then reads them instead of recomputing them
//                      (with their block reduction) at every step of every replay and slice.
//   kda_bwd_recurrent  grid (N sequences, H heads, 128 / BV value slices), 128 threads: thread i
//                      holds key row i of the chain's state slice S[i][z BV .. z BV + BV) and of
//                      its gradient. (1) The forward over the sequence, keeping the state entering
//                      every CKPT-th token in the workspace; (2) per checkpoint segment, last
//                      first, and per SUB tokens of it, last first: the forward again from the
//                      segment's checkpoint, keeping the state entering each of the SUB tokens in
//                      the thread's local memory, then those tokens backwards (docs/kda.md 7.1).
//                      dv and the initial-state gradient are complete per slice (a value column
//                      needs only its own); the gradients of the normalised q and k, of the
//                      log-decay and of beta sum over every column, so each slice writes its
//                      share to its own part of the workspace.
//   kda_bwd_finish     grid (T_total / 32 chunks, H), 128 threads: per token of its chunk, sums
//                      the slices' shares in slice order and takes them through the fused
//                      pre-processing (docs/kda.md 7.2) to dq, dk, dg and dbeta; writes the
//                      chunk's sums of the dA_log and ddt_bias terms to the workspace.
//   kda_bwd_reduce     grid H, 128 threads: dA_log and ddt_bias, the chunk sums in chunk order.
//
// Knobs (each has a default here that matches the op's):
//   BV    value columns per CTA (16 or 32: at most 8 slices' shares fit the workspace; the fp64
//         reference runs 64)
//   CKPT  tokens between the states the forward pass keeps (32, 64 or 128; the workspace holds
//         T_total / 32 + N of them per head)
//   SUB   tokens replayed into local memory at once (2 ... 16; SUB * BV <= 256 floats a thread)
//   PREP  0: the recurrence recomputes each token's pre-processing at every step; 1: a prepare
//         kernel saves it once (3 x 128 + 1 words a token-head of workspace)
//
// This is the simple correct seed (fp32 on CUDA cores, a block-wide reduction per token); the
// chunked algorithm of docs/kda.md 7.3 is the direction for the search.
//
// With KDA_BWD_REFERENCE defined, the same algorithm in fp64 with exact math (exp, log1p, 1 / sqrt,
// the sigmoids' slopes without the log-space branch) and entries named ptxevo_ref_*: the op's
// device reference (KdaBwdOp::device_reference_source), which the engine trusts only after it
// agreed with the host's fp64 backward on the spec's small shapes.
#ifdef KDA_BWD_REFERENCE
typedef double real;
typedef unsigned short __nv_bfloat16;  // raw bits: the reference is built without cuda_bf16.h
#define KDA_BWD_ENTRY(name) ptxevo_ref_##name
#else
typedef float real;
#include <cuda_bf16.h>
#define KDA_BWD_ENTRY(name) name
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
#ifndef BV
#define BV 16
#endif
#ifndef CKPT
#define CKPT 64
#endif
#ifndef SUB
#define SUB 8
#endif
#ifndef PREP
#define PREP 0
#endif

namespace kda_bwd {

// Compile-time constants as enumerators: namespace-scope constexpr variables would be emitted as
// .global variables in the PTX, and a candidate must have no device globals.
enum : int {
  kD = 128,  // K = V; also the threads of a CTA (one key row each)
  kBv = BV,
  kSlices = kD / BV,
  kCkpt = CKPT,
  kSub = SUB,
  kWarps = kD / 32,
  kFinishTokens = 32,  // tokens per kda_bwd_finish (and kda_bwd_prepare) CTA (KdaBwdOp::kFinishTokens)
  kPrepWords = 3 * kD + 1,  // a token-head's saved pre-processing: q, k normalised, e^a; beta's sigmoid
};

#if defined(KDA_BWD_REFERENCE) || defined(KDA_BWD_CHUNKED)
static_assert(kBv == 16 || kBv == 32 || kBv == 64, "BV: 16, 32 or 64");
#else
static_assert(kBv == 16 || kBv == 32, "BV: 16 or 32");
#endif
static_assert(kCkpt == 32 || kCkpt == 64 || kCkpt == 128, "CKPT: 32, 64 or 128");
static_assert(kSub >= 2 && kSub <= 16 && kSub <= kCkpt, "SUB: 2 ... 16");
static_assert(kSub * kBv <= 256, "SUB * BV: at most 256 floats of local memory a thread");

// The PTX primitives. kernels/tests/kda_host_emulation.hpp defines KDA_HOST_EMULATION and
// supplies CPU versions of these, so the rest of this file runs on the CPU against the reference.
#ifdef KDA_BWD_REFERENCE
__device__ __forceinline__ double load_bf16(const __nv_bfloat16* p) { return __uint_as_float((unsigned int)*p << 16); }
__device__ __forceinline__ double shfl_bfly(double v, int lane_mask) { return __shfl_xor_sync(0xffffffffu, v, lane_mask); }
__device__ __forceinline__ double fma_r(double a, double b, double c) { return fma(a, b, c); }
__device__ __forceinline__ double exp_r(double x) { return exp(x); }
__device__ __forceinline__ double rsqrt_r(double x) { return 1.0 / sqrt(x); }
__device__ __forceinline__ double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }
// v s (1 - s) with s = sigmoid(z), as the host's fp64 backward computes it.
__device__ __forceinline__ double times_sigmoid_slope(double v, double z) { return v * sigmoid(z) * sigmoid(-z); }
__device__ __forceinline__ double softplus(double x) { return x > 20.0 ? x : log1p(exp(x)); }
#else
#ifndef KDA_HOST_EMULATION
#include "../common/fast_math.cuh"
#endif  // KDA_HOST_EMULATION

#define KDA_LOG2E 1.4426950408889634f
#define KDA_LN2 0.6931471805599453f

__device__ __forceinline__ float fma_r(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ float exp_r(float x) { return ex2(x * KDA_LOG2E); }
__device__ __forceinline__ float rsqrt_r(float x) { return rsqrt(x); }
__device__ __forceinline__ float sigmoid(float z) { return rcp(1.f + ex2(-z * KDA_LOG2E)); }
// v s (1 - s) with s = sigmoid(z), the chain rule through a sigmoid. Not 1 - s (it rounds to 0 in
// fp32 for z > 17, where the slope is still e^-|z|); and from |z| = 40 in log space, since e^-|z|
// leaves fp32's normal range at 87 while the product may not ((1 + e^-|z|)^2 rounds to 1 there).
__device__ __forceinline__ float times_sigmoid_slope(float v, float z) {
  const float az = fabsf(z);
  if (az < 40.f) return v * sigmoid(z) * sigmoid(-z);
  if (v == 0.f) return 0.f;
  const float m = ex2(lg2(fabsf(v)) - az * KDA_LOG2E);
  return v < 0.f ? -m : m;
}
__device__ __forceinline__ float softplus(float x) { return x > 20.f ? x : KDA_LN2 * lg2(1.f + ex2(x * KDA_LOG2E)); }
#endif  // KDA_BWD_REFERENCE

// The gate (docs/kda.md 1.2): log-decay a <= 0 from x = g + dt_bias, ea = exp(A_log).
__device__ __forceinline__ real log_decay(real x, real ea, real lower_bound) {
#if KDA_GATE_SOFTPLUS
  (void)lower_bound;
  return -ea * softplus(x);
#else
  return lower_bound * sigmoid(ea * x);
#endif
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
  const __nv_bfloat16* __restrict__ d_out;   // [T_total, H, V]
  const float* __restrict__ d_final_state;   // [N, H, V, K]
  real* __restrict__ dq;                     // [T_total, H, K]
  real* __restrict__ dk;                     // [T_total, H, K]
  real* __restrict__ dv;                     // [T_total, H, V]
  real* __restrict__ dg;                     // [T_total, H, K]
  real* __restrict__ dbeta;                  // [T_total, H] (of the logits)
  real* __restrict__ da_log;                 // [H]
  real* __restrict__ ddt_bias;               // [H, K]
  real* __restrict__ d_initial_state;        // [N, H, V, K]
  // The workspace (fp32 words; KdaBwdOp::workspace_words): checkpoints [H][T_total / 32 + N]
  // [slices][K][BV] from word 0; the slices' shares from part_off: [slices][dq, dk, da]
  // [T_total][H][K], then the dbeta shares [slices][T_total][H]; the chunk sums from sums_off:
  // [chunks][H][K ddt_bias terms, 1 dA_log term].
  real* __restrict__ ws;
  long long T;  // tokens per sequence (fixed rows); kda_bwd_finish: T_total
  int H;
  real scale, lower_bound;
  long long part_off, sums_off;
  long long prep_off;  // PREP: [T_total][H][kPrepWords] from here
};

// Where slice z's share of quantity w (0: dq, 1: dk, 2: da) of token-head row e (tok H + h) lies,
// and its dbeta share, for `th` = T_total H token-heads.
__device__ __forceinline__ real* share(const Args& p, int z, int w, long long th, long long e) {
  return p.ws + p.part_off + ((long long)(z * 3 + w) * th + e) * kD;
}
__device__ __forceinline__ real* beta_share(const Args& p, int z, long long th, long long e) {
  return p.ws + p.part_off + (long long)kSlices * 3 * th * kD + (long long)z * th + e;
}

// Sums x[0 .. M) over the CTA's 128 threads; every thread gets the sums. `red` holds kWarps * M
// floats of shared memory.
template <int M>
__device__ __forceinline__ void block_sum(real (&x)[M], real* red) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x[m] += shfl_bfly(x[m], o);
  }
  if (lane == 0) {
#pragma unroll
    for (int m = 0; m < M; ++m) red[warp * M + m] = x[m];
  }
  __syncthreads();
#pragma unroll
  for (int m = 0; m < M; ++m) {
    real s = real(0);
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += red[w * M + m];
    x[m] = s;
  }
  __syncthreads();
}

// One token, as thread i (key row i) sees it: the normalised q_i, k_i, the decay e^(a_i), beta and
// this slice's columns of v.
struct Token {
  real q, k, ea, b;
  real v[kBv];
};

__device__ __forceinline__ Token load_token(const Args& p, long long tok, int h, int z, real dtb, real ea_log,
                                            real* red) {
  const int i = threadIdx.x;
  const long long row = (tok * p.H + h) * (long long)kD;
  Token t;
#if PREP
  (void)dtb, (void)ea_log, (void)red;
  const real* saved = p.ws + p.prep_off + (tok * p.H + h) * (long long)kPrepWords;
  t.q = saved[i];
  t.k = saved[kD + i];
  t.ea = saved[2 * kD + i];
  t.b = saved[3 * kD];
#else
  const real q = load_bf16(p.q + row + i), k = load_bf16(p.k + row + i), g = load_bf16(p.g + row + i);
  real sq[2] = {q * q, k * k};
  block_sum<2>(sq, red);
  t.q = q * rsqrt_r(sq[0] + real(1e-6));
  t.k = k * rsqrt_r(sq[1] + real(1e-6));
  t.ea = exp_r(log_decay(g + dtb, ea_log, p.lower_bound));
  t.b = sigmoid(load_bf16(p.beta + tok * p.H + h));
#endif
#pragma unroll
  for (int j = 0; j < kBv; ++j) t.v[j] = load_bf16(p.v + row + z * kBv + j);
  return t;
}

// S <- Diag(e^a) S;  r = v - S^T k;  S <- S + beta k r^T (row i of the slice).
__device__ __forceinline__ void forward_step(const Token& t, real (&s)[kBv], real* red) {
  real ks[kBv];
#pragma unroll
  for (int j = 0; j < kBv; ++j) {
    s[j] *= t.ea;
    ks[j] = s[j] * t.k;
  }
  block_sum<kBv>(ks, red);
#pragma unroll
  for (int j = 0; j < kBv; ++j) s[j] = fma_r(t.b * t.k, t.v[j] - ks[j], s[j]);
}

// The chain's first checkpoint slot: sequence n's segments follow those of the sequences before
// it, floor(bos / CKPT) + n of them at most, within T_total / 32 + N slots for any CKPT >= 32.
__device__ __forceinline__ long long slot_base(long long bos, int n) { return bos / kCkpt + n; }

__device__ __forceinline__ real* checkpoint(const Args& p, int h, int z, long long slot, long long slots) {
  return p.ws + (((long long)h * slots + slot) * kSlices + z) * (long long)(kD * kBv) + threadIdx.x * kBv;
}

__device__ __forceinline__ void recurrent_body(const Args& p, int nseq, real* red) {
  const int n = blockIdx.x, h = blockIdx.y, z = blockIdx.z, i = threadIdx.x;
  const long long bos = p.cu_seqlens ? p.cu_seqlens[n] : (long long)n * p.T;
  const long long eos = p.cu_seqlens ? p.cu_seqlens[n + 1] : bos + p.T;
  const long long total = p.cu_seqlens ? p.cu_seqlens[nseq] : (long long)nseq * p.T;
  const long long slots = total / 32 + nseq;
  const real dtb = p.dt_bias[h * kD + i], ea_log = exp_r(p.a_log[h]);
  const long long state = (((long long)n * p.H + h) * kD + z * kBv) * kD + i;  // [n][h][col][row i]

  // (1) The forward, keeping the state entering every CKPT-th token.
  real s[kBv];
#pragma unroll
  for (int j = 0; j < kBv; ++j) s[j] = HAS_INITIAL_STATE ? p.initial_state[state + (long long)j * kD] : real(0);
  for (long long tok = bos; tok < eos; ++tok) {
    if ((tok - bos) % kCkpt == 0) {
      real* c = checkpoint(p, h, z, slot_base(bos, n) + (tok - bos) / kCkpt, slots);
#pragma unroll
      for (int j = 0; j < kBv; ++j) c[j] = s[j];
    }
    const Token t = load_token(p, tok, h, z, dtb, ea_log, red);
    forward_step(t, s, red);
  }

  // (2) Backwards, a segment and SUB tokens of it at a time.
  real ds[kBv];
#pragma unroll
  for (int j = 0; j < kBv; ++j) ds[j] = HAS_FINAL_STATE ? p.d_final_state[state + (long long)j * kD] : real(0);
  const long long segments = (eos - bos + kCkpt - 1) / kCkpt;
  for (long long seg = segments - 1; seg >= 0; --seg) {
    const long long s0 = bos + seg * kCkpt, s1 = s0 + kCkpt < eos ? s0 + kCkpt : eos;
    const real* c = checkpoint(p, h, z, slot_base(bos, n) + seg, slots);
    for (long long u1 = s1; u1 > s0;) {
      const long long u0 = u1 - kSub > s0 ? u1 - kSub : s0;
      // The states entering tokens u0 .. u1 - 1, replayed from the checkpoint.
      real kept[kSub][kBv];
#pragma unroll
      for (int j = 0; j < kBv; ++j) s[j] = c[j];
      for (long long tok = s0; tok < u1; ++tok) {
        if (tok >= u0) {
#pragma unroll
          for (int j = 0; j < kBv; ++j) kept[tok - u0][j] = s[j];
        }
        const Token t = load_token(p, tok, h, z, dtb, ea_log, red);
        forward_step(t, s, red);
      }
      for (long long tok = u1 - 1; tok >= u0; --tok) {
        const Token t = load_token(p, tok, h, z, dtb, ea_log, red);
        const long long row = (tok * p.H + h) * (long long)kD;
        real sp[kBv], d_o[kBv], x[2 * kBv];  // x: k^T S' (r), then k^T dS (dr / beta)
#pragma unroll
        for (int j = 0; j < kBv; ++j) {
          sp[j] = kept[tok - u0][j] * t.ea;
          d_o[j] = load_bf16(p.d_out + row + z * kBv + j);
          ds[j] = fma_r(p.scale * t.q, d_o[j], ds[j]);  // o_t = scale S_t^T q_t
          x[j] = sp[j] * t.k;
          x[kBv + j] = ds[j] * t.k;
        }
        block_sum<2 * kBv>(x, red);
        real dq = real(0), dk = real(0), da = real(0), db = real(0);
#pragma unroll
        for (int j = 0; j < kBv; ++j) {
          const real r = t.v[j] - x[j];
          const real st = fma_r(t.b * t.k, r, sp[j]);  // S_t
          const real dr = t.b * x[kBv + j];
          dq = fma_r(st, d_o[j], dq);
          db = fma_r(r, x[kBv + j], db);
          dk = fma_r(t.b * ds[j], r, dk);
          dk = fma_r(-sp[j], dr, dk);
          const real dsp = fma_r(-t.k, dr, ds[j]);  // dS'
          da = fma_r(dsp, sp[j], da);
          ds[j] = dsp * t.ea;
          if (i == j) p.dv[row + z * kBv + j] = dr;
        }
        const long long th = total * p.H, e = tok * p.H + h;
        share(p, z, 0, th, e)[i] = p.scale * dq;
        share(p, z, 1, th, e)[i] = dk;
        share(p, z, 2, th, e)[i] = da;
        if (i == 0) *beta_share(p, z, th, e) = db;
      }
      u1 = u0;
    }
  }
#if HAS_INITIAL_STATE
#pragma unroll
  for (int j = 0; j < kBv; ++j) p.d_initial_state[state + (long long)j * kD] = ds[j];
#endif
}

// Back through the pre-processing (docs/kda.md 7.2), for the tokens of chunk blockIdx.x of head
// blockIdx.y (p.T is T_total here).
__device__ __forceinline__ void finish_body(const Args& p, real* red) {
  const int h = blockIdx.y, i = threadIdx.x;
  const long long t0 = (long long)blockIdx.x * kFinishTokens;
  const long long t1 = t0 + kFinishTokens < p.T ? t0 + kFinishTokens : p.T;
  const long long th = p.T * p.H;
  const real ea_log = exp_r(p.a_log[h]), dtb = p.dt_bias[h * kD + i];
  real dtb_sum = real(0), a_sum = real(0);  // this thread's terms of ddt_bias[h][i] and of dA_log[h]
  for (long long tok = t0; tok < t1; ++tok) {
    const long long e = tok * p.H + h, row = e * kD + i;
    real dqh = real(0), dkh = real(0), da = real(0), db = real(0);
#pragma unroll
    for (int z = 0; z < kSlices; ++z) {
      dqh += share(p, z, 0, th, e)[i];
      dkh += share(p, z, 1, th, e)[i];
      da += share(p, z, 2, th, e)[i];
      db += *beta_share(p, z, th, e);
    }
    const real q = load_bf16(p.q + row), k = load_bf16(p.k + row), g = load_bf16(p.g + row);
    real sq[2] = {q * q, k * k};
    block_sum<2>(sq, red);
    const real rq = rsqrt_r(sq[0] + real(1e-6)), rk = rsqrt_r(sq[1] + real(1e-6));
    const real qh = q * rq, kh = k * rk;
    real dots[2] = {qh * dqh, kh * dkh};
    block_sum<2>(dots, red);
    p.dq[row] = (dqh - qh * dots[0]) * rq;  // y = x / n: dx = (dy - y (y . dy)) / n
    p.dk[row] = (dkh - kh * dots[1]) * rk;
    const real x = g + dtb;
#if KDA_GATE_SOFTPLUS
    const real dgv = da * -ea_log * (x > real(20) ? real(1) : sigmoid(x));
    a_sum += da * -ea_log * softplus(x);  // d a / d A_log = a
#else
    const real dgv = times_sigmoid_slope(da * p.lower_bound * ea_log, ea_log * x);
    a_sum += dgv * x;  // d a / d A_log = (d a / d x) x
#endif
    p.dg[row] = dgv;
    dtb_sum += dgv;
    if (i == 0) p.dbeta[e] = times_sigmoid_slope(db, load_bf16(p.beta + e));
  }
  real a[1] = {a_sum};
  block_sum<1>(a, red);
  real* sums = p.ws + p.sums_off + ((long long)blockIdx.x * p.H + h) * (kD + 1);
  sums[i] = dtb_sum;
  if (i == 0) sums[kD] = a[0];
}

// PREP: the pre-processing of the tokens of chunk blockIdx.x of head blockIdx.y (p.T is T_total),
// computed as load_token would and saved for it.
__device__ __forceinline__ void prepare_body(const Args& p, real* red) {
  const int h = blockIdx.y, i = threadIdx.x;
  const long long t0 = (long long)blockIdx.x * kFinishTokens;
  const long long t1 = t0 + kFinishTokens < p.T ? t0 + kFinishTokens : p.T;
  const real ea_log = exp_r(p.a_log[h]), dtb = p.dt_bias[h * kD + i];
  for (long long tok = t0; tok < t1; ++tok) {
    const long long e = tok * p.H + h, row = e * kD + i;
    const real q = load_bf16(p.q + row), k = load_bf16(p.k + row), g = load_bf16(p.g + row);
    real sq[2] = {q * q, k * k};
    block_sum<2>(sq, red);
    real* saved = p.ws + p.prep_off + e * (long long)kPrepWords;
    saved[i] = q * rsqrt_r(sq[0] + real(1e-6));
    saved[kD + i] = k * rsqrt_r(sq[1] + real(1e-6));
    saved[2 * kD + i] = exp_r(log_decay(g + dtb, ea_log, p.lower_bound));
    if (i == 0) saved[3 * kD] = sigmoid(load_bf16(p.beta + e));
  }
}

// dA_log[h] and ddt_bias[h][i], the `chunks` chunk sums in chunk order, for head blockIdx.x.
__device__ __forceinline__ void reduce_body(const Args& p, int chunks) {
  const int h = blockIdx.x, i = threadIdx.x;
  real dtb = real(0), a = real(0);
#pragma unroll 8
  for (int c = 0; c < chunks; ++c) {
    const real* sums = p.ws + p.sums_off + ((long long)c * p.H + h) * (kD + 1);
    dtb += sums[i];
    if (i == 0) a += sums[kD];
  }
  p.ddt_bias[h * kD + i] = dtb;
  if (i == 0) p.da_log[h] = a;
}

}  // namespace kda_bwd

#ifndef KDA_HOST_EMULATION
// The recurrence takes the saved pre-processing's offset only when there is one (PREP), so the
// default build's entries are what they were.
#if PREP
#define KDA_BWD_PREP_PARAM , long long prep_off
#define KDA_BWD_PREP_OFF prep_off
#else
#define KDA_BWD_PREP_PARAM
#define KDA_BWD_PREP_OFF 0
#endif
// kda_bwd_chunked.cu includes this file for its helpers and kda_bwd_reduce only.
#ifndef KDA_BWD_CHUNKED
extern "C" __global__ void __launch_bounds__(kda_bwd::kD) KDA_BWD_ENTRY(kda_bwd_recurrent)(
    const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k, const __nv_bfloat16* __restrict__ v,
    const __nv_bfloat16* __restrict__ g, const __nv_bfloat16* __restrict__ beta, const float* __restrict__ a_log,
    const float* __restrict__ dt_bias, const long long* __restrict__ cu_seqlens,
    const float* __restrict__ initial_state, const __nv_bfloat16* __restrict__ d_out,
    const float* __restrict__ d_final_state, real* __restrict__ dv, real* __restrict__ d_initial_state,
    real* __restrict__ ws, long long T, int H, int nseq, real scale, real lower_bound,
    long long part_off KDA_BWD_PREP_PARAM) {
  __shared__ real red[kda_bwd::kWarps * 2 * kda_bwd::kBv];
  kda_bwd::recurrent_body({q, k, v, g, beta, a_log, dt_bias, cu_seqlens, initial_state, d_out, d_final_state, nullptr,
                           nullptr, dv, nullptr, nullptr, nullptr, nullptr, d_initial_state, ws, T, H, scale, lower_bound,
                           part_off, 0, KDA_BWD_PREP_OFF},
                          nseq, red);
}

#if PREP
extern "C" __global__ void __launch_bounds__(kda_bwd::kD) KDA_BWD_ENTRY(kda_bwd_prepare)(
    const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k, const __nv_bfloat16* __restrict__ g,
    const __nv_bfloat16* __restrict__ beta, const float* __restrict__ a_log, const float* __restrict__ dt_bias,
    real* __restrict__ ws, long long total, int H, real lower_bound, long long prep_off) {
  __shared__ real red[kda_bwd::kWarps * 2];
  kda_bwd::Args p{};
  p.q = q;
  p.k = k;
  p.g = g;
  p.beta = beta;
  p.a_log = a_log;
  p.dt_bias = dt_bias;
  p.ws = ws;
  p.T = total;
  p.H = H;
  p.lower_bound = lower_bound;
  p.prep_off = prep_off;
  kda_bwd::prepare_body(p, red);
}
#endif

extern "C" __global__ void __launch_bounds__(kda_bwd::kD) KDA_BWD_ENTRY(kda_bwd_finish)(
    const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k, const __nv_bfloat16* __restrict__ g,
    const __nv_bfloat16* __restrict__ beta, const float* __restrict__ a_log, const float* __restrict__ dt_bias,
    real* __restrict__ dq, real* __restrict__ dk, real* __restrict__ dg, real* __restrict__ dbeta,
    real* __restrict__ ws, long long total, int H, real lower_bound, long long part_off, long long sums_off) {
  __shared__ real red[kda_bwd::kWarps * 2];
  kda_bwd::Args p{};
  p.q = q;
  p.k = k;
  p.g = g;
  p.beta = beta;
  p.a_log = a_log;
  p.dt_bias = dt_bias;
  p.dq = dq;
  p.dk = dk;
  p.dg = dg;
  p.dbeta = dbeta;
  p.ws = ws;
  p.T = total;
  p.H = H;
  p.lower_bound = lower_bound;
  p.part_off = part_off;
  p.sums_off = sums_off;
  kda_bwd::finish_body(p, red);
}

#endif  // KDA_BWD_CHUNKED

extern "C" __global__ void __launch_bounds__(kda_bwd::kD) KDA_BWD_ENTRY(kda_bwd_reduce)(
    real* __restrict__ ws, real* __restrict__ da_log, real* __restrict__ ddt_bias, long long sums_off, int chunks,
    int H) {
  kda_bwd::Args p{};
  p.ws = ws;
  p.da_log = da_log;
  p.ddt_bias = ddt_bias;
  p.H = H;
  p.sums_off = sums_off;
  kda_bwd::reduce_body(p, chunks);
}
#endif  // KDA_HOST_EMULATION
