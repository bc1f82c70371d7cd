// corpus: archs=sm_80,sm_90a opts=-O0,-O2,-O2 -g
// Exercises (LLVM NVPTX): _Float16 and __bf16 scalar/vector arithmetic (f16x2 packed ops, bf16 fma), conversions to/from f32/f64/int, NVVM math builtins (ex2/lg2/rsqrt/rcp approximations, fma rounding modes, fmin/fmax, sqrt), integer bit builtins (popc, clz, bitreverse, prmt, mulhi, funnel shifts via __builtin_rotate).
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))

typedef _Float16 half2v __attribute__((ext_vector_type(2)));
typedef __bf16 bf162v __attribute__((ext_vector_type(2)));

extern "C" __global__ void f16_ops(const half2v *__restrict__ a, const half2v *__restrict__ b, half2v *__restrict__ out,
                                   float *__restrict__ fout, int n) {
  int i = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() + __nvvm_read_ptx_sreg_tid_x();
  if (i >= n) return;
  half2v x = a[i], y = b[i];
  half2v s = x + y;
  half2v p = x * y;
  half2v f = x * y + s;
  half2v m = x > y ? x : y;
  out[i] = f - p + m;
  _Float16 h = x.x / (y.y + (_Float16)1.0f);
  fout[i] = (float)h + (float)s.y;
}

extern "C" __global__ void bf16_ops(const bf162v *__restrict__ a, const float *__restrict__ w, bf162v *__restrict__ out,
                                    double *__restrict__ dout, int n) {
  int i = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() + __nvvm_read_ptx_sreg_tid_x();
  if (i >= n) return;
  bf162v x = a[i];
  float fx = (float)x.x, fy = (float)x.y;
  float wi = w[i];
  bf162v r = {(__bf16)(fx * wi), (__bf16)(fy * wi)};
  bf162v q = r * x + x;
  out[i] = q;
  dout[i] = (double)q.x + (double)(int)fy;
}

extern "C" __global__ void nvvm_math(const float *__restrict__ x, const unsigned *__restrict__ u, float *__restrict__ out,
                                     unsigned *__restrict__ uout, int n) {
  int i = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() + __nvvm_read_ptx_sreg_tid_x();
  if (i >= n) return;
  float v = x[i];
  float r = __nvvm_ex2_approx_f(v) + __nvvm_lg2_approx_f(__builtin_fabsf(v) + 1.0f) + __nvvm_rsqrt_approx_f(__builtin_fabsf(v) + 1.0f) +
            __nvvm_rcp_approx_ftz_f(v + 3.0f) + __nvvm_fma_rz_f(v, v, 1.0f) + __nvvm_fma_rn_ftz_f(v, 2.0f, v) +
            __nvvm_fmin_f(v, 0.5f) + __nvvm_fmax_ftz_f(v, -0.5f) + __builtin_sqrtf(__builtin_fabsf(v)) +
            __nvvm_sin_approx_f(v) + __nvvm_cos_approx_f(v) + __builtin_truncf(v) + __builtin_roundevenf(v) +
            __nvvm_div_approx_f(v, 7.0f) + __nvvm_saturate_f(v);
  double d = (double)v;
  r += (float)(__nvvm_rcp_rn_d(d + 2.0) + __builtin_sqrt(d * d + 1.0) + __builtin_fma(d, d, 1.0));
  out[i] = r;
  unsigned w = u[i];
  uout[i] = __builtin_popcount(w) + __builtin_clz(w | 1) + __builtin_bitreverse32(w) + __nvvm_prmt(w, ~w, 0x7531) +
            (unsigned)__nvvm_mulhi_ui(w, 0x9e3779b9u) + __builtin_rotateleft32(w, i & 31) + __builtin_rotateright32(w, 7) +
            (unsigned)(__nvvm_mul24_i((int)w, 3)) + (unsigned)__builtin_ctz(w | 0x80000000u);
}
