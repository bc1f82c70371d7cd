// Known bad: the last N % (32 * UNROLL) elements of a row are never looked at.
// expect: tolerance
#include <cuda_bf16.h>
#include <cuda_fp16.h>

extern "C" __global__ void __launch_bounds__(32 * WARPS) row_argmax(const ELEM* __restrict__ x, long long* __restrict__ idx,
                                                                    long long M, long long N) {
  const int lane = threadIdx.x & 31;
  const long long m = (long long)blockIdx.x * WARPS + (threadIdx.x >> 5);
  if (m >= M) return;
  const ELEM* row = x + m * N;
  float best = -__int_as_float(0x7f800000);  // -inf
  long long at = N;                          // no element yet: loses every tie
  for (long long j0 = lane; j0 + 32 * UNROLL <= N; j0 += 32 * UNROLL) {  // BUG: the tail of the row is skipped
    float v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const long long j = j0 + 32LL * u;
      v[u] = j < N ? (float)row[j] : -__int_as_float(0x7f800000);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const long long j = j0 + 32LL * u;
      if (j < N && (v[u] > best || at == N)) {
        best = v[u];
        at = j;
      }
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ob = __shfl_xor_sync(0xffffffffu, best, o);
    const long long oa = __shfl_xor_sync(0xffffffffu, at, o);
    if (ob > best || (ob == best && oa < at)) {
      best = ob;
      at = oa;
    }
  }
  if (lane == 0) idx[m] = at;
}
