// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: fast-math intrinsics (rsqrtf, __expf, __logf, __sinf/__cosf, __fdividef, __saturatef, __powf), IEEE-rounded intrinsics (__fadd_rz, __fmul_ru, __fmaf_rn, __frcp_rd, __fsqrt_ru, __fdiv_rn), libdevice sinf/expf/erff/atan2f, tanh.approx/ex2.approx/lg2.approx via asm, rounding.

__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float ex2_approx_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float lg2_approx(float x) {
  float y;
  asm("lg2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

extern "C" __global__ void fast_intrinsics(const float *__restrict__ x, float *__restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  float a = rsqrtf(fabsf(v) + 1e-6f);
  float b = __expf(v * 0.5f);
  float c = __logf(fabsf(v) + 1.0f);
  float d = __sinf(v) * __cosf(v);
  float e = __fdividef(v, a + 2.0f);
  float f = __saturatef(v);
  float g = __powf(fabsf(v) + 1.0f, 0.75f);
  float h = __tanf(v * 0.1f);
  float s, co;
  __sincosf(v, &s, &co);
  float t = tanh_approx(v) + ex2_approx_ftz(-fabsf(v)) + lg2_approx(fabsf(v) + 2.0f);
  out[i] = a + b + c + d + e + f + g + h + s * co + t + __exp10f(v * 0.01f) + __log2f(b) + __log10f(b);
}

extern "C" __global__ void ieee_rounded(const float *__restrict__ x, const float *__restrict__ y,
                                        float *__restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = x[i], b = y[i];
  float r = __fadd_rz(a, b) + __fadd_ru(a, b) + __fsub_rd(a, b) + __fmul_ru(a, b) + __fmul_rz(a, b);
  r += __fmaf_rn(a, b, r) + __fmaf_rz(a, b, 1.0f) + __fmaf_ru(a, b, 2.0f) + __fmaf_rd(a, b, 3.0f);
  r += __frcp_rn(b) + __frcp_rd(b) + __fsqrt_ru(fabsf(a)) + __fsqrt_rn(fabsf(b)) + __fdiv_rn(a, b) +
       __fdiv_rz(a, b) + __frsqrt_rn(fabsf(a) + 1.0f);
  out[i] = r;
}

extern "C" __global__ void libm_f32(const float *__restrict__ x, float *__restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  float r = sinf(v) + cosf(v) + expf(v) + logf(fabsf(v) + 1.f) + erff(v) + atan2f(v, 1.5f) + sqrtf(fabsf(v)) +
            cbrtf(v) + tanhf(v) + log1pf(fabsf(v)) + expm1f(v * 0.1f) + hypotf(v, 2.f) + powf(fabsf(v), 1.3f) +
            fmodf(v, 0.7f) + erfcinvf(0.5f + 0.25f * __saturatef(v)) + normcdff(v);
  r += floorf(v) + ceilf(v) + truncf(v) + roundf(v) + rintf(v) + nearbyintf(v * 3.f) + copysignf(2.f, v) +
       fminf(v, 0.f) + fmaxf(v, 1.f) + fdimf(v, 0.5f) + ldexpf(v, 3) + scalbnf(v, -2) + (float)ilogbf(v + 3.f);
  int ex;
  float mant = frexpf(v, &ex);
  r += mant + (float)ex + (float)lrintf(v) + (float)llroundf(v);
  out[i] = isnan(r) ? 0.f : (isinf(r) ? 1.f : r);
}

// Softplus/sigmoid with ftz fast paths; the file is compiled with and without -G/-Ofc.
extern "C" __global__ void activations(const float4 *__restrict__ x, float4 *__restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float4 v = x[i];
  float4 r;
  r.x = v.x > 20.f ? v.x : __logf(1.f + __expf(v.x));
  r.y = __fdividef(1.f, 1.f + __expf(-v.y));
  r.z = 0.5f * v.z * (1.f + tanh_approx(0.7978845608f * (v.z + 0.044715f * v.z * v.z * v.z)));
  r.w = v.w * __frcp_rn(1.f + ex2_approx_ftz(-1.4426950409f * v.w));
  out[i] = r;
}
