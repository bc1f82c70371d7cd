// The fp64 KDA references: the recurrent one against a hand-written matrix form of the update
// (S <- (I - b k k^T) Diag(e^a) S + b k v^T, an algebraically different order), the gate
// formulas at known points, the chunked algorithm against the recurrent one (chunk sizes that
// divide the sequences and ones that do not, both gates, extreme decays, with and without an
// initial state, K = V = 128 and small heads), the sequence split with state passing against the
// chunked algorithm, independence of packed sequences, and the problem checks.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "evaluator/tensor.hpp"
#include "kernels/kda/kda_reference.hpp"

namespace {

using ptxevo::evaluator::DType;
using ptxevo::evaluator::HostTensor;
using ptxevo::kernels::KdaGate;
using ptxevo::kernels::KdaProblem;
using I = std::int64_t;

// A problem with owned storage, drawn at random: q, k, v ~ N(0,1), beta logits ~ N(0, 2^2),
// g ~ U(g_lo, g_hi), dt_bias ~ U(-1, 1), A_log ~ U(-0.5, 1), initial state ~ N(0,1).
struct Owned {
  HostTensor q, k, v, g, beta, a_log, dt_bias, state;
  KdaProblem p;
};

Owned random_problem(I heads, I kd, I vd, std::vector<I> cu, KdaGate gate, bool with_state, std::uint64_t seed,
                     double g_lo = -3.0, double g_hi = 3.0) {
  Owned o;
  const I t = cu.back(), n = static_cast<I>(cu.size()) - 1;
  o.q = HostTensor("q", DType::BF16, {t, heads, kd});
  o.k = HostTensor("k", DType::BF16, {t, heads, kd});
  o.v = HostTensor("v", DType::BF16, {t, heads, vd});
  o.g = HostTensor("g", DType::BF16, {t, heads, kd});
  o.beta = HostTensor("beta", DType::BF16, {t, heads});
  o.a_log = HostTensor("A_log", DType::F32, {heads});
  o.dt_bias = HostTensor("dt_bias", DType::F32, {heads, kd});
  o.state = HostTensor("initial_state", DType::F32, {n, heads, vd, kd});
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (HostTensor* x : {&o.q, &o.k, &o.v, &o.state})
    for (I i = 0; i < x->numel(); ++i) x->set(i, nd(rng));
  for (I i = 0; i < o.g.numel(); ++i) o.g.set(i, g_lo + (g_hi - g_lo) * u(rng));
  for (I i = 0; i < o.beta.numel(); ++i) o.beta.set(i, 2.0 * nd(rng));
  for (I i = 0; i < o.a_log.numel(); ++i) o.a_log.set(i, -0.5 + 1.5 * u(rng));
  for (I i = 0; i < o.dt_bias.numel(); ++i) o.dt_bias.set(i, -1.0 + 2.0 * u(rng));
  o.p.heads = heads;
  o.p.k_dim = kd;
  o.p.v_dim = vd;
  o.p.cu_seqlens = std::move(cu);
  o.p.gate = gate;
  o.p.lower_bound = -5.0;
  o.p.scale = 1.0 / std::sqrt(static_cast<double>(kd));
  o.p.q = o.q.data.data();
  o.p.k = o.k.data.data();
  o.p.v = o.v.data.data();
  o.p.g = o.g.data.data();
  o.p.beta = o.beta.data.data();
  o.p.a_log = o.a_log.data.data();
  o.p.dt_bias = o.dt_bias.data.data();
  o.p.initial_state = with_state ? o.state.data.data() : nullptr;
  return o;
}

struct Result {
  std::vector<double> out, state;
};

// out [T, H, V] and state [N, H, V, K] for p.
Result sized_for(const KdaProblem& p) {
  return {std::vector<double>(static_cast<std::size_t>(p.total_tokens() * p.heads * p.v_dim)),
          std::vector<double>(static_cast<std::size_t>(p.sequences() * p.heads * p.v_dim * p.k_dim))};
}

Result run_recurrent(const KdaProblem& p) {
  Result r = sized_for(p);
  ptxevo::kernels::kda_recurrent_reference(p, r.out.data(), r.state.data());
  return r;
}

Result run_chunked(const KdaProblem& p, I chunk) {
  Result r = sized_for(p);
  ptxevo::kernels::kda_chunked_reference(p, chunk, r.out.data(), r.state.data());
  return r;
}

double rel_l2(const std::vector<double>& a, const std::vector<double>& ref) {
  double d = 0, n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    d += (a[i] - ref[i]) * (a[i] - ref[i]);
    n += ref[i] * ref[i];
  }
  return std::sqrt(d / n);
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(KdaReference, GateFormulasAtKnownPoints) {
  using ptxevo::kernels::kda_log_decay;
  EXPECT_DOUBLE_EQ(kda_log_decay(KdaGate::LowerBound, -5.0, 0.0, 0.0), -2.5);
  EXPECT_NEAR(kda_log_decay(KdaGate::LowerBound, -5.0, std::log(2.0), 1.5), -5.0 * sigmoid(3.0), 1e-15);
  EXPECT_NEAR(kda_log_decay(KdaGate::LowerBound, -5.0, 0.0, 1e4), -5.0, 1e-15);
  EXPECT_NEAR(kda_log_decay(KdaGate::LowerBound, -5.0, 0.0, -1e4), 0.0, 1e-15);
  EXPECT_NEAR(kda_log_decay(KdaGate::Softplus, 0, 0.0, 0.0), -std::log(2.0), 1e-15);
  EXPECT_NEAR(kda_log_decay(KdaGate::Softplus, 0, std::log(3.0), 1.0), -3.0 * std::log1p(std::exp(1.0)), 1e-14);
  EXPECT_NEAR(kda_log_decay(KdaGate::Softplus, 0, 0.0, 30.0), -30.0, 1e-12);  // above the threshold: x itself
  const double tiny = kda_log_decay(KdaGate::Softplus, 0, 0.0, -1e3);
  EXPECT_TRUE(tiny <= 0.0 && tiny > -1e-300);
}

// Two tokens, K = V = 2, with an initial state: the recurrence against the matrix form.
TEST(KdaReference, RecurrentMatchesTheMatrixFormByHand) {
  for (KdaGate gate : {KdaGate::LowerBound, KdaGate::Softplus}) {
    Owned o = random_problem(1, 2, 2, {0, 2}, gate, true, 7);
    const Result r = run_recurrent(o.p);
    // S[i][j] (key i, value j) from the V-first initial state.
    double S[2][2];
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) S[i][j] = o.state.get(j * 2 + i);
    for (I t = 0; t < 2; ++t) {
      double q[2], k[2], v[2], a[2];
      for (int i = 0; i < 2; ++i) {
        q[i] = o.q.get(t * 2 + i);
        k[i] = o.k.get(t * 2 + i);
        v[i] = o.v.get(t * 2 + i);
        const double x = o.g.get(t * 2 + i) + o.dt_bias.get(i);
        const double A = std::exp(o.a_log.get(0));
        a[i] = gate == KdaGate::LowerBound ? -5.0 * sigmoid(A * x) : -A * std::log1p(std::exp(x));
      }
      const double nq = std::sqrt(q[0] * q[0] + q[1] * q[1] + 1e-6), nk = std::sqrt(k[0] * k[0] + k[1] * k[1] + 1e-6);
      for (int i = 0; i < 2; ++i) {
        q[i] /= nq;
        k[i] /= nk;
      }
      const double b = sigmoid(o.beta.get(t));
      // (I - b k k^T) Diag(e^a) S + b k v^T
      double DS[2][2], N[2][2];
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) DS[i][j] = std::exp(a[i]) * S[i][j];
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
          double proj = DS[i][j];
          for (int m = 0; m < 2; ++m) proj -= b * k[i] * k[m] * DS[m][j];
          N[i][j] = proj + b * k[i] * v[j];
        }
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) S[i][j] = N[i][j];
      for (int j = 0; j < 2; ++j) {
        const double expect = o.p.scale * (q[0] * S[0][j] + q[1] * S[1][j]);
        EXPECT_NEAR(r.out[static_cast<std::size_t>(t * 2 + j)], expect, 1e-13) << "t=" << t << " j=" << j;
      }
    }
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) EXPECT_NEAR(r.state[static_cast<std::size_t>(j * 2 + i)], S[i][j], 1e-13);
  }
}

// The chunked algorithm equals the recurrence up to fp64 rounding.
void expect_chunked_matches(const Owned& o, I chunk, const std::string& what) {
  const Result a = run_recurrent(o.p), b = run_chunked(o.p, chunk);
  EXPECT_LT(rel_l2(b.out, a.out), 1e-11) << what << " chunk " << chunk;
  EXPECT_LT(rel_l2(b.state, a.state), 1e-11) << what << " chunk " << chunk;
}

TEST(KdaReference, ChunkedMatchesRecurrentOnSmallHeads) {
  const std::vector<I> cu = {0, 1, 17, 50, 114, 130};
  for (KdaGate gate : {KdaGate::LowerBound, KdaGate::Softplus})
    for (bool state : {false, true}) {
      const Owned o = random_problem(3, 16, 8, cu, gate, state, 11);
      for (I chunk : {1, 5, 16, 64}) expect_chunked_matches(o, chunk, std::string(gate == KdaGate::Softplus ? "softplus" : "lower_bound") + (state ? " with state" : ""));
    }
}

TEST(KdaReference, ChunkedMatchesRecurrentAtHeadDim128) {
  for (KdaGate gate : {KdaGate::LowerBound, KdaGate::Softplus}) {
    const Owned o = random_problem(2, 128, 128, {0, 65, 80}, gate, true, 13);
    for (I chunk : {16, 64}) expect_chunked_matches(o, chunk, "K = V = 128");
  }
}

// g = +-8 and beyond: decays from ~1 to e^-256 per token (softplus, exp(A_log) up to e); the
// chunked form must not overflow (it exponentiates only differences G_i - G_j, i >= j).
TEST(KdaReference, ChunkedSurvivesExtremeDecays) {
  for (KdaGate gate : {KdaGate::LowerBound, KdaGate::Softplus})
    for (auto [lo, hi] : std::vector<std::pair<double, double>>{{-8, -8}, {8, 8}, {-30, 30}, {60, 90}}) {
      const Owned o = random_problem(2, 16, 16, {0, 70, 133}, gate, true, 17, lo, hi);
      const Result a = run_recurrent(o.p), b = run_chunked(o.p, 64);
      for (double x : b.out) ASSERT_TRUE(std::isfinite(x));
      for (double x : b.state) ASSERT_TRUE(std::isfinite(x));
      expect_chunked_matches(o, 64, "g in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
}

// A packed sequence computes the same as alone: nothing leaks across cu_seqlens boundaries.
TEST(KdaReference, PackedSequencesAreIndependent) {
  const Owned packed = random_problem(2, 8, 8, {0, 5, 12}, KdaGate::LowerBound, true, 19);
  const Result all = run_recurrent(packed.p);
  KdaProblem second = packed.p;
  second.cu_seqlens = {0, 7};
  const I skip = 5 * 2;  // tokens of sequence 0, times heads
  second.q = packed.q.data.data() + skip * 8 * 2;
  second.k = packed.k.data.data() + skip * 8 * 2;
  second.v = packed.v.data.data() + skip * 8 * 2;
  second.g = packed.g.data.data() + skip * 8 * 2;
  second.beta = packed.beta.data.data() + skip * 2;
  second.initial_state = packed.state.data.data() + 2 * 8 * 8 * 4;  // sequence 1's states
  const Result alone = run_recurrent(second);
  for (std::size_t i = 0; i < alone.out.size(); ++i)
    EXPECT_EQ(alone.out[i], all.out[static_cast<std::size_t>(skip * 8) + i]) << i;
  for (std::size_t i = 0; i < alone.state.size(); ++i) EXPECT_EQ(alone.state[i], all.state[2 * 8 * 8 + i]) << i;
}

// Without an initial state the state starts at zero: the first token's output is
// scale * b * (q . k) v.
TEST(KdaReference, ZeroInitialStateFirstToken) {
  const Owned o = random_problem(1, 4, 4, {0, 1}, KdaGate::LowerBound, false, 23);
  const Result r = run_recurrent(o.p);
  const auto tok = ptxevo::kernels::kda_token(o.p, 0, 0);
  double qk = 0;
  for (int i = 0; i < 4; ++i) qk += tok.q[static_cast<std::size_t>(i)] * tok.k[static_cast<std::size_t>(i)];
  for (int j = 0; j < 4; ++j)
    EXPECT_NEAR(r.out[static_cast<std::size_t>(j)], o.p.scale * tok.beta * qk * tok.v[static_cast<std::size_t>(j)], 1e-14);
}

Result run_segmented(const KdaProblem& p, I chunk, I segments) {
  Result r = sized_for(p);
  ptxevo::kernels::kda_segmented_reference(p, chunk, segments, r.out.data(), r.state.data());
  return r;
}

// The sequence split with state passing (segments run on their own for their zero-state end
// states and their transitions, combined in order, then run again from their entering states)
// equals the chunked algorithm: one segment, segments of one chunk, a last segment short, more
// segments than chunks; packed sequences of 1 to 77 tokens (K != V: the transitions are K x K);
// both gates, with and without an initial state; and at K = V = 128 with decays near 1 (the
// transitions stay near the identity, the hardest case for a combination that drops them).
TEST(KdaReference, SegmentedMatchesChunked) {
  const std::vector<I> cu = {0, 1, 17, 50, 127, 130};
  for (KdaGate gate : {KdaGate::LowerBound, KdaGate::Softplus})
    for (bool state : {false, true}) {
      const Owned o = random_problem(2, 16, 8, cu, gate, state, 31);
      const std::string what = std::string(gate == KdaGate::Softplus ? "softplus" : "lower_bound") + (state ? " with state" : "");
      for (I chunk : {4, 16}) {
        const Result ref = run_chunked(o.p, chunk);
        for (I segments : {1, 2, 3, 7, 40}) {
          const Result seg = run_segmented(o.p, chunk, segments);
          EXPECT_LT(rel_l2(seg.out, ref.out), 1e-11) << what << " chunk " << chunk << " segments " << segments;
          EXPECT_LT(rel_l2(seg.state, ref.state), 1e-11) << what << " chunk " << chunk << " segments " << segments;
        }
      }
    }
  const Owned big = random_problem(1, 128, 128, {0, 100}, KdaGate::LowerBound, true, 37, -12, -10);
  const Result ref = run_chunked(big.p, 16), seg = run_segmented(big.p, 16, 3);
  EXPECT_LT(rel_l2(seg.out, ref.out), 1e-11);
  EXPECT_LT(rel_l2(seg.state, ref.state), 1e-11);
  EXPECT_THROW(run_segmented(big.p, 16, 0), std::invalid_argument);
}

TEST(KdaReference, BadProblemsThrowWithAReason) {
  Owned o = random_problem(1, 4, 4, {0, 3, 6}, KdaGate::LowerBound, false, 29);
  auto message = [](const KdaProblem& p) {
    try {
      run_recurrent(p);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  KdaProblem p = o.p;
  p.cu_seqlens = {0, 3, 3, 6};
  EXPECT_NE(message(p).find("strictly increasing"), std::string::npos) << message(p);
  p.cu_seqlens = {1, 6};
  EXPECT_NE(message(p).find("start at 0"), std::string::npos) << message(p);
  p = o.p;
  p.g = nullptr;
  EXPECT_NE(message(p).find("required"), std::string::npos);
  EXPECT_THROW(run_chunked(o.p, 0), std::invalid_argument);
}

}  // namespace
