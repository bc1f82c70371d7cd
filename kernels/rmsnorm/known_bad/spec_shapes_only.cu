// expect: heldout-shape|tolerance
// loophole: docs/loopholes.md 10 (over-fitting to the tested shapes: hard-coded sizes)
// Defect: correct only for the N values of rmsnorm_fwd.spec's benchmark and correctness lists;
// any other N (the held-out 3000, 12288, 40000) drops the weight.
// The correct kernel is base.cuh; the defect is the hooks defined here.

// BUG: the spec's N values, hard-coded.
#define KB_AFTER_LAYOUT              \
  const bool seen = N == 1           \
                    || N == 7        \
                    || N == 250      \
                    || N == 256      \
                    || N == 512      \
                    || N == 1000     \
                    || N == 1024     \
                    || N == 2047     \
                    || N == 2048     \
                    || N == 4096     \
                    || N == 4097     \
                    || N == 8192     \
                    || N == 16384    \
                    || N == 32768    \
                    || N == 65536    \
                    || N == 131071   \
                    || N == 131072   \
                    || N == 262144;
#define KB_VEC_OUT for (int e = 0; e < kVec; ++e) from_f(to_f(v.e[e]) * r * (!seen ? 1.f : (HAS_WEIGHT ? to_f(w[k * kVec + e]) : 1.f)), &o.e[e]);
#define KB_SCALAR_OUT for (long long c = lo + t; c < hi; c += kTpr) from_f(to_f(xr[c]) * r * (!seen ? 1.f : (HAS_WEIGHT ? to_f(w[c]) : 1.f)), &orow[c]);

#include "base.cuh"
