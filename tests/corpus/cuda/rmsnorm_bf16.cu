// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: RMSNorm row kernel: bf16 input, fp32 weight, 128-bit vector loads (uint4/float4), warp+block sum reduction, rsqrt.approx, fused residual add variant, templated hidden sizes.
#include <cuda_bf16.h>

__device__ __forceinline__ float warp_reduce_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <int NWARPS>
__device__ __forceinline__ float block_reduce_sum(float v, float *smem) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_reduce_sum(v);
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = lane < NWARPS ? smem[lane] : 0.f;
  v = warp_reduce_sum(v);
  return v;  // every thread has the total
}

__device__ __forceinline__ void bf16x8_to_f32(const uint4 &u, float f[8]) {
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    f[2 * k] = __uint_as_float(w[k] << 16);
    f[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
  }
}

__device__ __forceinline__ uint4 f32_to_bf16x8(const float f[8]) {
  uint4 u;
  unsigned *w = reinterpret_cast<unsigned *>(&u);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    __nv_bfloat162 p = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
    w[k] = *reinterpret_cast<unsigned *>(&p);
  }
  return u;
}

__device__ __forceinline__ float rsqrt_approx(float x) {
  float r;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

// One block of 128 threads per row; hidden size H is a multiple of 8.
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) rmsnorm_bf16_kernel(__nv_bfloat16 *__restrict__ out,
                                                              const __nv_bfloat16 *__restrict__ in,
                                                              const float *__restrict__ weight, int hidden, float eps) {
  __shared__ float red[BLOCK / 32];
  const size_t row = blockIdx.x;
  const uint4 *x = reinterpret_cast<const uint4 *>(in + row * hidden);
  uint4 *y = reinterpret_cast<uint4 *>(out + row * hidden);
  const float4 *w = reinterpret_cast<const float4 *>(weight);
  const int nvec = hidden / 8;
  float ss = 0.f;
  for (int i = threadIdx.x; i < nvec; i += BLOCK) {
    float f[8];
    bf16x8_to_f32(x[i], f);
#pragma unroll
    for (int k = 0; k < 8; ++k) ss = fmaf(f[k], f[k], ss);
  }
  ss = block_reduce_sum<BLOCK / 32>(ss, red);
  const float inv = rsqrt_approx(ss / (float)hidden + eps);
  for (int i = threadIdx.x; i < nvec; i += BLOCK) {
    float f[8];
    bf16x8_to_f32(x[i], f);
    float4 w0 = __ldg(w + 2 * i), w1 = __ldg(w + 2 * i + 1);
    f[0] *= inv * w0.x; f[1] *= inv * w0.y; f[2] *= inv * w0.z; f[3] *= inv * w0.w;
    f[4] *= inv * w1.x; f[5] *= inv * w1.y; f[6] *= inv * w1.z; f[7] *= inv * w1.w;
    y[i] = f32_to_bf16x8(f);
  }
}

template __global__ void rmsnorm_bf16_kernel<128>(__nv_bfloat16 *, const __nv_bfloat16 *, const float *, int, float);
template __global__ void rmsnorm_bf16_kernel<512>(__nv_bfloat16 *, const __nv_bfloat16 *, const float *, int, float);

// Fused residual add + RMSNorm; the row is cached in registers (hidden <= 8 * 8 * 256).
extern "C" __global__ void __launch_bounds__(256) fused_add_rmsnorm_bf16(__nv_bfloat16 *__restrict__ x,
                                                                         __nv_bfloat16 *__restrict__ residual,
                                                                         const float *__restrict__ weight, int hidden,
                                                                         float eps) {
  __shared__ float red[8];
  const size_t row = blockIdx.x;
  uint4 *xv = reinterpret_cast<uint4 *>(x + row * hidden);
  uint4 *rv = reinterpret_cast<uint4 *>(residual + row * hidden);
  const int nvec = hidden / 8;
  float cache[8][8];
  float ss = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    int i = threadIdx.x + j * 256;
    if (i < nvec) {
      float a[8], b[8];
      bf16x8_to_f32(xv[i], a);
      bf16x8_to_f32(rv[i], b);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        cache[j][k] = a[k] + b[k];
        ss = fmaf(cache[j][k], cache[j][k], ss);
      }
      rv[i] = f32_to_bf16x8(cache[j]);
    }
  }
  ss = block_reduce_sum<8>(ss, red);
  const float inv = rsqrtf(ss / (float)hidden + eps);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    int i = threadIdx.x + j * 256;
    if (i < nvec) {
      float o[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) o[k] = cache[j][k] * inv * __ldg(weight + i * 8 + k);
      xv[i] = f32_to_bf16x8(o);
    }
  }
}

// Warp-per-row variant for small hidden sizes, with row-wise rstd output (for backward).
extern "C" __global__ void rmsnorm_warp_per_row(const __nv_bfloat16 *__restrict__ in, const float *__restrict__ weight,
                                                __nv_bfloat16 *__restrict__ out, float *__restrict__ rstd, int rows,
                                                int hidden, float eps) {
  int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const __nv_bfloat162 *x2 = reinterpret_cast<const __nv_bfloat162 *>(in + (size_t)row * hidden);
  float ss = 0.f;
  for (int i = lane; i < hidden / 2; i += 32) {
    float2 f = __bfloat1622float2(x2[i]);
    ss += f.x * f.x + f.y * f.y;
  }
  ss = warp_reduce_sum(ss);
  float r = rsqrt_approx(ss / hidden + eps);
  if (lane == 0) rstd[row] = r;
  __nv_bfloat162 *o2 = reinterpret_cast<__nv_bfloat162 *>(out + (size_t)row * hidden);
  for (int i = lane; i < hidden / 2; i += 32) {
    float2 f = __bfloat1622float2(x2[i]);
    o2[i] = __floats2bfloat162_rn(f.x * r * weight[2 * i], f.y * r * weight[2 * i + 1]);
  }
}
