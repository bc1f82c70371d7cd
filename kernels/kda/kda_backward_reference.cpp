#include "kernels/kda/kda_backward_reference.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "evaluator/tensor.hpp"

namespace ptxevo::kernels {
namespace {

constexpr double kNormEps = 1e-6;  // FLA's l2norm and FlashKDA: x / sqrt(sum x^2 + 1e-6)

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// One token of one head after the pre-processing, with what its backward needs.
struct Token {
  std::vector<double> q, k;  // L2-normalised
  double q_norm = 0, k_norm = 0;  // sqrt(sum x^2 + eps) of the raw vectors
  std::vector<double> v;
  std::vector<double> x;     // g + dt_bias
  std::vector<double> a;     // log-decay, <= 0
  double beta = 0;           // sigmoid of the logit
};

Token token(const KdaInputs& in, std::int64_t t, std::int64_t h) {
  const auto K = static_cast<std::size_t>(in.k_dim), V = static_cast<std::size_t>(in.v_dim);
  Token tok;
  tok.q.resize(K);
  tok.k.resize(K);
  tok.x.resize(K);
  tok.a.resize(K);
  tok.v.resize(V);
  const auto kb = static_cast<std::size_t>((t * in.heads + h) * in.k_dim);
  const auto vb = static_cast<std::size_t>((t * in.heads + h) * in.v_dim);
  const double a_log = in.a_log[static_cast<std::size_t>(h)];
  double qs = 0, ks = 0;
  for (std::size_t i = 0; i < K; ++i) {
    tok.q[i] = in.q[kb + i];
    tok.k[i] = in.k[kb + i];
    qs += tok.q[i] * tok.q[i];
    ks += tok.k[i] * tok.k[i];
    tok.x[i] = in.g[kb + i] + in.dt_bias[static_cast<std::size_t>(h * in.k_dim) + i];
    tok.a[i] = kda_log_decay(in.gate, in.lower_bound, a_log, tok.x[i]);
  }
  tok.q_norm = std::sqrt(qs + kNormEps);
  tok.k_norm = std::sqrt(ks + kNormEps);
  // As kda_token: multiply by the reciprocal (the forward references must agree to the bit).
  const double rq = 1.0 / tok.q_norm, rk = 1.0 / tok.k_norm;
  for (std::size_t i = 0; i < K; ++i) {
    tok.q[i] *= rq;
    tok.k[i] *= rk;
  }
  for (std::size_t j = 0; j < V; ++j) tok.v[j] = in.v[vb + j];
  tok.beta = sigmoid(in.beta[static_cast<std::size_t>(t * in.heads + h)]);
  return tok;
}

// The state of one chain as S[i * V + j] (key channel i, value channel j).
std::vector<double> initial_state(const KdaInputs& in, std::int64_t n, std::int64_t h) {
  const auto K = static_cast<std::size_t>(in.k_dim), V = static_cast<std::size_t>(in.v_dim);
  std::vector<double> s(K * V, 0.0);
  if (in.initial_state.empty()) return s;
  const auto base = static_cast<std::size_t>((n * in.heads + h) * in.v_dim * in.k_dim);  // V-first
  for (std::size_t j = 0; j < V; ++j)
    for (std::size_t i = 0; i < K; ++i) s[i * V + j] = in.initial_state[base + j * K + i];
  return s;
}

// One token of the recurrence (docs/kda.md 1.3) on s in place; o (V values; may be null) gets the output.
void step(const Token& tok, double scale, std::vector<double>& s, std::vector<double>& r, double* o) {
  const std::size_t K = tok.k.size(), V = tok.v.size();
  // 1) decay the key rows, 2) residual against the decayed state.
  for (std::size_t j = 0; j < V; ++j) r[j] = tok.v[j];
  for (std::size_t i = 0; i < K; ++i) {
    double* row = &s[i * V];
    const double d = std::exp(tok.a[i]), ki = tok.k[i];
    for (std::size_t j = 0; j < V; ++j) {
      row[j] *= d;
      r[j] -= ki * row[j];
    }
  }
  // 3) rank-1 write, 4) read after the update.
  std::vector<double> acc(V, 0.0);
  for (std::size_t i = 0; i < K; ++i) {
    double* row = &s[i * V];
    const double bk = tok.beta * tok.k[i], qi = tok.q[i];
    for (std::size_t j = 0; j < V; ++j) {
      row[j] += bk * r[j];
      acc[j] += qi * row[j];
    }
  }
  if (o)
    for (std::size_t j = 0; j < V; ++j) o[j] = scale * acc[j];
}

template <typename Body>
void for_each_chain(const KdaInputs& in, Body&& body) {
  const std::int64_t chains = in.sequences() * in.heads;
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, chains, 1), [&](const tbb::blocked_range<std::int64_t>& r) {
    for (std::int64_t c = r.begin(); c != r.end(); ++c) body(c / in.heads, c % in.heads, c);
  });
}

// d(log-decay)/dx and d(log-decay)/dA_log of the gate at x = g + dt_bias (docs/kda.md 7.2).
void gate_derivatives(const KdaInputs& in, double a_log, double x, double a, double* dx, double* da_log) {
  const double e = std::exp(a_log);
  if (in.gate == KdaGate::LowerBound) {
    // s (1 - s) as sigmoid(z) sigmoid(-z): 1 - s rounds to 0 for z > 37 in fp64.
    const double ds = in.lower_bound * sigmoid(e * x) * sigmoid(-e * x);  // d a / d(e x)
    *dx = ds * e;
    *da_log = ds * e * x;
    return;
  }
  // Softplus with FLA's threshold: softplus(x) = x above 20, derivative 1 there.
  const double dsoftplus = x > 20.0 ? 1.0 : sigmoid(x);
  *dx = -e * dsoftplus;
  *da_log = a;  // a = -e softplus(x), and d e / d a_log = e
}

// The backward of x / sqrt(sum x^2 + eps) given y = the normalised x and its gradient dy.
void l2_norm_backward(const std::vector<double>& y, double norm, const std::vector<double>& dy, double* dx) {
  double dot = 0;
  for (std::size_t i = 0; i < y.size(); ++i) dot += y[i] * dy[i];
  for (std::size_t i = 0; i < y.size(); ++i) dx[i] = (dy[i] - y[i] * dot) / norm;
}

}  // namespace

void check_kda_inputs(const KdaInputs& in) {
  auto fail = [](const std::string& m) { throw std::invalid_argument("kda backward reference: " + m); };
  if (in.heads < 1 || in.k_dim < 1 || in.v_dim < 1) fail("heads, K and V must be >= 1");
  if (in.cu_seqlens.size() < 2 || in.cu_seqlens.front() != 0) fail("cu_seqlens must start at 0 and name a sequence");
  for (std::size_t i = 1; i < in.cu_seqlens.size(); ++i)
    if (in.cu_seqlens[i] <= in.cu_seqlens[i - 1]) fail("cu_seqlens must be strictly increasing");
  const auto T = static_cast<std::size_t>(in.total_tokens()), H = static_cast<std::size_t>(in.heads);
  const auto K = static_cast<std::size_t>(in.k_dim), V = static_cast<std::size_t>(in.v_dim);
  const auto N = static_cast<std::size_t>(in.sequences());
  auto size = [&](const std::vector<double>& x, std::size_t want, const char* name) {
    if (x.size() != want)
      fail(std::string(name) + " has " + std::to_string(x.size()) + " elements, expected " + std::to_string(want));
  };
  size(in.q, T * H * K, "q");
  size(in.k, T * H * K, "k");
  size(in.g, T * H * K, "g");
  size(in.v, T * H * V, "v");
  size(in.beta, T * H, "beta");
  size(in.a_log, H, "A_log");
  size(in.dt_bias, H * K, "dt_bias");
  if (!in.initial_state.empty()) size(in.initial_state, N * H * V * K, "initial_state");
  if (!(in.scale > 0) || !std::isfinite(in.scale)) fail("scale must be a positive finite number");
}

KdaInputs kda_inputs(const KdaProblem& p) {
  check_kda_problem(p);
  KdaInputs in;
  in.heads = p.heads;
  in.k_dim = p.k_dim;
  in.v_dim = p.v_dim;
  in.cu_seqlens = p.cu_seqlens;
  in.gate = p.gate;
  in.lower_bound = p.lower_bound;
  in.scale = p.scale;
  const auto T = static_cast<std::size_t>(p.total_tokens()), H = static_cast<std::size_t>(p.heads);
  const auto K = static_cast<std::size_t>(p.k_dim), V = static_cast<std::size_t>(p.v_dim);
  auto bf16 = [](const std::byte* base, std::size_t n) {
    std::vector<double> out(n);
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t b;
      std::memcpy(&b, base + 2 * i, 2);
      out[i] = evaluator::bf16_to_double(b);
    }
    return out;
  };
  auto f32 = [](const std::byte* base, std::size_t n) {
    std::vector<double> out(n);
    for (std::size_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, base + 4 * i, 4);
      out[i] = f;
    }
    return out;
  };
  in.q = bf16(p.q, T * H * K);
  in.k = bf16(p.k, T * H * K);
  in.g = bf16(p.g, T * H * K);
  in.v = bf16(p.v, T * H * V);
  in.beta = bf16(p.beta, T * H);
  in.a_log = f32(p.a_log, H);
  in.dt_bias = f32(p.dt_bias, H * K);
  if (p.initial_state) in.initial_state = f32(p.initial_state, static_cast<std::size_t>(p.sequences()) * H * V * K);
  return in;
}

void kda_forward(const KdaInputs& in, double* out, double* final_state) {
  check_kda_inputs(in);
  const auto K = static_cast<std::size_t>(in.k_dim), V = static_cast<std::size_t>(in.v_dim);
  for_each_chain(in, [&](std::int64_t n, std::int64_t h, std::int64_t) {
    std::vector<double> s = initial_state(in, n, h), r(V);
    for (std::int64_t t = in.cu_seqlens[static_cast<std::size_t>(n)]; t < in.cu_seqlens[static_cast<std::size_t>(n + 1)]; ++t)
      step(token(in, t, h), in.scale, s, r, out + (t * in.heads + h) * in.v_dim);
    if (!final_state) return;
    const auto base = static_cast<std::size_t>((n * in.heads + h) * in.v_dim * in.k_dim);
    for (std::size_t j = 0; j < V; ++j)
      for (std::size_t i = 0; i < K; ++i) final_state[base + j * K + i] = s[i * V + j];
  });
}

namespace {

// Gradients with respect to what the recurrence itself consumes: the normalised q and k, the
// log-decays, beta after the sigmoid, v; and the initial state.
struct CoreGradients {
  std::vector<double> dq, dk, da;  // [T_total, H, K]
  std::vector<double> dv;          // [T_total, H, V]
  std::vector<double> dbeta;       // [T_total, H]
  std::vector<double> dinitial_state;  // [N, H, V, K]
};

CoreGradients core_gradients(const KdaInputs& in) {
  const auto K = static_cast<std::size_t>(in.k_dim), V = static_cast<std::size_t>(in.v_dim);
  const auto H = static_cast<std::size_t>(in.heads), N = static_cast<std::size_t>(in.sequences());
  const auto T = static_cast<std::size_t>(in.total_tokens());
  CoreGradients c;
  c.dq.assign(T * H * K, 0.0);
  c.dk.assign(T * H * K, 0.0);
  c.da.assign(T * H * K, 0.0);
  c.dv.assign(T * H * V, 0.0);
  c.dbeta.assign(T * H, 0.0);
  c.dinitial_state.assign(N * H * V * K, 0.0);
  return c;
}

// dS_T of chain (n, h) as S[i * V + j], zero without one.
std::vector<double> final_state_gradient(const KdaInputs& in, const double* dfinal_state, std::int64_t n, std::int64_t h) {
  const auto K = static_cast<std::size_t>(in.k_dim), V = static_cast<std::size_t>(in.v_dim);
  std::vector<double> dS(K * V, 0.0);
  if (!dfinal_state) return dS;
  const auto base = static_cast<std::size_t>((n * in.heads + h) * in.v_dim * in.k_dim);
  for (std::size_t j = 0; j < V; ++j)
    for (std::size_t i = 0; i < K; ++i) dS[i * V + j] = dfinal_state[base + j * K + i];
  return dS;
}

void store_initial_state_gradient(const KdaInputs& in, std::int64_t n, std::int64_t h, const std::vector<double>& dS,
                                  CoreGradients& c) {
  const auto K = static_cast<std::size_t>(in.k_dim), V = static_cast<std::size_t>(in.v_dim);
  const auto base = static_cast<std::size_t>((n * in.heads + h) * in.v_dim * in.k_dim);
  for (std::size_t j = 0; j < V; ++j)
    for (std::size_t i = 0; i < K; ++i) c.dinitial_state[base + j * K + i] = dS[i * V + j];
}

void check_backward_arguments(const KdaInputs& in, const double* dout, std::int64_t step, const char* what) {
  check_kda_inputs(in);
  if (step < 1) throw std::invalid_argument(std::string("kda backward reference: ") + what + " must be >= 1");
  if (!dout) throw std::invalid_argument("kda backward reference: the output gradient is required");
}

// From the core's gradients to the inputs' (docs/kda.md 7.2): the L2 norms, the sigmoid and the
// gate. dA_log and dt_bias sum per chain first, then over chains in a fixed order (deterministic
// under TBB).
KdaGradients preprocessing_backward(const KdaInputs& in, CoreGradients c) {
  const auto K = static_cast<std::size_t>(in.k_dim), H = static_cast<std::size_t>(in.heads);
  const auto N = static_cast<std::size_t>(in.sequences());
  KdaGradients gr;
  gr.dq.assign(c.dq.size(), 0.0);
  gr.dk.assign(c.dk.size(), 0.0);
  gr.dg.assign(c.da.size(), 0.0);
  gr.dv = std::move(c.dv);
  gr.dbeta.assign(c.dbeta.size(), 0.0);
  gr.dinitial_state = std::move(c.dinitial_state);
  std::vector<double> chain_da_log(N * H, 0.0), chain_ddt_bias(N * H * K, 0.0);
  for_each_chain(in, [&](std::int64_t n, std::int64_t h, std::int64_t chain) {
    std::vector<double> dy(K);
    for (std::int64_t t = in.cu_seqlens[static_cast<std::size_t>(n)]; t < in.cu_seqlens[static_cast<std::size_t>(n + 1)]; ++t) {
      const Token tok = token(in, t, h);
      const auto row = static_cast<std::size_t>(t * in.heads + h);
      for (std::size_t i = 0; i < K; ++i) {
        double ddx = 0, dda_log = 0;
        gate_derivatives(in, in.a_log[static_cast<std::size_t>(h)], tok.x[i], tok.a[i], &ddx, &dda_log);
        const double da = c.da[row * K + i];
        gr.dg[row * K + i] = da * ddx;
        chain_da_log[static_cast<std::size_t>(chain)] += da * dda_log;
        chain_ddt_bias[static_cast<std::size_t>(chain) * K + i] += da * ddx;
      }
      const double logit = in.beta[row];
      gr.dbeta[row] = c.dbeta[row] * sigmoid(logit) * sigmoid(-logit);  // b (1 - b), without 1 - b's cancellation
      for (std::size_t i = 0; i < K; ++i) dy[i] = c.dq[row * K + i];
      l2_norm_backward(tok.q, tok.q_norm, dy, &gr.dq[row * K]);
      for (std::size_t i = 0; i < K; ++i) dy[i] = c.dk[row * K + i];
      l2_norm_backward(tok.k, tok.k_norm, dy, &gr.dk[row * K]);
    }
  });
  gr.da_log.assign(H, 0.0);
  gr.ddt_bias.assign(H * K, 0.0);
  for (std::size_t ch = 0; ch < N * H; ++ch) {
    const std::size_t h = ch % H;
    gr.da_log[h] += chain_da_log[ch];
    for (std::size_t i = 0; i < K; ++i) gr.ddt_bias[h * K + i] += chain_ddt_bias[ch * K + i];
  }
  return gr;
}

}  // namespace

KdaGradients kda_backward(const KdaInputs& in, const double* dout, const double* dfinal_state, std::int64_t checkpoint) {
  check_backward_arguments(in, dout, checkpoint, "checkpoint");
  const auto K = static_cast<std::size_t>(in.k_dim), V = static_cast<std::size_t>(in.v_dim);
  CoreGradients core = core_gradients(in);
  for_each_chain(in, [&](std::int64_t n, std::int64_t h, std::int64_t) {
    const std::int64_t bos = in.cu_seqlens[static_cast<std::size_t>(n)], eos = in.cu_seqlens[static_cast<std::size_t>(n + 1)];
    // Forward: the state before every checkpoint-th token.
    std::vector<std::vector<double>> saved;
    std::vector<double> s = initial_state(in, n, h), r(V);
    for (std::int64_t t = bos; t < eos; ++t) {
      if ((t - bos) % checkpoint == 0) saved.push_back(s);
      step(token(in, t, h), in.scale, s, r, nullptr);
    }
    // dS: the gradient of the state after the last token processed so far (backwards).
    std::vector<double> dS = final_state_gradient(in, dfinal_state, n, h);
    std::vector<double> sp(K * V), dsp(K * V), dr(V);
    for (auto seg = static_cast<std::int64_t>(saved.size()) - 1; seg >= 0; --seg) {
      const std::int64_t t0 = bos + seg * checkpoint, t1 = std::min(eos, t0 + checkpoint);
      // Recompute the segment: the state before each of its tokens, and the tokens.
      std::vector<std::vector<double>> before;
      std::vector<Token> toks;
      s = saved[static_cast<std::size_t>(seg)];
      for (std::int64_t t = t0; t < t1; ++t) {
        before.push_back(s);
        toks.push_back(token(in, t, h));
        step(toks.back(), in.scale, s, r, nullptr);
      }
      for (std::int64_t t = t1 - 1; t >= t0; --t) {
        const Token& tok = toks[static_cast<std::size_t>(t - t0)];
        const std::vector<double>& prev = before[static_cast<std::size_t>(t - t0)];
        const auto row = static_cast<std::size_t>(t * in.heads + h);
        double* dqh = &core.dq[row * K];
        double* dkh = &core.dk[row * K];
        // Replay the token: S' = D prev, r = v - S'^T k, S = S' + b k r^T.
        for (std::size_t j = 0; j < V; ++j) r[j] = tok.v[j];
        for (std::size_t i = 0; i < K; ++i) {
          const double d = std::exp(tok.a[i]);
          for (std::size_t j = 0; j < V; ++j) {
            sp[i * V + j] = d * prev[i * V + j];
            r[j] -= tok.k[i] * sp[i * V + j];
          }
        }
        const double* dout_t = dout + (t * in.heads + h) * in.v_dim;
        // o = scale S^T q: dq and the state's share of the output gradient.
        for (std::size_t i = 0; i < K; ++i) {
          double acc = 0;
          for (std::size_t j = 0; j < V; ++j) {
            const double st = sp[i * V + j] + tok.beta * tok.k[i] * r[j];
            acc += st * dout_t[j];
            dS[i * V + j] += in.scale * tok.q[i] * dout_t[j];
          }
          dqh[i] = in.scale * acc;
        }
        // S = S' + b k r^T.
        double dbeta = 0;
        for (std::size_t j = 0; j < V; ++j) dr[j] = 0;
        for (std::size_t i = 0; i < K; ++i) {
          double dsr = 0;
          for (std::size_t j = 0; j < V; ++j) {
            dsr += dS[i * V + j] * r[j];
            dr[j] += tok.beta * tok.k[i] * dS[i * V + j];
          }
          dbeta += tok.k[i] * dsr;
          dkh[i] = tok.beta * dsr;
        }
        core.dbeta[row] = dbeta;
        // r = v - S'^T k.
        for (std::size_t i = 0; i < K; ++i) {
          double sdr = 0;
          for (std::size_t j = 0; j < V; ++j) {
            dsp[i * V + j] = dS[i * V + j] - tok.k[i] * dr[j];
            sdr += sp[i * V + j] * dr[j];
          }
          dkh[i] -= sdr;
        }
        for (std::size_t j = 0; j < V; ++j) core.dv[row * V + j] = dr[j];
        // S' = diag(e^a) prev: the decay's gradient, and dS for the token before.
        for (std::size_t i = 0; i < K; ++i) {
          double da = 0;
          const double d = std::exp(tok.a[i]);
          for (std::size_t j = 0; j < V; ++j) {
            da += dsp[i * V + j] * sp[i * V + j];
            dS[i * V + j] = d * dsp[i * V + j];
          }
          core.da[row * K + i] = da;
        }
      }
    }
    store_initial_state_gradient(in, n, h, dS, core);
  });
  return preprocessing_backward(in, std::move(core));
}

KdaGradients kda_chunked_backward(const KdaInputs& in, const double* dout, const double* dfinal_state, std::int64_t chunk) {
  check_backward_arguments(in, dout, chunk, "chunk");
  const auto K = static_cast<std::size_t>(in.k_dim), V = static_cast<std::size_t>(in.v_dim);
  CoreGradients core = core_gradients(in);
  for_each_chain(in, [&](std::int64_t n, std::int64_t h, std::int64_t) {
    const std::int64_t bos = in.cu_seqlens[static_cast<std::size_t>(n)], eos = in.cu_seqlens[static_cast<std::size_t>(n + 1)];
    // Forward: the state entering every chunk (the token-serial steps give the same states).
    std::vector<std::vector<double>> entering;
    std::vector<double> s = initial_state(in, n, h), r(V);
    for (std::int64_t t = bos; t < eos; ++t) {
      if ((t - bos) % chunk == 0) entering.push_back(s);
      step(token(in, t, h), in.scale, s, r, nullptr);
    }
    std::vector<double> dS = final_state_gradient(in, dfinal_state, n, h);
    for (auto c = static_cast<std::int64_t>(entering.size()) - 1; c >= 0; --c) {
      const std::int64_t t0 = bos + c * chunk;
      const auto C = static_cast<std::size_t>(std::min(chunk, eos - t0));
      const std::vector<double>& S0 = entering[static_cast<std::size_t>(c)];
      std::vector<Token> tok;
      for (std::size_t i = 0; i < C; ++i) tok.push_back(token(in, t0 + static_cast<std::int64_t>(i), h));
      // ---- the chunk's forward (docs/kda.md 2.1) ----
      std::vector<double> G(C * K);  // inclusive cumsum of the log-decays
      for (std::size_t i = 0; i < C; ++i)
        for (std::size_t d = 0; d < K; ++d) G[i * K + d] = tok[i].a[d] + (i ? G[(i - 1) * K + d] : 0.0);
      const double* gtot = &G[(C - 1) * K];
      auto E = [&](std::size_t i, std::size_t j, std::size_t d) { return std::exp(G[i * K + d] - G[j * K + d]); };
      std::vector<double> P(C * C, 0.0), L(C * C, 0.0), M(C * C, 0.0);
      for (std::size_t i = 0; i < C; ++i)
        for (std::size_t j = 0; j <= i; ++j) {
          double pk = 0, mq = 0;
          for (std::size_t d = 0; d < K; ++d) {
            const double e = E(i, j, d);
            pk += tok[i].k[d] * tok[j].k[d] * e;
            mq += tok[i].q[d] * tok[j].k[d] * e;
          }
          if (j < i) {
            P[i * C + j] = pk;
            L[i * C + j] = tok[i].beta * pk;
          }
          M[i * C + j] = in.scale * mq;
        }
      std::vector<double> Kd(C * K), Qd(C * K), Kr(C * K);
      for (std::size_t i = 0; i < C; ++i)
        for (std::size_t d = 0; d < K; ++d) {
          Kd[i * K + d] = tok[i].k[d] * std::exp(G[i * K + d]);
          Qd[i * K + d] = in.scale * tok[i].q[d] * std::exp(G[i * K + d]);
          Kr[i * K + d] = tok[i].k[d] * std::exp(gtot[d] - G[i * K + d]);
        }
      // Y = V - Kd S0, W = diag(beta) Y, (I + L) U = W.
      std::vector<double> Y(C * V), U(C * V);
      for (std::size_t i = 0; i < C; ++i) {
        for (std::size_t j = 0; j < V; ++j) {
          double ks = 0;
          for (std::size_t d = 0; d < K; ++d) ks += Kd[i * K + d] * S0[d * V + j];
          Y[i * V + j] = tok[i].v[j] - ks;
          U[i * V + j] = tok[i].beta * Y[i * V + j];
        }
        for (std::size_t m = 0; m < i; ++m)
          for (std::size_t j = 0; j < V; ++j) U[i * V + j] -= L[i * C + m] * U[m * V + j];
      }
      // ---- its backward, given dO and dS (the gradient of the state it leaves) ----
      std::vector<double> dG(C * K, 0.0), dGtot(K, 0.0), dU(C * V, 0.0), dKd(C * K, 0.0), dQd(C * K, 0.0),
          dKr(C * K, 0.0), dS0(K * V, 0.0), dM(C * C, 0.0), dL(C * C, 0.0);
      auto dO = [&](std::size_t i, std::size_t j) { return dout[((t0 + static_cast<std::int64_t>(i)) * in.heads + h) * in.v_dim + static_cast<std::int64_t>(j)]; };
      // O = Qd S0 + M U.
      for (std::size_t i = 0; i < C; ++i) {
        for (std::size_t d = 0; d < K; ++d) {
          double acc = 0;
          for (std::size_t j = 0; j < V; ++j) acc += dO(i, j) * S0[d * V + j];
          dQd[i * K + d] = acc;
        }
        for (std::size_t m = 0; m <= i; ++m) {
          double acc = 0;
          for (std::size_t j = 0; j < V; ++j) {
            acc += dO(i, j) * U[m * V + j];
            dU[m * V + j] += M[i * C + m] * dO(i, j);
          }
          dM[i * C + m] = acc;
        }
      }
      for (std::size_t d = 0; d < K; ++d)
        for (std::size_t j = 0; j < V; ++j) {
          double acc = 0;
          for (std::size_t i = 0; i < C; ++i) acc += Qd[i * K + d] * dO(i, j);
          dS0[d * V + j] = acc;
        }
      // S1 = diag(e^Gtot) S0 + Kr^T U.
      for (std::size_t d = 0; d < K; ++d) {
        const double e = std::exp(gtot[d]);
        for (std::size_t j = 0; j < V; ++j) {
          dS0[d * V + j] += e * dS[d * V + j];
          dGtot[d] += e * dS[d * V + j] * S0[d * V + j];
        }
      }
      for (std::size_t i = 0; i < C; ++i) {
        for (std::size_t d = 0; d < K; ++d) {
          double acc = 0;
          for (std::size_t j = 0; j < V; ++j) acc += U[i * V + j] * dS[d * V + j];
          dKr[i * K + d] = acc;
        }
        for (std::size_t j = 0; j < V; ++j) {
          double acc = 0;
          for (std::size_t d = 0; d < K; ++d) acc += Kr[i * K + d] * dS[d * V + j];
          dU[i * V + j] += acc;
        }
      }
      // (I + L) U = W: dW = (I + L)^-T dU (back substitution), dL_ij = -dW_i . U_j for i > j.
      std::vector<double> dW(C * V);
      for (std::size_t i = C; i-- > 0;) {
        for (std::size_t j = 0; j < V; ++j) dW[i * V + j] = dU[i * V + j];
        for (std::size_t m = i + 1; m < C; ++m)
          for (std::size_t j = 0; j < V; ++j) dW[i * V + j] -= L[m * C + i] * dW[m * V + j];
      }
      for (std::size_t i = 0; i < C; ++i)
        for (std::size_t j = 0; j < i; ++j) {
          double acc = 0;
          for (std::size_t x = 0; x < V; ++x) acc += dW[i * V + x] * U[j * V + x];
          dL[i * C + j] = -acc;
        }
      // W = diag(beta) Y, Y = V - Kd S0.
      const auto row0 = static_cast<std::size_t>(t0 * in.heads + h);
      const auto H = static_cast<std::size_t>(in.heads);
      for (std::size_t i = 0; i < C; ++i) {
        const std::size_t row = row0 + i * H;
        double db = 0;
        for (std::size_t j = 0; j < V; ++j) {
          db += dW[i * V + j] * Y[i * V + j];
          core.dv[row * V + j] = tok[i].beta * dW[i * V + j];
        }
        // L_ij = beta_i P_ij.
        for (std::size_t j = 0; j < i; ++j) db += dL[i * C + j] * P[i * C + j];
        core.dbeta[row] = db;
        for (std::size_t d = 0; d < K; ++d) {
          double acc = 0;
          for (std::size_t j = 0; j < V; ++j) acc += tok[i].beta * dW[i * V + j] * S0[d * V + j];
          dKd[i * K + d] = -acc;
        }
      }
      for (std::size_t d = 0; d < K; ++d)
        for (std::size_t j = 0; j < V; ++j) {
          double acc = 0;
          for (std::size_t i = 0; i < C; ++i) acc += Kd[i * K + d] * tok[i].beta * dW[i * V + j];
          dS0[d * V + j] -= acc;
        }
      // P_ij = sum_d k_id k_jd e^(G_id - G_jd) (i > j) and M_ij = scale sum_d q_id k_jd e^(G_id - G_jd) (i >= j).
      std::vector<double> dq(C * K, 0.0), dk(C * K, 0.0);
      for (std::size_t i = 0; i < C; ++i)
        for (std::size_t j = 0; j <= i; ++j) {
          const double dp = j < i ? tok[i].beta * dL[i * C + j] : 0.0, dm = in.scale * dM[i * C + j];
          for (std::size_t d = 0; d < K; ++d) {
            const double e = E(i, j, d);
            const double kk = tok[i].k[d] * tok[j].k[d] * e, qk = tok[i].q[d] * tok[j].k[d] * e;
            dk[i * K + d] += dp * tok[j].k[d] * e;
            dk[j * K + d] += dp * tok[i].k[d] * e + dm * tok[i].q[d] * e;
            dq[i * K + d] += dm * tok[j].k[d] * e;
            const double dg = dp * kk + dm * qk;
            dG[i * K + d] += dg;
            dG[j * K + d] -= dg;
          }
        }
      // Kd = k e^G, Qd = scale q e^G, Kr = k e^(Gtot - G).
      for (std::size_t i = 0; i < C; ++i)
        for (std::size_t d = 0; d < K; ++d) {
          const double eg = std::exp(G[i * K + d]), er = std::exp(gtot[d] - G[i * K + d]);
          dk[i * K + d] += dKd[i * K + d] * eg + dKr[i * K + d] * er;
          dq[i * K + d] += in.scale * dQd[i * K + d] * eg;
          dG[i * K + d] += dKd[i * K + d] * Kd[i * K + d] + dQd[i * K + d] * Qd[i * K + d] - dKr[i * K + d] * Kr[i * K + d];
          dGtot[d] += dKr[i * K + d] * Kr[i * K + d];
        }
      for (std::size_t d = 0; d < K; ++d) dG[(C - 1) * K + d] += dGtot[d];
      // G = inclusive cumsum of a: da_m = sum over i >= m of dG_i.
      std::vector<double> acc(K, 0.0);
      for (std::size_t i = C; i-- > 0;) {
        const std::size_t row = row0 + i * H;
        for (std::size_t d = 0; d < K; ++d) {
          acc[d] += dG[i * K + d];
          core.da[row * K + d] = acc[d];
          core.dq[row * K + d] = dq[i * K + d];
          core.dk[row * K + d] = dk[i * K + d];
        }
      }
      dS = std::move(dS0);
    }
    store_initial_state_gradient(in, n, h, dS, core);
  });
  return preprocessing_backward(in, std::move(core));
}

}  // namespace ptxevo::kernels
