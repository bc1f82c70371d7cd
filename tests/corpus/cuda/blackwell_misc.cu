// corpus: archs=sm_100a
// Exercises: Blackwell-only scalar/vector instructions: packed f32x2 arithmetic (add/mul/fma .f32x2), FP4/FP6 conversions (cvt e2m1x2 / e3m2x2 / e2m3x2 / ue8m0x2), stochastic rounding cvt.rs, redux.sync on f32, 256-bit vector loads (ld.global.v8.f32), tcgen05-free Blackwell cluster launch control (clusterlaunchcontrol.try_cancel / query_cancel).

__device__ __forceinline__ unsigned long long f32x2_fma(unsigned long long a, unsigned long long b, unsigned long long c) {
  unsigned long long d;
  asm("fma.rn.f32x2 %0, %1, %2, %3;" : "=l"(d) : "l"(a), "l"(b), "l"(c));
  return d;
}
__device__ __forceinline__ unsigned long long pack2(float lo, float hi) {
  return ((unsigned long long)__float_as_uint(hi) << 32) | __float_as_uint(lo);
}

extern "C" __global__ void packed_f32x2_axpby(const float2 *__restrict__ x, const float2 *__restrict__ y, float2 *__restrict__ z,
                                              float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float2 xv = x[i], yv = y[i];
  unsigned long long xa = pack2(xv.x, xv.y), ya = pack2(yv.x, yv.y), aa = pack2(a, a), bb = pack2(b, b);
  unsigned long long t, s, m;
  asm("mul.rn.f32x2 %0, %1, %2;" : "=l"(t) : "l"(ya), "l"(bb));
  unsigned long long r = f32x2_fma(xa, aa, t);
  asm("add.rz.f32x2 %0, %1, %2;" : "=l"(s) : "l"(r), "l"(xa));
  asm("sub.f32x2 %0, %1, %2;" : "=l"(m) : "l"(s), "l"(ya));
  z[i] = make_float2(__uint_as_float((unsigned)m), __uint_as_float((unsigned)(m >> 32)));
}

extern "C" __global__ void fp4_fp6_convert(const float4 *__restrict__ x, unsigned *__restrict__ out, const unsigned *__restrict__ rbits,
                                           int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float4 v = x[i];
  unsigned short e2m1;  // two fp4 values in the low byte
  asm("{\n\t.reg .b8 t;\n\tcvt.rn.satfinite.e2m1x2.f32 t, %2, %1;\n\tcvt.u16.u8 %0, t;\n\t}" : "=h"(e2m1) : "f"(v.x), "f"(v.y));
  unsigned short e3m2, e2m3, ue8m0;
  asm("cvt.rn.satfinite.e3m2x2.f32 %0, %2, %1;" : "=h"(e3m2) : "f"(v.x), "f"(v.y));
  asm("cvt.rn.satfinite.e2m3x2.f32 %0, %2, %1;" : "=h"(e2m3) : "f"(v.z), "f"(v.w));
  asm("cvt.rz.satfinite.ue8m0x2.f32 %0, %2, %1;" : "=h"(ue8m0) : "f"(fabsf(v.z)), "f"(fabsf(v.w)));
  unsigned h2;
  asm("cvt.rn.f16x2.e2m3x2 %0, %1;" : "=r"(h2) : "h"(e2m3));
  unsigned rs;  // stochastic rounding of four floats to e4m3x4 using random bits
  asm("cvt.rs.satfinite.e4m3x4.f32 %0, {%1, %2, %3, %4}, %5;" : "=r"(rs) : "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(rbits[i]));
  unsigned bf2;
  asm("cvt.rs.satfinite.bf16x2.f32 %0, %1, %2, %3;" : "=r"(bf2) : "f"(v.x), "f"(v.y), "r"(rbits[i] ^ 0x9e3779b9u));
  out[3 * i] = (unsigned)e2m1 | ((unsigned)e3m2 << 16);
  out[3 * i + 1] = ((unsigned)ue8m0 << 16) ^ h2 ^ bf2;
  out[3 * i + 2] = rs;
}

extern "C" __global__ void redux_f32_and_wide_loads(const float *__restrict__ x, float *__restrict__ out, int n8) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  if (i < n8)
    asm volatile("ld.global.v8.f32 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8];"
                 : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3]), "=f"(v[4]), "=f"(v[5]), "=f"(v[6]), "=f"(v[7])
                 : "l"(x + 8 * i));
  float m = fmaxf(fmaxf(fmaxf(v[0], v[1]), fmaxf(v[2], v[3])), fmaxf(fmaxf(v[4], v[5]), fmaxf(v[6], v[7])));
  float wmax, wmin_abs;
  asm volatile("redux.sync.max.NaN.f32 %0, %1, 0xffffffff;" : "=f"(wmax) : "f"(m));
  asm volatile("redux.sync.min.abs.f32 %0, %1, 0xffffffff;" : "=f"(wmin_abs) : "f"(v[0]));
  if ((threadIdx.x & 31) == 0) {
    out[2 * (i >> 5)] = wmax;
    out[2 * (i >> 5) + 1] = wmin_abs;
  }
}

// Persistent-kernel work stealing with cluster launch control: try to cancel a not-yet-launched CTA and take its work.
extern "C" __global__ void __launch_bounds__(128) clc_persistent(float *__restrict__ data, int n_tiles) {
  __shared__ __align__(16) unsigned long long resp[2];
  __shared__ __align__(8) unsigned long long bar;
  __shared__ int next_tile;
  unsigned bar_a = (unsigned)__cvta_generic_to_shared(&bar);
  unsigned resp_a = (unsigned)__cvta_generic_to_shared(resp);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar_a) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  int tile = blockIdx.x;
  unsigned phase = 0;
  while (tile < n_tiles) {
    data[tile * 128 + threadIdx.x] *= 2.0f;
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 16;" ::"r"(bar_a) : "memory");
      asm volatile("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%0], [%1];" ::"r"(
                       resp_a),
                   "r"(bar_a)
                   : "memory");
      asm volatile(
          "{\n\t.reg .pred P1;\n\tCLC_WAIT:\n\tmbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n\t@!P1 bra "
          "CLC_WAIT;\n\t}" ::"r"(bar_a),
          "r"(phase)
          : "memory");
      unsigned ok, cx;
      asm volatile(
          "{\n\t.reg .b128 r;\n\t.reg .pred p;\n\tld.shared.b128 r, [%2];\n\t"
          "clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 p, r;\n\tselp.u32 %0, 1, 0, p;\n\t"
          "clusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128 %1, r;\n\t}"
          : "=r"(ok), "=r"(cx)
          : "r"(resp_a)
          : "memory");
      next_tile = ok ? (int)cx : n_tiles;
    }
    phase ^= 1;
    __syncthreads();
    tile = next_tile;
    __syncthreads();
  }
}
