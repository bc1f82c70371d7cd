// RmsNormFwdOp's export (evaluator/op_export.hpp): the host launcher, whose plan mirrors
// dispatch() and launch_plan() line for line (exporter/tests checks they agree), and a PyTorch
// binding and a QuACK-compatible module. docs/export.md describes what users get.
#include <map>

#include "kernels/rmsnorm/rmsnorm_fwd_op.hpp"

namespace ptxevo::kernels {

namespace {

using evaluator::Knobs;
using evaluator::OpConfig;

const char* py_bool(bool b) { return b ? "True" : "False"; }

// The plan mirrors RmsNormFwdOp::dispatch and launch_plan line for line (spread, persistent CTAs,
// the wide and small entries and the programmatic launch included); the launcher checks
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
  const long long kWideRows = @WIDE_ROWS@, kWideThreads = 1024, kMinCluster = @MIN_CLUSTER@;
  const long long kSmallThreads = @SMALL_THREADS@, kSmallItems = @SMALL_ITEMS@, kSmallMinRows = @SMALL_MIN_ROWS@;
  const long long kSmallMinCtas = @SMALL_MIN_CTAS@;
  const long long kSmallStageElemBytes = @SMALL_STAGE_ELEM_BYTES@;  // SMALL_STAGE: x (+ residual) bytes, else 0
  const long long kStageElemBytes = @STAGE_ELEM_BYTES@;  // fp32 h with a residual, else sizeof(x)
  if (M < 1 || N < 1) {
    if (why) *why = "ptxevo_rmsnorm_fwd: M and N must be >= 1";
    return -1;
  }
  if (M > (1LL << 40) / N) {
    if (why) *why = "ptxevo_rmsnorm_fwd: M * N is too large (at most 2^40 elements)";
    return -1;
  }
  // Short rows (SMALL_THREADS): the small entries when SMALL_THREADS threads of SMALL_ITEMS vectors
  // hold the row, the shape has at least SMALL_MIN_ROWS rows and the plan without them would launch
  // at least SMALL_MIN_CTAS CTAs (decided below).
  const long long p2s = ptxevo_rmsnorm_fwd_next_pow2(ptxevo_rmsnorm_fwd_ceil_div(N, kSmallItems * kVec));
  const long long tps = kTpr > p2s ? kTpr : p2s;
  const int small_fits = kSmallThreads > 0 && tps <= kSmallThreads && M >= kSmallMinRows;
  // Threads per row: the fewest (at least TPR) that hold the row in registers, at most THREADS.
  const long long need = ptxevo_rmsnorm_fwd_ceil_div(N, kItems * kVec);
  const long long p2 = ptxevo_rmsnorm_fwd_next_pow2(need);
  long long tpr = need >= kThreads ? kThreads : (kTpr > p2 ? kTpr : p2);
  long long cluster = 1;
  if (need > kThreads && kCluster > 1) {  // a row longer than a CTA holds: split over a cluster
    const long long c = ptxevo_rmsnorm_fwd_next_pow2(ptxevo_rmsnorm_fwd_ceil_div(need, kThreads));
    cluster = c < kCluster ? c : kCluster;
    // MIN_CLUSTER: at least that many CTAs (at most CLUSTER) while every thread keeps a vector.
    while (cluster < (kMinCluster < kCluster ? kMinCluster : kCluster) && N / (2 * cluster) >= kThreads * kVec)
      cluster *= 2;
  }
  // Few rows: spread a row over more threads, then more CTAs of a cluster, up to SPREAD_CTAS CTAs.
  while (ptxevo_rmsnorm_fwd_ctas(M, cluster, kThreads / tpr) < kSpreadCtas && tpr < kThreads &&
         tpr < ptxevo_rmsnorm_fwd_next_pow2(ptxevo_rmsnorm_fwd_ceil_div(N, kVec)))
    tpr *= 2;
  while (ptxevo_rmsnorm_fwd_ctas(M, cluster, kThreads / tpr) < kSpreadCtas && kCluster > 1 && tpr == kThreads && cluster < kCluster &&
         N / (2 * cluster) >= kThreads * kVec)
    cluster *= 2;
  // Few long rows (WIDE_ROWS): one CTA of 1024 threads per row in place of a cluster.
  const int wide_fits = kWideRows > 0 && kThreads < kWideThreads && M <= kWideRows && (cluster > 1 || need > kThreads) &&
                        kWideThreads * kItems * kVec >= N;
  const int small =
      small_fits && (wide_fits ? M : ptxevo_rmsnorm_fwd_ctas(M, cluster, kThreads / tpr)) >= kSmallMinCtas;
  const int wide = !small && wide_fits;
  if (wide) {
    tpr = kWideThreads;
    cluster = 1;
  }
  if (small) {
    tpr = tps;
    cluster = 1;
  }
  const long long rows_per_cta = small ? kSmallThreads / tpr : wide ? 1 : kThreads / tpr;
  int entry = 0;
  if (small) {
    entry = @SMALL_ENTRY@;
    for (long long t = kTpr; t < tpr; t *= 2) ++entry;
  } else if (wide) {
    entry = @WIDE_ENTRY@;
  } else if (cluster > 1) {
    entry = @CLUSTER_ENTRY@;
  } else {
    for (long long t = kTpr; t < tpr; t *= 2) ++entry;
  }
  long long shared = 0;
  if (!wide && !small && tpr == kThreads && kStageKb > 0) {  // what the registers cannot hold goes to the stage
    const long long unit = N % kVec == 0 ? kVec : 1;
    const long long slot = unit * kStageElemBytes;
    const long long slice = ptxevo_rmsnorm_fwd_ceil_div(N / unit, cluster);
    long long over = ptxevo_rmsnorm_fwd_ceil_div(slice, kThreads) - kItems * kVec / unit;
    if (over < 0) over = 0;
    const long long fit = kStageKb * 1024 / (kThreads * slot);
    shared = (over < fit ? over : fit) * kThreads * slot;
  }
  if (small) shared = rows_per_cta * N * kSmallStageElemBytes;  // SMALL_STAGE: the CTA's rows
  long long groups = cluster > 1 ? M : ptxevo_rmsnorm_fwd_ceil_div(M, rows_per_cta);
  // PERSISTENT_CTAS: the CTAs walk the row groups, so fewer CTAs than groups suffice.
  if (cluster == 1 && !wide && !small && kPersistentCtas > 0 && groups > kPersistentCtas) groups = kPersistentCtas;
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
  plan->block[0] = (unsigned)(small ? kSmallThreads : wide ? kWideThreads : kThreads);
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

constexpr const char* kRmsNormBinding = R"cpp(// @BINDING@: PyTorch binding of @CU@ (generated by `ptxevo export --format torch`).
// @DESCRIPTION@
// Inputs are checked against the options the kernel was built for; the launch goes on the
// current CUDA stream of x's device.
#include <torch/extension.h>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

@PROTOTYPE@

namespace {

constexpr bool kHasWeight = @HAS_WEIGHT@, kHasBias = @HAS_BIAS@, kHasResidual = @HAS_RESIDUAL@, kStoreRstd = @STORE_RSTD@;

@CHECK_TENSOR@

void check_present(const c10::optional<at::Tensor>& t, bool built_with, const char* name) {
  TORCH_CHECK(t.has_value() == built_with, "the exported kernel was built ", built_with ? "with" : "without", " ",
              name, "; ", built_with ? "pass it" : "pass None");
}

const void* ptr(const c10::optional<at::Tensor>& t) { return t.has_value() ? t->data_ptr() : nullptr; }

}  // namespace

// [out, residual_out, rstd]; residual_out and rstd are None when the kernel does not write them.
std::vector<at::Tensor> fwd(const at::Tensor& x, const c10::optional<at::Tensor>& weight,
                            const c10::optional<at::Tensor>& bias, const c10::optional<at::Tensor>& residual,
                            double eps) {
  TORCH_CHECK(x.dim() == 2, "x must be 2-D [M, N], got ", x.dim(), " dimensions");
  const int64_t M = x.size(0), N = x.size(1);
  TORCH_CHECK(N >= 1, "x must have at least one column");
  check_tensor(x, "x", @X_TYPE@, {M, N}, x);
  check_present(weight, kHasWeight, "a weight");
  check_present(bias, kHasBias, "a bias");
  check_present(residual, kHasResidual, "a residual");
  if (weight) check_tensor(*weight, "weight", @W_TYPE@, {N}, x);
  if (bias) check_tensor(*bias, "bias", @B_TYPE@, {N}, x);
  if (residual) check_tensor(*residual, "residual", @X_TYPE@, {M, N}, x);
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor out = at::empty_like(x), residual_out, rstd;
  if (kHasResidual) residual_out = at::empty({M, N}, x.options().dtype(@R_TYPE@));
  if (kStoreRstd) rstd = at::empty({M}, x.options().dtype(at::kFloat));
  if (M == 0) return {out, residual_out, rstd};
  const char* why = nullptr;
  const cudaError_t e = ptxevo_@OP@_launch(x.data_ptr(), ptr(weight), ptr(bias), ptr(residual), out.data_ptr(),
                                           kHasResidual ? residual_out.data_ptr() : nullptr,
                                           kStoreRstd ? rstd.data_ptr<float>() : nullptr, M, N,
                                           static_cast<float>(eps), at::cuda::getCurrentCUDAStream().stream(), &why);
  TORCH_CHECK(e == cudaSuccess, why ? why : "launch failed", " (", cudaGetErrorString(e), ")");
  return {out, residual_out, rstd};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("fwd", &fwd, "@OP@ forward: [out, residual_out, rstd]", pybind11::arg("x"), pybind11::arg("weight"),
        pybind11::arg("bias"), pybind11::arg("residual"), pybind11::arg("eps"));
}
)cpp";

constexpr const char* kRmsNormModule = R"py("""QuACK-compatible RMSNorm on a kernel exported by ptxevo (`ptxevo export --format torch`).

@DESCRIPTION@

rmsnorm_fwd, rmsnorm_bwd and rmsnorm take QuACK's arguments (quack/rmsnorm.py). The forward runs
the exported kernel, which was built for the options in CONFIG: other dtypes or optional tensors
raise ValueError instead of silently computing something else. The backward is PyTorch eager in
fp32 (the campaign evolved the forward only). The extension is compiled on first use with
torch.utils.cpp_extension.load (nvcc and a host compiler are needed once; torch caches the build).
"""
import os
from typing import Optional, Tuple

import torch
from torch import Tensor

CONFIG = {
    "op": "@OP@",
    "arch": "@ARCH@",
    "x_dtype": @X_PY@,
    "weight_dtype": @W_PY@ if @HAS_WEIGHT_PY@ else None,
    "bias_dtype": @B_PY@ if @HAS_BIAS_PY@ else None,
    "has_residual": @HAS_RESIDUAL_PY@,
    "residual_out_dtype": @R_PY@ if @HAS_RESIDUAL_PY@ else None,
    "store_rstd": @STORE_RSTD_PY@,
}
@LOADER@

def _check(name: str, t: Optional[Tensor], dtype) -> None:
    if (t is not None) != (dtype is not None):
        built = "with" if dtype is not None else "without"
        raise ValueError(f"this export of @OP@ was built {built} {name}; pass {'it' if dtype is not None else 'None'}")
    if t is not None and t.dtype != dtype:
        raise ValueError(f"{name} must be {dtype} (the exported kernel was built for it), got {t.dtype}")


def rmsnorm_fwd(x: Tensor, weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
                residual: Optional[Tensor] = None, out_dtype: Optional[torch.dtype] = None,
                residual_dtype: Optional[torch.dtype] = None, eps: float = 1e-6,
                store_rstd: bool = False) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
    """(out, residual_out, rstd) as QuACK returns them; residual_out is x without a residual."""
    _check("x", x, CONFIG["x_dtype"])
    _check("weight", weight, CONFIG["weight_dtype"])
    _check("bias", bias, CONFIG["bias_dtype"])
    _check("residual", residual, CONFIG["x_dtype"] if CONFIG["has_residual"] else None)
    if out_dtype is not None and out_dtype != x.dtype:
        raise ValueError(f"out_dtype must be x's dtype {x.dtype} for this export, got {out_dtype}")
    if residual_dtype is not None and residual is not None and residual_dtype != CONFIG["residual_out_dtype"]:
        raise ValueError(f"residual_dtype must be {CONFIG['residual_out_dtype']} for this export, got {residual_dtype}")
    shape = x.shape
    x2 = x.reshape(-1, shape[-1]).contiguous()
    r2 = residual.reshape(-1, shape[-1]).contiguous() if residual is not None else None
    w = weight.contiguous() if weight is not None else None
    b = bias.contiguous() if bias is not None else None
    out, residual_out, rstd = load().fwd(x2, w, b, r2, float(eps))
    if store_rstd and rstd is None:  # the kernel was built without rstd: the same formula in fp32
        h = x2.float() if r2 is None else x2.float() + r2.float()
        rstd = torch.rsqrt(h.square().mean(dim=-1) + eps)
    if not store_rstd:
        rstd = None
    elif rstd is not None:
        rstd = rstd.reshape(shape[:-1])
    residual_out = x if residual is None else residual_out.reshape(shape)
    return out.reshape(shape), residual_out, rstd


def rmsnorm_bwd(x: Tensor, weight: Optional[Tensor], dout: Tensor, rstd: Tensor,
                dresidual_out: Optional[Tensor] = None, has_bias: bool = False,
                has_residual: bool = False) -> Tuple[Tensor, Optional[Tensor], Optional[Tensor], Optional[Tensor]]:
    """(dx, dw, db, dresidual), QuACK's backward in PyTorch eager with fp32 accumulation."""
    n = x.shape[-1]
    xf = x.reshape(-1, n).float()
    r = rstd.reshape(-1, 1).float()
    dy = dout.reshape(-1, n).float()
    x_hat = xf * r
    wdy = dy * weight.float() if weight is not None else dy
    c1 = (x_hat * wdy).mean(dim=-1, keepdim=True)
    dx = (wdy - x_hat * c1) * r
    if dresidual_out is not None:
        dx = dx + dresidual_out.reshape(-1, n).float()
    dw = (dy * x_hat).sum(dim=0).to(weight.dtype) if weight is not None else None
    db = dy.sum(dim=0).to(weight.dtype if weight is not None else x.dtype) if has_bias else None
    dx_out = dx.to(x.dtype).reshape(x.shape)
    dresidual = dx_out if has_residual else None
    return dx_out, dw, db, dresidual


class _RMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, residual, out_dtype, residual_dtype, eps, prenorm):
        out, residual_out, rstd = rmsnorm_fwd(x, weight, bias, residual, out_dtype, residual_dtype, eps,
                                              store_rstd=True)
        ctx.save_for_backward(x if residual is None else residual_out, weight, rstd)
        ctx.has_bias = bias is not None
        ctx.has_residual = residual is not None
        ctx.prenorm = prenorm
        return (out, residual_out) if prenorm else out

    @staticmethod
    def backward(ctx, dout, *rest):
        x, weight, rstd = ctx.saved_tensors
        dresidual_out = rest[0] if ctx.prenorm and rest else None
        dx, dw, db, dresidual = rmsnorm_bwd(x, weight, dout, rstd, dresidual_out, ctx.has_bias, ctx.has_residual)
        return dx, dw, db, dresidual, None, None, None, None


def rmsnorm(x: Tensor, weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
            residual: Optional[Tensor] = None, out_dtype: Optional[torch.dtype] = None,
            residual_dtype: Optional[torch.dtype] = None, eps: float = 1e-6, prenorm: bool = False):
    """QuACK's autograd rmsnorm: out, or (out, residual_out) with prenorm."""
    return _RMSNormFunction.apply(x, weight, bias, residual, out_dtype, residual_dtype, eps, prenorm)
)py";

}  // namespace

std::optional<evaluator::HostExport> RmsNormFwdOp::host_export(const OpConfig& cfg, const Knobs& knobs,
                                                              const std::set<std::string>&) const {
  const Config c = parse(cfg);
  const Geometry g = geometry(c, knobs);
  evaluator::HostExport l;
  l.kernel_params = {{"const XT* __restrict__", "x", "l"},        {"const WT* __restrict__", "w", "l"},
                     {"const BT* __restrict__", "b", "l"},        {"const XT* __restrict__", "res", "l"},
                     {"XT* __restrict__", "out", "l"},            {"RT* __restrict__", "res_out", "l"},
                     {"float* __restrict__", "rstd", "l"},        {"long long", "M", "l"},
                     {"long long", "N", "l"},                     {"float", "eps", "f"}};
  l.entries = entries(g);
  std::string names, cases;
  int cluster_entry = -1, wide_entry = -1, small_entry = -1;
  for (std::size_t i = 0; i < l.entries.size(); ++i) {
    names += (i ? ", " : "") + ("\"" + l.entries[i] + "\"");
    cases += "    case " + std::to_string(i) + ":\n      k = " + l.entries[i] + ";\n      break;\n";
    if (l.entries[i] == "rmsnorm_fwd_cluster") cluster_entry = static_cast<int>(i);
    if (l.entries[i] == "rmsnorm_fwd_wide") wide_entry = static_cast<int>(i);
    if (small_entry < 0 && l.entries[i].rfind("rmsnorm_fwd_small", 0) == 0) small_entry = static_cast<int>(i);
  }
  if (!cases.empty()) cases.pop_back();  // the template's line break follows
  const auto xs = static_cast<long long>(evaluator::dtype_size(c.x));
  l.code = evaluator::substitute(kRmsNormFwdHost, {{"ENTRY_NAMES", names},
                                        {"ENTRY_CASES", cases},
                                        {"CLUSTER_ENTRY", std::to_string(cluster_entry)},
                                        {"WIDE_ENTRY", std::to_string(wide_entry)},
                                        {"WIDE_ROWS", std::to_string(g.wide_rows)},
                                        {"SMALL_ENTRY", std::to_string(small_entry)},
                                        {"SMALL_THREADS", std::to_string(g.small_threads)},
                                        {"SMALL_ITEMS", std::to_string(g.small_items)},
                                        {"SMALL_MIN_ROWS", std::to_string(g.small_min_rows)},
                                        {"SMALL_MIN_CTAS", std::to_string(g.small_min_ctas)},
                                        {"SMALL_STAGE_ELEM_BYTES", std::to_string(g.small_stage == 1 ? small_stage_bytes(c, 1) : 0)},
                                        {"MIN_CLUSTER", std::to_string(g.min_cluster)},
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


std::optional<evaluator::TorchExport> RmsNormFwdOp::torch_export(const OpConfig& cfg) const {
  const Config c = parse(cfg);
  const std::map<std::string, std::string> values = {
      {"CHECK_TENSOR", evaluator::kTorchCheckTensor},
      {"OP", name()},
      {"HAS_WEIGHT", c.has_weight ? "true" : "false"},
      {"HAS_BIAS", c.has_bias ? "true" : "false"},
      {"HAS_RESIDUAL", c.has_residual ? "true" : "false"},
      {"STORE_RSTD", c.store_rstd ? "true" : "false"},
      {"X_TYPE", evaluator::torch_dtype_cpp(c.x)},
      {"W_TYPE", evaluator::torch_dtype_cpp(c.w)},
      {"B_TYPE", evaluator::torch_dtype_cpp(c.b)},
      {"R_TYPE", evaluator::torch_dtype_cpp(c.residual_out)},
      {"X_PY", evaluator::torch_dtype_py(c.x)},
      {"W_PY", evaluator::torch_dtype_py(c.w)},
      {"B_PY", evaluator::torch_dtype_py(c.b)},
      {"R_PY", evaluator::torch_dtype_py(c.residual_out)},
      {"HAS_WEIGHT_PY", py_bool(c.has_weight)},
      {"HAS_BIAS_PY", py_bool(c.has_bias)},
      {"HAS_RESIDUAL_PY", py_bool(c.has_residual)},
      {"STORE_RSTD_PY", py_bool(c.store_rstd)},
  };
  return evaluator::TorchExport{evaluator::substitute(kRmsNormBinding, values),
                                evaluator::substitute(kRmsNormModule, values)};
}

}  // namespace ptxevo::kernels
