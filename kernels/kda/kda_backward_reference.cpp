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
    const double s = sigmoid(e * x);
    const double ds = in.lower_bound * s * (1.0 - s);  // d a / d(e x)
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

KdaGradients kda_backward(const KdaInputs& in, const double* dout, const double* dfinal_state, std::int64_t checkpoint) {
  check_kda_inputs(in);
  if (checkpoint < 1) throw std::invalid_argument("kda backward reference: checkpoint must be >= 1");
  if (!dout) throw std::invalid_argument("kda backward reference: the output gradient is required");
  const auto K = static_cast<std::size_t>(in.k_dim), V = static_cast<std::size_t>(in.v_dim);
  const auto H = static_cast<std::size_t>(in.heads), N = static_cast<std::size_t>(in.sequences());
  const auto T = static_cast<std::size_t>(in.total_tokens());
  KdaGradients gr;
  gr.dq.assign(T * H * K, 0.0);
  gr.dk.assign(T * H * K, 0.0);
  gr.dg.assign(T * H * K, 0.0);
  gr.dv.assign(T * H * V, 0.0);
  gr.dbeta.assign(T * H, 0.0);
  gr.dinitial_state.assign(N * H * V * K, 0.0);
  // Per chain, summed over chains in a fixed order afterwards: deterministic under TBB.
  std::vector<double> chain_da_log(N * H, 0.0), chain_ddt_bias(N * H * K, 0.0);

  for_each_chain(in, [&](std::int64_t n, std::int64_t h, std::int64_t chain) {
    const std::int64_t bos = in.cu_seqlens[static_cast<std::size_t>(n)], eos = in.cu_seqlens[static_cast<std::size_t>(n + 1)];
    const auto state_base = static_cast<std::size_t>((n * in.heads + h) * in.v_dim * in.k_dim);
    // Forward: the state before every checkpoint-th token.
    std::vector<std::vector<double>> saved;
    std::vector<double> s = initial_state(in, n, h), r(V);
    for (std::int64_t t = bos; t < eos; ++t) {
      if ((t - bos) % checkpoint == 0) saved.push_back(s);
      step(token(in, t, h), in.scale, s, r, nullptr);
    }
    // dS: the gradient of the state after the last token processed so far (backwards).
    std::vector<double> dS(K * V, 0.0);
    if (dfinal_state)
      for (std::size_t j = 0; j < V; ++j)
        for (std::size_t i = 0; i < K; ++i) dS[i * V + j] = dfinal_state[state_base + j * K + i];
    std::vector<double> sp(K * V), dsp(K * V), dqh(K), dkh(K), dr(V), dx(K);
    double* da_log = &chain_da_log[static_cast<std::size_t>(chain)];
    double* ddt = &chain_ddt_bias[static_cast<std::size_t>(chain) * K];
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
        // r = v - S'^T k.
        for (std::size_t i = 0; i < K; ++i) {
          double sdr = 0;
          for (std::size_t j = 0; j < V; ++j) {
            dsp[i * V + j] = dS[i * V + j] - tok.k[i] * dr[j];
            sdr += sp[i * V + j] * dr[j];
          }
          dkh[i] -= sdr;
        }
        // S' = diag(e^a) prev: the decay's gradient, and dS for the token before.
        const auto row = static_cast<std::size_t>(t * in.heads + h);
        for (std::size_t i = 0; i < K; ++i) {
          double da = 0;
          const double d = std::exp(tok.a[i]);
          for (std::size_t j = 0; j < V; ++j) {
            da += dsp[i * V + j] * sp[i * V + j];
            dS[i * V + j] = d * dsp[i * V + j];
          }
          double ddx = 0, dda_log = 0;
          gate_derivatives(in, in.a_log[static_cast<std::size_t>(h)], tok.x[i], tok.a[i], &ddx, &dda_log);
          dx[i] = da * ddx;
          *da_log += da * dda_log;
          ddt[i] += dx[i];
        }
        for (std::size_t i = 0; i < K; ++i) gr.dg[row * K + i] = dx[i];
        for (std::size_t j = 0; j < V; ++j) gr.dv[row * V + j] = dr[j];
        gr.dbeta[row] = dbeta * tok.beta * (1.0 - tok.beta);
        l2_norm_backward(tok.q, tok.q_norm, dqh, &gr.dq[row * K]);
        l2_norm_backward(tok.k, tok.k_norm, dkh, &gr.dk[row * K]);
      }
    }
    for (std::size_t j = 0; j < V; ++j)
      for (std::size_t i = 0; i < K; ++i) gr.dinitial_state[state_base + j * K + i] = dS[i * V + j];
  });

  gr.da_log.assign(H, 0.0);
  gr.ddt_bias.assign(H * K, 0.0);
  for (std::size_t c = 0; c < N * H; ++c) {
    const std::size_t h = c % H;
    gr.da_log[h] += chain_da_log[c];
    for (std::size_t i = 0; i < K; ++i) gr.ddt_bias[h * K + i] += chain_ddt_bias[c * K + i];
  }
  return gr;
}

}  // namespace ptxevo::kernels
