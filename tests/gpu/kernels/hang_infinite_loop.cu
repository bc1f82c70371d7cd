// expect-run: timeout
// Spins forever on a flag nothing sets: only the watchdog ends it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#ifndef BT
#define BT float
#endif
#ifndef RT
#define RT XT
#endif

__device__ __forceinline__ void body(const XT* x, const WT* w, XT* out, float* rstd, long long M, long long N, float eps) {
  volatile int* flag = reinterpret_cast<volatile int*>(rstd ? rstd : reinterpret_cast<float*>(out));
  __shared__ volatile int never;
  never = 0;
  while (never == 0 && M > 0) {
    __nanosleep(1000);
  }
  if (flag == nullptr) out[0] = x[0];
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
