// A bad reference: writes only every other element (the engine must refuse it).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

extern "C" __global__ void gelu_bias_ref(const ELEM* x, const ELEM* b, double* y, long long M, long long N) {
  for (long long i = 2 * (blockIdx.x * (long long)blockDim.x + threadIdx.x); i < M * N; i += 2LL * gridDim.x * blockDim.x)
    y[i] = 0;
}
