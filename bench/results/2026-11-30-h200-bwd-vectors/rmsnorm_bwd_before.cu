// Seed for rmsnorm_bwd: a persistent grid walks the rows; per row one block reduction gives
// c1 = mean(x_hat * w * dout), then dx = (w * dout - x_hat * c1) * rstd. Each CTA accumulates its
// dw partial row in the scratch tensor (one row per CTA, so no atomics); a second kernel sums
// the partial rows. Correct first: scalar accesses, fp32 arithmetic, 64-bit offsets.
// Defines: XT, WT (element types), HAS_WEIGHT; knobs: THREADS (per CTA), BLOCKS and RTHREADS
// (launch plan only).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }

template <class T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_f<__half>(float v) {
  return __float2half_rn(v);
}

// Sum over the CTA; every thread gets the total.
__device__ __forceinline__ float block_sum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = lane < (THREADS / 32) ? red[lane] : 0.f;
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  __syncthreads();  // red is reused by the next row
  return t;
}

extern "C" __global__ void __launch_bounds__(THREADS)
    rmsnorm_bwd(const XT* __restrict__ x, const WT* __restrict__ w, const XT* __restrict__ dout,
                const float* __restrict__ rstd, XT* __restrict__ dx, float* __restrict__ dw_partial, long long M,
                long long N) {
  __shared__ float red[32];
  float* part = HAS_WEIGHT ? dw_partial + static_cast<long long>(blockIdx.x) * N : nullptr;
  // Thread t owns columns t, t + THREADS, ... of the partial row, here and below: no race.
  if (HAS_WEIGHT)
    for (long long j = threadIdx.x; j < N; j += THREADS) part[j] = 0.f;
  for (long long r = blockIdx.x; r < M; r += gridDim.x) {
    const XT* xr = x + r * N;
    const XT* dr = dout + r * N;
    const float rs = rstd[r];
    float c1 = 0.f;
    for (long long j = threadIdx.x; j < N; j += THREADS) {
      const float wj = HAS_WEIGHT ? to_f(w[j]) : 1.f;
      c1 += to_f(xr[j]) * rs * to_f(dr[j]) * wj;
    }
    c1 = block_sum(c1, red) / static_cast<float>(N);
    for (long long j = threadIdx.x; j < N; j += THREADS) {
      const float xh = to_f(xr[j]) * rs;
      const float dy = to_f(dr[j]);
      const float wj = HAS_WEIGHT ? to_f(w[j]) : 1.f;
      dx[r * N + j] = from_f<XT>((dy * wj - xh * c1) * rs);
      if (HAS_WEIGHT) part[j] += dy * xh;
    }
  }
}

extern "C" __global__ void rmsnorm_bwd_dw_reduce(const float* __restrict__ partial, float* __restrict__ dw,
                                                 long long rows, long long N) {
  const long long j = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= N) return;
  float s = 0.f;
  for (long long p = 0; p < rows; ++p) s += partial[p * N + j];
  dw[j] = s;
}
