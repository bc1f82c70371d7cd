// expect: tolerance
// loophole: docs/loopholes.md 21 (sub-sampled reduction: every other element, times 2)
// Defect: the sum of squares uses only even columns and doubles the result.
// The correct kernel is base.cuh; the defect is the hooks defined here.

// BUG: every other element, and the half sample extrapolated.
#define KB_VEC_SQUARES for (int e = 0; e < kVec; e += 2) ss = fmaf(to_f(v.e[e]), to_f(v.e[e]), ss);
#define KB_SCALAR_SQUARES \
  for (long long c = t; c < N; c += kTpr)                   \
    if ((c & 1) == 0) ss = fmaf(to_f(xr[c]), to_f(xr[c]), ss);
#define KB_ROW_SUM ss = 2.f * row_sum<kTpr>(ss);

#include "base.cuh"
