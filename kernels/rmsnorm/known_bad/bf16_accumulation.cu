// expect: tolerance
// loophole: docs/loopholes.md 8 (precision downgrade: the sum of squares accumulated in x's 16-bit type)
// Defect: each row's sum of squares is one running sum in XT (rounded after every add, as a naive
// half-precision kernel does); once its ulp exceeds the addends the sum stalls.
// The correct kernel is base.cuh; the defect is the hooks defined here.

// BUG: one thread a row accumulates in XT; the threads' own sums are not taken.
#define KB_SUMS_ACTIVE false
#define KB_ROW_SUM                                        \
  __shared__ float row_ss[kThreads / kTpr];               \
  if (active && t == 0) {                                 \
    XT acc;                                               \
    from_f(0.f, &acc);                                    \
    for (long long c = 0; c < N; ++c) {                   \
      XT sq;                                              \
      from_f(to_f(xr[c]) * to_f(xr[c]), &sq);             \
      from_f(to_f(acc) + to_f(sq), &acc);                 \
    }                                                     \
    row_ss[threadIdx.x / kTpr] = to_f(acc);               \
  }                                                       \
  __syncthreads();                                        \
  ss = row_ss[threadIdx.x / kTpr];

#include "base.cuh"
