// expect: launch-resources
// loophole: docs/loopholes.md 1 (launching outside declared resources: the launch fails or the kernel runs partly)
// Defect: __launch_bounds__(THREADS / 2) while the plan launches THREADS threads per CTA.
// The correct kernel is base.cuh; the defect is the hooks defined here.

// BUG: smaller than the launch.
#define KB_BOUNDS __launch_bounds__(THREADS / 2)

#include "base.cuh"
