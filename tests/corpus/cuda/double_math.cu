// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: fp64 arithmetic (fma.rn.f64, div.rn.f64, sqrt.rn.f64, rcp), double intrinsics (__dadd_rz, __dmul_ru, __fma_rd, __drcp_rn, __dsqrt_rd), libm double (exp, log, sin, pow), conversions f64<->f32/s32/u64, hi/lo word access.

extern "C" __global__ void dgemv_rowmajor(const double *__restrict__ A, const double *__restrict__ x,
                                          double *__restrict__ y, int rows, int cols, double alpha, double beta) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const double *a = A + (size_t)r * cols;
  double acc = 0.0;
#pragma unroll 4
  for (int c = 0; c < cols; ++c) acc = fma(a[c], __ldg(x + c), acc);
  y[r] = alpha * acc + beta * y[r];
}

extern "C" __global__ void double_intrinsics(const double *__restrict__ x, const double *__restrict__ y,
                                             double *__restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double a = x[i], b = y[i];
  double r = __dadd_rz(a, b) + __dadd_ru(a, b) + __dsub_rd(a, b) + __dmul_ru(a, b) + __dmul_rn(a, b);
  r += __fma_rd(a, b, r) + __fma_ru(a, b, 1.0) + __fma_rz(a, b, 2.0) + __fma_rn(a, b, 3.0);
  r += __drcp_rn(b) + __drcp_rz(b) + __ddiv_ru(a, b) + __ddiv_rn(a, b) + __dsqrt_rd(fabs(a)) + __dsqrt_rn(fabs(b));
  r += a / b + sqrt(fabs(a)) + rsqrt(fabs(b) + 1.0);
  out[i] = r;
}

extern "C" __global__ void libm_f64(const double *__restrict__ x, double *__restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double v = x[i];
  out[i] = exp(v) + log(fabs(v) + 1.0) + sin(v) * cos(v) + pow(fabs(v), 0.3) + tanh(v) + atan(v) + erf(v) +
           floor(v) + ceil(v) + trunc(v) + round(v) + rint(v) + fmin(v, 2.0) + fmax(v, -2.0) + copysign(1.0, v) +
           log2(fabs(v) + 2.0) + exp2(v * 0.5) + cbrt(v) + fmod(v, 1.25);
}

extern "C" __global__ void double_conversions(const double *__restrict__ x, float *__restrict__ f,
                                              int *__restrict__ si, unsigned long long *__restrict__ u64,
                                              long long *__restrict__ s64, double *__restrict__ back, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double v = x[i];
  f[i] = __double2float_rn(v) + __double2float_rz(v) + __double2float_ru(v) + __double2float_rd(v);
  si[i] = __double2int_rn(v) + __double2int_rz(v) + __double2int_ru(v) + __double2int_rd(v) +
          __double2hiint(v) + __double2loint(v);
  u64[i] = __double2ull_rn(fabs(v)) + __double2ull_rz(fabs(v)) + (unsigned long long)__double_as_longlong(v);
  s64[i] = __double2ll_rd(v) + __double2ll_ru(v) + (long long)v;
  int hi = __double2hiint(v), lo = __double2loint(v);
  back[i] = __hiloint2double(hi ^ 0x80000000, lo) + __int2double_rn(si[i]) + __ll2double_rn(s64[i]) +
            __ull2double_rz(u64[i]) + __uint2double_rn((unsigned)lo) + (double)f[i];
}

// Kahan-compensated dot product in double, with warp reduction of (sum, compensation) pairs.
extern "C" __global__ void kahan_dot(const double *__restrict__ a, const double *__restrict__ b,
                                     double *__restrict__ out, int n) {
  double sum = 0.0, c = 0.0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    double yv = __fma_rn(a[i], b[i], -c);
    double t = sum + yv;
    c = (t - sum) - yv;
    sum = t;
  }
  for (int off = 16; off; off >>= 1) {
    sum += __shfl_xor_sync(0xffffffffu, sum, off);
    c += __shfl_xor_sync(0xffffffffu, c, off);
  }
  if ((threadIdx.x & 31) == 0) atomicAdd(out, sum - c);
}
