// expect: unwritten-output
// loophole: docs/loopholes.md 1 (output left unwritten: stale or poisoned memory passes as a result)
// Defect: when N % VEC != 0 the last N % VEC columns of every row are never written.
// The correct kernel is base.cuh; the defect is the hooks defined here.

// BUG: the tail columns are skipped.
#define KB_SCALAR_OUT                                                  \
  for (long long c = lo + t; c < min(hi, N / kVec * kVec); c += kTpr) \
    from_f(to_f(xr[c]) * r * (HAS_WEIGHT ? to_f(w[c]) : 1.f), &orow[c]);

#include "base.cuh"
