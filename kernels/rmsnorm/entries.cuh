// Part of rmsnorm_fwd.cu (read into it where it is included; no guards): the extern "C" entry
// points, one per name RmsNormFwdOp::entries can give for the knobs, each an instance of the
// template's bodies above.
#define PTXEVO_PARAMS                                                                                       \
  const XT *__restrict__ x, const WT *__restrict__ w, const BT *__restrict__ b, const XT *__restrict__ res, \
      XT *__restrict__ out, RT *__restrict__ res_out, float *__restrict__ rstd, long long M, long long N, float eps
#define PTXEVO_ENTRY(NAME, T, CLUSTERED)                                                        \
  extern "C" __global__ void PTXEVO_BOUNDS NAME(PTXEVO_PARAMS) {                                \
    rmsnorm_seed::entry_body<T, CLUSTERED>({x, w, b, res, out, res_out, rstd, M, N, eps});       \
  }

// The entries the launch plan can name for these knobs: TPR <= T <= THREADS, plus the cluster one.
#if TPR <= 1
PTXEVO_ENTRY(rmsnorm_fwd_tpr1, 1, false)
#endif
#if TPR <= 2
PTXEVO_ENTRY(rmsnorm_fwd_tpr2, 2, false)
#endif
#if TPR <= 4
PTXEVO_ENTRY(rmsnorm_fwd_tpr4, 4, false)
#endif
#if TPR <= 8
PTXEVO_ENTRY(rmsnorm_fwd_tpr8, 8, false)
#endif
#if TPR <= 16
PTXEVO_ENTRY(rmsnorm_fwd_tpr16, 16, false)
#endif
#if TPR <= 32
PTXEVO_ENTRY(rmsnorm_fwd_tpr32, 32, false)
#endif
#if TPR <= 64 && THREADS >= 64
PTXEVO_ENTRY(rmsnorm_fwd_tpr64, 64, false)
#endif
#if TPR <= 128 && THREADS >= 128
PTXEVO_ENTRY(rmsnorm_fwd_tpr128, 128, false)
#endif
#if TPR <= 256 && THREADS >= 256
PTXEVO_ENTRY(rmsnorm_fwd_tpr256, 256, false)
#endif
#if TPR <= 512 && THREADS >= 512
PTXEVO_ENTRY(rmsnorm_fwd_tpr512, 512, false)
#endif
#if THREADS >= 1024
PTXEVO_ENTRY(rmsnorm_fwd_tpr1024, 1024, false)
#endif
#if CLUSTER > 1
PTXEVO_ENTRY(rmsnorm_fwd_cluster, THREADS, true)
#endif
#if SMALL_THREADS > 0
#if SMALL_MIN_BLOCKS > 0
#define PTXEVO_SMALL_BOUNDS __launch_bounds__(SMALL_THREADS, SMALL_MIN_BLOCKS)
#else
#define PTXEVO_SMALL_BOUNDS __launch_bounds__(SMALL_THREADS)
#endif
// Never persistent: the plan takes them for grids of many CTAs.
#if SMALL_STAGE
#define PTXEVO_SMALL_ENTRY(NAME, T)                                                        \
  extern "C" __global__ void PTXEVO_SMALL_BOUNDS NAME(PTXEVO_PARAMS) {                     \
    rmsnorm_seed::rmsnorm_fwd_small_staged<T>({x, w, b, res, out, res_out, rstd, M, N, eps}); \
  }
#else
#define PTXEVO_SMALL_ENTRY(NAME, T)                                                             \
  extern "C" __global__ void PTXEVO_SMALL_BOUNDS NAME(PTXEVO_PARAMS) {                          \
    rmsnorm_seed::rmsnorm_fwd_body<T, false, false, true>({x, w, b, res, out, res_out, rstd, M, N, eps}); \
  }
#endif
// The small entries the launch plan can name: TPR <= T <= SMALL_THREADS.
#if TPR <= 1
PTXEVO_SMALL_ENTRY(rmsnorm_fwd_small1, 1)
#endif
#if TPR <= 2
PTXEVO_SMALL_ENTRY(rmsnorm_fwd_small2, 2)
#endif
#if TPR <= 4
PTXEVO_SMALL_ENTRY(rmsnorm_fwd_small4, 4)
#endif
#if TPR <= 8
PTXEVO_SMALL_ENTRY(rmsnorm_fwd_small8, 8)
#endif
#if TPR <= 16
PTXEVO_SMALL_ENTRY(rmsnorm_fwd_small16, 16)
#endif
#if TPR <= 32
PTXEVO_SMALL_ENTRY(rmsnorm_fwd_small32, 32)
#endif
#if TPR <= 64 && SMALL_THREADS >= 64
PTXEVO_SMALL_ENTRY(rmsnorm_fwd_small64, 64)
#endif
#if TPR <= 128 && SMALL_THREADS >= 128
PTXEVO_SMALL_ENTRY(rmsnorm_fwd_small128, 128)
#endif
#if TPR <= 256 && SMALL_THREADS >= 256
PTXEVO_SMALL_ENTRY(rmsnorm_fwd_small256, 256)
#endif
#if TPR <= 512 && SMALL_THREADS >= 512
PTXEVO_SMALL_ENTRY(rmsnorm_fwd_small512, 512)
#endif
#if SMALL_THREADS >= 1024
PTXEVO_SMALL_ENTRY(rmsnorm_fwd_small1024, 1024)
#endif
#endif
#if WIDE_ROWS > 0 && THREADS < 1024
// Never persistent: the plan gives it at most WIDE_ROWS CTAs.
extern "C" __global__ void __launch_bounds__(rmsnorm_seed::kWideThreads, 1) rmsnorm_fwd_wide(PTXEVO_PARAMS) {
  rmsnorm_seed::rmsnorm_fwd_body<rmsnorm_seed::kWideThreads, false, true>({x, w, b, res, out, res_out, rstd, M, N, eps});
}
#endif
