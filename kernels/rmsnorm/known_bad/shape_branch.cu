// expect: tolerance
// loophole: docs/loopholes.md 10 and 12 (a branch keyed on problem size, wrong only at one benchmark shape)
// Defect: at M = 32768, N = 4096 (a benchmark shape) a "fast path" skips the weight.
// The correct kernel is base.cuh; the defect is the hooks defined here.

// BUG: shape-keyed path.
#define KB_AFTER_LAYOUT const bool fast = M == 32768 && N == 4096;
#define KB_VEC_OUT for (int e = 0; e < kVec; ++e) from_f(to_f(v.e[e]) * r * (fast ? 1.f : (HAS_WEIGHT ? to_f(w[k * kVec + e]) : 1.f)), &o.e[e]);
#define KB_SCALAR_OUT for (long long c = lo + t; c < hi; c += kTpr) from_f(to_f(xr[c]) * r * (fast ? 1.f : (HAS_WEIGHT ? to_f(w[c]) : 1.f)), &orow[c]);

#include "base.cuh"
