#include "exporter/kda_launcher.hpp"

#include <stdexcept>
#include <vector>

#include "exporter/inline_ptx.hpp"
#include "exporter/text_template.hpp"
#include "kernels/kda/kda_fwd_op.hpp"

namespace ptxevo::exporter {

namespace {

using kernels::KdaFwdOp;

// The plan is kda_plan.hpp's; what is written here is only the argument checks and, per kernel,
// the arguments in its entry's parameter order (as KdaFwdOp::launch_plan passes them).
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
std::vector<KernelParam> entry_params(kda_plan::Kernel k) {
  const KernelParam bf16_in[] = {{"const __nv_bfloat16* __restrict__", "q", "l"},
                                 {"const __nv_bfloat16* __restrict__", "k", "l"},
                                 {"const __nv_bfloat16* __restrict__", "v", "l"},
                                 {"const __nv_bfloat16* __restrict__", "g", "l"},
                                 {"const __nv_bfloat16* __restrict__", "beta", "l"},
                                 {"const float* __restrict__", "a_log", "l"},
                                 {"const float* __restrict__", "dt_bias", "l"},
                                 {"const long long* __restrict__", "cu_seqlens", "l"}};
  std::vector<KernelParam> p;
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

std::string plan_source_without_pragma() {
  std::string s = KdaFwdOp::plan_source();
  const std::string pragma = "#pragma once\n";
  if (const auto at = s.find(pragma); at != std::string::npos) s.erase(at, pragma.size());
  return s;
}

}  // namespace

OpLauncher kda_fwd_launcher(const evaluator::OpConfig& cfg, const evaluator::Knobs& knobs,
                            const std::set<std::string>& defined) {
  std::string geometry_type, fields, plan_call;
  std::vector<kda_plan::Kernel> possible;
  try {
    KdaFwdOp::parse(cfg);
    if (KdaFwdOp::is_chunked(knobs)) {
      const KdaFwdOp::ChunkedGeometry g = KdaFwdOp::chunked_geometry(knobs);
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
      const KdaFwdOp::Geometry g = KdaFwdOp::geometry(knobs);
      geometry_type = "RecurrentGeometry";
      fields = field("bv", g.bv) + field("ksplit", g.ksplit) + field("tb", g.tb) + field("min_blocks", g.min_blocks);
      plan_call = "ptxevo::kda_plan::recurrent_plan(d, ptxevo_kda_fwd_geometry(), plan)";
      possible = {kda_plan::Kernel::Recurrent};
    }
  } catch (const std::invalid_argument& e) {
    throw ExportError(e.what());
  }
  OpLauncher l;
  std::string cases;
  for (const auto k : possible) {
    const std::string entry = kda_plan::entry_name(k);
    if (!defined.count(entry))
      throw ExportError("the launch plan of these knobs may launch " + entry + ", which the candidate's PTX does not define");
    l.entries.push_back(entry);
    l.params_by_entry[entry] = entry_params(k);
    for (const auto& c : kernel_cases())
      if (c.kernel == k)
        cases += std::string("      case ptxevo::kda_plan::Kernel::") + kernel_enum(k) +
                 ":\n        e = ptxevo_kda_fwd_run(l, stream, " + entry + ", " + c.call + ");\n        break;\n";
  }
  if (!cases.empty()) cases.pop_back();  // the template's line break follows
  l.code = substitute(kKdaFwdHost, {{"PLAN_SOURCE", plan_source_without_pragma()},
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

}  // namespace ptxevo::exporter
