// The correct kernel every known-bad rmsnorm_fwd kernel here is made from: the seed's entries,
// signature, knobs and thread->row mapping (an entry's tpr threads per row, thread t of a row
// owns vectors t, t + tpr, ...; the CTAs of a cluster split a row's columns and each sums the
// whole row itself), in a compact two-pass form.
//
// A known-bad file states its expected gate reasons and its defect, defines the hooks below that
// it changes, and includes this file (ptxevo expands the include when it reads the file). Each
// hook defaults to the correct code; a file's defect is exactly the hooks it defines:
//   KB_GLOBALS               namespace-scope declarations (none)
//   KB_CROSS_WARP_SUM        row_sum's step across the warps of a row (through shared memory)
//   KB_REDUCTION_BARRIER     the barrier between writing and reading those partials
//   KB_BODY_START            the first statements of every entry's body
//   KB_AFTER_LAYOUT          after `vec` (the row's layout) is known
//   KB_SUMS_ACTIVE           the condition under which a thread sums its squares (`active`)
//   KB_VEC_SQUARES           the sum of squares over one vector `v`
//   KB_SCALAR_SQUARES        the sum of squares loop of the scalar path
//   KB_BEFORE_ROW_SUM        after the thread's own sum
//   KB_ROW_SUM               the row's sum from the threads' sums
//   KB_NORMALISER            r = 1 / sqrt(mean(x^2) + eps)
//   KB_BEFORE_WRITE          after rstd, before the outputs
//   KB_VEC_OUT               one output vector `o` from `v`
//   KB_AFTER_VEC_STORE       after `o` is stored
//   KB_SCALAR_OUT            the scalar path's output loop
//   KB_AFTER_SCALAR_OUT      after that loop
//   KB_BOUNDS                the entries' __launch_bounds__
// Hooks with statements are macros of one line; comments in them are /* */.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#ifndef XT
#define XT __nv_bfloat16
#endif
#ifndef WT
#define WT float
#endif
#ifndef BT
#define BT float
#endif
#ifndef RT
#define RT XT
#endif
#ifndef HAS_WEIGHT
#define HAS_WEIGHT 1
#endif
#ifndef STORE_RSTD
#define STORE_RSTD 0
#endif
#ifndef VEC
#define VEC (16 / (int)sizeof(XT))
#endif
#ifndef THREADS
#define THREADS 512
#endif
#ifndef TPR
#define TPR 8
#endif
#ifndef CLUSTER
#define CLUSTER 16
#endif
#if HAS_BIAS || HAS_RESIDUAL
#error "the known-bad kernels cover the plain forward only (no bias, no residual)"
#endif

// The hooks' correct code (see above).
#ifndef KB_GLOBALS
#define KB_GLOBALS
#endif
#ifndef KB_CROSS_WARP_SUM
#define KB_CROSS_WARP_SUM                                                  \
  __shared__ float red[kThreads / 32];                                     \
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;              \
  if (lane == 0) red[warp] = v;                                            \
  KB_REDUCTION_BARRIER                                                     \
  v = red[(warp / kWpr) * kWpr + lane % kWpr];                             \
  for (int o = kWpr / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
#endif
#ifndef KB_REDUCTION_BARRIER
#define KB_REDUCTION_BARRIER __syncthreads();
#endif
#ifndef KB_BODY_START
#define KB_BODY_START
#endif
#ifndef KB_AFTER_LAYOUT
#define KB_AFTER_LAYOUT
#endif
#ifndef KB_SUMS_ACTIVE
#define KB_SUMS_ACTIVE active
#endif
#ifndef KB_VEC_SQUARES
#define KB_VEC_SQUARES for (int e = 0; e < kVec; ++e) ss = fmaf(to_f(v.e[e]), to_f(v.e[e]), ss);
#endif
#ifndef KB_SCALAR_SQUARES
#define KB_SCALAR_SQUARES for (long long c = t; c < N; c += kTpr) ss = fmaf(to_f(xr[c]), to_f(xr[c]), ss);
#endif
#ifndef KB_BEFORE_ROW_SUM
#define KB_BEFORE_ROW_SUM
#endif
#ifndef KB_ROW_SUM
#define KB_ROW_SUM ss = row_sum<kTpr>(ss);
#endif
#ifndef KB_NORMALISER
#define KB_NORMALISER float r = rsqrtf(ss / (float)N + eps);
#endif
#ifndef KB_BEFORE_WRITE
#define KB_BEFORE_WRITE
#endif
#ifndef KB_VEC_OUT
#define KB_VEC_OUT \
  for (int e = 0; e < kVec; ++e) from_f(to_f(v.e[e]) * r * (HAS_WEIGHT ? to_f(w[k * kVec + e]) : 1.f), &o.e[e]);
#endif
#ifndef KB_AFTER_VEC_STORE
#define KB_AFTER_VEC_STORE
#endif
#ifndef KB_SCALAR_OUT
#define KB_SCALAR_OUT \
  for (long long c = lo + t; c < hi; c += kTpr) from_f(to_f(xr[c]) * r * (HAS_WEIGHT ? to_f(w[c]) : 1.f), &orow[c]);
#endif
#ifndef KB_AFTER_SCALAR_OUT
#define KB_AFTER_SCALAR_OUT
#endif
#ifndef KB_BOUNDS
#define KB_BOUNDS __launch_bounds__(THREADS)
#endif

KB_GLOBALS

enum : int {
  kVec = VEC,
  kThreads = THREADS,
};

struct alignas(kVec * sizeof(XT)) XVec {
  XT e[kVec];
};

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ void from_f(float v, float* o) { *o = v; }
__device__ __forceinline__ void from_f(float v, __nv_bfloat16* o) { *o = __float2bfloat16_rn(v); }
__device__ __forceinline__ void from_f(float v, __half* o) { *o = __float2half_rn(v); }
template <int kTpr>
__device__ __forceinline__ float row_sum(float v) {
  constexpr int kLanes = kTpr < 32 ? kTpr : 32, kWpr = kTpr > 32 ? kTpr / 32 : 1;
  for (int o = kLanes / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (kTpr > 32) {
    KB_CROSS_WARP_SUM
  }
  return v;
}

// kTpr threads per row. Clustered: the c CTAs of a cluster share a row; each sums the whole row
// itself (no exchange between CTAs) and writes only its slice [lo, hi) of the row's units.
template <int kTpr, bool kClustered>
__device__ __forceinline__ void body(const XT* __restrict__ x, const WT* __restrict__ w, XT* __restrict__ out,
                                     float* __restrict__ rstd, long long M, long long N, float eps) {
  KB_BODY_START
  unsigned int rank = 0, nranks = 1;
  if (kClustered) {
    asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(nranks));
  }
  const int t = threadIdx.x % kTpr;
  const long long cta = (long long)blockIdx.y * gridDim.x + blockIdx.x;
  const long long row = kClustered ? cta / nranks : cta * (kThreads / kTpr) + threadIdx.x / kTpr;
  const bool active = row < M;
  const XT* xr = x + (active ? row : 0) * N;
  XT* orow = out + (active ? row : 0) * N;
  const bool vec = N % kVec == 0;
  KB_AFTER_LAYOUT
  const long long nu = vec ? N / kVec : N, per = (nu + nranks - 1) / nranks;
  const long long lo = min(nu, (long long)rank * per), hi = min(nu, lo + per);
  float ss = 0.f;
  if (KB_SUMS_ACTIVE) {
    if (vec) {
      for (long long k = t; k < N / kVec; k += kTpr) {
        const XVec v = reinterpret_cast<const XVec*>(xr)[k];
        KB_VEC_SQUARES
      }
    } else {
      KB_SCALAR_SQUARES
    }
  }
  KB_BEFORE_ROW_SUM
  KB_ROW_SUM
  KB_NORMALISER
  if (!active) return;
  if (STORE_RSTD && t == 0 && rank == 0) rstd[row] = r;
  KB_BEFORE_WRITE
  if (vec) {
    for (long long k = lo + t; k < hi; k += kTpr) {
      const XVec v = reinterpret_cast<const XVec*>(xr)[k];
      XVec o;
      KB_VEC_OUT
      reinterpret_cast<XVec*>(orow)[k] = o;
      KB_AFTER_VEC_STORE
    }
  } else {
    KB_SCALAR_OUT
    KB_AFTER_SCALAR_OUT
  }
}

// The seed's entries (the launch plan picks one per shape) and its signature; bias and residual
// arguments are null here.
#define KB_ENTRY(NAME, T, CLUSTERED)                                                                          \
  extern "C" __global__ void KB_BOUNDS NAME(                                                                  \
      const XT* __restrict__ x, const WT* __restrict__ w, const BT* __restrict__ b, const XT* __restrict__ res, \
      XT* __restrict__ out, RT* __restrict__ res_out, float* __restrict__ rstd, long long M, long long N,     \
      float eps) {                                                                                            \
    body<T, CLUSTERED>(x, w, out, rstd, M, N, eps);                                                           \
  }
#if TPR <= 1
KB_ENTRY(rmsnorm_fwd_tpr1, 1, false)
#endif
#if TPR <= 2
KB_ENTRY(rmsnorm_fwd_tpr2, 2, false)
#endif
#if TPR <= 4
KB_ENTRY(rmsnorm_fwd_tpr4, 4, false)
#endif
#if TPR <= 8
KB_ENTRY(rmsnorm_fwd_tpr8, 8, false)
#endif
#if TPR <= 16
KB_ENTRY(rmsnorm_fwd_tpr16, 16, false)
#endif
#if TPR <= 32
KB_ENTRY(rmsnorm_fwd_tpr32, 32, false)
#endif
#if TPR <= 64 && THREADS >= 64
KB_ENTRY(rmsnorm_fwd_tpr64, 64, false)
#endif
#if TPR <= 128 && THREADS >= 128
KB_ENTRY(rmsnorm_fwd_tpr128, 128, false)
#endif
#if TPR <= 256 && THREADS >= 256
KB_ENTRY(rmsnorm_fwd_tpr256, 256, false)
#endif
#if TPR <= 512 && THREADS >= 512
KB_ENTRY(rmsnorm_fwd_tpr512, 512, false)
#endif
#if THREADS >= 1024
KB_ENTRY(rmsnorm_fwd_tpr1024, 1024, false)
#endif
#if CLUSTER > 1
KB_ENTRY(rmsnorm_fwd_cluster, THREADS, true)
#endif
