// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: __nv_bfloat16 / __nv_bfloat162 arithmetic and conversions (cvt.rn.bf16x2.f32, bf16->f32 via shift/prmt), fma.rn.bf16x2, min/max, relu, bf16 SiLU-and-mul epilogue.
#include <cuda_bf16.h>

__device__ __forceinline__ float silu(float x) { return x / (1.0f + __expf(-x)); }

// SwiGLU: out = silu(gate) * up, bf16 in / bf16 out, 8 elements per thread (128-bit).
extern "C" __global__ void silu_and_mul_bf16(const __nv_bfloat16 *__restrict__ gate_up,
                                             __nv_bfloat16 *__restrict__ out, int d) {
  const int row = blockIdx.x;
  const uint4 *g = reinterpret_cast<const uint4 *>(gate_up + (size_t)row * 2 * d);
  const uint4 *u = reinterpret_cast<const uint4 *>(gate_up + (size_t)row * 2 * d + d);
  uint4 *o = reinterpret_cast<uint4 *>(out + (size_t)row * d);
  for (int i = threadIdx.x; i < d / 8; i += blockDim.x) {
    uint4 gv = g[i], uv = u[i];
    const __nv_bfloat162 *g2 = reinterpret_cast<const __nv_bfloat162 *>(&gv);
    const __nv_bfloat162 *u2 = reinterpret_cast<const __nv_bfloat162 *>(&uv);
    uint4 ov;
    __nv_bfloat162 *o2 = reinterpret_cast<__nv_bfloat162 *>(&ov);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float2 gf = __bfloat1622float2(g2[k]);
      float2 uf = __bfloat1622float2(u2[k]);
      o2[k] = __floats2bfloat162_rn(silu(gf.x) * uf.x, silu(gf.y) * uf.y);
    }
    o[i] = ov;
  }
}

extern "C" __global__ void bf16x2_ops(const __nv_bfloat162 *__restrict__ a, const __nv_bfloat162 *__restrict__ b,
                                      __nv_bfloat162 *__restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __nv_bfloat162 x = a[i], y = b[i];
  __nv_bfloat162 s = __hadd2(x, y);
  __nv_bfloat162 p = __hmul2(x, y);
  __nv_bfloat162 f = __hfma2(x, y, s);
  __nv_bfloat162 fr = __hfma2_relu(x, y, p);
  __nv_bfloat162 mx = __hmax2(x, y), mn = __hmin2_nan(x, y);
  __nv_bfloat162 ab = __habs2(x), ng = __hneg2(y);
  __nv_bfloat162 sub = __hsub2(f, fr);
  __nv_bfloat162 sel = __hgt2(x, y);
  out[i] = __hadd2(__hadd2(sub, __hmul2(sel, mx)), __hadd2(mn, __hadd2(ab, ng)));
}

extern "C" __global__ void bf16_convert(const float *__restrict__ f, const __nv_bfloat16 *__restrict__ h,
                                        __nv_bfloat16 *__restrict__ o_bf, float *__restrict__ o_f,
                                        int *__restrict__ o_i, double *__restrict__ o_d, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = f[i];
  __nv_bfloat16 rn = __float2bfloat16_rn(v);
  __nv_bfloat16 rz = __float2bfloat16_rz(v);
  __nv_bfloat16 ru = __float2bfloat16_ru(v);
  __nv_bfloat16 rd = __float2bfloat16_rd(v);
  __nv_bfloat16 hv = h[i];
  o_bf[i] = __hadd(__hadd(rn, rz), __hadd(ru, rd));
  o_f[i] = __bfloat162float(hv) + __low2float(__halves2bfloat162(rn, hv));
  o_i[i] = __bfloat162int_rn(hv) + (int)__bfloat16_as_ushort(rz) + __bfloat162int_rz(ru);
  o_d[i] = (double)__bfloat162float(__double2bfloat16((double)v * 3.0));
  __nv_bfloat16 e = hexp(hv);
  __nv_bfloat16 r = hrcp(__hadd(__habs(hv), __float2bfloat16(1.0f)));
  __nv_bfloat16 c = hcos(hv);
  o_bf[n + i] = __hadd(e, __hadd(r, c));
}

// Row-wise bf16 dot products with f32 accumulation, using packed bf16 multiply into f32 via conversion.
extern "C" __global__ void bf16_gemv(const __nv_bfloat16 *__restrict__ A, const __nv_bfloat16 *__restrict__ x,
                                     float *__restrict__ y, int rows, int cols) {
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  int lane = threadIdx.x & 31;
  if (warp >= rows) return;
  const uint4 *a = reinterpret_cast<const uint4 *>(A + (size_t)warp * cols);
  const uint4 *xv = reinterpret_cast<const uint4 *>(x);
  float acc = 0.f;
  for (int c = lane; c < cols / 8; c += 32) {
    uint4 av = __ldg(a + c), bv = __ldg(xv + c);
    const __nv_bfloat162 *a2 = reinterpret_cast<const __nv_bfloat162 *>(&av);
    const __nv_bfloat162 *b2 = reinterpret_cast<const __nv_bfloat162 *>(&bv);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float2 fa = __bfloat1622float2(a2[k]);
      float2 fb = __bfloat1622float2(b2[k]);
      acc = fmaf(fa.x, fb.x, acc);
      acc = fmaf(fa.y, fb.y, acc);
    }
  }
  for (int off = 16; off; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) y[warp] = acc;
}
