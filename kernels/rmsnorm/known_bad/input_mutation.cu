// expect: input-mutated
// loophole: docs/loopholes.md 2 (mutating inputs: zeroing x so a reference computed afterwards agrees)
// Defect: after a thread has written its outputs it zeroes the x elements it read (const cast away).
// The correct kernel is base.cuh; the defect is the hooks defined here.

// BUG: writes the input.
#define KB_AFTER_VEC_STORE const_cast<XVec*>(reinterpret_cast<const XVec*>(xr))[k] = XVec{};
#define KB_SCALAR_OUT                                                 \
  for (long long c = lo + t; c < hi; c += kTpr) {                     \
    from_f(to_f(xr[c]) * r * (HAS_WEIGHT ? to_f(w[c]) : 1.f), &orow[c]); \
    from_f(0.f, const_cast<XT*>(xr) + c);                             \
  }

#include "base.cuh"
