// The fp64 reference of rmsnorm_fwd_declared (rmsnorm_fwd.op.toml): one CTA per row (striding
// over rows past the grid), the sum of squares in fp64 over the block. Built by ptxevo with NVRTC
// and run on the GPU on every gated shape. XT, WT, BT, RT and the HAS_* / STORE_RSTD switches
// come from the op's options. eps arrives as the float the kernel gets.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

template <class T>
__device__ double load(const T* p, long long i) {
  return (double)(float)p[i];
}

// The sum over the block (256 threads); every thread gets it.
__device__ double block_sum(double v) {
  __shared__ double sh[256];
  __syncthreads();
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int o = 128; o > 0; o >>= 1) {
    if (threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
    __syncthreads();
  }
  return sh[0];
}

extern "C" __global__ void __launch_bounds__(256) rmsnorm_fwd_ref(const XT* x, const WT* w, const BT* b, const XT* res,
                                                                  double* out, double* res_out, double* rstd, long long M,
                                                                  long long N, float eps) {
  for (long long m = blockIdx.x; m < M; m += gridDim.x) {
    const long long base = m * N;
    double ss = 0;
    for (long long j = threadIdx.x; j < N; j += 256) {
      double v = load(x, base + j);
      if (HAS_RESIDUAL) v += load(res, base + j);
      ss += v * v;
    }
    const double r = 1.0 / sqrt(block_sum(ss) / (double)N + (double)eps);
    if (STORE_RSTD && threadIdx.x == 0) rstd[m] = r;
    for (long long j = threadIdx.x; j < N; j += 256) {
      double v = load(x, base + j);
      if (HAS_RESIDUAL) v += load(res, base + j);
      const double wv = HAS_WEIGHT ? load(w, j) : 1.0;
      const double bv = HAS_BIAS ? load(b, j) : 0.0;
      out[base + j] = v * r * wv + bv;
      if (HAS_RESIDUAL) res_out[base + j] = v;
    }
  }
}
