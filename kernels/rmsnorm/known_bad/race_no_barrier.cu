// expect: tolerance|nondeterministic|nonfinite-output
// loophole: LOOPHOLES 1 and 15 (a cross-warp race: results that depend on timing and stale shared memory)
// Known-bad rmsnorm_fwd: the seed's entry, signature, knobs and thread->row mapping (THREADS / TPR
// rows per CTA, thread t of a row owns vectors t, t + TPR, ...), in a compact two-pass form.
// Defect: the cross-warp reduction (TPR > 32, e.g. the default TPR = 256) reads the other warps'
// partial sums from shared memory without the barrier, so it often reads stale values (or
// uninitialized ones, possibly NaN bit patterns).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#ifndef XT
#define XT __nv_bfloat16
#endif
#ifndef WT
#define WT float
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
#define THREADS 256
#endif
#ifndef TPR
#define TPR 256
#endif

enum : int {
  kVec = VEC,
  kTpr = TPR,
  kRows = THREADS / TPR,
  kLanes = TPR < 32 ? TPR : 32,
  kWpr = TPR > 32 ? TPR / 32 : 1,
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
__device__ __forceinline__ float row_sum(float v) {
  for (int o = kLanes / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (kTpr > 32) {
    __shared__ float red[THREADS / 32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) red[warp] = v;
    // BUG: no __syncthreads() here
    v = red[(warp / kWpr) * kWpr + lane % kWpr];
    for (int o = kWpr / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  }
  return v;
}

extern "C" __global__ void __launch_bounds__(THREADS) rmsnorm_fwd(const XT* __restrict__ x, const WT* __restrict__ w,
                                                                  XT* __restrict__ out, float* __restrict__ rstd,
                                                                  long long M, long long N, float eps) {
  const int t = threadIdx.x % kTpr;
  const long long row = ((long long)blockIdx.y * gridDim.x + blockIdx.x) * kRows + threadIdx.x / kTpr;
  const bool active = row < M;
  const XT* xr = x + (active ? row : 0) * N;
  XT* orow = out + (active ? row : 0) * N;
  const bool vec = N % kVec == 0;
  float ss = 0.f;
  if (active) {
    if (vec) {
      for (long long k = t; k < N / kVec; k += kTpr) {
        const XVec v = reinterpret_cast<const XVec*>(xr)[k];
        for (int e = 0; e < kVec; ++e) ss = fmaf(to_f(v.e[e]), to_f(v.e[e]), ss);
      }
    } else {
      for (long long c = t; c < N; c += kTpr) ss = fmaf(to_f(xr[c]), to_f(xr[c]), ss);
    }
  }
  ss = row_sum(ss);
  float r = rsqrtf(ss / (float)N + eps);
  if (!active) return;
  if (STORE_RSTD && t == 0) rstd[row] = r;
  if (vec) {
    for (long long k = t; k < N / kVec; k += kTpr) {
      const XVec v = reinterpret_cast<const XVec*>(xr)[k];
      XVec o;
      for (int e = 0; e < kVec; ++e) from_f(to_f(v.e[e]) * r * (HAS_WEIGHT ? to_f(w[k * kVec + e]) : 1.f), &o.e[e]);
      reinterpret_cast<XVec*>(orow)[k] = o;
    }
  } else {
    for (long long c = t; c < N; c += kTpr) from_f(to_f(xr[c]) * r * (HAS_WEIGHT ? to_f(w[c]) : 1.f), &orow[c]);
  }
}
