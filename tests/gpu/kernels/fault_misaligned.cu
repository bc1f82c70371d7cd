// expect-run: fault (CUDA_ERROR_MISALIGNED_ADDRESS)
// A 16-byte vector load from an address that is 2 bytes off.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

extern "C" __global__ void rmsnorm_fwd(const XT* x, const WT* w, XT* out, float* rstd, long long M, long long N,
                                       float eps) {
  const char* p = reinterpret_cast<const char*>(x) + 2;
  float4 v = *reinterpret_cast<const float4*>(p);
  if (v.x == 12345.f) out[0] = x[0];
}
