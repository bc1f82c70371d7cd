// The fp64 reference of gelu_bias: built by ptxevo with NVRTC (never by a candidate) and run on
// the GPU on every gated shape. ELEM comes from the op's dtype option.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ double load(const ELEM* p, long long i) { return (double)(float)p[i]; }

extern "C" __global__ void gelu_bias_ref(const ELEM* x, const ELEM* b, double* y, long long M, long long N) {
  const long long total = M * N;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    const double v = load(x, i) + load(b, i % N);
    // erfc, not 1 + erf: the sum cancels for v below about -6 even in fp64.
    y[i] = 0.5 * v * erfc(-v * 0.70710678118654752440);
  }
}
