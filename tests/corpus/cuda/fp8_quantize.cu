// corpus: archs=sm_90a,sm_100a
// Exercises: FP8 conversions via inline PTX: cvt.rn.satfinite.e4m3x2.f32 / e5m2x2.f32, cvt.rn.f16x2.e4m3x2 / e5m2x2, cvt.rn.satfinite.e4m3x2.f16x2, per-tensor absmax (atomicMax on float bits), per-token dynamic quantization with 32-bit packed stores, dequant + bf16 packing.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ unsigned short f32x2_to_e4m3x2(float lo, float hi) {
  unsigned short r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;" : "=h"(r) : "f"(lo), "f"(hi));
  return r;
}
__device__ __forceinline__ unsigned short f32x2_to_e5m2x2(float lo, float hi) {
  unsigned short r;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %2, %1;" : "=h"(r) : "f"(lo), "f"(hi));
  return r;
}
__device__ __forceinline__ unsigned e4m3x2_to_f16x2(unsigned short v) {
  unsigned r;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(v));
  return r;
}
__device__ __forceinline__ unsigned e5m2x2_to_f16x2(unsigned short v) {
  unsigned r;
  asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(r) : "h"(v));
  return r;
}
__device__ __forceinline__ unsigned short f16x2_to_e4m3x2(unsigned h2) {
  unsigned short r;
  asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(r) : "r"(h2));
  return r;
}

// Pass 1: absmax over the whole tensor.
extern "C" __global__ void absmax_f32(const float4 *__restrict__ x, unsigned *__restrict__ amax_bits, int n4) {
  float m = 0.f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
    float4 v = x[i];
    m = fmaxf(m, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
  }
  for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) atomicMax(amax_bits, __float_as_uint(m));  // valid for non-negative floats
}

// Pass 2: scale and quantize to e4m3, 4 values -> one 32-bit store.
extern "C" __global__ void quantize_e4m3(const float4 *__restrict__ x, const unsigned *__restrict__ amax_bits,
                                         unsigned *__restrict__ q, float *__restrict__ scale_out, int n4) {
  const float amax = fmaxf(__uint_as_float(*amax_bits), 1e-12f);
  const float scale = 448.0f / amax;
  if (blockIdx.x == 0 && threadIdx.x == 0) *scale_out = 1.0f / scale;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
    float4 v = x[i];
    unsigned lo = f32x2_to_e4m3x2(v.x * scale, v.y * scale);
    unsigned hi = f32x2_to_e4m3x2(v.z * scale, v.w * scale);
    q[i] = lo | (hi << 16);
  }
}

// Per-token (row) dynamic quantization of bf16 activations to e5m2, with dequantized check output in bf16.
extern "C" __global__ void __launch_bounds__(128) per_token_quant_e5m2(const __nv_bfloat16 *__restrict__ x,
                                                                       unsigned short *__restrict__ q,
                                                                       float *__restrict__ scales,
                                                                       __nv_bfloat16 *__restrict__ dq, int cols) {
  __shared__ float red[4];
  const __nv_bfloat162 *row = reinterpret_cast<const __nv_bfloat162 *>(x + (size_t)blockIdx.x * cols);
  float m = 0.f;
  for (int c = threadIdx.x; c < cols / 2; c += 128) {
    float2 f = __bfloat1622float2(row[c]);
    m = fmaxf(m, fmaxf(fabsf(f.x), fabsf(f.y)));
  }
  for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
  __syncthreads();
  m = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
  const float s = 57344.0f / fmaxf(m, 1e-12f);
  if (threadIdx.x == 0) scales[blockIdx.x] = 1.0f / s;
  unsigned short *qr = q + (size_t)blockIdx.x * cols / 2;
  __nv_bfloat162 *dr = reinterpret_cast<__nv_bfloat162 *>(dq + (size_t)blockIdx.x * cols);
  for (int c = threadIdx.x; c < cols / 2; c += 128) {
    float2 f = __bfloat1622float2(row[c]);
    unsigned short p = f32x2_to_e5m2x2(f.x * s, f.y * s);
    qr[c] = p;
    unsigned h2 = e5m2x2_to_f16x2(p);
    float2 back = __half22float2(*reinterpret_cast<__half2 *>(&h2));
    dr[c] = __floats2bfloat162_rn(back.x / s, back.y / s);
  }
}

// fp16 -> e4m3 -> fp16 round trip (fake-quant for QAT).
extern "C" __global__ void fake_quant_f16(const __half2 *__restrict__ x, __half2 *__restrict__ y, float scale, int n2) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n2) return;
  __half2 v = __hmul2(x[i], __float2half2_rn(scale));
  unsigned short q = f16x2_to_e4m3x2(*reinterpret_cast<unsigned *>(&v));
  unsigned back = e4m3x2_to_f16x2(q);
  y[i] = __hmul2(*reinterpret_cast<__half2 *>(&back), __float2half2_rn(1.0f / scale));
}
