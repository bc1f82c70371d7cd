// Part of rmsnorm_fwd.cu (read into it where it is included; no guards): the small entries with
// SMALL_STAGE 1. A CTA's rows (kSmallThreads / kTpr of them, contiguous in memory) reach shared
// memory by one bulk copy (cp.async.bulk, completing on an mbarrier), x's rows then the
// residual's, instead of each thread's loads into a register tile. No tile: the registers left are
// those of the reduction and the output, so many CTAs fit an SM (shared memory bounds them: the
// plan gives each rows_per_cta * N * sizeof(x) bytes, twice that with a residual), and the copy
// is issued by one instruction as soon as the CTA starts. Both passes read the rows from shared
// memory; the weight is read from global memory for the output (or prefetched into L1 while the
// copy is in flight, SMALL_WEIGHT_PREFETCH). The scalar path (N % VEC != 0 or a base pointer not
// aligned for vectors: no bulk copy) reads x from global memory in each pass.

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "SMALL_STAGE needs cp.async.bulk and mbarrier transaction counts (sm_90 or later); use SMALL_STAGE=0"
#endif

#include "../common/mbarrier.cuh"

// Vector u of a row staged at `row` (shared memory): h in fp32 (x + residual; the residual rows
// start `res_off` bytes after x's).
__device__ __forceinline__ void staged_vector(const unsigned char* row, unsigned int res_off, int u, float* h) {
  unsigned int xw[Words<kXBytes>::value];
  stage_get<kXBytes>(xw, row + u * kXBytes);
#pragma unroll
  for (int e = 0; e < kVec; ++e) h[e] = Elem<XT>::get(xw, e);
#if HAS_RESIDUAL
  unsigned int rw[Words<kXBytes>::value];
  stage_get<kXBytes>(rw, row + res_off + u * kXBytes);
#pragma unroll
  for (int e = 0; e < kVec; ++e) h[e] += Elem<XT>::get(rw, e);
#else
  (void)res_off;
#endif
}

template <int kTpr>
__device__ __forceinline__ void rmsnorm_fwd_small_staged(const Args& a) {
  static_assert(kTpr <= kSmallThreads, "a small entry: rows within its CTA");
  constexpr int kRows = kSmallThreads / kTpr;
#if EARLY_LAUNCH
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  const long long row0 = ((long long)blockIdx.y * gridDim.x + blockIdx.x) * kRows;
  const long long row = row0 + threadIdx.x / kTpr;
  const bool active = row < a.M;
  const int t = threadIdx.x % kTpr;
  const int n = (int)a.N;  // the plan gives a small entry only rows its CTA holds
  if (a.N > (long long)kTpr * kSmallItems * kVec) __trap();
  bool vec_ok = n % kVec == 0 && aligned_for<XT, kVec>(a.x) && aligned_for<XT, kVec>(a.out);
  if constexpr (HAS_WEIGHT) vec_ok = vec_ok && aligned_for<WT, kVec>(a.w);
  if constexpr (HAS_BIAS) vec_ok = vec_ok && aligned_for<BT, kVec>(a.b);
  if constexpr (HAS_RESIDUAL) vec_ok = vec_ok && aligned_for<XT, kVec>(a.res) && aligned_for<RT, kVec>(a.res_out);
  // Bulk copies need 16-byte aligned sources and sizes: whole vectors of 16 bytes.
  vec_ok = vec_ok && kXBytes == 16;
  const unsigned int row_bytes = (unsigned int)n * (unsigned int)sizeof(XT);
  const unsigned int res_off = kRows * row_bytes;  // the plan's layout: x's rows, then the residual's
  const unsigned char* mine = stage + (threadIdx.x / kTpr) * row_bytes;
  const int nv = n / kVec;
  float ss = 0.f;
  if (vec_ok) {
    __shared__ __align__(8) unsigned long long bar_mem;
    const unsigned int bar = (unsigned int)__cvta_generic_to_shared(&bar_mem);
    const long long rows = a.M - row0 < kRows ? a.M - row0 : kRows;  // <= 0 past the last row
    if (threadIdx.x == 0 && rows > 0) {
      const unsigned int bytes = (unsigned int)rows * row_bytes;
      mbar_init(bar);
      mbar_init_fence();
      mbar_expect_tx(bar, HAS_RESIDUAL ? 2 * bytes : bytes);
      const unsigned int dst = (unsigned int)__cvta_generic_to_shared(stage);
      bulk_copy(dst, a.x + row0 * a.N, bytes, bar);
#if HAS_RESIDUAL
      bulk_copy(dst + res_off, a.res + row0 * a.N, bytes, bar);
#endif
    }
    if (active && small_weight_prefetch()) {
      for (int u = t; u < nv; u += kTpr) {
#if HAS_WEIGHT
        prefetch_l1(a.w + (long long)u * kVec);
#endif
#if HAS_BIAS
        prefetch_l1(a.b + (long long)u * kVec);
#endif
      }
    }
    __syncthreads();  // the barrier is initialised
    if (rows > 0) mbar_wait(bar, 0);
    if (active) {
#pragma unroll
      for (int j = 0; j < kSmallItems; ++j) {
        const int u = t + j * kTpr;
        if (u < nv) {
          float h[kVec];
          staged_vector(mine, res_off, u, h);
          store_residual<kVec>(a, row * a.N + (long long)u * kVec, h);
#pragma unroll
          for (int e = 0; e < kVec; ++e) ss = fmaf(h[e], h[e], ss);
        }
      }
    }
  } else if (active) {
    for (int k = t; k < n; k += kTpr) {
      float h[1];
      unsigned int xw[1];
      load_unit<1>(a, row * a.N + k, h, xw);
      store_residual<1>(a, row * a.N + k, h);
      ss = fmaf(h[0], h[0], ss);
    }
  }
  ss = row_sum_small<kTpr>(ss);
  const float r = rsqrt_approx(__fdividef(ss, (float)n) + a.eps);
  if (!active) return;  // after the last barrier
  if constexpr (STORE_RSTD) {
    if (t == 0) a.rstd[row] = r;
  }
  if (vec_ok) {
#pragma unroll
    for (int j = 0; j < kSmallItems; ++j) {
      const int u = t + j * kTpr;
      if (u < nv) {
        float h[kVec];
        staged_vector(mine, res_off, u, h);
        emit<kVec>(a, row * a.N + (long long)u * kVec, (long long)u * kVec, h, r);
      }
    }
  } else {
    for (int k = t; k < n; k += kTpr) {
      float h[1];
      unsigned int xw[1];
      load_unit<1>(a, row * a.N + k, h, xw);
      emit<1>(a, row * a.N + k, k, h, r);
    }
  }
}
