// The fp64 reference of the Kimi Delta Attention backward (docs/kda.md section 7): from the
// forward's inputs, the output gradient and the final-state gradient, the gradients of q, k, v,
// the raw gate g, the beta logits, A_log, dt_bias and the initial state, through the same fused
// pre-processing as the forward (L2 norm of q and k, sigmoid of beta, the gate computed from g,
// A_log and dt_bias). Recompute-based: the forward keeps one state every `checkpoint` tokens and
// the backward recomputes the states of a segment from its checkpoint, so memory is
// O((T / checkpoint + checkpoint) K V) per (sequence, head) chain.
//
// The inputs are fp64 (KdaInputs), so finite differences of kda_forward check the gradients
// (kernels/tests/kda_backward_reference_test.cpp); kda_inputs widens the engine's bf16 / fp32
// problem, and kda_forward on it equals kda_recurrent_reference.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kda/kda_reference.hpp"

namespace ptxevo::kernels {

// The forward's inputs in fp64, in the FlashKDA layout of KdaProblem (token-major, states V-first).
struct KdaInputs {
  std::int64_t heads = 0, k_dim = 128, v_dim = 128;
  std::vector<std::int64_t> cu_seqlens;
  KdaGate gate = KdaGate::LowerBound;
  double lower_bound = -5.0;
  double scale = 0.08838834764831845;
  std::vector<double> q, k, g;     // [T_total, H, K]
  std::vector<double> v;           // [T_total, H, V]
  std::vector<double> beta;        // [T_total, H], logits
  std::vector<double> a_log;       // [H]
  std::vector<double> dt_bias;     // [H, K]
  std::vector<double> initial_state;  // [N, H, V, K]; empty: a zero state

  std::int64_t sequences() const { return static_cast<std::int64_t>(cu_seqlens.size()) - 1; }
  std::int64_t total_tokens() const { return cu_seqlens.empty() ? 0 : cu_seqlens.back(); }
};

// Throws std::invalid_argument naming what is inconsistent (as check_kda_problem, and sizes).
void check_kda_inputs(const KdaInputs& in);
// The problem's tensors widened to fp64.
KdaInputs kda_inputs(const KdaProblem& p);

// The token-serial recurrence of docs/kda.md 1.3 on fp64 inputs: out [T_total, H, V] and, when not
// null, final_state [N, H, V, K].
void kda_forward(const KdaInputs& in, double* out, double* final_state);

struct KdaGradients {
  std::vector<double> dq, dk, dg;       // [T_total, H, K]; dg is d/d(raw gate input g)
  std::vector<double> dv;               // [T_total, H, V]
  std::vector<double> dbeta;            // [T_total, H], d/d(logit)
  std::vector<double> da_log;           // [H]
  std::vector<double> ddt_bias;         // [H, K]
  std::vector<double> dinitial_state;   // [N, H, V, K]
};

// dout [T_total, H, V]; dfinal_state [N, H, V, K] or null (the final state unused). `checkpoint`
// >= 1 tokens between stored states; the result does not depend on it beyond rounding.
KdaGradients kda_backward(const KdaInputs& in, const double* dout, const double* dfinal_state,
                          std::int64_t checkpoint = 64);

// The same gradients through chunks of `chunk` tokens (>= 1), the algorithm a chunked backward
// kernel implements (docs/kda.md 7.3): the state entering each chunk from a forward pass, then per
// chunk from the last, the chunk's forward of docs/kda.md 2.1 (G, L, M, Kd, Qd, Kr, U) and its
// reverse. Must match kda_backward to rounding.
KdaGradients kda_chunked_backward(const KdaInputs& in, const double* dout, const double* dfinal_state,
                                  std::int64_t chunk);

}  // namespace ptxevo::kernels
