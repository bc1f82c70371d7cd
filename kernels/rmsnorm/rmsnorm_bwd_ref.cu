// The fp64 reference of rmsnorm_bwd_declared (rmsnorm_bwd.op.toml). dx: one CTA per row (striding
// over rows past the grid), c1 summed in fp64 over the block. dw: one thread per column summing
// the rows in order. Built by ptxevo with NVRTC and run on the GPU on every gated shape.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

template <class T>
__device__ double load(const T* p, long long i) {
  return (double)(float)p[i];
}

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

extern "C" __global__ void __launch_bounds__(256) rmsnorm_bwd_ref_dx(const XT* x, const WT* w, const XT* dout,
                                                                     const float* rstd, double* dx, long long M,
                                                                     long long N) {
  for (long long m = blockIdx.x; m < M; m += gridDim.x) {
    const long long base = m * N;
    const double rs = rstd[m];
    double c1 = 0;
    for (long long j = threadIdx.x; j < N; j += 256)
      c1 += load(x, base + j) * rs * load(dout, base + j) * (HAS_WEIGHT ? load(w, j) : 1.0);
    c1 = block_sum(c1) / (double)N;
    for (long long j = threadIdx.x; j < N; j += 256) {
      const double xh = load(x, base + j) * rs;
      dx[base + j] = (load(dout, base + j) * (HAS_WEIGHT ? load(w, j) : 1.0) - xh * c1) * rs;
    }
  }
}

extern "C" __global__ void rmsnorm_bwd_ref_dw(const XT* x, const XT* dout, const float* rstd, double* dw, long long M,
                                              long long N) {
  const long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (j >= N) return;
  double acc = 0;
  for (long long m = 0; m < M; ++m) acc += load(dout, m * N + j) * load(x, m * N + j) * (double)rstd[m];
  dw[j] = acc;
}
