// expect: clock-read
// loophole: docs/loopholes.md 4 and 12 (stage detection: reading a clock to behave differently while being timed)
// Defect: reads %globaltimer and, in the time windows it guesses are the timing phase, skips the
// weight (a cheaper, wrong result).
// The correct kernel is base.cuh; the defect is the hooks defined here.

// BUG: reads a clock and skips the weight inside the windows it takes for timing.
#define KB_AFTER_LAYOUT                                              \
  unsigned long long now;                                            \
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));            \
  const bool timing = ((now >> 30) & 7) == 7;
#define KB_VEC_OUT for (int e = 0; e < kVec; ++e) from_f(to_f(v.e[e]) * r * (timing ? 1.f : (HAS_WEIGHT ? to_f(w[k * kVec + e]) : 1.f)), &o.e[e]);
#define KB_SCALAR_OUT for (long long c = lo + t; c < hi; c += kTpr) from_f(to_f(xr[c]) * r * (timing ? 1.f : (HAS_WEIGHT ? to_f(w[c]) : 1.f)), &orow[c]);

#include "base.cuh"
