// expect: nonfinite-output
// loophole: docs/loopholes.md 13 (NaN outputs: every comparison with NaN is false, so a naive tolerance check passes)
// Defect: rows with row % 5 == 0 (row 0 included) get a NaN rstd, so their outputs are NaN.
// The correct kernel is base.cuh; the defect is the hooks defined here.

// BUG: NaN rows.
#define KB_NORMALISER                    \
  float r = rsqrtf(ss / (float)N + eps); \
  if (row % 5 == 0) r = __int_as_float(0x7fc00000);

#include "base.cuh"
