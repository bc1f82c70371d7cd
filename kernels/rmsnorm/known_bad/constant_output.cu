// expect: tolerance|trivial-output
// loophole: docs/loopholes.md 7 and 9 (constant output that a loose tolerance or degenerate data would accept)
// Defect: writes 1 to every output element; the reduction runs but its result is ignored.
// The correct kernel is base.cuh; the defect is the hooks defined here.

// BUG: the result does not depend on the input.
#define KB_NORMALISER        \
  float r = rsqrtf(ss / (float)N + eps); \
  r = 0.f * r;
#define KB_VEC_OUT for (int e = 0; e < kVec; ++e) from_f(1.f + to_f(v.e[e]) * r, &o.e[e]);
#define KB_SCALAR_OUT for (long long c = lo + t; c < hi; c += kTpr) from_f(1.f + to_f(xr[c]) * r, &orow[c]);

#include "base.cuh"
