// expect: nondeterministic|timed-output-mismatch
// loophole: an order-dependent reduction whose results agree on two runs of an idle GPU (a determinism check of two runs)
// Defect: the cross-warp reduction (entries with more than 32 threads per row: with the default
// knobs every N > 1024) adds the warps' partial sums with a float atomicAdd into shared memory,
// so the sum's rounding depends on the order the warps arrive in. Every result is within the
// tolerance; only bit-for-bit repeatability tells it apart, and two back-to-back runs on an idle
// GPU often see the same order. (The `ptxevo eval --repeat` figures: bench/results.)
// The correct kernel is base.cuh; the defect is the hooks defined here.

// BUG: the warps' partials meet in an atomic sum, in whatever order they arrive.
#define KB_CROSS_WARP_SUM                                                                           \
  __shared__ float acc[kThreads / 32];                                                              \
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, first = (warp / kWpr) * kWpr;         \
  if (lane == 0 && warp == first) acc[first] = 0.f;                                                 \
  __syncthreads();                                                                                  \
  if (lane == 0) atomicAdd(&acc[first], v);                                                         \
  __syncthreads();                                                                                  \
  v = acc[first];

#include "base.cuh"
