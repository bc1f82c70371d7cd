// expect: unwritten-output
// loophole: docs/loopholes.md 1 (output left unwritten: stale or poisoned memory passes as a result)
// Defect: odd rows are never written (correct for M = 1 only).
// The correct kernel is base.cuh; the defect is the hooks defined here.

// BUG: only even rows are written.
#define KB_BEFORE_WRITE if (row & 1) return;

#include "base.cuh"
