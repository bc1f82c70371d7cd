// expect: tolerance
// loophole: wrong only on shapes of more than 8192 rows, which `--max-benchmark-shapes 0` once left ungated
// Defect: the weight is dropped when M > 8192. Every correctness and held-out shape has fewer
// rows; only the benchmark shapes (M = 8192 .. 32768; the wrong ones M >= 16384) show it, so a gate
// that skipped untimed benchmark shapes passed it.
// The correct kernel is base.cuh; the defect is the hooks defined here.

// BUG: the weight is skipped on problems of more than 8192 rows.
#define KB_VEC_OUT for (int e = 0; e < kVec; ++e) from_f(to_f(v.e[e]) * r * (HAS_WEIGHT && M <= 8192 ? to_f(w[k * kVec + e]) : 1.f), &o.e[e]);
#define KB_SCALAR_OUT for (long long c = lo + t; c < hi; c += kTpr) from_f(to_f(xr[c]) * r * (HAS_WEIGHT && M <= 8192 ? to_f(w[c]) : 1.f), &orow[c]);

#include "base.cuh"
