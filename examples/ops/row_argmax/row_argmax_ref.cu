// The fp64 reference of row_argmax: one thread scans one row in order, so the first index of
// the maximum wins. Built by ptxevo with NVRTC and run on the GPU on every gated shape.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

extern "C" __global__ void row_argmax_ref(const ELEM* x, double* idx, long long M, long long N) {
  const long long m = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (m >= M) return;
  const ELEM* row = x + m * N;
  double best = (double)(float)row[0];
  long long at = 0;
  for (long long j = 1; j < N; ++j) {
    const double v = (double)(float)row[j];
    if (v > best) {
      best = v;
      at = j;
    }
  }
  idx[m] = (double)at;
}
