// expect-run: timeout
// Spins forever on a flag nothing sets: only the watchdog ends it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

extern "C" __global__ void rmsnorm_fwd(const XT* x, const WT* w, XT* out, float* rstd, long long M, long long N,
                                       float eps) {
  volatile int* flag = reinterpret_cast<volatile int*>(rstd ? rstd : reinterpret_cast<float*>(out));
  __shared__ volatile int never;
  never = 0;
  while (never == 0 && M > 0) {
    __nanosleep(1000);
  }
  if (flag == nullptr) out[0] = x[0];
}
