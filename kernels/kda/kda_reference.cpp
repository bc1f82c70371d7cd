#include "kernels/kda/kda_reference.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "evaluator/tensor.hpp"

namespace ptxevo::kernels {
namespace {

double load_bf16(const std::byte* base, std::int64_t i) {
  std::uint16_t b;
  std::memcpy(&b, base + 2 * i, 2);
  return evaluator::bf16_to_double(b);
}

double load_f32(const std::byte* base, std::int64_t i) {
  float f;
  std::memcpy(&f, base + 4 * i, 4);
  return f;
}

// x / sqrt(sum x^2 + 1e-6), the eps FLA's l2norm and FlashKDA use.
void l2_normalize(std::vector<double>& x) {
  double ss = 0;
  for (double e : x) ss += e * e;
  const double r = 1.0 / std::sqrt(ss + 1e-6);
  for (double& e : x) e *= r;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// The state of one (sequence, head) as S[i * V + j] (key channel i, value channel j): the
// recurrence scales key rows and reduces over them, so value channels sit contiguous.
std::vector<double> load_state(const KdaProblem& p, std::int64_t n, std::int64_t h) {
  const std::int64_t kd = p.k_dim, vd = p.v_dim;
  std::vector<double> s(static_cast<std::size_t>(kd * vd), 0.0);
  if (!p.initial_state) return s;
  const std::int64_t base = (n * p.heads + h) * vd * kd;  // V-first: [N, H, V, K]
  for (std::int64_t j = 0; j < vd; ++j)
    for (std::int64_t i = 0; i < kd; ++i) s[static_cast<std::size_t>(i * vd + j)] = load_f32(p.initial_state, base + j * kd + i);
  return s;
}

void store_state(const KdaProblem& p, std::int64_t n, std::int64_t h, const std::vector<double>& s, double* final_state) {
  if (!final_state) return;
  const std::int64_t kd = p.k_dim, vd = p.v_dim;
  const std::int64_t base = (n * p.heads + h) * vd * kd;
  for (std::int64_t j = 0; j < vd; ++j)
    for (std::int64_t i = 0; i < kd; ++i) final_state[base + j * kd + i] = s[static_cast<std::size_t>(i * vd + j)];
}

// Runs body(n, h) for every (sequence, head), in parallel.
template <typename Body>
void for_each_chain(const KdaProblem& p, Body&& body) {
  const std::int64_t chains = p.sequences() * p.heads;
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, chains, 1), [&](const tbb::blocked_range<std::int64_t>& r) {
    for (std::int64_t c = r.begin(); c != r.end(); ++c) body(c / p.heads, c % p.heads);
  });
}

// One chunk of tokens [t0, t0 + c) of head h starting from state s (K x `width` value columns,
// updated in place); out (null: not written) gets the chunk's rows. zero_v: v taken as 0, so that
// the step is the chunk's linear transition alone (width K, from the identity: its matrix).
void chunk_step(const KdaProblem& p, std::int64_t h, std::int64_t t0, std::int64_t c, std::vector<double>& s,
                double* out, std::int64_t width = -1, bool zero_v = false) {
  const std::int64_t kd = p.k_dim, vd = width < 0 ? p.v_dim : width;
  const auto K = static_cast<std::size_t>(kd), V = static_cast<std::size_t>(vd);
  const auto C = static_cast<std::size_t>(c);
  std::vector<KdaToken> tok;
  for (std::int64_t i = 0; i < c; ++i) tok.push_back(kda_token(p, t0 + i, h));
  // G[i][d]: inclusive cumsum of the log-decays over the chunk.
  std::vector<double> G(C * K);
  for (std::size_t i = 0; i < C; ++i)
    for (std::size_t d = 0; d < K; ++d) G[i * K + d] = tok[i].a[d] + (i ? G[(i - 1) * K + d] : 0.0);
  const double* gtot = &G[(C - 1) * K];
  // L (strictly lower, row-scaled by beta) and M (lower including the diagonal, times scale):
  // exponents are G_i - G_j with i >= j, never positive.
  std::vector<double> L(C * C, 0.0), M(C * C, 0.0);
  for (std::size_t i = 0; i < C; ++i)
    for (std::size_t j = 0; j <= i; ++j) {
      double lk = 0, mq = 0;
      for (std::size_t d = 0; d < K; ++d) {
        const double e = std::exp(G[i * K + d] - G[j * K + d]);
        lk += tok[i].k[d] * tok[j].k[d] * e;
        mq += tok[i].q[d] * tok[j].k[d] * e;
      }
      if (j < i) L[i * C + j] = tok[i].beta * lk;
      M[i * C + j] = p.scale * mq;
    }
  // Kd S0 and Qd S0 (Kd = k * e^G, Qd = scale * q * e^G), then U = (I + L)^-1 diag(b) (V - Kd S0)
  // by forward substitution and O = Qd S0 + M U.
  std::vector<double> U(C * V), O(C * V);
  for (std::size_t i = 0; i < C; ++i) {
    std::vector<double> ks(V, 0.0), qs(V, 0.0);
    for (std::size_t d = 0; d < K; ++d) {
      const double e = std::exp(G[i * K + d]);
      const double kk = tok[i].k[d] * e, qq = p.scale * tok[i].q[d] * e;
      const double* row = &s[d * V];
      for (std::size_t j = 0; j < V; ++j) {
        ks[j] += kk * row[j];
        qs[j] += qq * row[j];
      }
    }
    for (std::size_t j = 0; j < V; ++j) U[i * V + j] = tok[i].beta * ((zero_v ? 0.0 : tok[i].v[j]) - ks[j]);
    for (std::size_t m = 0; m < i; ++m)
      for (std::size_t j = 0; j < V; ++j) U[i * V + j] -= L[i * C + m] * U[m * V + j];
    for (std::size_t j = 0; j < V; ++j) O[i * V + j] = qs[j];
  }
  for (std::size_t i = 0; i < C; ++i)
    for (std::size_t m = 0; m <= i; ++m)
      for (std::size_t j = 0; j < V; ++j) O[i * V + j] += M[i * C + m] * U[m * V + j];
  // S_next = diag(e^Gtot) S0 + Kr^T U with Kr = k * e^(Gtot - G).
  for (std::size_t d = 0; d < K; ++d) {
    double* row = &s[d * V];
    const double e = std::exp(gtot[d]);
    for (std::size_t j = 0; j < V; ++j) row[j] *= e;
    for (std::size_t i = 0; i < C; ++i) {
      const double kr = tok[i].k[d] * std::exp(gtot[d] - G[i * K + d]);
      for (std::size_t j = 0; j < V; ++j) row[j] += kr * U[i * V + j];
    }
  }
  if (!out) return;
  for (std::size_t i = 0; i < C; ++i)
    for (std::size_t j = 0; j < V; ++j)
      out[((t0 + static_cast<std::int64_t>(i)) * p.heads + h) * vd + static_cast<std::int64_t>(j)] = O[i * V + j];
}

// Chunks [c_begin, c_end) of `chunk` tokens of the sequence [bos, eos) of head h, from state s
// (chunk_step's width and zero_v); the sequence's last chunk may be partial.
void run_chunks(const KdaProblem& p, std::int64_t h, std::int64_t bos, std::int64_t eos, std::int64_t chunk,
                std::int64_t c_begin, std::int64_t c_end, std::vector<double>& s, double* out, std::int64_t width = -1,
                bool zero_v = false) {
  for (std::int64_t c = c_begin; c < c_end; ++c) {
    const std::int64_t t0 = bos + c * chunk;
    chunk_step(p, h, t0, std::min(chunk, eos - t0), s, out, width, zero_v);
  }
}

void check_chunk(std::int64_t chunk) {
  if (chunk < 1) throw std::invalid_argument("kda reference: chunk must be >= 1, got " + std::to_string(chunk));
}

}  // namespace

void check_kda_problem(const KdaProblem& p) {
  auto fail = [](const std::string& m) { throw std::invalid_argument("kda reference: " + m); };
  if (p.heads < 1 || p.k_dim < 1 || p.v_dim < 1)
    fail("heads, K and V must be >= 1, got H=" + std::to_string(p.heads) + " K=" + std::to_string(p.k_dim) +
         " V=" + std::to_string(p.v_dim));
  if (p.cu_seqlens.size() < 2) fail("cu_seqlens needs at least 2 entries (one sequence)");
  if (p.cu_seqlens.front() != 0) fail("cu_seqlens must start at 0, got " + std::to_string(p.cu_seqlens.front()));
  for (std::size_t i = 1; i < p.cu_seqlens.size(); ++i)
    if (p.cu_seqlens[i] <= p.cu_seqlens[i - 1])
      fail("cu_seqlens must be strictly increasing (every sequence has a token), but entry " + std::to_string(i) +
           " is " + std::to_string(p.cu_seqlens[i]) + " after " + std::to_string(p.cu_seqlens[i - 1]));
  if (!p.q || !p.k || !p.v || !p.g || !p.beta || !p.a_log || !p.dt_bias)
    fail("q, k, v, g, beta, A_log and dt_bias are all required");
  if (!(p.scale > 0) || !std::isfinite(p.scale)) fail("scale must be a positive finite number");
}

double kda_log_decay(KdaGate gate, double lower_bound, double a_log, double x) {
  const double a = std::exp(a_log);
  if (gate == KdaGate::LowerBound) return lower_bound * sigmoid(a * x);
  const double softplus = x > 20.0 ? x : std::log1p(std::exp(x));  // FLA's threshold
  return -a * softplus;
}

KdaToken kda_token(const KdaProblem& p, std::int64_t t, std::int64_t h) {
  const auto K = static_cast<std::size_t>(p.k_dim), V = static_cast<std::size_t>(p.v_dim);
  KdaToken tok{std::vector<double>(K), std::vector<double>(K), std::vector<double>(V), std::vector<double>(K), 0.0};
  const std::int64_t kb = (t * p.heads + h) * p.k_dim, vb = (t * p.heads + h) * p.v_dim;
  const double a_log = load_f32(p.a_log, h);
  for (std::size_t i = 0; i < K; ++i) {
    const auto ii = static_cast<std::int64_t>(i);
    tok.q[i] = load_bf16(p.q, kb + ii);
    tok.k[i] = load_bf16(p.k, kb + ii);
    const double x = load_bf16(p.g, kb + ii) + load_f32(p.dt_bias, h * p.k_dim + ii);
    tok.a[i] = kda_log_decay(p.gate, p.lower_bound, a_log, x);
  }
  for (std::size_t j = 0; j < V; ++j) tok.v[j] = load_bf16(p.v, vb + static_cast<std::int64_t>(j));
  l2_normalize(tok.q);
  l2_normalize(tok.k);
  tok.beta = sigmoid(load_bf16(p.beta, t * p.heads + h));
  return tok;
}

void kda_recurrent_reference(const KdaProblem& p, double* out, double* final_state) {
  check_kda_problem(p);
  const auto K = static_cast<std::size_t>(p.k_dim), V = static_cast<std::size_t>(p.v_dim);
  for_each_chain(p, [&](std::int64_t n, std::int64_t h) {
    std::vector<double> s = load_state(p, n, h);
    std::vector<double> r(V), o(V);
    for (std::int64_t t = p.cu_seqlens[static_cast<std::size_t>(n)]; t < p.cu_seqlens[static_cast<std::size_t>(n + 1)];
         ++t) {
      const KdaToken tok = kda_token(p, t, h);
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
      for (std::size_t j = 0; j < V; ++j) o[j] = 0;
      for (std::size_t i = 0; i < K; ++i) {
        double* row = &s[i * V];
        const double bk = tok.beta * tok.k[i], qi = tok.q[i];
        for (std::size_t j = 0; j < V; ++j) {
          row[j] += bk * r[j];
          o[j] += qi * row[j];
        }
      }
      double* dst = out + (t * p.heads + h) * p.v_dim;
      for (std::size_t j = 0; j < V; ++j) dst[j] = p.scale * o[j];
    }
    store_state(p, n, h, s, final_state);
  });
}

void kda_chunked_reference(const KdaProblem& p, std::int64_t chunk, double* out, double* final_state) {
  check_kda_problem(p);
  check_chunk(chunk);
  for_each_chain(p, [&](std::int64_t n, std::int64_t h) {
    std::vector<double> s = load_state(p, n, h);
    const std::int64_t bos = p.cu_seqlens[static_cast<std::size_t>(n)], eos = p.cu_seqlens[static_cast<std::size_t>(n + 1)];
    run_chunks(p, h, bos, eos, chunk, 0, (eos - bos + chunk - 1) / chunk, s, out);
    store_state(p, n, h, s, final_state);
  });
}

void kda_segmented_reference(const KdaProblem& p, std::int64_t chunk, std::int64_t segments, double* out,
                             double* final_state) {
  check_kda_problem(p);
  check_chunk(chunk);
  if (segments < 1)
    throw std::invalid_argument("kda reference: segments must be >= 1, got " + std::to_string(segments));
  const auto K = static_cast<std::size_t>(p.k_dim), V = static_cast<std::size_t>(p.v_dim);
  for_each_chain(p, [&](std::int64_t n, std::int64_t h) {
    const std::int64_t bos = p.cu_seqlens[static_cast<std::size_t>(n)], eos = p.cu_seqlens[static_cast<std::size_t>(n + 1)];
    const std::int64_t nchunks = (eos - bos + chunk - 1) / chunk;
    const std::int64_t per = (nchunks + segments - 1) / segments;  // chunks a segment (the last may be short)
    const std::int64_t nseg = (nchunks + per - 1) / per;
    auto run = [&](std::int64_t j, std::vector<double>& s, double* o, std::int64_t width, bool zero_v) {
      run_chunks(p, h, bos, eos, chunk, j * per, std::min(nchunks, (j + 1) * per), s, o, width, zero_v);
    };
    // 1. Each segment on its own (in parallel on a GPU): its end state from a zero state, and its
    // transition A_j (K x K) from the identity with v = 0.
    std::vector<std::vector<double>> s0(static_cast<std::size_t>(nseg)), tr(static_cast<std::size_t>(nseg));
    for (std::int64_t j = 0; j < nseg; ++j) {
      auto& z = s0[static_cast<std::size_t>(j)];
      z.assign(K * V, 0.0);
      run(j, z, nullptr, p.v_dim, false);
      auto& a = tr[static_cast<std::size_t>(j)];
      a.assign(K * K, 0.0);
      for (std::size_t i = 0; i < K; ++i) a[i * K + i] = 1.0;
      run(j, a, nullptr, p.k_dim, true);
    }
    // 2. The states entering each segment, in order: S_(j+1) = A_j S_j + S0_j.
    std::vector<double> s = load_state(p, n, h), next(K * V);
    for (std::int64_t j = 0; j < nseg; ++j) {
      // 3. Segment j again from its true entering state (in parallel on a GPU, after step 2),
      // writing its outputs.
      std::vector<double> again = s;
      run(j, again, out, p.v_dim, false);
      const auto& a = tr[static_cast<std::size_t>(j)];
      const auto& z = s0[static_cast<std::size_t>(j)];
      for (std::size_t i = 0; i < K; ++i)
        for (std::size_t c = 0; c < V; ++c) {
          double acc = z[i * V + c];
          for (std::size_t e = 0; e < K; ++e) acc += a[i * K + e] * s[e * V + c];
          next[i * V + c] = acc;
        }
      s.swap(next);
    }
    store_state(p, n, h, s, final_state);
  });
}

}  // namespace ptxevo::kernels
