// KdaBwdOp's export (evaluator/op_export.hpp): the host launcher of the backward's kernels (the
// plan KdaBwdOp::launch_plan makes for either seed, with the knobs baked in) and a PyTorch binding and module
// whose `bwd` gives every gradient and whose `attach_forward` pairs it with an exported kda_fwd
// module into a torch.autograd.Function. docs/export.md describes what users get.
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/kda/kda_bwd_op.hpp"

namespace ptxevo::kernels {

namespace {

using evaluator::ExportParam;
using evaluator::Knobs;
using evaluator::OpConfig;

[[noreturn]] void fail(const std::string& m) { throw std::invalid_argument("kda_bwd export: " + m); }

constexpr const char* kKdaBwdHostCommon = R"cpp(
// ---- host launcher (NVRTC, which compiles device code only, skips it) ----
#ifndef __CUDACC_RTC__
#include <cuda_runtime.h>

// The launcher's checks of its arguments against the options the kernels were built for: 0, or why not.
static const char* ptxevo_kda_bwd_check(
    const void* q, const void* k, const void* v, const void* g, const void* beta, const float* A_log,
    const float* dt_bias, const long long* cu_seqlens, const float* initial_state, const void* d_out,
    const float* d_final_state, float* dq, float* dk, float* dv, float* dg, float* dbeta, float* dA_log,
    float* ddt_bias, float* d_initial_state, void* workspace, long long B, long long N, float scale,
    float lower_bound) {
  if (!q || !k || !v || !g || !beta || !A_log || !dt_bias || !d_out || !dq || !dk || !dv || !dg || !dbeta ||
      !dA_log || !ddt_bias || !workspace) {
    return "ptxevo_kda_bwd: q, k, v, g, beta, A_log, dt_bias, d_out, dq, dk, dv, dg, dbeta, dA_log, ddt_bias and "
           "workspace are required";
  }
  if ((initial_state != 0) != (HAS_INITIAL_STATE != 0) || (d_initial_state != 0) != (HAS_INITIAL_STATE != 0)) {
    return HAS_INITIAL_STATE ? "ptxevo_kda_bwd: these kernels were built for an initial state; pass it and d_initial_state"
                             : "ptxevo_kda_bwd: these kernels were built without an initial state; pass NULL for both";
  }
  if ((d_final_state != 0) != (HAS_FINAL_STATE != 0)) {
    return HAS_FINAL_STATE ? "ptxevo_kda_bwd: these kernels were built for a final state; pass d_final_state"
                           : "ptxevo_kda_bwd: these kernels were built without a final state; pass NULL";
  }
  if ((cu_seqlens != 0) != (N != B)) {
    return N != B ? "ptxevo_kda_bwd: packed sequences (N != B) need cu_seqlens"
                  : "ptxevo_kda_bwd: cu_seqlens is for packed sequences (B == 1, N > 1) only; pass NULL";
  }
  if (!(scale > 0.0f) || scale > 3.0e38f) {
    return "ptxevo_kda_bwd: scale must be a finite number > 0";
  }
  if (!KDA_GATE_SOFTPLUS && !(lower_bound >= -5.0f && lower_bound < 0.0f)) {
    return "ptxevo_kda_bwd: lower_bound must be in [-5, 0) (the lower-bound gate)";
  }
  return 0;
}
#endif  // __CUDACC_RTC__
)cpp";

constexpr const char* kKdaBwdHost = R"cpp(
#ifndef __CUDACC_RTC__

// The plan of KdaBwdOp::launch_plan for the knobs above: value slices per (sequence, head) chain,
// the workspace's regions (fp32 words) and the finish kernel's token chunks.
// With PTXEVO_KDA_BWD_PREP, kda_bwd_prepare (on kda_bwd_finish's grid) first saves each token's
// pre-processing at prep_offset (-1 without).
struct ptxevo_kda_bwd_plan_t {
  unsigned grid[3][3];  // kda_bwd_recurrent, kda_bwd_finish, kda_bwd_reduce
  long long share_offset, sums_offset, prep_offset, workspace_words, chunks;
};
#define PTXEVO_KDA_BWD_PREP @PREP@
enum { ptxevo_kda_bwd_slices = @SLICES@, ptxevo_kda_bwd_chunk = @CHUNK@ };

// B rows of T tokens, H heads, N sequences: N == B (a sequence a row), or B == 1 and N > 1 packed
// sequences (cu_seqlens). 0, or why not.
extern "C" const char* ptxevo_kda_bwd_plan(long long B, long long T, long long H, long long N,
                                          ptxevo_kda_bwd_plan_t* p) {
  if (B < 1 || T < 1 || H < 1 || N < 1) return "ptxevo_kda_bwd: B, T, H and N must be >= 1";
  if (N != B && B != 1)
    return "ptxevo_kda_bwd: N must equal B (a sequence a row) or B must be 1 (N packed sequences)";
  if (H > 65535 || N > 0x7fffffffLL) return "ptxevo_kda_bwd: H must be at most 65535 and N below 2^31";
  const long long total = B * T;
  if (total > 0x7fffffffLL / ptxevo_kda_bwd_chunk) return "ptxevo_kda_bwd: too many tokens";
  const long long D = 128;
  p->chunks = (total + ptxevo_kda_bwd_chunk - 1) / ptxevo_kda_bwd_chunk;
  p->share_offset = H * (total / 32 + N) * D * D;
  p->sums_offset = p->share_offset + ptxevo_kda_bwd_slices * total * H * (3 * D + 1);
  const long long layout = p->sums_offset + p->chunks * H * (D + 1);
  p->prep_offset = PTXEVO_KDA_BWD_PREP ? layout : -1;
  p->workspace_words = layout + (PTXEVO_KDA_BWD_PREP ? total * H * (3 * D + 1) : 0);
  const unsigned g[3][3] = {{(unsigned)N, (unsigned)H, (unsigned)ptxevo_kda_bwd_slices},
                            {(unsigned)p->chunks, (unsigned)H, 1u},
                            {(unsigned)H, 1u, 1u}};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) p->grid[i][j] = g[i][j];
  return 0;
}

)cpp";

// The part of the launcher both seeds share: the workspace size and the launch's checks, after
// the seed's plan (its ptxevo_kda_bwd_plan_t), before its launches.
constexpr const char* kKdaBwdHostLaunch = R"cpp(
// Bytes of scratch the launch needs (pass a buffer at least this large), or -1 for bad dims.
extern "C" long long ptxevo_kda_bwd_workspace_bytes(long long B, long long T, long long H, long long N) {
  ptxevo_kda_bwd_plan_t p;
  return ptxevo_kda_bwd_plan(B, T, H, N, &p) ? -1 : p.workspace_words * 4;
}

// The gradients of KDA(q, k, v, g, beta) (the forward of the same options) from d_out (bf16, of
// out) and, with the final state, d_final_state (fp32, V-first); tensors dense in the op's
// layouts (inputs as the forward's; dq, dk, dv, dg fp32 [B, T, H, 128]; dbeta fp32 [B, T, H];
// dA_log fp32 [H]; ddt_bias fp32 [H, 128]; d_initial_state fp32 [N, H, 128, 128], V-first).
// Every gradient is written (none accumulated into); pointers the options do not use must be NULL.
// Returns cudaSuccess, or an error with *why (when why is not NULL). Launches on `stream`.
extern "C" cudaError_t ptxevo_kda_bwd_launch(
    const void* q, const void* k, const void* v, const void* g, const void* beta, const float* A_log,
    const float* dt_bias, const long long* cu_seqlens, const float* initial_state, const void* d_out,
    const float* d_final_state, float* dq, float* dk, float* dv, float* dg, float* dbeta, float* dA_log,
    float* ddt_bias, float* d_initial_state, void* workspace, long long workspace_bytes, long long B, long long T,
    long long H, long long N, float scale, float lower_bound, cudaStream_t stream, const char** why) {
  const char* ignored = 0;
  if (!why) why = &ignored;
  if ((*why = ptxevo_kda_bwd_check(q, k, v, g, beta, A_log, dt_bias, cu_seqlens, initial_state, d_out, d_final_state, dq,
                                   dk, dv, dg, dbeta, dA_log, ddt_bias, d_initial_state, workspace, B, N, scale,
                                   lower_bound)) != 0)
    return cudaErrorInvalidValue;
  ptxevo_kda_bwd_plan_t p;
  if ((*why = ptxevo_kda_bwd_plan(B, T, H, N, &p)) != 0) return cudaErrorInvalidValue;
  if (workspace_bytes < p.workspace_words * 4) {
    *why = "ptxevo_kda_bwd: the workspace is smaller than ptxevo_kda_bwd_workspace_bytes() asks for";
    return cudaErrorInvalidValue;
  }
)cpp";

constexpr const char* kKdaBwdHostLaunches = R"cpp(
  typedef __nv_bfloat16 bf16;
  float* ws = (float*)workspace;
  const int h = (int)H;
#if PTXEVO_KDA_BWD_PREP
  kda_bwd_prepare<<<dim3(p.grid[1][0], p.grid[1][1], 1), 128, 0, stream>>>(
      (const bf16*)q, (const bf16*)k, (const bf16*)g, (const bf16*)beta, A_log, dt_bias, ws, B * T, h, lower_bound,
      p.prep_offset);
  kda_bwd_recurrent<<<dim3(p.grid[0][0], p.grid[0][1], p.grid[0][2]), 128, 0, stream>>>(
      (const bf16*)q, (const bf16*)k, (const bf16*)v, (const bf16*)g, (const bf16*)beta, A_log, dt_bias, cu_seqlens,
      initial_state, (const bf16*)d_out, d_final_state, dv, d_initial_state, ws, T, h, (int)N, scale, lower_bound,
      p.share_offset, p.prep_offset);
#else
  kda_bwd_recurrent<<<dim3(p.grid[0][0], p.grid[0][1], p.grid[0][2]), 128, 0, stream>>>(
      (const bf16*)q, (const bf16*)k, (const bf16*)v, (const bf16*)g, (const bf16*)beta, A_log, dt_bias, cu_seqlens,
      initial_state, (const bf16*)d_out, d_final_state, dv, d_initial_state, ws, T, h, (int)N, scale, lower_bound,
      p.share_offset);
#endif
  kda_bwd_finish<<<dim3(p.grid[1][0], p.grid[1][1], 1), 128, 0, stream>>>(
      (const bf16*)q, (const bf16*)k, (const bf16*)g, (const bf16*)beta, A_log, dt_bias, dq, dk, dg, dbeta, ws, B * T, h,
      lower_bound, p.share_offset, p.sums_offset);
  kda_bwd_reduce<<<dim3(p.grid[2][0], 1, 1), 128, 0, stream>>>(ws, dA_log, ddt_bias, p.sums_offset, (int)p.chunks, h);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) *why = cudaGetErrorString(e);
  return e;
}
#endif  // __CUDACC_RTC__
)cpp";

constexpr const char* kKdaBwdChunkedHost = R"cpp(
#ifndef __CUDACC_RTC__

// The plan of KdaBwdOp::launch_plan for the chunked seed's knobs above (KdaBwdOp::chunked_layout):
// T_total / CHUNK + N chunk slots, the workspace's regions (fp32 words), each entry's grid and
// dynamic shared memory.
struct ptxevo_kda_bwd_plan_t {
  // kda_bwd_chunk_prepare, _states, _dstates, _slices, _finish (launched when ptxevo_kda_bwd_kernels
  // is 5; with FINISH_IN_SLICES the slices kernel does its work), kda_bwd_reduce
  unsigned grid[6][3];
  unsigned shared_bytes[5];  // the five chunked kernels'
  unsigned threads[5];       // the five chunked kernels' CTA sizes
  long long slots, dstate_offset, prep_offset, y_offset, mat_offset, share_offset, sums_offset, workspace_words;
};
// Shares: of the token gradients, one per slices CTA of a (chunk, head): 128 / BV, or 1 with
// SLICE_LOOP.
enum { ptxevo_kda_bwd_slices = @SLICES@, ptxevo_kda_bwd_shares = @SHARES@, ptxevo_kda_bwd_chunk = @CHUNK@ };
enum { ptxevo_kda_bwd_kernels = @KERNELS@ };  // chunked kernels launched before kda_bwd_reduce

// B rows of T tokens, H heads, N sequences: N == B (a sequence a row), or B == 1 and N > 1 packed
// sequences (cu_seqlens). 0, or why not.
extern "C" const char* ptxevo_kda_bwd_plan(long long B, long long T, long long H, long long N,
                                          ptxevo_kda_bwd_plan_t* p) {
  if (B < 1 || T < 1 || H < 1 || N < 1) return "ptxevo_kda_bwd: B, T, H and N must be >= 1";
  if (N != B && B != 1)
    return "ptxevo_kda_bwd: N must equal B (a sequence a row) or B must be 1 (N packed sequences)";
  if (H * ptxevo_kda_bwd_slices > 65535 || N > 65535)
    return "ptxevo_kda_bwd: H must be at most 65535 / (128 / BV) and N at most 65535";
  const long long total = B * T, D = 128, C = ptxevo_kda_bwd_chunk, th = total * H;
  p->slots = total / C + N;
  if (p->slots > 0x7fffffffLL) return "ptxevo_kda_bwd: too many tokens";
  const long long states = H * p->slots * D * D;
  p->dstate_offset = states;
  p->prep_offset = 2 * states;
  p->y_offset = p->prep_offset + th * (3 * D + 1);
  p->mat_offset = p->y_offset + th * D;
  p->share_offset = p->mat_offset + H * p->slots * 3 * C * C;
  p->sums_offset = p->share_offset + ptxevo_kda_bwd_shares * th * (3 * D + 2 * C + 1);
  p->workspace_words = p->sums_offset + p->slots * H * (D + 1);
  const unsigned S = (unsigned)p->slots, h = (unsigned)H, z = (unsigned)ptxevo_kda_bwd_slices;
  const unsigned sh = (unsigned)ptxevo_kda_bwd_shares;
  const unsigned g[6][3] = {{S, h, 1u}, {(unsigned)N, h, z}, {(unsigned)N, h, z}, {S, h * sh, 1u}, {S, h, 1u}, {h, 1u, 1u}};
  const unsigned smem[5] = {@SMEM_PREPARE@u, @SMEM_STATES@u, @SMEM_DSTATES@u, @SMEM_SLICES@u, @SMEM_FINISH@u};
  const unsigned threads[5] = {128u, @CHAIN_THREADS@u, @CHAIN_THREADS@u, 128u, 128u};
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 3; ++j) p->grid[i][j] = g[i][j];
  for (int i = 0; i < 5; ++i) p->shared_bytes[i] = smem[i], p->threads[i] = threads[i];
  return 0;
}

)cpp";

constexpr const char* kKdaBwdChunkedHostLaunches = R"cpp(
  typedef __nv_bfloat16 bf16;
  typedef void (*chunk_kernel)(const bf16*, const bf16*, const bf16*, const bf16*, const bf16*, const float*,
                               const float*, const long long*, const float*, const bf16*, const float*, float*, float*,
                               float*, float*, float*, float*, float*, long long, int, int, long long, float, float,
                               long long, long long, long long, long long, long long, long long);
  const chunk_kernel kernels[ptxevo_kda_bwd_kernels] = {@CHUNK_ENTRIES@};
  float* ws = (float*)workspace;
  for (int i = 0; i < ptxevo_kda_bwd_kernels; ++i) {
    cudaError_t e = cudaFuncSetAttribute((const void*)kernels[i], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)p.shared_bytes[i]);
    if (e == cudaSuccess) {
      kernels[i]<<<dim3(p.grid[i][0], p.grid[i][1], p.grid[i][2]), p.threads[i], p.shared_bytes[i], stream>>>(
          (const bf16*)q, (const bf16*)k, (const bf16*)v, (const bf16*)g, (const bf16*)beta, A_log, dt_bias,
          cu_seqlens, initial_state, (const bf16*)d_out, d_final_state, dq, dk, dv, dg, dbeta, d_initial_state, ws, T,
          (int)H, (int)N, p.slots, scale, lower_bound, p.dstate_offset, p.prep_offset, p.y_offset, p.mat_offset,
          p.share_offset, p.sums_offset);
      e = cudaGetLastError();
    }
    if (e != cudaSuccess) {
      *why = cudaGetErrorString(e);
      return e;
    }
  }
  kda_bwd_reduce<<<dim3(p.grid[5][0], 1, 1), 128, 0, stream>>>(ws, dA_log, ddt_bias, p.sums_offset, (int)p.slots,
                                                              (int)H);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) *why = cudaGetErrorString(e);
  return e;
}
#endif  // __CUDACC_RTC__
)cpp";

// The chunked entries' parameters as kda_bwd_chunked.cu declares them (all five alike).
std::vector<ExportParam> chunk_params() {
  return {{"const __nv_bfloat16* __restrict__", "q", "l"},     {"const __nv_bfloat16* __restrict__", "k", "l"},
          {"const __nv_bfloat16* __restrict__", "v", "l"},     {"const __nv_bfloat16* __restrict__", "g", "l"},
          {"const __nv_bfloat16* __restrict__", "beta", "l"},  {"const float* __restrict__", "a_log", "l"},
          {"const float* __restrict__", "dt_bias", "l"},       {"const long long* __restrict__", "cu_seqlens", "l"},
          {"const float* __restrict__", "initial_state", "l"}, {"const __nv_bfloat16* __restrict__", "d_out", "l"},
          {"const float* __restrict__", "d_final_state", "l"}, {"float* __restrict__", "dq", "l"},
          {"float* __restrict__", "dk", "l"},                  {"float* __restrict__", "dv", "l"},
          {"float* __restrict__", "dg", "l"},                  {"float* __restrict__", "dbeta", "l"},
          {"float* __restrict__", "d_initial_state", "l"},     {"float* __restrict__", "ws", "l"},
          {"long long", "T", "l"},                             {"int", "H", "r"},
          {"int", "nseq", "r"},                                {"long long", "slots", "l"},
          {"float", "scale", "f"},                             {"float", "lower_bound", "f"},
          {"long long", "dstate_off", "l"},                    {"long long", "prep_off", "l"},
          {"long long", "y_off", "l"},                         {"long long", "mat_off", "l"},
          {"long long", "share_off", "l"},                     {"long long", "sums_off", "l"}};
}

// The entries' parameters as kda_bwd.cu declares them.
std::vector<ExportParam> prepare_params() {
  return {{"const __nv_bfloat16* __restrict__", "q", "l"},    {"const __nv_bfloat16* __restrict__", "k", "l"},
          {"const __nv_bfloat16* __restrict__", "g", "l"},    {"const __nv_bfloat16* __restrict__", "beta", "l"},
          {"const float* __restrict__", "a_log", "l"},        {"const float* __restrict__", "dt_bias", "l"},
          {"float* __restrict__", "ws", "l"},                 {"long long", "total", "l"},
          {"int", "H", "r"},                                  {"float", "lower_bound", "f"},
          {"long long", "prep_off", "l"}};
}

std::vector<ExportParam> recurrent_params(bool prep) {
  std::vector<ExportParam> p = {{"const __nv_bfloat16* __restrict__", "q", "l"},      {"const __nv_bfloat16* __restrict__", "k", "l"},
          {"const __nv_bfloat16* __restrict__", "v", "l"},      {"const __nv_bfloat16* __restrict__", "g", "l"},
          {"const __nv_bfloat16* __restrict__", "beta", "l"},   {"const float* __restrict__", "a_log", "l"},
          {"const float* __restrict__", "dt_bias", "l"},        {"const long long* __restrict__", "cu_seqlens", "l"},
          {"const float* __restrict__", "initial_state", "l"},  {"const __nv_bfloat16* __restrict__", "d_out", "l"},
          {"const float* __restrict__", "d_final_state", "l"},  {"float* __restrict__", "dv", "l"},
          {"float* __restrict__", "d_initial_state", "l"},      {"float* __restrict__", "ws", "l"},
          {"long long", "T", "l"},                              {"int", "H", "r"},
          {"int", "nseq", "r"},                                 {"float", "scale", "f"},
          {"float", "lower_bound", "f"},                        {"long long", "part_off", "l"}};
  if (prep) p.push_back({"long long", "prep_off", "l"});
  return p;
}

std::vector<ExportParam> finish_params() {
  return {{"const __nv_bfloat16* __restrict__", "q", "l"},    {"const __nv_bfloat16* __restrict__", "k", "l"},
          {"const __nv_bfloat16* __restrict__", "g", "l"},    {"const __nv_bfloat16* __restrict__", "beta", "l"},
          {"const float* __restrict__", "a_log", "l"},        {"const float* __restrict__", "dt_bias", "l"},
          {"float* __restrict__", "dq", "l"},                 {"float* __restrict__", "dk", "l"},
          {"float* __restrict__", "dg", "l"},                 {"float* __restrict__", "dbeta", "l"},
          {"float* __restrict__", "ws", "l"},                 {"long long", "total", "l"},
          {"int", "H", "r"},                                  {"float", "lower_bound", "f"},
          {"long long", "part_off", "l"},                     {"long long", "sums_off", "l"}};
}

std::vector<ExportParam> reduce_params() {
  return {{"float* __restrict__", "ws", "l"},       {"float* __restrict__", "da_log", "l"},
          {"float* __restrict__", "ddt_bias", "l"}, {"long long", "sums_off", "l"},
          {"int", "chunks", "r"},                   {"int", "H", "r"}};
}

constexpr const char* kKdaBwdBinding = R"cpp(// @BINDING@: PyTorch binding of @CU@ (generated by `ptxevo export --format torch`).
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

// The forward's inputs (fp32 states), the output gradient d_out (bf16) and, with the final state,
// d_final_state (fp32); writes every gradient (fp32) in place.
void bwd(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g, const at::Tensor& beta,
         double scale, const at::Tensor& A_log, const at::Tensor& dt_bias, double lower_bound,
         const c10::optional<at::Tensor>& initial_state, const c10::optional<at::Tensor>& cu_seqlens,
         const at::Tensor& d_out, const c10::optional<at::Tensor>& d_final_state, at::Tensor dq, at::Tensor dk,
         at::Tensor dv, at::Tensor dg, at::Tensor dbeta, at::Tensor dA_log, at::Tensor ddt_bias,
         const c10::optional<at::Tensor>& d_initial_state) {
  TORCH_CHECK(q.dim() == 4 && q.size(3) == kD, "q must be [B, T, H, 128], got ", q.sizes());
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2);
  const bool packed = cu_seqlens.has_value();
  TORCH_CHECK(!packed || B == 1, "packed sequences (cu_seqlens) need B == 1, got B = ", B);
  const int64_t N = packed ? cu_seqlens->numel() - 1 : B;
  TORCH_CHECK(N >= 1, "cu_seqlens must hold at least 2 offsets");
  const std::pair<const at::Tensor*, const char*> tokens[] = {{&q, "q"}, {&k, "k"}, {&v, "v"}, {&g, "g"},
                                                              {&d_out, "d_out"}};
  for (const auto& [t, name] : tokens) check_tensor(*t, name, at::kBFloat16, {B, T, H, kD}, q);
  const std::pair<at::Tensor*, const char*> grads[] = {{&dq, "dq"}, {&dk, "dk"}, {&dv, "dv"}, {&dg, "dg"}};
  for (const auto& [t, name] : grads) check_tensor(*t, name, at::kFloat, {B, T, H, kD}, q);
  check_tensor(beta, "beta", at::kBFloat16, {B, T, H}, q);
  check_tensor(dbeta, "dbeta", at::kFloat, {B, T, H}, q);
  check_tensor(A_log, "A_log", at::kFloat, {H}, q);
  check_tensor(dA_log, "dA_log", at::kFloat, {H}, q);
  check_tensor(dt_bias, "dt_bias", at::kFloat, {H, kD}, q);
  check_tensor(ddt_bias, "ddt_bias", at::kFloat, {H, kD}, q);
  if (packed) check_tensor(*cu_seqlens, "cu_seqlens", at::kLong, {N + 1}, q);
  TORCH_CHECK(initial_state.has_value() == kInitialState && d_initial_state.has_value() == kInitialState,
              "the exported kernels were built ",
              kInitialState ? "for an initial state; pass it and d_initial_state" : "without an initial state; pass None");
  TORCH_CHECK(d_final_state.has_value() == kFinalState, "the exported kernels were built ",
              kFinalState ? "for a final state; pass d_final_state" : "without a final state; pass None");
  if (initial_state) check_tensor(*initial_state, "initial_state", at::kFloat, {N, H, kD, kD}, q);
  if (d_initial_state) check_tensor(*d_initial_state, "d_initial_state", at::kFloat, {N, H, kD, kD}, q);
  if (d_final_state) check_tensor(*d_final_state, "d_final_state", at::kFloat, {N, H, kD, kD}, q);
  const c10::cuda::CUDAGuard guard(q.device());
  const long long ws = ptxevo_kda_bwd_workspace_bytes(B, T, H, N);
  TORCH_CHECK(ws > 0, "ptxevo_kda_bwd: no plan for B = ", B, ", T = ", T, ", H = ", H, ", N = ", N);
  at::Tensor workspace = at::empty({static_cast<int64_t>(ws)}, q.options().dtype(at::kByte));
  const char* why = nullptr;
  const cudaError_t e = ptxevo_kda_bwd_launch(
      q.data_ptr(), k.data_ptr(), v.data_ptr(), g.data_ptr(), beta.data_ptr(), A_log.data_ptr<float>(),
      dt_bias.data_ptr<float>(), packed ? reinterpret_cast<const long long*>(cu_seqlens->data_ptr<int64_t>()) : nullptr,
      initial_state ? initial_state->data_ptr<float>() : nullptr, d_out.data_ptr(),
      d_final_state ? d_final_state->data_ptr<float>() : nullptr, dq.data_ptr<float>(), dk.data_ptr<float>(),
      dv.data_ptr<float>(), dg.data_ptr<float>(), dbeta.data_ptr<float>(), dA_log.data_ptr<float>(),
      ddt_bias.data_ptr<float>(), d_initial_state ? d_initial_state->data_ptr<float>() : nullptr, workspace.data_ptr(),
      ws, B, T, H, N, static_cast<float>(scale), static_cast<float>(lower_bound),
      at::cuda::getCurrentCUDAStream().stream(), &why);
  TORCH_CHECK(e == cudaSuccess, why ? why : "launch failed", " (", cudaGetErrorString(e), ")");
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("bwd", &bwd, "kda_bwd: writes every gradient", pybind11::arg("q"), pybind11::arg("k"), pybind11::arg("v"),
        pybind11::arg("g"), pybind11::arg("beta"), pybind11::arg("scale"), pybind11::arg("A_log"),
        pybind11::arg("dt_bias"), pybind11::arg("lower_bound"), pybind11::arg("initial_state"),
        pybind11::arg("cu_seqlens"), pybind11::arg("d_out"), pybind11::arg("d_final_state"), pybind11::arg("dq"),
        pybind11::arg("dk"), pybind11::arg("dv"), pybind11::arg("dg"), pybind11::arg("dbeta"), pybind11::arg("dA_log"),
        pybind11::arg("ddt_bias"), pybind11::arg("d_initial_state"));
}
)cpp";

constexpr const char* kKdaBwdModule = R"py("""Kimi Delta Attention backward on kernels exported by ptxevo (`ptxevo export --format torch`).

@DESCRIPTION@

bwd() takes the forward's inputs (FlashKDA's names and layouts) with the output gradient d_out and,
when the kernels were built with the final state, its gradient d_final_state, and returns the
gradients (dq, dk, dv, dg, dbeta, dA_log, ddt_bias, d_initial_state), fp32. attach_forward(fwd_module)
pairs them with an exported kda_fwd module of the same options into kda(), a torch.autograd.Function
whose forward and backward are both ptxevo's: o, final_state = kda(q, k, v, g, beta, A_log, dt_bias, ...).
The kernels were built for the options in CONFIG; other options raise ValueError. States are
[N, H, 128, 128], V-first (S^T), fp32. Packed sequences take B == 1 and int64 cu_seqlens. The
extension is compiled on first use with torch.utils.cpp_extension.load.
"""
import os
from typing import Any, Callable, Optional, Tuple

import torch
from torch import Tensor

CONFIG = {
    "op": "kda_bwd",
    "arch": "@ARCH@",
    "gate": "@GATE@",
    "initial_state": @HAS_INITIAL_PY@,
    "final_state": @HAS_FINAL_PY@,
    "head_dim": 128,
}
@LOADER@
D = 128


def _gate_bound(lower_bound: Optional[float]) -> float:
    if CONFIG["gate"] == "lower_bound":
        if lower_bound is None or not (-5.0 <= float(lower_bound) < 0.0):
            raise ValueError(f"these kernels use the lower-bound gate: pass lower_bound in [-5, 0), got {lower_bound}")
        return float(lower_bound)
    if lower_bound is not None:
        raise ValueError("these kernels use the softplus gate (FLA's lower_bound=None): pass lower_bound=None")
    return 0.0


def bwd(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, scale: float, A_log: Tensor, dt_bias: Tensor,
        lower_bound: Optional[float], d_out: Tensor, initial_state: Optional[Tensor] = None,
        d_final_state: Optional[Tensor] = None, cu_seqlens: Optional[Tensor] = None) -> Tuple[Optional[Tensor], ...]:
    """The gradients (dq, dk, dv, dg, dbeta, dA_log, ddt_bias, d_initial_state), fp32; d_initial_state is
    None when the kernels were built without an initial state."""
    if q.dim() != 4 or q.shape[-1] != D:
        raise ValueError(f"q must be [B, T, H, 128], got {tuple(q.shape)}")
    B, T, H, _ = q.shape
    N = cu_seqlens.numel() - 1 if cu_seqlens is not None else B
    bound = _gate_bound(lower_bound)
    if initial_state is not None and not CONFIG["initial_state"]:
        raise ValueError("this export was built without initial_state; export kda_bwd from a spec with "
                         "initial_state = true")
    if d_final_state is not None and not CONFIG["final_state"]:
        raise ValueError("this export was built without final_state; export kda_bwd from a spec with final_state = true")
    s0 = None
    if CONFIG["initial_state"]:  # none given: the zero state
        s0 = (initial_state.to(torch.float32).contiguous() if initial_state is not None
              else torch.zeros(N, H, D, D, dtype=torch.float32, device=q.device))
    dfs = None
    if CONFIG["final_state"]:  # none given: the final state was not used, its gradient is zero
        dfs = (d_final_state.to(torch.float32).contiguous() if d_final_state is not None
               else torch.zeros(N, H, D, D, dtype=torch.float32, device=q.device))
    cu = None if cu_seqlens is None else cu_seqlens.to(torch.long)
    f32 = dict(dtype=torch.float32, device=q.device)
    dq, dk, dv, dg = (torch.empty(B, T, H, D, **f32) for _ in range(4))
    dbeta = torch.empty(B, T, H, **f32)
    dA_log = torch.empty(H, **f32)
    ddt_bias = torch.empty(H, D, **f32)
    ds0 = torch.empty(N, H, D, D, **f32) if CONFIG["initial_state"] else None
    load().bwd(q.contiguous(), k.contiguous(), v.contiguous(), g.contiguous(), beta.contiguous(), float(scale),
               A_log.float().contiguous(), dt_bias.float().reshape(H, D).contiguous(), bound, s0, cu,
               d_out.to(torch.bfloat16).contiguous(), dfs, dq, dk, dv, dg, dbeta, dA_log, ddt_bias, ds0)
    return dq, dk, dv, dg, dbeta, dA_log, ddt_bias, (ds0 if initial_state is not None else None)


def attach_forward(fwd_module: Any) -> Callable[..., Tuple[Tensor, Optional[Tensor]]]:
    """kda(q, k, v, g, beta, A_log, dt_bias, scale=None, lower_bound=None, initial_state=None,
    output_final_state=False, cu_seqlens=None, max_seqlen=None) -> (o, final_state): an autograd function
    whose forward is `fwd_module` (an exported kda_fwd module built for the same options) and whose
    backward is bwd() here. Gradients come back in each input's dtype."""
    theirs = {k: fwd_module.CONFIG[k] for k in ("gate", "initial_state", "final_state", "head_dim")}
    mine = {k: CONFIG[k] for k in theirs}
    if theirs != mine:
        raise ValueError(f"the forward module was built for {theirs}, these backward kernels for {mine}")

    class KdaFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, g, beta, A_log, dt_bias, initial_state, scale, lower_bound, output_final_state,
                    cu_seqlens, max_seqlen):
            B, T, H, _ = q.shape
            N = cu_seqlens.numel() - 1 if cu_seqlens is not None else B
            out = torch.empty_like(v)
            final = None
            if output_final_state or CONFIG["final_state"]:
                final = torch.empty(N, H, D, D, dtype=torch.float32, device=q.device)
            fwd_module.fwd(q, k, v, g, beta, scale, out, A_log, dt_bias, lower_bound, initial_state, final, cu_seqlens,
                           max_seqlen)
            ctx.save_for_backward(q, k, v, g, beta, A_log, dt_bias, initial_state, cu_seqlens)
            ctx.scale, ctx.lower_bound = scale, lower_bound
            return out, (final if output_final_state else None)

        @staticmethod
        def backward(ctx, d_out, d_final):
            q, k, v, g, beta, A_log, dt_bias, initial_state, cu_seqlens = ctx.saved_tensors
            grads = bwd(q, k, v, g, beta, ctx.scale, A_log, dt_bias, ctx.lower_bound,
                        torch.zeros_like(v) if d_out is None else d_out, initial_state,
                        d_final if CONFIG["final_state"] else None, cu_seqlens)
            inputs = (q, k, v, g, beta, A_log, dt_bias, initial_state)
            out = [None if gr is None or x is None else gr.to(x.dtype).view_as(x) for gr, x in zip(grads, inputs)]
            return (*out, None, None, None, None, None)

    def kda(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, A_log: Tensor, dt_bias: Tensor,
            scale: Optional[float] = None, lower_bound: Optional[float] = None,
            initial_state: Optional[Tensor] = None, output_final_state: bool = False,
            cu_seqlens: Optional[Tensor] = None, max_seqlen: Optional[int] = None) -> Tuple[Tensor, Optional[Tensor]]:
        if output_final_state and not CONFIG["final_state"]:
            raise ValueError("this export was built without final_state")
        if scale is None:
            scale = q.shape[-1] ** -0.5
        return KdaFunction.apply(q, k, v, g, beta, A_log, dt_bias, initial_state, float(scale), lower_bound,
                                 output_final_state, cu_seqlens, max_seqlen)

    return kda
)py";

const char* py_bool(bool b) { return b ? "True" : "False"; }

}  // namespace

std::optional<evaluator::HostExport> KdaBwdOp::host_export(const OpConfig& cfg, const Knobs& knobs,
                                                          const std::set<std::string>& defined) const {
  KdaFwdOp::parse(cfg);
  const Geometry g = geometry(knobs);
  evaluator::HostExport l;
  if (g.chunk) {
    std::vector<const char*> entries = {kChunkPrepareEntry, kChunkStatesEntry, kChunkDstatesEntry,
                                        kChunkSlicesEntry};
    if (!g.finish_in_slices) entries.push_back(kChunkFinishEntry);
    std::string entry_list;
    for (const char* entry : entries) {
      l.params_by_entry[entry] = chunk_params();
      entry_list += std::string(entry_list.empty() ? "" : ", ") + entry;
    }
    l.params_by_entry[kReduceEntry] = reduce_params();
    entries.push_back(kReduceEntry);
    for (const char* entry : entries) {
      if (!defined.count(entry))
        fail(std::string("the plan launches ") + entry + ", which the candidate's PTX does not define");
      l.entries.push_back(entry);
    }
    const auto smem = [&](const char* entry) {
      return std::to_string(chunked_shared_bytes(entry, g.chunk, g.bv, g.slice_loop, g.finish_in_slices, g.finish_lean));
    };
    l.code = std::string(kKdaBwdHostCommon) +
             evaluator::substitute(kKdaBwdChunkedHost, {{"SLICES", std::to_string(kHeadDim / g.bv)},
                                                        {"SHARES", std::to_string(g.slice_loop ? 1 : kHeadDim / g.bv)},
                                                        {"KERNELS", std::to_string(entries.size() - 1)},
                                                        {"CHUNK", std::to_string(g.chunk)},
                                                        {"CHAIN_THREADS", std::to_string(g.chain_threads)},
                                                        {"SMEM_PREPARE", smem(kChunkPrepareEntry)},
                                                        {"SMEM_STATES", smem(kChunkStatesEntry)},
                                                        {"SMEM_DSTATES", smem(kChunkDstatesEntry)},
                                                        {"SMEM_SLICES", smem(kChunkSlicesEntry)},
                                                        {"SMEM_FINISH", smem(kChunkFinishEntry)}}) +
             kKdaBwdHostLaunch + evaluator::substitute(kKdaBwdChunkedHostLaunches, {{"CHUNK_ENTRIES", entry_list}});
  }
  if (!g.chunk) {
    std::vector<const char*> entries = {kRecurrentEntry, kFinishEntry, kReduceEntry};
    if (g.prep) entries.insert(entries.begin(), kPrepareEntry);
    for (const char* entry : entries) {
      if (!defined.count(entry))
        fail(std::string("the plan launches ") + entry + ", which the candidate's PTX does not define");
      l.entries.push_back(entry);
    }
    if (g.prep) l.params_by_entry[kPrepareEntry] = prepare_params();
    l.params_by_entry[kRecurrentEntry] = recurrent_params(g.prep);
    l.params_by_entry[kFinishEntry] = finish_params();
    l.params_by_entry[kReduceEntry] = reduce_params();
    l.code = std::string(kKdaBwdHostCommon) + evaluator::substitute(kKdaBwdHost, {{"SLICES", std::to_string(kHeadDim / g.bv)},
                                                                                   {"PREP", g.prep ? "1" : "0"},
                                                                                   {"CHUNK", std::to_string(kFinishTokens)}}) +
             kKdaBwdHostLaunch + kKdaBwdHostLaunches;
  }
  l.prototype =
      "extern \"C\" cudaError_t ptxevo_kda_bwd_launch(const void* q, const void* k, const void* v, const void* g, "
      "const void* beta, const float* A_log, const float* dt_bias, const long long* cu_seqlens, "
      "const float* initial_state, const void* d_out, const float* d_final_state, float* dq, float* dk, float* dv, "
      "float* dg, float* dbeta, float* dA_log, float* ddt_bias, float* d_initial_state, void* workspace, "
      "long long workspace_bytes, long long B, long long T, long long H, long long N, float scale, "
      "float lower_bound, cudaStream_t stream, const char** why);\n"
      "extern \"C\" long long ptxevo_kda_bwd_workspace_bytes(long long B, long long T, long long H, long long N);";
  l.plan_prototype =
      "extern \"C\" const char* ptxevo_kda_bwd_plan(long long B, long long T, long long H, long long N, "
      "ptxevo_kda_bwd_plan_t* p);";
  return l;
}

std::optional<evaluator::TorchExport> KdaBwdOp::torch_export(const OpConfig& cfg) const {
  const Config c = KdaFwdOp::parse(cfg);
  const std::map<std::string, std::string> values = {
      {"CHECK_TENSOR", evaluator::kTorchCheckTensor},
      {"GATE", c.gate == KdaGate::Softplus ? "softplus" : "lower_bound"},
      {"HAS_INITIAL", c.initial_state ? "true" : "false"},
      {"HAS_FINAL", c.final_state ? "true" : "false"},
      {"HAS_INITIAL_PY", py_bool(c.initial_state)},
      {"HAS_FINAL_PY", py_bool(c.final_state)},
  };
  return evaluator::TorchExport{evaluator::substitute(kKdaBwdBinding, values),
                                evaluator::substitute(kKdaBwdModule, values)};
}

}  // namespace ptxevo::kernels
