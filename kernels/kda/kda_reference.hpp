// fp64 CPU references of the Kimi Delta Attention forward (docs/kda.md sections 1 and 2), on the
// FlashKDA calling convention: q, k, v, g bf16 [T_total, H, D], beta logits bf16 [T_total, H],
// A_log fp32 [H], dt_bias fp32 [H, K], states fp32 V-first [N, H, V, K]. Tokens are packed: a
// batch of B rows of T tokens is B sequences at offsets b * T (cu_seqlens = {0, T, 2T, ...}).
//
// Two algorithms over the same inputs:
//  - kda_recurrent_reference: the token-serial recurrence of docs/kda.md 1.3, the gold the op
//    checks kernels against (parallel over sequences x heads with TBB);
//  - kda_chunked_reference: the chunked WY / UT-transform algorithm of section 2.1, which the
//    seed kernels implement; tests check it against the recurrent one. Every exponential it takes
//    is of a difference G_i - G_j with i >= j (or of G itself), so each factor is <= 1 and
//    nothing overflows even with the unbounded softplus gate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ptxevo::kernels {

// How g becomes the per-channel log-decay a <= 0 (docs/kda.md section 1.2).
enum class KdaGate {
  LowerBound,  // a = lower_bound * sigmoid(exp(A_log[h]) * (g + dt_bias[h, i]))
  Softplus,    // a = -exp(A_log[h]) * softplus(g + dt_bias[h, i]), softplus threshold 20
};

// Raw tensors as the engine holds them (little-endian bf16 / fp32 bytes), and what they mean.
struct KdaProblem {
  std::int64_t heads = 0;
  std::int64_t k_dim = 128;  // K (the op fixes K = V = 128; tests use smaller heads for speed)
  std::int64_t v_dim = 128;  // V
  std::vector<std::int64_t> cu_seqlens;  // N + 1 token offsets: 0 = c[0] < c[1] < ... < c[N] = T_total
  KdaGate gate = KdaGate::LowerBound;
  double lower_bound = -5.0;  // used by KdaGate::LowerBound only
  double scale = 0.08838834764831845;  // 1 / sqrt(128)
  const std::byte* q = nullptr;        // bf16 [T_total, H, K]
  const std::byte* k = nullptr;        // bf16 [T_total, H, K]
  const std::byte* v = nullptr;        // bf16 [T_total, H, V]
  const std::byte* g = nullptr;        // bf16 [T_total, H, K]
  const std::byte* beta = nullptr;     // bf16 [T_total, H] (logits)
  const std::byte* a_log = nullptr;    // fp32 [H]
  const std::byte* dt_bias = nullptr;  // fp32 [H, K]
  const std::byte* initial_state = nullptr;  // fp32 [N, H, V, K], or null for a zero state

  std::int64_t sequences() const { return static_cast<std::int64_t>(cu_seqlens.size()) - 1; }
  std::int64_t total_tokens() const { return cu_seqlens.empty() ? 0 : cu_seqlens.back(); }
};

// Throws std::invalid_argument when the problem is inconsistent (no heads, missing tensors,
// cu_seqlens not starting at 0 or not strictly increasing).
void check_kda_problem(const KdaProblem& p);

// One token's inputs of one head after the fused pre-processing, in fp64.
struct KdaToken {
  std::vector<double> q, k;  // L2-normalised: x / sqrt(sum x^2 + 1e-6)
  std::vector<double> v;
  std::vector<double> a;     // log-decay per key channel, <= 0
  double beta = 0;           // sigmoid of the logit
};
// Token t (packed index) of head h.
KdaToken kda_token(const KdaProblem& p, std::int64_t t, std::int64_t h);
// The gate of docs/kda.md section 1.2 for one channel: g + dt_bias = x, A_log = a_log.
double kda_log_decay(KdaGate gate, double lower_bound, double a_log, double x);

// Outputs: out [T_total, H, V] and, when final_state is not null, [N, H, V, K], both fp64.
void kda_recurrent_reference(const KdaProblem& p, double* out, double* final_state);
// The same through chunks of `chunk` tokens (>= 1); each sequence's last chunk may be partial.
void kda_chunked_reference(const KdaProblem& p, std::int64_t chunk, double* out, double* final_state);
// The chunked algorithm with each sequence split into `segments` (>= 1) runs of whole chunks
// (fewer when the sequence has fewer chunks), the sequence split with state passing of issue 7 for
// few (sequence, head) chains. A chunk maps the state affinely, S -> A S + B V with A = D - Kr^T T'
// Kd (K x K), so a segment's end state is A_j S + S0_j: S0_j is the segment run from a zero state
// and A_j the segment run from the identity with v = 0 (K value columns). Segments run on their own
// for S0_j and A_j, a short sequential pass combines them into each segment's entering state, and
// each segment runs again from it for its outputs: three times the chunks' work, parallel over
// segments. Must match kda_chunked_reference to rounding.
void kda_segmented_reference(const KdaProblem& p, std::int64_t chunk, std::int64_t segments, double* out,
                             double* final_state);

}  // namespace ptxevo::kernels
