// Known bad: the last column of every row is computed without its bias.
// expect: tolerance
#include <cuda_bf16.h>
#include <cuda_fp16.h>

constexpr int kPackBytes = VEC * (int)sizeof(ELEM);
constexpr int kAlign = kPackBytes < 16 ? kPackBytes : 16;
struct alignas(kAlign) Pack {
  ELEM v[VEC];
};

__device__ __forceinline__ float gelu(float v) { return 0.5f * v * erfcf(-v * 0.70710678f); }

extern "C" __global__ void __launch_bounds__(THREADS) gelu_bias(const ELEM* __restrict__ x, const ELEM* __restrict__ b,
                                                                ELEM* __restrict__ y, long long M, long long N) {
  const long long col = ((long long)blockIdx.x * THREADS + threadIdx.x) * VEC;
  if (col >= N) return;
  const bool whole = col + VEC <= N && N % VEC == 0;
  float bias[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) bias[k] = col + k < N - 1 ? (float)b[col + k] : 0.0f;  // BUG: the last column gets no bias
  const long long row_step = (long long)gridDim.y * ROWS;
  for (long long r0 = (long long)blockIdx.y * ROWS; r0 < M; r0 += row_step) {
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const long long row = r0 + r;
      if (row >= M) break;
      const long long at = row * N + col;
      if (whole) {
        Pack in = *reinterpret_cast<const Pack*>(x + at), out;
#pragma unroll
        for (int k = 0; k < VEC; ++k) out.v[k] = (ELEM)gelu((float)in.v[k] + bias[k]);
        *reinterpret_cast<Pack*>(y + at) = out;
      } else {
        for (int k = 0; k < VEC && col + k < N; ++k) y[at + k] = (ELEM)gelu((float)x[at + k] + bias[k]);
      }
    }
  }
}
