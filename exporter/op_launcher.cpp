#include "exporter/op_launcher.hpp"

#include <map>

#include "exporter/declared_export.hpp"
#include "exporter/kda_launcher.hpp"
#include "exporter/text_template.hpp"
#include "kernels/rmsnorm/rmsnorm_fwd_op.hpp"

namespace ptxevo::exporter {

namespace {

// The plan mirrors RmsNormFwdOp::dispatch and launch_plan line for line (spread, persistent CTAs
// and the programmatic launch included); the launcher checks
// that the optional tensors match the options the kernel was built with (a weight passed to a
// kernel built without one would be ignored silently).
constexpr const char* kRmsNormFwdHost = R"cpp(
// ---- host launcher (NVRTC, which compiles device code only, skips it) ----
#ifndef __CUDACC_RTC__
#include <cuda_runtime.h>

// One call's launch: which entry, the grid, the block, the dynamic shared memory, the cluster.
typedef struct {
  int entry;  // index into ptxevo_rmsnorm_fwd_entries
  unsigned grid[3], block[3], cluster[3];
  unsigned shared_bytes;
  int programmatic;  // 1: launched as a programmatic dependent (EARLY_LAUNCH)
} ptxevo_rmsnorm_fwd_plan_t;

[[maybe_unused]] static const char* const ptxevo_rmsnorm_fwd_entries[] = {@ENTRY_NAMES@};

static long long ptxevo_rmsnorm_fwd_next_pow2(long long v) {
  long long p = 1;
  while (p < v) p *= 2;
  return p;
}
static long long ptxevo_rmsnorm_fwd_ceil_div(long long a, long long b) { return (a + b - 1) / b; }
// CTAs the grid has before PERSISTENT_CTAS: a cluster per row, or a CTA per rows_per_cta rows.
static long long ptxevo_rmsnorm_fwd_ctas(long long M, long long cluster, long long rows_per_cta) {
  return cluster > 1 ? M * cluster : ptxevo_rmsnorm_fwd_ceil_div(M, rows_per_cta);
}

// The plan for x of [M, N] (RmsNormFwdOp::launch_plan with the knobs above): 0, or -1 with *why.
extern "C" int ptxevo_rmsnorm_fwd_plan(long long M, long long N, ptxevo_rmsnorm_fwd_plan_t* plan, const char** why) {
  const long long kVec = @VEC@, kThreads = @THREADS@, kTpr = @TPR@, kItems = @ITEMS@, kCluster = @CLUSTER@;
  const long long kStageKb = @STAGE_KB@, kSpreadCtas = @SPREAD_CTAS@, kPersistentCtas = @PERSISTENT_CTAS@;
  const long long kStageElemBytes = @STAGE_ELEM_BYTES@;  // fp32 h with a residual, else sizeof(x)
  if (M < 1 || N < 1) {
    if (why) *why = "ptxevo_rmsnorm_fwd: M and N must be >= 1";
    return -1;
  }
  if (M > (1LL << 40) / N) {
    if (why) *why = "ptxevo_rmsnorm_fwd: M * N is too large (at most 2^40 elements)";
    return -1;
  }
  // Threads per row: the fewest (at least TPR) that hold the row in registers, at most THREADS.
  const long long need = ptxevo_rmsnorm_fwd_ceil_div(N, kItems * kVec);
  const long long p2 = ptxevo_rmsnorm_fwd_next_pow2(need);
  long long tpr = need >= kThreads ? kThreads : (kTpr > p2 ? kTpr : p2);
  long long cluster = 1;
  if (need > kThreads && kCluster > 1) {  // a row longer than a CTA holds: split over a cluster
    const long long c = ptxevo_rmsnorm_fwd_next_pow2(ptxevo_rmsnorm_fwd_ceil_div(need, kThreads));
    cluster = c < kCluster ? c : kCluster;
  }
  // Few rows: spread a row over more threads, then more CTAs of a cluster, up to SPREAD_CTAS CTAs.
  while (ptxevo_rmsnorm_fwd_ctas(M, cluster, kThreads / tpr) < kSpreadCtas && tpr < kThreads &&
         tpr < ptxevo_rmsnorm_fwd_next_pow2(ptxevo_rmsnorm_fwd_ceil_div(N, kVec)))
    tpr *= 2;
  while (ptxevo_rmsnorm_fwd_ctas(M, cluster, kThreads / tpr) < kSpreadCtas && kCluster > 1 && tpr == kThreads && cluster < kCluster &&
         N / (2 * cluster) >= kThreads * kVec)
    cluster *= 2;
  const long long rows_per_cta = kThreads / tpr;
  int entry = 0;
  if (cluster > 1) {
    entry = @CLUSTER_ENTRY@;
  } else {
    for (long long t = kTpr; t < tpr; t *= 2) ++entry;
  }
  long long shared = 0;
  if (tpr == kThreads && kStageKb > 0) {  // what the registers cannot hold goes to the stage
    const long long unit = N % kVec == 0 ? kVec : 1;
    const long long slot = unit * kStageElemBytes;
    const long long slice = ptxevo_rmsnorm_fwd_ceil_div(N / unit, cluster);
    long long over = ptxevo_rmsnorm_fwd_ceil_div(slice, kThreads) - kItems * kVec / unit;
    if (over < 0) over = 0;
    const long long fit = kStageKb * 1024 / (kThreads * slot);
    shared = (over < fit ? over : fit) * kThreads * slot;
  }
  long long groups = cluster > 1 ? M : ptxevo_rmsnorm_fwd_ceil_div(M, rows_per_cta);
  // PERSISTENT_CTAS: the CTAs walk the row groups, so fewer CTAs than groups suffice.
  if (cluster == 1 && kPersistentCtas > 0 && groups > kPersistentCtas) groups = kPersistentCtas;
  const long long max_x = ((1LL << 31) - 1) / cluster;
  long long gx = groups, gy = 1;
  if (groups > max_x) {  // the kernel's CTA index is blockIdx.y * gridDim.x + blockIdx.x
    gy = ptxevo_rmsnorm_fwd_ceil_div(groups, max_x);
    if (gy > 65535) {
      if (why) *why = "ptxevo_rmsnorm_fwd: M needs too many CTAs";
      return -1;
    }
    gx = ptxevo_rmsnorm_fwd_ceil_div(groups, gy);
  }
  plan->entry = entry;
  plan->grid[0] = (unsigned)(gx * cluster);
  plan->grid[1] = (unsigned)gy;
  plan->grid[2] = 1;
  plan->block[0] = (unsigned)kThreads;
  plan->block[1] = plan->block[2] = 1;
  plan->cluster[0] = (unsigned)cluster;
  plan->cluster[1] = plan->cluster[2] = 1;
  plan->shared_bytes = (unsigned)shared;
  plan->programmatic = @EARLY_LAUNCH@;
  return 0;
}

// out = rmsnorm(x (+ residual)) * w (+ b) for x of [M, N], rows dense (row stride N). Pointers
// the options above do not use must be NULL; those they use must not be. Returns cudaSuccess, or
// an error with *why (when why is not NULL) saying what was wrong. Launches on `stream`.
extern "C" cudaError_t ptxevo_rmsnorm_fwd_launch(const void* x, const void* w, const void* b, const void* residual,
                                                 void* out, void* residual_out, float* rstd, long long M, long long N,
                                                 float eps, cudaStream_t stream, const char** why) {
  const char* ignored = 0;
  if (!why) why = &ignored;
  if (!x || !out) {
    *why = "ptxevo_rmsnorm_fwd: x and out are required";
    return cudaErrorInvalidValue;
  }
  if ((w != 0) != (HAS_WEIGHT != 0)) {
    *why = HAS_WEIGHT ? "ptxevo_rmsnorm_fwd: this kernel was built with a weight; pass w"
                      : "ptxevo_rmsnorm_fwd: this kernel was built without a weight; pass w = NULL";
    return cudaErrorInvalidValue;
  }
  if ((b != 0) != (HAS_BIAS != 0)) {
    *why = HAS_BIAS ? "ptxevo_rmsnorm_fwd: this kernel was built with a bias; pass b"
                    : "ptxevo_rmsnorm_fwd: this kernel was built without a bias; pass b = NULL";
    return cudaErrorInvalidValue;
  }
  if ((residual != 0) != (HAS_RESIDUAL != 0) || (residual_out != 0) != (HAS_RESIDUAL != 0)) {
    *why = HAS_RESIDUAL ? "ptxevo_rmsnorm_fwd: this kernel was built with a residual; pass residual and residual_out"
                        : "ptxevo_rmsnorm_fwd: this kernel was built without a residual; pass NULL for both";
    return cudaErrorInvalidValue;
  }
  if ((rstd != 0) != (STORE_RSTD != 0)) {
    *why = STORE_RSTD ? "ptxevo_rmsnorm_fwd: this kernel was built to store rstd; pass rstd"
                      : "ptxevo_rmsnorm_fwd: this kernel was built without rstd; pass rstd = NULL";
    return cudaErrorInvalidValue;
  }
  if (!(eps >= 0.0f) || eps > 3.0e38f) {
    *why = "ptxevo_rmsnorm_fwd: eps must be a finite number >= 0";
    return cudaErrorInvalidValue;
  }
  ptxevo_rmsnorm_fwd_plan_t p;
  if (ptxevo_rmsnorm_fwd_plan(M, N, &p, why) != 0) return cudaErrorInvalidValue;
  typedef void (*kernel_t)(const XT*, const WT*, const BT*, const XT*, XT*, RT*, float*, long long, long long, float);
  kernel_t k = 0;
  switch (p.entry) {
@ENTRY_CASES@
    default:
      *why = "ptxevo_rmsnorm_fwd: the plan named an entry this file lacks";
      return cudaErrorInvalidValue;
  }
  cudaError_t e = cudaSuccess;
  if (p.shared_bytes > 48 * 1024) {
    e = cudaFuncSetAttribute((const void*)k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)p.shared_bytes);
    if (e != cudaSuccess) {
      *why = "ptxevo_rmsnorm_fwd: cudaFuncSetAttribute(MaxDynamicSharedMemorySize) failed";
      return e;
    }
  }
  if (p.cluster[0] > 8) {  // 16-CTA clusters are non-portable and must be allowed per kernel
    e = cudaFuncSetAttribute((const void*)k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (e != cudaSuccess) {
      *why = "ptxevo_rmsnorm_fwd: cudaFuncSetAttribute(NonPortableClusterSizeAllowed) failed";
      return e;
    }
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(p.grid[0], p.grid[1], p.grid[2]);
  cfg.blockDim = dim3(p.block[0], p.block[1], p.block[2]);
  cfg.dynamicSmemBytes = p.shared_bytes;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n_attr = 0;
  if (p.cluster[0] > 1) {
    attr[n_attr].id = cudaLaunchAttributeClusterDimension;
    attr[n_attr].val.clusterDim.x = p.cluster[0];
    attr[n_attr].val.clusterDim.y = p.cluster[1];
    attr[n_attr].val.clusterDim.z = p.cluster[2];
    ++n_attr;
  }
  if (p.programmatic) {  // the kernel waits (griddepcontrol.wait) before it reads what its predecessor wrote
    attr[n_attr].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n_attr].val.programmaticStreamSerializationAllowed = 1;
    ++n_attr;
  }
  cfg.attrs = n_attr ? attr : 0;
  cfg.numAttrs = n_attr;
  e = cudaLaunchKernelEx(&cfg, k, (const XT*)x, (const WT*)w, (const BT*)b, (const XT*)residual, (XT*)out,
                         (RT*)residual_out, rstd, M, N, eps);
  if (e != cudaSuccess) *why = cudaGetErrorString(e);
  return e;
}
#endif  // __CUDACC_RTC__
)cpp";

OpLauncher rmsnorm_fwd_launcher(const evaluator::OpConfig& cfg, const evaluator::Knobs& knobs) {
  using kernels::RmsNormFwdOp;
  RmsNormFwdOp::Config c;
  RmsNormFwdOp::Geometry g;
  try {
    c = RmsNormFwdOp::parse(cfg);
    g = RmsNormFwdOp::geometry(c, knobs);
  } catch (const std::invalid_argument& e) {
    throw ExportError(e.what());
  }
  OpLauncher l;
  l.kernel_params = {{"const XT* __restrict__", "x", "l"},        {"const WT* __restrict__", "w", "l"},
                     {"const BT* __restrict__", "b", "l"},        {"const XT* __restrict__", "res", "l"},
                     {"XT* __restrict__", "out", "l"},            {"RT* __restrict__", "res_out", "l"},
                     {"float* __restrict__", "rstd", "l"},        {"long long", "M", "l"},
                     {"long long", "N", "l"},                     {"float", "eps", "f"}};
  l.entries = RmsNormFwdOp::entries(g);
  std::string names, cases;
  int cluster_entry = -1;
  for (std::size_t i = 0; i < l.entries.size(); ++i) {
    names += (i ? ", " : "") + ("\"" + l.entries[i] + "\"");
    cases += "    case " + std::to_string(i) + ":\n      k = " + l.entries[i] + ";\n      break;\n";
    if (l.entries[i] == "rmsnorm_fwd_cluster") cluster_entry = static_cast<int>(i);
  }
  if (!cases.empty()) cases.pop_back();  // the template's line break follows
  const auto xs = static_cast<long long>(evaluator::dtype_size(c.x));
  l.code = substitute(kRmsNormFwdHost, {{"ENTRY_NAMES", names},
                                        {"ENTRY_CASES", cases},
                                        {"CLUSTER_ENTRY", std::to_string(cluster_entry)},
                                        {"VEC", std::to_string(g.vec)},
                                        {"THREADS", std::to_string(g.threads)},
                                        {"TPR", std::to_string(g.tpr)},
                                        {"ITEMS", std::to_string(g.items)},
                                        {"CLUSTER", std::to_string(g.cluster)},
                                        {"STAGE_KB", std::to_string(g.stage_kb)},
                                        {"SPREAD_CTAS", std::to_string(g.spread_ctas)},
                                        {"PERSISTENT_CTAS", std::to_string(g.persistent_ctas)},
                                        {"EARLY_LAUNCH", g.early_launch == 1 ? "1" : "0"},
                                        {"STAGE_ELEM_BYTES", std::to_string(c.has_residual ? 4 : xs)}});
  l.prototype =
      "extern \"C\" cudaError_t ptxevo_rmsnorm_fwd_launch(const void* x, const void* w, const void* b, "
      "const void* residual, void* out, void* residual_out, float* rstd, long long M, long long N, float eps, "
      "cudaStream_t stream, const char** why);";
  l.plan_prototype =
      "extern \"C\" int ptxevo_rmsnorm_fwd_plan(long long M, long long N, ptxevo_rmsnorm_fwd_plan_t* plan, "
      "const char** why);";
  return l;
}

}  // namespace

OpLauncher op_launcher(const evaluator::Op& op, const evaluator::OpConfig& cfg, const evaluator::Knobs& knobs,
                       const std::set<std::string>& defined) {
  if (const auto* d = dynamic_cast<const declared_ops::DeclaredOp*>(&op)) return declared_launcher(*d, cfg, knobs, defined);
  if (op.name() == "rmsnorm_fwd") return rmsnorm_fwd_launcher(cfg, knobs);
  if (op.name() == "kda_fwd") return kda_fwd_launcher(cfg, knobs, defined);
  throw ExportError("export has no host launcher for op '" + op.name() +
                    "' (ops declared in files, rmsnorm_fwd and kda_fwd have one); `ptxevo export --format ptx` writes its PTX and launch.json");
}

}  // namespace ptxevo::exporter
