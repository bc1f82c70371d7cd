// expect: unwritten-output
// loophole: docs/loopholes.md 1 (output left unwritten: stale or poisoned memory passes as a result)
// Defect: the last row (row M - 1) is never written.
// The correct kernel is base.cuh; the defect is the hooks defined here.

// BUG: off-by-one row bound.
#define KB_BEFORE_WRITE if (row == M - 1) return;

#include "base.cuh"
