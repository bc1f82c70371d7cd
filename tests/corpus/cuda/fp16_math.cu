// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: half / half2 arithmetic (hadd2, hfma2, hmul2.sat, hmax/hmin, habs, hneg), comparisons, conversions (cvt.rn.f16x2.f32, f16<->f32/int), h2exp/h2rcp approximations, packed fp16 GELU.
#include <cuda_fp16.h>

__device__ __forceinline__ __half2 gelu_tanh_h2(__half2 x) {
  const __half2 k0 = __float2half2_rn(0.7978845608f);
  const __half2 k1 = __float2half2_rn(0.044715f);
  const __half2 half = __float2half2_rn(0.5f);
  const __half2 one = __float2half2_rn(1.0f);
  __half2 x3 = __hmul2(__hmul2(x, x), x);
  __half2 inner = __hmul2(k0, __hfma2(k1, x3, x));
  float2 f = __half22float2(inner);
  __half2 t = __floats2half2_rn(tanhf(f.x), tanhf(f.y));
  return __hmul2(__hmul2(half, x), __hadd2(one, t));
}

extern "C" __global__ void gelu_fp16(const __half2 *__restrict__ in, __half2 *__restrict__ out, int n2) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n2) out[i] = gelu_tanh_h2(in[i]);
}

extern "C" __global__ void half_ops(const __half *__restrict__ a, const __half *__restrict__ b,
                                    __half *__restrict__ out, float *__restrict__ fout, int *__restrict__ iout,
                                    int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half x = a[i], y = b[i];
  __half s = __hadd(x, y);
  __half d = __hsub_sat(x, y);
  __half m = __hfma_relu(x, y, s);
  __half q = __hdiv(x, __hadd(y, __float2half(1.0f)));
  __half mx = __hmax(x, y), mn = __hmin_nan(x, y);
  __half ab = __habs(__hneg(x));
  bool lt = __hlt(x, y), eq = __heq(x, y), nan = __hisnan(y);
  __half r = hrcp(__hadd(ab, __float2half(0.5f)));
  __half e = hexp(__hmul(x, __float2half(0.1f)));
  __half l = hlog(__hadd(ab, __float2half(1.0f)));
  __half sq = hsqrt(ab);
  out[i] = __hadd(__hadd(__hadd(s, d), __hadd(m, q)), __hadd(__hadd(mx, mn), __hadd(__hadd(r, e), __hadd(l, sq))));
  fout[i] = __half2float(x) * __low2float(__halves2half2(x, y));
  iout[i] = __half2int_rn(s) + __half2int_rz(d) + (int)__half2uint_rd(ab) + lt + 2 * eq + 4 * nan +
            (int)__half_as_ushort(y) + __half2short_rn(mx);
}

extern "C" __global__ void half2_ops(const __half2 *__restrict__ a, const __half2 *__restrict__ b,
                                     __half2 *__restrict__ out, float2 *__restrict__ f2, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half2 x = a[i], y = b[i];
  __half2 s = __hadd2_sat(x, y);
  __half2 p = __hmul2_sat(x, y);
  __half2 f = __hfma2_sat(x, y, s);
  __half2 mx = __hmax2(x, y), mn = __hmin2(x, y);
  __half2 ab = __habs2(x);
  __half2 ng = __hneg2(y);
  __half2 cmp = __hle2(x, y);
  __half2 swapped = __lowhigh2highlow(x);
  __half2 lo = __low2half2(y), hi = __high2half2(y);
  __half2 ex = h2exp2(__hmul2(x, __float2half2_rn(0.25f)));
  __half2 rc = h2rcp(__hadd2(ab, __float2half2_rn(1.0f)));
  __half2 rs = h2rsqrt(__hadd2(ab, __float2half2_rn(1.0f)));
  __half2 dv = __h2div(x, __hadd2(ab, __float2half2_rn(2.0f)));
  out[i] = __hadd2(__hadd2(__hadd2(s, p), __hadd2(f, mx)),
                   __hadd2(__hadd2(mn, ng), __hadd2(__hmul2(cmp, swapped), __hadd2(__hadd2(lo, hi), __hadd2(ex, __hadd2(rc, __hadd2(rs, dv)))))));
  f2[i] = __half22float2(__hcmadd(x, y, s));
  if (__hbeq2(x, y)) f2[i].x += 1.0f;
}

extern "C" __global__ void f32_to_f16_pack(const float4 *__restrict__ in, uint2 *__restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float4 v = in[i];
  __half2 lo = __float22half2_rn(make_float2(v.x, v.y));
  __half2 hi = __floats2half2_rn(v.z, v.w);
  __half h_rz = __float2half_rz(v.x), h_ru = __float2half_ru(v.y), h_rd = __float2half_rd(v.z);
  uint2 o;
  o.x = *reinterpret_cast<unsigned *>(&lo) ^ __half_as_ushort(h_rz);
  o.y = *reinterpret_cast<unsigned *>(&hi) ^ ((unsigned)__half_as_ushort(h_ru) << 16) ^ __half_as_ushort(h_rd);
  out[i] = o;
}
