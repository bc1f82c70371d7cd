// expect: nonfinite-output|tolerance
// loophole: dropping eps: invisible on rows of normal data, NaN on an all-zero row and wrong on rows far below eps (degenerate rows)
// Defect: the normaliser is rsqrt(mean(x^2)) without eps. On the gate's random rows mean(x^2) is
// about 1 and eps 1e-6 changes nothing a tolerance sees; an all-zero row gives 0 * inf = NaN and a
// row of 1e-30 comes out near 1 instead of near 1e-27.
// The correct kernel is base.cuh; the defect is the hooks defined here.

// BUG: eps dropped (it changes a row of normal data by less than 1e-6 relative).
#define KB_NORMALISER              \
  float r = rsqrtf(ss / (float)N); \
  (void)eps;

#include "base.cuh"
