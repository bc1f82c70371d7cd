// expect-run: fault (CUDA_ERROR_ILLEGAL_ADDRESS)
// Writes through a wild pointer: the launch faults and the worker's context is lost.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#ifndef BT
#define BT float
#endif
#ifndef RT
#define RT XT
#endif

__device__ __forceinline__ void body(const XT* x, const WT* w, XT* out, float* rstd, long long M, long long N, float eps) {
  XT* wild = reinterpret_cast<XT*>(0x10ull << 40);
  wild[threadIdx.x + blockIdx.x * blockDim.x] = x[0];
}

// Every entry the seed's launch plan can name, with the seed's signature (bias and residual null).
#define ENTRY(NAME)                                                                                            \
  extern "C" __global__ void NAME(const XT* x, const WT* w, const BT* b, const XT* res, XT* out, RT* res_out, \
                                  float* rstd, long long M, long long N, float eps) {                          \
    body(x, w, out, rstd, M, N, eps);                                                                          \
  }
ENTRY(rmsnorm_fwd_tpr1)
ENTRY(rmsnorm_fwd_tpr2)
ENTRY(rmsnorm_fwd_tpr4)
ENTRY(rmsnorm_fwd_tpr8)
ENTRY(rmsnorm_fwd_tpr16)
ENTRY(rmsnorm_fwd_tpr32)
ENTRY(rmsnorm_fwd_tpr64)
ENTRY(rmsnorm_fwd_tpr128)
ENTRY(rmsnorm_fwd_tpr256)
ENTRY(rmsnorm_fwd_tpr512)
ENTRY(rmsnorm_fwd_tpr1024)
ENTRY(rmsnorm_fwd_cluster)
