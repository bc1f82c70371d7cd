// expect: out-of-bounds-write
// loophole: docs/loopholes.md 1 and 15 (writing outside the output: past its end, into memory the harness owns)
// Defect: thread 0 of the last row also writes one vector (or element) past the end of out.
// The correct kernel is base.cuh; the defect is the hooks defined here.

// BUG: past the end.
#define KB_AFTER_VEC_STORE if (row == M - 1 && t == 0) reinterpret_cast<XVec*>(orow)[N / kVec] = o;
#define KB_AFTER_SCALAR_OUT if (row == M - 1 && t == 0) orow[N] = orow[0];

#include "base.cuh"
