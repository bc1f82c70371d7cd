// KdaFwdOp's export (evaluator/op_export.hpp): the host launcher around the plan code the op
// itself runs (kda_plan.hpp, pasted into the .cu with the knobs baked in) and a PyTorch binding
// and module with FlashKDA's calling convention, a torch.library op and a flash-linear-attention
// backend. docs/export.md describes what users get.
#include <stdexcept>
#include <vector>

#include "kernels/kda/kda_fwd_op.hpp"

namespace ptxevo::kernels {

namespace {

using evaluator::Knobs;
using evaluator::OpConfig;

[[noreturn]] void fail(const std::string& m) { throw std::invalid_argument("kda_fwd export: " + m); }

constexpr const char* kKdaFwdHost = R"cpp(
// ---- host launcher (NVRTC, which compiles device code only, skips it) ----
#ifndef __CUDACC_RTC__
#include <cuda_runtime.h>

// ---- the launch plan: ptxevo's kernels/kda/kda_plan.hpp, verbatim (the plan the kernels were
// timed with) ----
@PLAN_SOURCE@
// ---- end of the launch plan ----

// The knobs above, as the plan reads them.
static ptxevo::kda_plan::@GEOMETRY_TYPE@ ptxevo_kda_fwd_geometry() {
  ptxevo::kda_plan::@GEOMETRY_TYPE@ g;
@GEOMETRY_FIELDS@
  return g;
}

// B rows of T tokens, H heads, N sequences: N == B (a sequence a row), or B == 1 and N > 1 packed
// sequences (cu_seqlens), the longest of them `longest` tokens (ignored when not packed).
static const char* ptxevo_kda_fwd_dims(long long B, long long T, long long H, long long N, long long longest,
                                       ptxevo::kda_plan::Dims* d) {
  if (B < 1 || T < 1 || H < 1 || N < 1) return "ptxevo_kda_fwd: B, T, H and N must be >= 1";
  if (N != B && B != 1)
    return "ptxevo_kda_fwd: N must equal B (a sequence a row) or B must be 1 (N packed sequences)";
  if (H > 65535) return "ptxevo_kda_fwd: H must be at most 65535";
  d->batch = B;
  d->tokens = T;
  d->heads = H;
  d->sequences = N;
  d->packed = N != B;
  d->longest = d->packed ? longest : T;
  if (d->packed && (longest < 1 || longest > T))
    return "ptxevo_kda_fwd: longest must be the length of the longest packed sequence, in [1, T]";
  return 0;
}

// Bytes of scratch the launch needs (pass a buffer at least this large), or -1 for bad dims.
extern "C" long long ptxevo_kda_fwd_workspace_bytes(long long B, long long T, long long H, long long N,
                                                    long long longest) {
  ptxevo::kda_plan::Dims d;
  if (ptxevo_kda_fwd_dims(B, T, H, N, longest, &d)) return -1;
  return ptxevo::kda_plan::workspace_bytes(d);
}

// The launches for these dims: 0, or -1 with *why.
extern "C" int ptxevo_kda_fwd_plan(long long B, long long T, long long H, long long N, long long longest,
                                   ptxevo::kda_plan::Plan* plan, const char** why) {
  const char* ignored = 0;
  if (!why) why = &ignored;
  ptxevo::kda_plan::Dims d;
  *why = ptxevo_kda_fwd_dims(B, T, H, N, longest, &d);
  if (!*why) *why = @PLAN_CALL@;
  return *why ? -1 : 0;
}

template <typename... Params, typename... Args>
static cudaError_t ptxevo_kda_fwd_run(const ptxevo::kda_plan::Launch& l, cudaStream_t stream, void (*kernel)(Params...),
                                      Args... args) {
  if (l.shared_bytes > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute((const void*)kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)l.shared_bytes);
    if (e != cudaSuccess) return e;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(l.grid[0], l.grid[1], l.grid[2]);
  cfg.blockDim = dim3(l.block[0], l.block[1], l.block[2]);
  cfg.dynamicSmemBytes = l.shared_bytes;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  if (l.programmatic) {  // starts while the launch before it runs; the kernels wait on flags
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  return cudaLaunchKernelEx(&cfg, kernel, args...);
}

// out = KDA(q, k, v, g, beta) with the state options the kernels were built for (below); tensors
// dense in the layouts of the op (q, k, v, g, out bf16 [B, T, H, 128]; beta bf16 [B, T, H];
// A_log fp32 [H]; dt_bias fp32 [H, 128]; states fp32 [N, H, 128, 128], V-first; cu_seqlens int64
// [N + 1] for packed sequences, else NULL). Pointers the options do not use must be NULL.
// Returns cudaSuccess, or an error with *why (when why is not NULL). Launches on `stream`.
extern "C" cudaError_t ptxevo_kda_fwd_launch(const void* q, const void* k, const void* v, const void* g,
                                             const void* beta, const float* A_log, const float* dt_bias,
                                             const long long* cu_seqlens, const float* initial_state, void* out,
                                             float* final_state, void* workspace, long long workspace_bytes,
                                             long long B, long long T, long long H, long long N, long long longest,
                                             float scale, float lower_bound, cudaStream_t stream, const char** why) {
  const char* ignored = 0;
  if (!why) why = &ignored;
  if (!q || !k || !v || !g || !beta || !A_log || !dt_bias || !out || !workspace) {
    *why = "ptxevo_kda_fwd: q, k, v, g, beta, A_log, dt_bias, out and workspace are required";
    return cudaErrorInvalidValue;
  }
  if ((initial_state != 0) != (HAS_INITIAL_STATE != 0)) {
    *why = HAS_INITIAL_STATE ? "ptxevo_kda_fwd: these kernels were built to read an initial state; pass it"
                             : "ptxevo_kda_fwd: these kernels were built without an initial state; pass NULL";
    return cudaErrorInvalidValue;
  }
  if ((final_state != 0) != (HAS_FINAL_STATE != 0)) {
    *why = HAS_FINAL_STATE ? "ptxevo_kda_fwd: these kernels were built to write the final state; pass it"
                           : "ptxevo_kda_fwd: these kernels were built without a final state; pass NULL";
    return cudaErrorInvalidValue;
  }
  if ((cu_seqlens != 0) != (N != B)) {
    *why = N != B ? "ptxevo_kda_fwd: packed sequences (N != B) need cu_seqlens"
                  : "ptxevo_kda_fwd: cu_seqlens is for packed sequences (B == 1, N > 1) only; pass NULL";
    return cudaErrorInvalidValue;
  }
  if (!(scale > 0.0f) || scale > 3.0e38f) {
    *why = "ptxevo_kda_fwd: scale must be a finite number > 0";
    return cudaErrorInvalidValue;
  }
  if (!KDA_GATE_SOFTPLUS && !(lower_bound >= -5.0f && lower_bound < 0.0f)) {
    *why = "ptxevo_kda_fwd: lower_bound must be in [-5, 0) (the lower-bound gate)";
    return cudaErrorInvalidValue;
  }
  ptxevo::kda_plan::Plan p;
  if (ptxevo_kda_fwd_plan(B, T, H, N, longest, &p, why) != 0) return cudaErrorInvalidValue;
  if (workspace_bytes < ptxevo_kda_fwd_workspace_bytes(B, T, H, N, longest)) {
    *why = "ptxevo_kda_fwd: the workspace is smaller than ptxevo_kda_fwd_workspace_bytes() asks for";
    return cudaErrorInvalidValue;
  }
  typedef __nv_bfloat16 bf16;
  const int h = (int)H, n = (int)N;
  for (int i = 0; i < p.count; ++i) {
    const ptxevo::kda_plan::Launch& l = p.launches[i];
    cudaError_t e = cudaErrorInvalidValue;
    switch (l.kernel) {
@KERNEL_CASES@
      default:
        *why = "ptxevo_kda_fwd: the plan named a kernel this file lacks";
        return cudaErrorInvalidValue;
    }
    if (e != cudaSuccess) {
      *why = cudaGetErrorString(e);
      return e;
    }
  }
  return cudaSuccess;
}
#endif  // __CUDACC_RTC__
)cpp";

struct KernelCase {
  kda_plan::Kernel kernel;
  const char* call;  // the launch's arguments after the kernel
};

// Per kernel, the arguments in its entry's parameter order.
const std::vector<KernelCase>& kernel_cases() {
  static const std::vector<KernelCase> cases = {
      {kda_plan::Kernel::Recurrent,
       "(const bf16*)q, (const bf16*)k, (const bf16*)v, (const bf16*)g, (const bf16*)beta, A_log, dt_bias, cu_seqlens, "
       "initial_state, (bf16*)out, final_state, T, h, scale, lower_bound"},
      {kda_plan::Kernel::Chunked,
       "(const bf16*)q, (const bf16*)k, (const bf16*)v, (const bf16*)g, (const bf16*)beta, A_log, dt_bias, cu_seqlens, "
       "initial_state, (bf16*)out, final_state, T, h, scale, lower_bound"},
      {kda_plan::Kernel::ChunkedTcgen05,
       "(const bf16*)q, (const bf16*)k, (const bf16*)v, (const bf16*)g, (const bf16*)beta, A_log, dt_bias, cu_seqlens, "
       "initial_state, (bf16*)out, final_state, T, h, scale, lower_bound"},
      {kda_plan::Kernel::Prepare,
       "(const bf16*)q, (const bf16*)k, (const bf16*)v, (const bf16*)g, (const bf16*)beta, A_log, dt_bias, cu_seqlens, "
       "(unsigned char*)workspace, T, h, n, scale, lower_bound"},
      {kda_plan::Kernel::Recurrence,
       "(const unsigned char*)workspace, cu_seqlens, initial_state, (bf16*)out, final_state, T, h, n, scale, "
       "lower_bound, (const bf16*)v, (int)l.segments, (int)l.pass"},
      {kda_plan::Kernel::SegCombine, "(unsigned char*)workspace, cu_seqlens, T, h, n, (int)l.segments"},
      {kda_plan::Kernel::FlagsReset, "(unsigned char*)workspace, cu_seqlens, T, h, n"},
  };
  return cases;
}

const char* kernel_enum(kda_plan::Kernel k) {
  switch (k) {
    case kda_plan::Kernel::Recurrent: return "Recurrent";
    case kda_plan::Kernel::Chunked: return "Chunked";
    case kda_plan::Kernel::ChunkedTcgen05: return "ChunkedTcgen05";
    case kda_plan::Kernel::Prepare: return "Prepare";
    case kda_plan::Kernel::Recurrence: return "Recurrence";
    case kda_plan::Kernel::SegCombine: return "SegCombine";
    case kda_plan::Kernel::FlagsReset: return "FlagsReset";
  }
  return "";
}

// The entries' parameters as the exported C++ declares them (kda_fwd.cu, kda_fwd_chunked.cu).
std::vector<evaluator::ExportParam> entry_params(kda_plan::Kernel k) {
  const evaluator::ExportParam bf16_in[] = {{"const __nv_bfloat16* __restrict__", "q", "l"},
                                 {"const __nv_bfloat16* __restrict__", "k", "l"},
                                 {"const __nv_bfloat16* __restrict__", "v", "l"},
                                 {"const __nv_bfloat16* __restrict__", "g", "l"},
                                 {"const __nv_bfloat16* __restrict__", "beta", "l"},
                                 {"const float* __restrict__", "a_log", "l"},
                                 {"const float* __restrict__", "dt_bias", "l"},
                                 {"const long long* __restrict__", "cu_seqlens", "l"}};
  std::vector<evaluator::ExportParam> p;
  switch (k) {
    case kda_plan::Kernel::Recurrent:
    case kda_plan::Kernel::Chunked:
    case kda_plan::Kernel::ChunkedTcgen05:
      p.assign(std::begin(bf16_in), std::end(bf16_in));
      p.insert(p.end(), {{"const float* __restrict__", "initial_state", "l"},
                         {"__nv_bfloat16* __restrict__", "out", "l"},
                         {"float* __restrict__", "final_state", "l"},
                         {"long long", "T", "l"},
                         {"int", "H", "r"},
                         {"float", "scale", "f"},
                         {"float", "lower_bound", "f"}});
      break;
    case kda_plan::Kernel::Prepare:
      p.assign(std::begin(bf16_in), std::end(bf16_in));
      p.insert(p.end(), {{"unsigned char* __restrict__", "ws", "l"},
                         {"long long", "T", "l"},
                         {"int", "H", "r"},
                         {"int", "nseq", "r"},
                         {"float", "scale", "f"},
                         {"float", "lower_bound", "f"}});
      break;
    case kda_plan::Kernel::Recurrence:
      p = {{"const unsigned char* __restrict__", "ws", "l"},
           {"const long long* __restrict__", "cu_seqlens", "l"},
           {"const float* __restrict__", "initial_state", "l"},
           {"__nv_bfloat16* __restrict__", "out", "l"},
           {"float* __restrict__", "final_state", "l"},
           {"long long", "T", "l"},
           {"int", "H", "r"},
           {"int", "nseq", "r"},
           {"float", "scale", "f"},
           {"float", "lower_bound", "f"},
           {"const __nv_bfloat16* __restrict__", "v", "l"},
           {"int", "nseg", "r"},
           {"int", "pass", "r"}};
      break;
    case kda_plan::Kernel::SegCombine:
      p = {{"unsigned char* __restrict__", "ws", "l"},
           {"const long long* __restrict__", "cu_seqlens", "l"},
           {"long long", "T", "l"},
           {"int", "H", "r"},
           {"int", "nseq", "r"},
           {"int", "nseg", "r"}};
      break;
    case kda_plan::Kernel::FlagsReset:
      p = {{"unsigned char* __restrict__", "ws", "l"},
           {"const long long* __restrict__", "cu_seqlens", "l"},
           {"long long", "T", "l"},
           {"int", "H", "r"},
           {"int", "nseq", "r"}};
      break;
  }
  return p;
}

std::string field(const char* name, std::int64_t v) { return "  g." + std::string(name) + " = " + std::to_string(v) + ";\n"; }
std::string field(const char* name, bool v) { return "  g." + std::string(name) + " = " + (v ? "true" : "false") + ";\n"; }

std::string plan_source_text() {
  std::string s = KdaFwdOp::plan_source();
  const std::string pragma = "#pragma once\n";
  if (const auto at = s.find(pragma); at != std::string::npos) s.erase(at, pragma.size());
  return s;
}

constexpr const char* kKdaBinding = R"cpp(// @BINDING@: PyTorch binding of @CU@ (generated by `ptxevo export --format torch`).
// @DESCRIPTION@
// Tensors are checked against the options the kernels were built for; the launch goes on the
// current CUDA stream of q's device, with a workspace from torch's caching allocator.
#include <torch/extension.h>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

@PROTOTYPE@

namespace {

constexpr bool kInitialState = @HAS_INITIAL@, kFinalState = @HAS_FINAL@;
constexpr int64_t kD = 128;

@CHECK_TENSOR@

}  // namespace

// flash_kda.fwd's tensors with fp32 states (the Python module converts bf16 ones), plus `longest`,
// the longest packed sequence's length (ignored without cu_seqlens). Writes out and final_state.
void fwd(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g, const at::Tensor& beta,
         double scale, at::Tensor out, const at::Tensor& A_log, const at::Tensor& dt_bias, double lower_bound,
         const c10::optional<at::Tensor>& initial_state, const c10::optional<at::Tensor>& final_state,
         const c10::optional<at::Tensor>& cu_seqlens, int64_t longest) {
  TORCH_CHECK(q.dim() == 4 && q.size(3) == kD, "q must be [B, T, H, 128], got ", q.sizes());
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2);
  const bool packed = cu_seqlens.has_value();
  TORCH_CHECK(!packed || B == 1, "packed sequences (cu_seqlens) need B == 1, got B = ", B);
  const int64_t N = packed ? cu_seqlens->numel() - 1 : B;
  TORCH_CHECK(N >= 1, "cu_seqlens must hold at least 2 offsets");
  const std::pair<const at::Tensor*, const char*> tokens[] = {{&q, "q"}, {&k, "k"}, {&v, "v"}, {&g, "g"}, {&out, "out"}};
  for (const auto& [t, name] : tokens) check_tensor(*t, name, at::kBFloat16, {B, T, H, kD}, q);
  check_tensor(beta, "beta", at::kBFloat16, {B, T, H}, q);
  check_tensor(A_log, "A_log", at::kFloat, {H}, q);
  check_tensor(dt_bias, "dt_bias", at::kFloat, {H, kD}, q);
  if (packed) check_tensor(*cu_seqlens, "cu_seqlens", at::kLong, {N + 1}, q);
  TORCH_CHECK(initial_state.has_value() == kInitialState, "the exported kernels were built ",
              kInitialState ? "to read an initial state; pass it" : "without an initial state; pass None");
  TORCH_CHECK(final_state.has_value() == kFinalState, "the exported kernels were built ",
              kFinalState ? "to write the final state; pass it" : "without a final state; pass None");
  if (initial_state) check_tensor(*initial_state, "initial_state", at::kFloat, {N, H, kD, kD}, q);
  if (final_state) check_tensor(*final_state, "final_state", at::kFloat, {N, H, kD, kD}, q);
  if (B * T == 0) return;
  const c10::cuda::CUDAGuard guard(q.device());
  const int64_t longest_tokens = packed ? longest : T;
  const long long ws = ptxevo_kda_fwd_workspace_bytes(B, T, H, N, longest_tokens);
  TORCH_CHECK(ws > 0, "ptxevo_kda_fwd: no plan for B = ", B, ", T = ", T, ", H = ", H, ", N = ", N, ", longest = ",
              longest_tokens);
  at::Tensor workspace = at::empty({static_cast<int64_t>(ws)}, q.options().dtype(at::kByte));
  const char* why = nullptr;
  const cudaError_t e = ptxevo_kda_fwd_launch(
      q.data_ptr(), k.data_ptr(), v.data_ptr(), g.data_ptr(), beta.data_ptr(), A_log.data_ptr<float>(),
      dt_bias.data_ptr<float>(), packed ? reinterpret_cast<const long long*>(cu_seqlens->data_ptr<int64_t>()) : nullptr,
      initial_state ? initial_state->data_ptr<float>() : nullptr, out.data_ptr(),
      final_state ? final_state->data_ptr<float>() : nullptr, workspace.data_ptr(), ws, B, T, H, N, longest_tokens,
      static_cast<float>(scale), static_cast<float>(lower_bound), at::cuda::getCurrentCUDAStream().stream(), &why);
  TORCH_CHECK(e == cudaSuccess, why ? why : "launch failed", " (", cudaGetErrorString(e), ")");
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("fwd", &fwd, "kda_fwd: writes out and final_state", pybind11::arg("q"), pybind11::arg("k"), pybind11::arg("v"),
        pybind11::arg("g"), pybind11::arg("beta"), pybind11::arg("scale"), pybind11::arg("out"), pybind11::arg("A_log"),
        pybind11::arg("dt_bias"), pybind11::arg("lower_bound"), pybind11::arg("initial_state"),
        pybind11::arg("final_state"), pybind11::arg("cu_seqlens"), pybind11::arg("longest"));
}
)cpp";

constexpr const char* kKdaModule = R"py("""FlashKDA-compatible Kimi Delta Attention forward on kernels exported by ptxevo
(`ptxevo export --format torch`).

@DESCRIPTION@

fwd() takes flash_kda.fwd's arguments and writes out (and final_state) in place; chunk_kda() takes
FLA's chunk_kda arguments for the fused path and returns (o, final_state); register_fla_backend()
makes FLA's chunk_kda dispatch here under torch.inference_mode(). The kernels were built for the
options in CONFIG (the gate, whether states are read and written): other options raise ValueError
instead of computing something else. States are [N, H, 128, 128], V-first (S^T), fp32 or bf16 (the
kernels run fp32 states; bf16 ones are converted). Packed sequences take B == 1 and int64
cu_seqlens; pass max_seqlen (the longest sequence) to spare a device-to-host copy, and always under
CUDA-graph capture. The extension is compiled on first use with torch.utils.cpp_extension.load.
"""
import os
from typing import Optional, Tuple

import torch
from torch import Tensor

CONFIG = {
    "op": "kda_fwd",
    "arch": "@ARCH@",
    "gate": "@GATE@",
    "initial_state": @HAS_INITIAL_PY@,
    "final_state": @HAS_FINAL_PY@,
    "head_dim": 128,
}
@LOADER@
D = 128


@torch.library.custom_op("ptxevo_@TAG@::kda_fwd", mutates_args=("out", "final_state"), device_types="cuda")
def _kda_fwd(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, scale: float, out: Tensor, A_log: Tensor,
             dt_bias: Tensor, lower_bound: float, initial_state: Optional[Tensor], final_state: Optional[Tensor],
             cu_seqlens: Optional[Tensor], longest: int) -> None:
    load().fwd(q, k, v, g, beta, scale, out, A_log, dt_bias, lower_bound, initial_state, final_state, cu_seqlens,
               longest)


# The fake for torch.compile's tracing: the op returns nothing (it writes out and final_state in
# place), so there is no output to describe.
@_kda_fwd.register_fake
def _(q, k, v, g, beta, scale, out, A_log, dt_bias, lower_bound, initial_state, final_state, cu_seqlens, longest):
    return None


def _longest(cu_seqlens: Tensor, max_seqlen: Optional[int]) -> int:
    if max_seqlen is not None:
        return int(max_seqlen)
    if cu_seqlens.device.type != "cpu" and torch.cuda.is_current_stream_capturing():
        raise ValueError("ptxevo kda_fwd: pass max_seqlen (the longest packed sequence) under CUDA-graph capture; "
                         "reading it from cu_seqlens copies to the host")
    c = cu_seqlens.cpu()
    return int((c[1:] - c[:-1]).max())


def _gate_bound(lower_bound: Optional[float]) -> float:
    if CONFIG["gate"] == "lower_bound":
        if lower_bound is None or not (-5.0 <= float(lower_bound) < 0.0):
            raise ValueError(f"these kernels use the lower-bound gate: pass lower_bound in [-5, 0), got {lower_bound}")
        return float(lower_bound)
    if lower_bound is not None:
        raise ValueError("these kernels use the softplus gate (FLA's lower_bound=None): pass lower_bound=None")
    return 0.0


def fwd(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, scale: float, out: Tensor, A_log: Tensor,
        dt_bias: Tensor, lower_bound: Optional[float], initial_state: Optional[Tensor] = None,
        final_state: Optional[Tensor] = None, cu_seqlens: Optional[Tensor] = None,
        max_seqlen: Optional[int] = None) -> None:
    """flash_kda.fwd: out (and final_state) written in place."""
    if q.dim() != 4 or q.shape[-1] != D:
        raise ValueError(f"q must be [B, T, H, 128], got {tuple(q.shape)}")
    B, T, H, _ = q.shape
    N = cu_seqlens.numel() - 1 if cu_seqlens is not None else B
    bound = _gate_bound(lower_bound)
    for name, s in (("initial_state", initial_state), ("final_state", final_state)):
        if s is not None and not CONFIG[name]:
            raise ValueError(f"this export was built without {name}; export kda_fwd from a spec with {name} = true")
        if s is not None and s.dtype not in (torch.float32, torch.bfloat16):
            raise ValueError(f"{name} must be float32 or bfloat16, got {s.dtype}")
    if initial_state is not None and final_state is not None and initial_state.dtype != final_state.dtype:
        raise ValueError("initial_state and final_state must have one dtype (FlashKDA's convention)")
    s0 = None
    if CONFIG["initial_state"]:  # none given: the zero state, which is what no initial state means
        s0 = (initial_state.to(torch.float32).contiguous() if initial_state is not None
              else torch.zeros(N, H, D, D, dtype=torch.float32, device=q.device))
    fs = None
    if CONFIG["final_state"]:
        direct = final_state is not None and final_state.dtype == torch.float32 and final_state.is_contiguous()
        fs = final_state if direct else torch.empty(N, H, D, D, dtype=torch.float32, device=q.device)
    cu = None
    longest = T
    if cu_seqlens is not None:
        cu = cu_seqlens if cu_seqlens.dtype == torch.long else cu_seqlens.to(torch.long)
        longest = _longest(cu, max_seqlen)
    if dt_bias.dim() == 1:
        dt_bias = dt_bias.view(H, -1)
    _kda_fwd(q, k, v, g, beta, float(scale), out, A_log, dt_bias, bound, s0, fs, cu, longest)
    if final_state is not None and fs is not final_state:
        final_state.copy_(fs)


def chunk_kda(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, scale: Optional[float] = None,
              initial_state: Optional[Tensor] = None, output_final_state: bool = False,
              A_log: Optional[Tensor] = None, dt_bias: Optional[Tensor] = None,
              lower_bound: Optional[float] = None, cu_seqlens: Optional[Tensor] = None,
              cu_seqlens_cpu: Optional[Tensor] = None,
              max_seqlen: Optional[int] = None) -> Tuple[Tensor, Optional[Tensor]]:
    """FLA's chunk_kda with use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel and
    state_v_first: (o, final_state), the final state fp32 [N, H, 128, 128] when asked for."""
    if A_log is None or dt_bias is None:
        raise ValueError("the gate is computed in the kernel: pass A_log and dt_bias")
    if scale is None:
        scale = q.shape[-1] ** -0.5
    N = cu_seqlens.numel() - 1 if cu_seqlens is not None else q.shape[0]
    if max_seqlen is None and cu_seqlens_cpu is not None:
        max_seqlen = int((cu_seqlens_cpu[1:] - cu_seqlens_cpu[:-1]).max())
    out = torch.empty_like(v)
    final = (torch.empty(N, q.shape[2], D, D, dtype=torch.float32, device=q.device) if output_final_state else None)
    fwd(q, k, v, g, beta, scale, out, A_log, dt_bias, lower_bound, initial_state, final, cu_seqlens, max_seqlen)
    return out, final


def register_fla_backend(priority: int = 2):
    """Registers these kernels with flash-linear-attention's backend dispatch for chunk_kda (fla.ops.backends,
    FLA >= 0.5): where a call is what they compute (no gradients, bfloat16, K = V = 128, no GVA, the three
    in-kernel flags, state_v_first, the gate and state options of CONFIG), FLA runs them instead of its Triton
    path (lower priority numbers win; FlashKDA's backend has 3). FLA_PTXEVO_KDA=0 turns it off. Returns the
    backend."""
    from fla.ops.backends import BaseBackend
    from fla.ops.kda.backends import kda_registry

    class PtxevoKDABackend(BaseBackend):
        backend_type = "ptxevo_kda"
        package_name = None
        env_var = "FLA_PTXEVO_KDA"
        default_enable = True

        def chunk_kda_verifier(self, q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                               use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                               use_beta_sigmoid_in_kernel=False, state_v_first=False, cu_seqlens=None,
                               cu_seqlens_cpu=None, safe_gate=False, lower_bound=None, disable_recompute=False,
                               return_intermediate_states=False, cp_context=None, **kwargs):
            checks = [
                (not torch.is_grad_enabled(), "forward only: gradients are enabled"),
                (q.is_cuda, "q is not a CUDA tensor"),
                (q.dtype == torch.bfloat16, f"needs bfloat16, got {q.dtype}"),
                (q.shape[-1] == D and v.shape[-1] == D, "needs K = V = 128"),
                (v.shape[2] == q.shape[2], "no GVA"),
                (use_gate_in_kernel and use_qk_l2norm_in_kernel and use_beta_sigmoid_in_kernel,
                 "needs use_gate_in_kernel, use_qk_l2norm_in_kernel and use_beta_sigmoid_in_kernel"),
                (not kwargs.get("allow_neg_eigval", False), "no allow_neg_eigval"),
                (state_v_first, "needs state_v_first=True"),
                (cp_context is None and not return_intermediate_states,
                 "no context parallel or intermediate states"),
                (kwargs.get("A_log") is not None and kwargs.get("dt_bias") is not None, "needs A_log and dt_bias"),
                ((lower_bound is not None) == (CONFIG["gate"] == "lower_bound"),
                 f"built for the {CONFIG['gate']} gate"),
                (initial_state is None or CONFIG["initial_state"], "built without an initial state"),
                (not output_final_state or CONFIG["final_state"], "built without a final state"),
            ]
            for ok, why in checks:
                if not ok:
                    return False, why
            return True, None

        def chunk_kda(self, q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                      use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                      state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None, safe_gate=False, lower_bound=None,
                      disable_recompute=False, return_intermediate_states=False, cp_context=None, A_log=None,
                      dt_bias=None, **kwargs):
            return chunk_kda(q, k, v, g, beta, scale, initial_state, output_final_state, A_log, dt_bias,
                             lower_bound, cu_seqlens, cu_seqlens_cpu)

    PtxevoKDABackend.priority = priority
    backend = PtxevoKDABackend()
    kda_registry.register(backend)
    return backend
)py";

const char* py_bool(bool b) { return b ? "True" : "False"; }

}  // namespace

std::optional<evaluator::HostExport> KdaFwdOp::host_export(const OpConfig& cfg, const Knobs& knobs,
                                                          const std::set<std::string>& defined) const {
  std::string geometry_type, fields, plan_call;
  std::vector<kda_plan::Kernel> possible;
  {
    parse(cfg);
    if (is_chunked(knobs)) {
      const ChunkedGeometry g = chunked_geometry(knobs);
      geometry_type = "ChunkedGeometry";
      fields = field("chunk", g.chunk) + field("bv", g.bv) + field("warps", g.warps) + field("stage", g.stage) +
               field("lm_tensor_cores", g.lm_tensor_cores) + field("tcgen05", g.tcgen05) + field("fused", g.fused) +
               field("u0_bits", g.u0_bits) + field("ksplit", g.ksplit) + field("prefetch_chunks", g.prefetch_chunks) +
               field("wy_tensor_cores", g.wy_tensor_cores) + field("state_hi_lo", g.state_hi_lo) +
               field("u_hi_lo", g.u_hi_lo) + field("lmterms", g.lmterms) +
               field("wy_in_recurrence", g.wy_in_recurrence) + field("wgmma", g.wgmma) + field("bulk", g.bulk) +
               field("prepare_ctas", g.prepare_ctas) + field("seqsplit", g.seqsplit);
      plan_call = "ptxevo::kda_plan::chunked_plan(d, ptxevo_kda_fwd_geometry(), KDA_GATE_SOFTPLUS != 0, plan)";
      if (g.fused) {
        possible = {g.tcgen05 ? kda_plan::Kernel::ChunkedTcgen05 : kda_plan::Kernel::Chunked};
      } else {
        possible = {kda_plan::Kernel::Prepare, kda_plan::Kernel::Recurrence};
        if (g.seqsplit > 1) possible.push_back(kda_plan::Kernel::SegCombine);
        if (g.prepare_ctas > 0) possible.push_back(kda_plan::Kernel::FlagsReset);
      }
    } else {
      const Geometry g = geometry(knobs);
      geometry_type = "RecurrentGeometry";
      fields = field("bv", g.bv) + field("ksplit", g.ksplit) + field("tb", g.tb) + field("min_blocks", g.min_blocks);
      plan_call = "ptxevo::kda_plan::recurrent_plan(d, ptxevo_kda_fwd_geometry(), plan)";
      possible = {kda_plan::Kernel::Recurrent};
    }
  }
  evaluator::HostExport l;
  std::string cases;
  for (const auto k : possible) {
    const std::string entry = kda_plan::entry_name(k);
    if (!defined.count(entry))
      fail("the launch plan of these knobs may launch " + entry + ", which the candidate's PTX does not define");
    l.entries.push_back(entry);
    l.params_by_entry[entry] = entry_params(k);
    for (const auto& c : kernel_cases())
      if (c.kernel == k)
        cases += std::string("      case ptxevo::kda_plan::Kernel::") + kernel_enum(k) +
                 ":\n        e = ptxevo_kda_fwd_run(l, stream, " + entry + ", " + c.call + ");\n        break;\n";
  }
  if (!cases.empty()) cases.pop_back();  // the template's line break follows
  l.code = evaluator::substitute(kKdaFwdHost, {{"PLAN_SOURCE", plan_source_text()},
                                    {"GEOMETRY_TYPE", geometry_type},
                                    {"GEOMETRY_FIELDS", fields.substr(0, fields.size() - 1)},
                                    {"PLAN_CALL", plan_call},
                                    {"KERNEL_CASES", cases}});
  l.prototype =
      "extern \"C\" cudaError_t ptxevo_kda_fwd_launch(const void* q, const void* k, const void* v, const void* g, "
      "const void* beta, const float* A_log, const float* dt_bias, const long long* cu_seqlens, "
      "const float* initial_state, void* out, float* final_state, void* workspace, long long workspace_bytes, "
      "long long B, long long T, long long H, long long N, long long longest, float scale, float lower_bound, "
      "cudaStream_t stream, const char** why);\n"
      "extern \"C\" long long ptxevo_kda_fwd_workspace_bytes(long long B, long long T, long long H, long long N, "
      "long long longest);";
  l.plan_prototype =
      "extern \"C\" int ptxevo_kda_fwd_plan(long long B, long long T, long long H, long long N, long long longest, "
      "ptxevo::kda_plan::Plan* plan, const char** why);";
  return l;
}


std::optional<evaluator::TorchExport> KdaFwdOp::torch_export(const OpConfig& cfg) const {
  const Config c = parse(cfg);
  const std::map<std::string, std::string> values = {
      {"CHECK_TENSOR", evaluator::kTorchCheckTensor},
      {"GATE", c.gate == KdaGate::Softplus ? "softplus" : "lower_bound"},
      {"HAS_INITIAL", c.initial_state ? "true" : "false"},
      {"HAS_FINAL", c.final_state ? "true" : "false"},
      {"HAS_INITIAL_PY", py_bool(c.initial_state)},
      {"HAS_FINAL_PY", py_bool(c.final_state)},
  };
  return evaluator::TorchExport{evaluator::substitute(kKdaBinding, values), evaluator::substitute(kKdaModule, values)};
}

}  // namespace ptxevo::kernels
