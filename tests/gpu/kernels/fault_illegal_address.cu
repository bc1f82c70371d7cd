// expect-run: fault (CUDA_ERROR_ILLEGAL_ADDRESS)
// Writes through a wild pointer: the launch faults and the worker's context is lost.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

extern "C" __global__ void rmsnorm_fwd(const XT* x, const WT* w, XT* out, float* rstd, long long M, long long N,
                                       float eps) {
  XT* wild = reinterpret_cast<XT*>(0x10ull << 40);
  wild[threadIdx.x + blockIdx.x * blockDim.x] = x[0];
}
