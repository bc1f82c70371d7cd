// kda_fwd seed template (recurrent): Kimi Delta Attention forward, token by token.
//   per (sequence n, head h), state S (K x V, fp32 registers), for each token t:
//     S <- Diag(e^a_t) S;  r = beta_t (v_t - k_t^T S);  S <- S + k_t r^T;  o_t = scale q_t^T S
//   with q, k L2-normalised (eps 1e-6), beta = sigmoid(logit), a_t the gate's log-decay.
//
// Compiled by NVRTC (device code only) with the op's defines (KDA_GATE_SOFTPLUS,
// HAS_INITIAL_STATE, HAS_FINAL_STATE) and the knobs below. KdaFwdOp::launch_plan
// (kernels/kda/kda_fwd_op.cpp) launches the one entry, kda_fwd_recurrent, with
//   grid  = (N sequences, H heads, 128 / BV value slices),  block = BV * KSPLIT threads.
// A CTA owns value columns [z * BV, z * BV + BV) of one (sequence, head): the slices are
// independent (each column of S evolves on its own given k, q, a, beta), which multiplies the
// independent chains by 128 / BV (docs/kda.md section 2.2).
//
// Knobs (each has a default here that matches the op's):
//   BV          value columns per CTA (8 ... 128, power of two)
//   KSPLIT      threads per value column (1 ... 32, power of two); thread `part` of a column holds
//               key rows i = r * KSPLIT + part (r < 128 / KSPLIT) of S in registers, and the
//               column's reductions over i run as a shfl.sync.bfly butterfly over its KSPLIT lanes
//   TB          tokens per stage (1 ... 16): a stage loads and pre-processes TB tokens at once (one
//               warp per token: L2 norms, gate, decays) into shared memory, then runs them serially
//   MIN_BLOCKS  second __launch_bounds__ argument (0: none)
//
// This is the simple correct seed (one fp32 FMA chain per state element and token, CUDA cores);
// the chunked tensor-core algorithm (docs/kda.md section 2.1) is the direction for the search.
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
#ifndef BV
#define BV 32
#endif
#ifndef KSPLIT
#define KSPLIT 4
#endif
#ifndef TB
#define TB 8
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 0
#endif

#if MIN_BLOCKS > 0
#define PTXEVO_BOUNDS __launch_bounds__(BV * KSPLIT, MIN_BLOCKS)
#else
#define PTXEVO_BOUNDS __launch_bounds__(BV * KSPLIT)
#endif

namespace kda_seed {

// Compile-time constants as enumerators: namespace-scope constexpr variables would be emitted as
// .global variables in the PTX, and a candidate must have no device globals.
enum : int {
  kD = 128,  // K = V
  kBv = BV,
  kKsplit = KSPLIT,
  kRows = kD / KSPLIT,  // state rows per thread
  kThreads = BV * KSPLIT,
  kWarps = kThreads / 32,
  kTb = TB,
};

static_assert(kBv >= 8 && kBv <= kD && (kBv & (kBv - 1)) == 0, "BV: a power of two in [8, 128]");
static_assert(kKsplit >= 1 && kKsplit <= 32 && (kKsplit & (kKsplit - 1)) == 0, "KSPLIT: a power of two in [1, 32]");
static_assert(kThreads >= 32 && kThreads <= 1024, "BV * KSPLIT: 32 ... 1024 threads");
static_assert(kTb >= 1 && kTb <= 16 && (kTb & (kTb - 1)) == 0, "TB: 1, 2, 4, 8 or 16");

// One stage of pre-processed tokens.
struct Stage {
  float2 kd[kTb][kD];  // (normalised k, e^a) per key channel
  float q[kTb][kD];    // normalised q times scale
  float v[kTb][kBv];   // this CTA's value columns
  float o[kTb][kBv];   // outputs, written back after the stage
  float beta[kTb];     // sigmoid(logit)
};

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

#define KDA_LOG2E 1.4426950408889634f
#define KDA_LN2 0.6931471805599453f

// sigmoid(z) = 1 / (1 + 2^(-z log2 e)); 2^+inf = inf gives 0, as it should.
__device__ __forceinline__ float sigmoid(float z) { return rcp(1.f + ex2(-z * KDA_LOG2E)); }

// The gate (docs/kda.md section 1.2): log-decay a <= 0 from x = g + dt_bias, ea = exp(A_log).
__device__ __forceinline__ float log_decay(float x, float ea, float lower_bound) {
#if KDA_GATE_SOFTPLUS
  const float z = x;
  const float sp = z > 20.f ? z : KDA_LN2 * lg2(1.f + ex2(z * KDA_LOG2E));  // FLA's threshold 20
  (void)lower_bound;
  return -ea * sp;
#else
  return lower_bound * sigmoid(ea * x);
#endif
}

// 4 bf16 (8 bytes) as floats.
__device__ __forceinline__ void load_bf16x4(const __nv_bfloat16* p, float* f) {
  unsigned int w0, w1;
  asm("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(w0), "=r"(w1) : "l"(p));
  f[0] = __uint_as_float(w0 << 16);
  f[1] = __uint_as_float(w0 & 0xffff0000u);
  f[2] = __uint_as_float(w1 << 16);
  f[3] = __uint_as_float(w1 & 0xffff0000u);
}

__device__ __forceinline__ float load_bf16(const __nv_bfloat16* p) {
  unsigned short h;
  asm("ld.global.nc.u16 %0, [%1];" : "=h"(h) : "l"(p));
  return __uint_as_float((unsigned int)h << 16);
}

__device__ __forceinline__ void store_bf16x2(__nv_bfloat16* p, float lo, float hi) {
  unsigned int d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  asm volatile("st.global.u32 [%0], %1;" ::"l"(p), "r"(d) : "memory");
}

// Sum over the KSPLIT adjacent lanes of a column (all lanes of the warp take part).
__device__ __forceinline__ float column_sum(float v) {
#pragma unroll
  for (int o = kKsplit / 2; o > 0; o >>= 1) v += shfl_bfly(v, o);
  return v;
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

// Loads and pre-processes tokens [t0, t0 + count) of head h into the stage (one warp per token).
__device__ __forceinline__ void prepare(const Args& a, Stage& st, long long t0, int count, int h, int col0,
                                        const float* dtb, float ea) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int tt = warp; tt < count; tt += kWarps) {
    const long long row = ((t0 + tt) * a.H + h) * (long long)kD + lane * 4;
    float q[4], k[4], g[4];
    load_bf16x4(a.q + row, q);
    load_bf16x4(a.k + row, k);
    load_bf16x4(a.g + row, g);
    float sq = 0.f, sk = 0.f;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      sq = fmaf(q[e], q[e], sq);
      sk = fmaf(k[e], k[e], sk);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      sq += shfl_bfly(sq, o);
      sk += shfl_bfly(sk, o);
    }
    const float rq = rsqrt(sq + 1e-6f) * a.scale, rk = rsqrt(sk + 1e-6f);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float decay = ex2(log_decay(g[e] + dtb[e], ea, a.lower_bound) * KDA_LOG2E);
      st.kd[tt][lane * 4 + e] = make_float2(k[e] * rk, decay);
      st.q[tt][lane * 4 + e] = q[e] * rq;
    }
    if (lane == 0) st.beta[tt] = sigmoid(load_bf16(a.beta + (t0 + tt) * a.H + h));
  }
  for (int i = threadIdx.x; i < count * kBv; i += kThreads) {
    const int tt = i / kBv, j = i % kBv;
    st.v[tt][j] = load_bf16(a.v + ((t0 + tt) * a.H + h) * (long long)kD + col0 + j);
  }
}

__device__ __forceinline__ void kda_fwd_body(const Args& a) {
  __shared__ __align__(16) Stage st;
  const long long n = blockIdx.x;
  const int h = blockIdx.y;
  const int col0 = blockIdx.z * kBv;            // first value column of this CTA
  const int col = threadIdx.x / kKsplit;        // this thread's column within the slice
  const int part = threadIdx.x % kKsplit;       // its share of the key rows
  long long bos, eos;
  if (a.cu_seqlens) {
    bos = a.cu_seqlens[n];
    eos = a.cu_seqlens[n + 1];
  } else {
    bos = n * a.T;
    eos = bos + a.T;
  }
  // Per-lane gate constants for the channels a lane pre-processes (lane * 4 ... + 3).
  const int lane = threadIdx.x % 32;
  float dtb[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) dtb[e] = a.dt_bias[h * kD + lane * 4 + e];
  const float ea = ex2(a.a_log[h] * KDA_LOG2E);

  // State rows i = r * KSPLIT + part of column col0 + col; V-first in memory: [n][h][j][i].
  const long long sbase = ((n * a.H + h) * kD + col0 + col) * (long long)kD;
  float s[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#if HAS_INITIAL_STATE
    s[r] = a.initial_state[sbase + r * kKsplit + part];
#else
    s[r] = 0.f;
#endif
  }
  (void)sbase;

  for (long long t0 = bos; t0 < eos; t0 += kTb) {
    const int count = (int)(eos - t0 < kTb ? eos - t0 : kTb);
    prepare(a, st, t0, count, h, col0, dtb, ea);
    __syncthreads();
    for (int tt = 0; tt < count; ++tt) {
      // 1) decay the rows, 2) residual against the decayed state.
      float acc = 0.f;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float2 kd = st.kd[tt][r * kKsplit + part];
        s[r] *= kd.y;
        acc = fmaf(kd.x, s[r], acc);
      }
      acc = column_sum(acc);
      // Re-read k from shared memory below instead of keeping the 128 / KSPLIT values of the
      // first loop live: they would double the registers per thread and spill wherever the
      // launch bounds cap them.
      asm volatile("" ::: "memory");
      const float rj = st.beta[tt] * (st.v[tt][col] - acc);
      // 3) rank-1 write, 4) read after the update.
      float o = 0.f;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int i = r * kKsplit + part;
        s[r] = fmaf(st.kd[tt][i].x, rj, s[r]);
        o = fmaf(st.q[tt][i], s[r], o);
      }
      o = column_sum(o);
      if (part == 0) st.o[tt][col] = o;
    }
    __syncthreads();
    // Outputs of the stage as bf16 pairs; the next stage's prepare() touches no o[], and its
    // serial loop writes o[] only after the barrier that follows these stores.
    for (int i = threadIdx.x; i < count * (kBv / 2); i += kThreads) {
      const int tt = i / (kBv / 2), j = 2 * (i % (kBv / 2));
      store_bf16x2(a.out + ((t0 + tt) * a.H + h) * (long long)kD + col0 + j, st.o[tt][j], st.o[tt][j + 1]);
    }
  }
#if HAS_FINAL_STATE
#pragma unroll
  for (int r = 0; r < kRows; ++r) a.final_state[sbase + r * kKsplit + part] = s[r];
#endif
}

}  // namespace kda_seed

extern "C" __global__ void PTXEVO_BOUNDS kda_fwd_recurrent(
    const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k, const __nv_bfloat16* __restrict__ v,
    const __nv_bfloat16* __restrict__ g, const __nv_bfloat16* __restrict__ beta, const float* __restrict__ a_log,
    const float* __restrict__ dt_bias, const long long* __restrict__ cu_seqlens,
    const float* __restrict__ initial_state, __nv_bfloat16* __restrict__ out, float* __restrict__ final_state,
    long long T, int H, float scale, float lower_bound) {
  kda_seed::kda_fwd_body(
      {q, k, v, g, beta, a_log, dt_bias, cu_seqlens, initial_state, out, final_state, T, H, scale, lower_bound});
}
