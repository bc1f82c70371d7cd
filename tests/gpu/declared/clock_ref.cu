// A bad reference: its outputs depend on when it runs (the engine must refuse it).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

extern "C" __global__ void gelu_bias_ref(const ELEM* x, const ELEM* b, double* y, long long M, long long N) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < M * N; i += (long long)gridDim.x * blockDim.x)
    y[i] = (double)clock64();
}
