// expect: persistent-global
// loophole: docs/loopholes.md 3 and 4 (caching across launches: a device global tells later calls to skip the work)
// Defect: a __device__ counter of finished CTAs; once a whole grid has finished, every later
// launch returns at once and leaves the previous call's output in place.
// The correct kernel is base.cuh; the defect is the hooks defined here.

// BUG: state that outlives the launch, and later calls that skip the work because of it.
#define KB_GLOBALS __device__ unsigned int g_finished_ctas;
#define KB_BODY_START if (*(volatile unsigned int*)&g_finished_ctas >= gridDim.x * gridDim.y) return;
#define KB_NORMALISER                                     \
  if (threadIdx.x == 0) atomicAdd(&g_finished_ctas, 1u); \
  float r = rsqrtf(ss / (float)N + eps);

#include "base.cuh"
