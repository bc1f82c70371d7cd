// The KDA forward's fp64 reference kernel (kda_device_reference.hpp), built by the engine with
// NVRTC after KDA_GATE_SOFTPLUS, KDA_LOWER_BOUND and KDA_SCALE (kda_fwd_device_reference_source),
// and compiled as host C++ by kernels/tests/kda_device_reference_emulation_test.cpp. Thread i is
// key channel i of one (sequence, head); s[c] = S[i][j0 + c].
#ifndef KDA_REF_ENTRY
#define KDA_REF_ENTRY extern "C" __global__
#endif
#define KD 128
#define VB 16
#define WARPS (KD / 32)
__device__ __forceinline__ double bf16(const unsigned short* p, long long i) {
  return (double)__uint_as_float((unsigned int)p[i] << 16);
}
__device__ __forceinline__ double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
// Sums v[c] over the CTA's KD threads for every c; every thread gets the VB totals in tot.
__device__ __forceinline__ void column_sums(double (&v)[VB], double (*part)[VB], double* tot) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int c = 0; c < VB; ++c) {
    double x = v[c];
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    if (lane == 0) part[warp][c] = x;
  }
  __syncthreads();
  if (threadIdx.x < VB) {
    double x = 0;
    for (int w = 0; w < WARPS; ++w) x += part[w][threadIdx.x];
    tot[threadIdx.x] = x;
  }
  __syncthreads();
}
__device__ __forceinline__ double block_sum(double v, double* sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  double x = 0;
  for (int w = 0; w < WARPS; ++w) x += sh[w];
  return x;
}
// cu_seqlens null: row n is tokens [n * T, (n + 1) * T).
KDA_REF_ENTRY void __launch_bounds__(KD) ptxevo_ref_kda_fwd(
    const unsigned short* q, const unsigned short* k, const unsigned short* v, const unsigned short* g,
    const unsigned short* beta, const float* A_log, const float* dt_bias, const long long* cu_seqlens,
    const float* initial_state, double* out, double* final_state, long long T, int H) {
  __shared__ double part[WARPS][VB];
  __shared__ double tot[VB];
  __shared__ double red[WARPS];
  const long long n = blockIdx.x;
  const int h = blockIdx.y, j0 = blockIdx.z * VB, i = threadIdx.x;
  const long long bos = cu_seqlens ? cu_seqlens[n] : n * T, eos = cu_seqlens ? cu_seqlens[n + 1] : (n + 1) * T;
  const long long state = ((n * H + h) * (long long)KD) * KD;  // V-first [N, H, V, K]
  double s[VB];
#pragma unroll
  for (int c = 0; c < VB; ++c) s[c] = initial_state ? (double)initial_state[state + (long long)(j0 + c) * KD + i] : 0.0;
  const double e_alog = exp((double)A_log[h]);
  const double bias = (double)dt_bias[h * KD + i];
  double w[VB];
  for (long long t = bos; t < eos; ++t) {
    const long long row = (t * H + h) * KD;
    double qi = bf16(q, row + i), ki = bf16(k, row + i);
    const double x = bf16(g, row + i) + bias;
#if KDA_GATE_SOFTPLUS
    const double a = -e_alog * (x > 20.0 ? x : log1p(exp(x)));
#else
    const double a = KDA_LOWER_BOUND * sigmoid(e_alog * x);
#endif
    // x / sqrt(sum x^2 + 1e-6) for q and k, as the host multiplies by the reciprocal.
    qi *= 1.0 / sqrt(block_sum(qi * qi, red) + 1e-6);
    ki *= 1.0 / sqrt(block_sum(ki * ki, red) + 1e-6);
    const double b = sigmoid(bf16(beta, t * H + h));
    const double d = exp(a);
    // 1) decay the key rows, 2) residual against the decayed state.
#pragma unroll
    for (int c = 0; c < VB; ++c) {
      s[c] *= d;
      w[c] = ki * s[c];
    }
    column_sums(w, part, tot);
    double r[VB];
#pragma unroll
    for (int c = 0; c < VB; ++c) r[c] = bf16(v, row + j0 + c) - tot[c];
    // 3) rank-1 write, 4) read after the update.
#pragma unroll
    for (int c = 0; c < VB; ++c) {
      s[c] += b * ki * r[c];
      w[c] = qi * s[c];
    }
    column_sums(w, part, tot);
    if (i < VB) out[row + j0 + i] = KDA_SCALE * tot[i];
  }
  if (final_state)
#pragma unroll
    for (int c = 0; c < VB; ++c) final_state[state + (long long)(j0 + c) * KD + i] = s[c];
}
#undef KD
#undef VB
#undef WARPS
