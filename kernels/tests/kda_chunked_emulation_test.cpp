// A CPU model of the chunked tensor-core seed (kernels/kda/kda_fwd_chunked.cu): the same blocking
// and the same rounding points, checked against the op's fp64 recurrent reference on the op's own
// fills. It is written from the algorithm (docs/kda.md 2.1), not from the kernel's code, so a
// mistake in the blocking (which cumulative log-gate multiplies which operand, what a partial chunk
// carries, where bf16 rounding enters) shows here without a GPU:
//   per chunk of C tokens (rows past the sequence's end have k = q = v = beta = 0 and a = 0):
//     G      = inclusive cumsum of the log2-decays (fp32, chunk-local), Gtot = G[C - 1]
//     Kd     = bf16(k 2^G),  Qd = bf16(scale q 2^G),  KrT = bf16(k 2^(Gtot - G))^T, dec = 2^Gtot
//     L_ij   = beta_i sum_d k_id k_jd 2^(G_id - G_jd), i > j     (fp32, CUDA cores)
//     M_ij   = scale sum_d q_id k_jd 2^(G_id - G_jd), i >= j, as M_hi + M_lo (two bf16 terms)
//     W      = Kd (S_hi + S_lo),  Qs = Qd (S_hi + S_lo)     (S split into two bf16 terms; fp32 acc)
//     U      = (I + L)^-1 diag(beta) (V - W)               (fp32 forward substitution)
//     O      = Qs + M_hi U_hi + M_hi U_lo + M_lo U_hi,  out = bf16(O)
//     S      = dec * S + KrT (U_hi + U_lo)                 (fp32 state)
// Every exponential is of a difference G_i - G_j with i >= j (or Gtot - G_i, or G_i): <= 0.
// With LM_TENSOR_CORES (lower-bound gate, C = 16) L and M come from tensor-core products of factors
// about a reference token r = 7 instead: x_i = 2^(G_i - G_r), y_j = 2^(G_r - G_j), each within
// 2^(+-8 x 7.22) because the gate bounds a decay to 5 nats a token, split into hi + lo bf16 terms:
//     L_ij = beta_i sum_d (k_i x_i)(k_j y_j),  M_ij = sum_d (q_i x_i)(k_j y_j)   (hi hi + hi lo + lo hi)
#include <gtest/gtest.h>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "evaluator/gpu_evaluation.hpp"
#include "evaluator/spec.hpp"
#include "evaluator/tensor.hpp"
#include "kernels/builtin_ops.hpp"
#include "kernels/kda/kda_fwd_op.hpp"

namespace {

using ptxevo::evaluator::Distribution;
using ptxevo::evaluator::HostTensor;
using ptxevo::evaluator::OpConfig;
using ptxevo::evaluator::Shape;
using ptxevo::kernels::KdaFwdOp;
using ptxevo::kernels::KdaGate;
using ptxevo::kernels::KdaProblem;
using I = std::int64_t;

constexpr int D = 128;

float bf16(float x) { return static_cast<float>(ptxevo::evaluator::bf16_to_double(ptxevo::evaluator::double_to_bf16(x))); }

float load_bf16(const std::byte* base, I i) {
  std::uint16_t b;
  std::memcpy(&b, base + 2 * i, 2);
  return static_cast<float>(ptxevo::evaluator::bf16_to_double(b));
}
float load_f32(const std::byte* base, I i) {
  float f;
  std::memcpy(&f, base + 4 * i, 4);
  return f;
}

// Deliberate blocking mistakes, to show that the model (and the tolerance) catches them.
enum class Mistake {
  None,
  ExclusiveCumsum,    // G without the token's own decay
  NoPartialMask,      // a partial chunk's padding rows keep the last real token's decay
  StateAsBf16,        // W and Qs read S rounded once to bf16 (no lo term): allowed, only less precise
  MAsBf16,            // M rounded once to bf16: allowed, but one rounding per row of out adds up
};

struct Emulation {
  std::vector<float> out;    // [T_total, H, 128]
  std::vector<float> state;  // [N, H, 128 (V), 128 (K)]
};

// The model of one (sequence, head) chain over all 128 value columns (the kernel's V slices are
// independent column blocks of the same arithmetic).
void emulate_chain(const KdaProblem& p, I n, I h, int C, Mistake mistake, bool lm_tensor_cores, Emulation& e) {
  const float scale = static_cast<float>(p.scale), lb = static_cast<float>(p.lower_bound);
  const float log2e = 1.4426950408889634f;
  const float ea = std::exp(load_f32(p.a_log, h));
  std::vector<float> S(D * D, 0.f);  // S[d * D + j]: key row d, value column j
  if (p.initial_state)
    for (int j = 0; j < D; ++j)
      for (int d = 0; d < D; ++d) S[d * D + j] = load_f32(p.initial_state, ((n * p.heads + h) * D + j) * D + d);
  const I bos = p.cu_seqlens[static_cast<std::size_t>(n)], eos = p.cu_seqlens[static_cast<std::size_t>(n + 1)];
  std::vector<float> q(C * D), k(C * D), a(C * D), v(C * D), beta(C), G(C * D);
  std::vector<float> Kd(C * D), Qd(C * D), Kr(C * D), dec(D), L(C * C), Mhi(C * C), Mlo(C * C), W(C * D),
      Qs(C * D), U(C * D);
  for (I t0 = bos; t0 < eos; t0 += C) {
    const int count = static_cast<int>(std::min<I>(C, eos - t0));
    // Pre-processing: L2 norms (scale folded into q), gate in log2 units, beta sigmoid.
    std::fill(q.begin(), q.end(), 0.f);
    std::fill(k.begin(), k.end(), 0.f);
    std::fill(a.begin(), a.end(), 0.f);
    std::fill(v.begin(), v.end(), 0.f);
    std::fill(beta.begin(), beta.end(), 0.f);
    for (int i = 0; i < count; ++i) {
      const I row = ((t0 + i) * p.heads + h) * D;
      float sq = 0, sk = 0;
      for (int d = 0; d < D; ++d) {
        q[i * D + d] = load_bf16(p.q, row + d);
        k[i * D + d] = load_bf16(p.k, row + d);
        v[i * D + d] = load_bf16(p.v, row + d);
        sq += q[i * D + d] * q[i * D + d];
        sk += k[i * D + d] * k[i * D + d];
      }
      const float rq = scale / std::sqrt(sq + 1e-6f), rk = 1.f / std::sqrt(sk + 1e-6f);
      for (int d = 0; d < D; ++d) {
        q[i * D + d] *= rq;
        k[i * D + d] *= rk;
        const float x = load_bf16(p.g, row + d) + load_f32(p.dt_bias, h * D + d);
        float ld;
        if (p.gate == KdaGate::Softplus) ld = -ea * (x > 20.f ? x : std::log1p(std::exp(x)));
        else ld = lb / (1.f + std::exp(-ea * x));
        a[i * D + d] = ld * log2e;
      }
      beta[i] = 1.f / (1.f + std::exp(-load_bf16(p.beta, (t0 + i) * p.heads + h)));
    }
    if (mistake == Mistake::NoPartialMask)
      for (int i = count; i < C; ++i)
        for (int d = 0; d < D; ++d) a[i * D + d] = a[(count - 1) * D + d];
    for (int d = 0; d < D; ++d) {
      float g = 0;
      for (int i = 0; i < C; ++i) {
        const float prev = g;
        g += a[i * D + d];
        G[i * D + d] = mistake == Mistake::ExclusiveCumsum ? prev : g;
      }
    }
    // Decayed bf16 operands and the intra-chunk matrices.
    for (int d = 0; d < D; ++d) dec[d] = std::exp2(G[(C - 1) * D + d]);
    for (int i = 0; i < C; ++i)
      for (int d = 0; d < D; ++d) {
        const float gi = G[i * D + d];
        Kd[i * D + d] = bf16(k[i * D + d] * std::exp2(gi));
        Qd[i * D + d] = bf16(q[i * D + d] * std::exp2(gi));
        Kr[i * D + d] = bf16(k[i * D + d] * std::exp2(G[(C - 1) * D + d] - gi));
      }
    const int ref = 7;  // the factors' reference token (LM_TENSOR_CORES)
    auto split = [](float val, float& hi, float& lo) {
      hi = bf16(val);
      lo = bf16(val - hi);
    };
    for (int i = 0; i < C; ++i)
      for (int j = 0; j < C; ++j) {
        float lk = 0, mq = 0;
        if (j <= i && lm_tensor_cores)
          for (int d = 0; d < D; ++d) {
            float kxh, kxl, qxh, qxl, kyh, kyl;
            const float x = std::exp2(G[i * D + d] - G[ref * D + d]), y = std::exp2(G[ref * D + d] - G[j * D + d]);
            split(k[i * D + d] * x, kxh, kxl);
            split(q[i * D + d] * x, qxh, qxl);
            split(k[j * D + d] * y, kyh, kyl);
            lk += kxh * kyh + kxh * kyl + kxl * kyh;
            mq += qxh * kyh + qxh * kyl + qxl * kyh;
          }
        else if (j <= i)
          for (int d = 0; d < D; ++d) {
            const float x = std::exp2(G[i * D + d] - G[j * D + d]);
            lk += k[i * D + d] * k[j * D + d] * x;
            mq += q[i * D + d] * k[j * D + d] * x;
          }
        L[i * C + j] = j < i ? beta[i] * lk : 0.f;
        Mhi[i * C + j] = j <= i ? bf16(mq) : 0.f;
        Mlo[i * C + j] = j <= i && mistake != Mistake::MAsBf16 ? bf16(mq - Mhi[i * C + j]) : 0.f;
      }
    // Reads of the chunk-start state (tensor cores: bf16 operands, fp32 accumulation).
    std::vector<float> s_hi(D * D), s_lo(D * D);
    for (int x = 0; x < D * D; ++x) {
      s_hi[x] = bf16(S[x]);
      s_lo[x] = mistake == Mistake::StateAsBf16 ? 0.f : bf16(S[x] - s_hi[x]);
    }
    for (int i = 0; i < C; ++i)
      for (int j = 0; j < D; ++j) {
        float w = 0, o = 0;
        for (int d = 0; d < D; ++d) {
          w += Kd[i * D + d] * s_hi[d * D + j] + Kd[i * D + d] * s_lo[d * D + j];
          o += Qd[i * D + d] * s_hi[d * D + j] + Qd[i * D + d] * s_lo[d * D + j];
        }
        W[i * D + j] = w;
        Qs[i * D + j] = o;
      }
    // The UT transform as a forward substitution (fp32), then U as hi + lo bf16 terms.
    for (int i = 0; i < C; ++i)
      for (int j = 0; j < D; ++j) {
        float u = beta[i] * (v[i * D + j] - W[i * D + j]);
        for (int m = 0; m < i; ++m) u -= L[i * C + m] * U[m * D + j];
        U[i * D + j] = u;
      }
    std::vector<float> u_hi(C * D), u_lo(C * D);
    for (int x = 0; x < C * D; ++x) {
      u_hi[x] = bf16(U[x]);
      u_lo[x] = bf16(U[x] - u_hi[x]);
    }
    for (int i = 0; i < count; ++i)
      for (int j = 0; j < D; ++j) {
        float o = Qs[i * D + j];
        for (int m = 0; m <= i; ++m)
          o += Mhi[i * C + m] * u_hi[m * D + j] + Mhi[i * C + m] * u_lo[m * D + j] + Mlo[i * C + m] * u_hi[m * D + j];
        e.out[static_cast<std::size_t>(((t0 + i) * p.heads + h) * D + j)] = bf16(o);
      }
    for (int d = 0; d < D; ++d)
      for (int j = 0; j < D; ++j) {
        float s = dec[d] * S[d * D + j];
        for (int i = 0; i < C; ++i) s += Kr[i * D + d] * u_hi[i * D + j] + Kr[i * D + d] * u_lo[i * D + j];
        S[d * D + j] = s;
      }
  }
  for (int j = 0; j < D; ++j)
    for (int d = 0; d < D; ++d) e.state[static_cast<std::size_t>(((n * p.heads + h) * D + j) * D + d)] = S[d * D + j];
}

Emulation emulate(const KdaProblem& p, int chunk, Mistake mistake, bool lm_tensor_cores) {
  Emulation e;
  e.out.assign(static_cast<std::size_t>(p.total_tokens() * p.heads * D), 0.f);
  e.state.assign(static_cast<std::size_t>(p.sequences() * p.heads * D * D), 0.f);
  const I chains = p.sequences() * p.heads;
  tbb::parallel_for(tbb::blocked_range<I>(0, chains, 1), [&](const tbb::blocked_range<I>& r) {
    for (I c = r.begin(); c != r.end(); ++c)
      emulate_chain(p, c / p.heads, c % p.heads, chunk, mistake, lm_tensor_cores, e);
  });
  return e;
}

double rel_l2(const std::vector<float>& x, const HostTensor& ref) {
  double d = 0, n = 0;
  for (I i = 0; i < ref.numel(); ++i) {
    const double r = ref.get(i), y = x[static_cast<std::size_t>(i)];
    if (!std::isfinite(y)) return INFINITY;
    d += (y - r) * (y - r);
    n += r * r;
  }
  return n > 0 ? std::sqrt(d / n) : std::sqrt(d);
}

struct Errors {
  double out = 0, state = 0;
};

// The model against the op's reference on the op's fills of `s` under `cfg` and `dist`.
Errors errors(const Shape& s, const OpConfig& cfg, Distribution dist, std::uint64_t seed, int chunk, Mistake mistake,
              bool lm_tensor_cores = false) {
  const KdaFwdOp op;
  const auto descs = op.tensors(s, cfg);
  std::vector<HostTensor> ts;
  for (const auto& desc : descs) ts.emplace_back(desc.name, desc.dtype, desc.shape);
  ptxevo::evaluator::fill_inputs(op, descs, dist, seed, ts);
  std::vector<HostTensor> ref;
  op.reference(s, cfg, ts, ref);
  const auto c = KdaFwdOp::parse(cfg);
  const auto p = KdaFwdOp::problem(ptxevo::kernels::kda_dims(s), c, ts);
  const Emulation e = emulate(p, chunk, mistake, lm_tensor_cores);
  Errors r;
  r.out = rel_l2(e.out, ref.at(0));
  if (c.final_state) r.state = rel_l2(e.state, ref.at(1));
  return r;
}

ptxevo::evaluator::Spec load(const std::string& file) {
  const auto registry = ptxevo::kernels::builtin_ops();
  auto r = ptxevo::evaluator::load_spec(std::string(PTXEVO_SOURCE_DIR) + "/kernels/kda/" + file, registry);
  if (!r.spec) throw std::runtime_error(r.error->format());
  return *r.spec;
}

// Every correctness shape of every kernels/kda spec (options as the spec fixes them: both gates,
// states present or absent), the chunk sizes and input distributions taken in turn (every chunk
// size meets every spec; all three on every shape took two minutes of CI for little more); the op's
// fills put gate extremes (constant -8 / 0 / +8, wide random) on the heads of every shape.
TEST(KdaChunkedEmulation, MatchesTheRecurrentReferenceOnEverySpecShape) {
  double worst_out = 0, worst_state = 0;
  std::uint64_t seed = 11;
  for (const char* file : {"kda_fwd.spec", "kda_fwd_softplus.spec", "kda_fwd_state_in.spec", "kda_fwd_state_out.spec",
                           "kda_fwd_no_state.spec"}) {
    const auto spec = load(file);
    const auto& dists = ptxevo::evaluator::all_distributions();
    for (std::size_t i = 0; i < spec.correctness_shapes.size(); ++i) {
      const int chunk = 16 << ((i + seed) % 3);
      const Shape& s = spec.correctness_shapes[i];
      const Distribution dist = dists[(i / 3 + i) % dists.size()];
      const Errors e = errors(s, spec.config, dist, ++seed, chunk, Mistake::None);
      SCOPED_TRACE(std::string(file) + " " + ptxevo::evaluator::shape_to_string(s) + " C=" + std::to_string(chunk) +
                   " " + to_string(dist));
      EXPECT_LT(e.out, 5e-3);
      EXPECT_LT(e.state, 5e-3);
      if (e.out > 3.5e-3 || e.state > 3e-3)
        std::printf("  %s %s C=%d %s: out %.3g, final_state %.3g\n", file, ptxevo::evaluator::shape_to_string(s).c_str(),
                    chunk, to_string(dist), e.out, e.state);
      worst_out = std::max(worst_out, e.out);
      worst_state = std::max(worst_state, e.state);
    }
  }
  std::printf("chunked model vs fp64 recurrence, worst rel_l2: out %.3g, final_state %.3g\n", worst_out, worst_state);
}

// Long sequences over many chunks carry the state through every chunk size: the held-out shapes
// of the main spec (packed sets 9 and 10, batched rows, 3000 tokens x 8 heads) at C = 64 and 16.
TEST(KdaChunkedEmulation, HoldsOverLongSequences) {
  const auto spec = load("kda_fwd.spec");
  std::uint64_t seed = 101;
  for (int chunk : {16, 64})
    for (const auto& s : spec.heldout_shapes) {
      const Errors e = errors(s, spec.config, Distribution::Normal, ++seed, chunk, Mistake::None);
      SCOPED_TRACE(ptxevo::evaluator::shape_to_string(s) + " C=" + std::to_string(chunk));
      EXPECT_LT(e.out, 5e-3);
      EXPECT_LT(e.state, 5e-3);
    }
}

// The softplus gate is unbounded below: decays of hundreds of nats a token must give 0, never
// inf or NaN, at every chunk size.
TEST(KdaChunkedEmulation, SoftplusExtremesStayFinite) {
  const OpConfig cfg{{"gate", "softplus"}};
  const Shape s{{"B", 1}, {"T", 241}, {"H", 6}, {"N", 7}};  // six heads: every gate regime of the fill
  for (int chunk : {16, 32, 64})
    for (Distribution dist : ptxevo::evaluator::all_distributions()) {
      const Errors e = errors(s, cfg, dist, 7, chunk, Mistake::None);
      EXPECT_LT(e.out, 5e-3) << "C=" << chunk << " " << to_string(dist);
      EXPECT_LT(e.state, 5e-3) << "C=" << chunk << " " << to_string(dist);
    }
}

// LM_TENSOR_CORES: the factored tensor-core L and M of the lower-bound gate at C = 16, on every
// correctness and held-out shape of the specs with that gate, and at the gate's extreme
// (lower_bound = -5 with every decay at its bound: constant g = +8 heads in the fills).
TEST(KdaChunkedEmulation, FactoredTensorCoreLAndMMatchTheReference) {
  double worst_out = 0, worst_state = 0;
  std::uint64_t seed = 301;
  for (const char* file : {"kda_fwd.spec", "kda_fwd_state_in.spec", "kda_fwd_no_state.spec"}) {
    const auto spec = load(file);
    const auto& dists = ptxevo::evaluator::all_distributions();
    std::vector<Shape> shapes = spec.correctness_shapes;
    if (std::string(file) == "kda_fwd.spec") shapes.insert(shapes.end(), spec.heldout_shapes.begin(), spec.heldout_shapes.end());
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const Distribution dist = dists[i % dists.size()];
      const Errors e = errors(shapes[i], spec.config, dist, ++seed, 16, Mistake::None, true);
      SCOPED_TRACE(std::string(file) + " " + ptxevo::evaluator::shape_to_string(shapes[i]) + " " + to_string(dist));
      EXPECT_LT(e.out, 5e-3);
      EXPECT_LT(e.state, 5e-3);
      worst_out = std::max(worst_out, e.out);
      worst_state = std::max(worst_state, e.state);
    }
  }
  for (Distribution dist : ptxevo::evaluator::all_distributions()) {
    const Errors e = errors({{"B", 1}, {"T", 241}, {"H", 6}, {"N", 7}}, {{"lower_bound", "-5"}}, dist, 5, 16, Mistake::None,
                            true);
    EXPECT_LT(e.out, 5e-3) << to_string(dist);
    EXPECT_LT(e.state, 5e-3) << to_string(dist);
  }
  std::printf("factored tensor-core L and M (C = 16) vs fp64 recurrence, worst rel_l2: out %.3g, final_state %.3g\n",
              worst_out, worst_state);
}

// The model is sensitive to the blocking: an exclusive cumsum or unmasked padding rows fail the
// op's tolerance by far. Reading S or M as one bf16 term is allowed but costs accuracy (why the
// kernel splits both into hi + lo); the packed pairs of single tokens (N = 2) show M's cost most.
TEST(KdaChunkedEmulation, BlockingMistakesFailTheTolerance) {
  const KdaFwdOp op;
  const double tol = op.tolerance("out", {}).rel_l2;
  const Shape s{{"B", 1}, {"T", 241}, {"H", 4}, {"N", 7}};  // sequences of 1 ... 65 tokens: partial chunks
  for (int chunk : {16, 64}) {
    const Errors good = errors(s, {}, Distribution::Normal, 3, chunk, Mistake::None);
    const Errors excl = errors(s, {}, Distribution::Normal, 3, chunk, Mistake::ExclusiveCumsum);
    const Errors pad = errors(s, {}, Distribution::Normal, 3, chunk, Mistake::NoPartialMask);
    const Errors one = errors(s, {}, Distribution::Normal, 3, chunk, Mistake::StateAsBf16);
    std::printf("C=%d out/state rel_l2: model %.3g/%.3g, exclusive cumsum %.3g/%.3g, unmasked padding %.3g/%.3g, "
                "S as one bf16 %.3g/%.3g\n",
                chunk, good.out, good.state, excl.out, excl.state, pad.out, pad.state, one.out, one.state);
    EXPECT_LT(good.out, 5e-3);
    EXPECT_GT(excl.out, 5 * tol);
    EXPECT_GT(pad.state, 5 * tol);  // padding decays the carried state by the wrong amount
    EXPECT_GE(one.out, good.out);
  }
  double split = 0, single = 0;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    const Shape pairs{{"B", 1}, {"T", 2}, {"H", 4}, {"N", 2}};
    // No initial state: a single token's out is M_00 U_0 alone.
    const OpConfig cfg{{"initial_state", "false"}};
    split = std::max(split, errors(pairs, cfg, Distribution::SparseSpikes, seed, 16, Mistake::None).out);
    single = std::max(single, errors(pairs, cfg, Distribution::SparseSpikes, seed, 16, Mistake::MAsBf16).out);
  }
  std::printf("single-token pairs, worst out rel_l2 over 8 fills: M as hi + lo %.3g, M as one bf16 %.3g\n", split,
              single);
  EXPECT_LT(split, single);
}

}  // namespace
