// expect: tolerance|nondeterministic|nonfinite-output
// loophole: docs/loopholes.md 1 and 15 (a cross-warp race: results that depend on timing and stale shared memory)
// Defect: the cross-warp reduction (entries with more than 32 threads per row: with the default
// knobs every N > 1024) reads the other warps' partial sums from shared memory without the
// barrier, so it often reads stale values (or uninitialized ones, possibly NaN bit patterns).
// The correct kernel is base.cuh; the defect is the hooks defined here.

// BUG: no __syncthreads() between writing and reading the warps' partials.
#define KB_REDUCTION_BARRIER

#include "base.cuh"
