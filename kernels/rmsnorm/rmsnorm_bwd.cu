// Seed for rmsnorm_bwd: a persistent grid walks the rows; per row one block reduction gives
// c1 = mean(x_hat * w * dout), then dx = (w * dout - x_hat * c1) * rstd. Each CTA owns one dw
// partial row in the scratch tensor (no atomics); a second kernel sums the partial rows.
// Three paths, chosen per launch from N: rows of at most THREADS * ITEMS * VEC elements
// (N % VEC == 0) are held in registers as 16-byte vectors, read once, and the CTA's dw partial
// stays in registers until its last row; longer rows (N % VEC == 0) stream 16-byte vectors twice
// (the second read mostly from L2) with the dw partial read-modify-written in place; any other N
// takes the scalar path. fp32 arithmetic, 64-bit offsets.
// Defines: XT, WT (element types), HAS_WEIGHT; knobs: THREADS (per CTA), ITEMS (vectors per
// thread in registers), BLOCKS and RTHREADS (launch plan only).
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

#ifndef ITEMS
#define ITEMS 4
#endif
#define VEC (16 / (int)sizeof(XT))

__device__ __forceinline__ uint4 load16(const XT* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
__device__ __forceinline__ float elem(const uint4& raw, int i) { return to_f(reinterpret_cast<const XT*>(&raw)[i]); }
__device__ __forceinline__ float weight(const WT* w, long long j) { return HAS_WEIGHT ? to_f(__ldg(w + j)) : 1.f; }

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

// Rows that fit the registers: x and dout as raw 16-byte vectors, the dw partial in fp32.
__device__ __forceinline__ void bwd_registers(const XT* __restrict__ x, const WT* __restrict__ w,
                                              const XT* __restrict__ dout, const float* __restrict__ rstd,
                                              XT* __restrict__ dx, float* __restrict__ part, long long M, long long N,
                                              float* red) {
  const long long nv = N / VEC;
  float acc[ITEMS][VEC];
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int i = 0; i < VEC; ++i) acc[k][i] = 0.f;
  for (long long r = blockIdx.x; r < M; r += gridDim.x) {
    uint4 xv[ITEMS], dv[ITEMS];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const long long v = threadIdx.x + static_cast<long long>(k) * THREADS;
      if (v < nv) {
        xv[k] = load16(x + r * N + v * VEC);
        dv[k] = load16(dout + r * N + v * VEC);
      }
    }
    const float rs = rstd[r];
    float c = 0.f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const long long v = threadIdx.x + static_cast<long long>(k) * THREADS;
      if (v < nv)
#pragma unroll
        for (int i = 0; i < VEC; ++i) c += elem(xv[k], i) * elem(dv[k], i) * weight(w, v * VEC + i);
    }
    const float c1 = block_sum(c, red) * rs / static_cast<float>(N);
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const long long v = threadIdx.x + static_cast<long long>(k) * THREADS;
      if (v < nv) {
        uint4 o;
        XT* oe = reinterpret_cast<XT*>(&o);
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          const float xh = elem(xv[k], i) * rs;
          const float dy = elem(dv[k], i);
          oe[i] = from_f<XT>((dy * weight(w, v * VEC + i) - xh * c1) * rs);
          acc[k][i] += dy * xh;
        }
        *reinterpret_cast<uint4*>(dx + r * N + v * VEC) = o;
      }
    }
  }
  if (HAS_WEIGHT) {
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const long long v = threadIdx.x + static_cast<long long>(k) * THREADS;
      if (v < nv)
#pragma unroll
        for (int i = 0; i < VEC; ++i) part[v * VEC + i] = acc[k][i];
    }
  }
}

// Longer rows: 16-byte vectors, two passes over the row, the dw partial updated in place.
__device__ __forceinline__ void bwd_stream(const XT* __restrict__ x, const WT* __restrict__ w,
                                           const XT* __restrict__ dout, const float* __restrict__ rstd,
                                           XT* __restrict__ dx, float* __restrict__ part, long long M, long long N,
                                           float* red) {
  const long long nv = N / VEC;
  if (HAS_WEIGHT)
    for (long long j = threadIdx.x; j < N; j += THREADS) part[j] = 0.f;
  for (long long r = blockIdx.x; r < M; r += gridDim.x) {
    const float rs = rstd[r];
    float c = 0.f;
    for (long long v = threadIdx.x; v < nv; v += THREADS) {
      const uint4 xr = load16(x + r * N + v * VEC), dr = load16(dout + r * N + v * VEC);
#pragma unroll
      for (int i = 0; i < VEC; ++i) c += elem(xr, i) * elem(dr, i) * weight(w, v * VEC + i);
    }
    const float c1 = block_sum(c, red) * rs / static_cast<float>(N);
    for (long long v = threadIdx.x; v < nv; v += THREADS) {
      const uint4 xr = load16(x + r * N + v * VEC), dr = load16(dout + r * N + v * VEC);
      uint4 o;
      XT* oe = reinterpret_cast<XT*>(&o);
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        const float xh = elem(xr, i) * rs;
        const float dy = elem(dr, i);
        oe[i] = from_f<XT>((dy * weight(w, v * VEC + i) - xh * c1) * rs);
        if (HAS_WEIGHT) part[v * VEC + i] += dy * xh;
      }
      *reinterpret_cast<uint4*>(dx + r * N + v * VEC) = o;
    }
  }
}

// Any N: scalar accesses.
__device__ __forceinline__ void bwd_scalar(const XT* __restrict__ x, const WT* __restrict__ w,
                                           const XT* __restrict__ dout, const float* __restrict__ rstd,
                                           XT* __restrict__ dx, float* __restrict__ part, long long M, long long N,
                                           float* red) {
  // Thread t owns columns t, t + THREADS, ... of the partial row, here and below: no race.
  if (HAS_WEIGHT)
    for (long long j = threadIdx.x; j < N; j += THREADS) part[j] = 0.f;
  for (long long r = blockIdx.x; r < M; r += gridDim.x) {
    const XT* xr = x + r * N;
    const XT* dr = dout + r * N;
    const float rs = rstd[r];
    float c1 = 0.f;
    for (long long j = threadIdx.x; j < N; j += THREADS) c1 += to_f(xr[j]) * rs * to_f(dr[j]) * weight(w, j);
    c1 = block_sum(c1, red) / static_cast<float>(N);
    for (long long j = threadIdx.x; j < N; j += THREADS) {
      const float xh = to_f(xr[j]) * rs;
      const float dy = to_f(dr[j]);
      dx[r * N + j] = from_f<XT>((dy * weight(w, j) - xh * c1) * rs);
      if (HAS_WEIGHT) part[j] += dy * xh;
    }
  }
}

extern "C" __global__ void __launch_bounds__(THREADS)
    rmsnorm_bwd(const XT* __restrict__ x, const WT* __restrict__ w, const XT* __restrict__ dout,
                const float* __restrict__ rstd, XT* __restrict__ dx, float* __restrict__ dw_partial, long long M,
                long long N) {
  __shared__ float red[32];
  float* part = HAS_WEIGHT ? dw_partial + static_cast<long long>(blockIdx.x) * N : nullptr;
  if (N % VEC != 0) bwd_scalar(x, w, dout, rstd, dx, part, M, N, red);
  else if (N <= static_cast<long long>(THREADS) * ITEMS * VEC) bwd_registers(x, w, dout, rstd, dx, part, M, N, red);
  else bwd_stream(x, w, dout, rstd, dx, part, M, N, red);
}

extern "C" __global__ void rmsnorm_bwd_dw_reduce(const float* __restrict__ partial, float* __restrict__ dw,
                                                 long long rows, long long N) {
  const long long j = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= N) return;
  float s = 0.f;
  for (long long p = 0; p < rows; ++p) s += partial[p * N + j];
  dw[j] = s;
}
