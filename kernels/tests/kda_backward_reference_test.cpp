// The fp64 KDA backward reference against central finite differences of the fp64 forward, on
// tiny heads (every input element perturbed), both gates, packed sequences, with and without the
// initial and final states; the forward on widened inputs against kda_recurrent_reference; the
// checkpoint spacing; and the input checks.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "evaluator/tensor.hpp"
#include "kernels/kda/kda_backward_reference.hpp"

namespace {

using ptxevo::kernels::KdaGate;
using ptxevo::kernels::KdaGradients;
using ptxevo::kernels::KdaInputs;
using I = std::int64_t;

// q, k, v ~ N(0,1), g ~ N(0,1), beta logits ~ N(0,1.5^2), A_log ~ U(-1, 0.5), dt_bias ~ N(0, 0.5^2),
// initial state ~ N(0, 0.5^2).
KdaInputs random_inputs(I heads, I kd, I vd, std::vector<I> cu, KdaGate gate, bool with_state, std::uint64_t seed) {
  KdaInputs in;
  in.heads = heads;
  in.k_dim = kd;
  in.v_dim = vd;
  in.cu_seqlens = std::move(cu);
  in.gate = gate;
  in.lower_bound = -5.0;
  in.scale = 1.0 / std::sqrt(static_cast<double>(kd));
  const auto t = static_cast<std::size_t>(in.total_tokens()), h = static_cast<std::size_t>(heads);
  const auto k = static_cast<std::size_t>(kd), v = static_cast<std::size_t>(vd);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  auto normal = [&](std::size_t n, double sd) {
    std::vector<double> x(n);
    for (auto& e : x) e = sd * nd(rng);
    return x;
  };
  in.q = normal(t * h * k, 1.0);
  in.k = normal(t * h * k, 1.0);
  in.v = normal(t * h * v, 1.0);
  in.g = normal(t * h * k, 1.0);
  in.beta = normal(t * h, 1.5);
  in.a_log.resize(h);
  for (auto& e : in.a_log) e = -1.0 + 1.5 * u(rng);
  in.dt_bias = normal(h * k, 0.5);
  if (with_state) in.initial_state = normal(static_cast<std::size_t>(in.sequences()) * h * v * k, 0.5);
  return in;
}

// L = <dout, out> + <dfinal, final state>: its gradient is what kda_backward returns.
double loss(const KdaInputs& in, const std::vector<double>& dout, const std::vector<double>* dfinal) {
  std::vector<double> out(dout.size()), fin(static_cast<std::size_t>(in.sequences() * in.heads * in.v_dim * in.k_dim));
  ptxevo::kernels::kda_forward(in, out.data(), fin.data());
  double l = 0;
  for (std::size_t i = 0; i < out.size(); ++i) l += dout[i] * out[i];
  if (dfinal)
    for (std::size_t i = 0; i < fin.size(); ++i) l += (*dfinal)[i] * fin[i];
  return l;
}

// Every element of every input against a central difference; returns the largest error seen.
double check_against_finite_differences(KdaInputs in, bool final_grad, std::int64_t checkpoint, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<double> dout(static_cast<std::size_t>(in.total_tokens() * in.heads * in.v_dim));
  for (auto& e : dout) e = nd(rng);
  std::vector<double> dfinal(static_cast<std::size_t>(in.sequences() * in.heads * in.v_dim * in.k_dim));
  for (auto& e : dfinal) e = nd(rng);
  const std::vector<double>* df = final_grad ? &dfinal : nullptr;
  const KdaGradients gr = ptxevo::kernels::kda_backward(in, dout.data(), final_grad ? dfinal.data() : nullptr, checkpoint);
  double worst = 0;
  auto check = [&](std::vector<double>& x, const std::vector<double>& analytic, const char* name) {
    ASSERT_EQ(x.size(), analytic.size()) << name;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double saved = x[i], h = 1e-6 * std::max(1.0, std::abs(saved));
      x[i] = saved + h;
      const double up = loss(in, dout, df);
      x[i] = saved - h;
      const double down = loss(in, dout, df);
      x[i] = saved;
      const double numeric = (up - down) / (2 * h);
      const double err = std::abs(analytic[i] - numeric) / (1.0 + std::abs(numeric));
      worst = std::max(worst, err);
      EXPECT_LT(err, 1e-6) << name << "[" << i << "]: analytic " << analytic[i] << ", finite differences " << numeric;
    }
  };
  check(in.q, gr.dq, "q");
  check(in.k, gr.dk, "k");
  check(in.v, gr.dv, "v");
  check(in.g, gr.dg, "g");
  check(in.beta, gr.dbeta, "beta");
  check(in.a_log, gr.da_log, "A_log");
  check(in.dt_bias, gr.ddt_bias, "dt_bias");
  if (!in.initial_state.empty()) check(in.initial_state, gr.dinitial_state, "initial_state");
  return worst;
}

TEST(KdaBackwardReference, LowerBoundGateMatchesFiniteDifferences) {
  // Two packed sequences (3 and 5 tokens), checkpoints every 2 tokens: segments recomputed.
  const auto in = random_inputs(2, 4, 3, {0, 3, 8}, KdaGate::LowerBound, true, 11);
  std::printf("worst relative error %.2e\n", check_against_finite_differences(in, true, 2, 12));
}

TEST(KdaBackwardReference, SoftplusGateMatchesFiniteDifferencesAboveAndBelowItsThreshold) {
  auto in = random_inputs(2, 4, 3, {0, 4, 6, 9}, KdaGate::Softplus, false, 21);
  // Some channels past softplus's threshold (x = g + dt_bias > 20: softplus(x) = x there).
  for (std::size_t i = 0; i < in.g.size(); i += 7) in.g[i] = 24.0;
  std::printf("worst relative error %.2e\n", check_against_finite_differences(in, false, 64, 22));
}

TEST(KdaBackwardReference, StatesOnlyMatchFiniteDifferences) {
  // No output gradient on the last sequence's tokens: what reaches its inputs comes through the
  // final state alone.
  auto in = random_inputs(1, 3, 2, {0, 6}, KdaGate::LowerBound, true, 31);
  std::printf("worst relative error %.2e\n", check_against_finite_differences(in, true, 4, 32));
  std::vector<double> dout(static_cast<std::size_t>(6 * 2), 0.0), dfinal(6, 1.0);
  const auto gr = ptxevo::kernels::kda_backward(in, dout.data(), dfinal.data(), 4);
  double sum = 0;
  for (double x : gr.dv) sum += std::abs(x);
  EXPECT_GT(sum, 0) << "the final state's gradient does not reach v";
  const auto none = ptxevo::kernels::kda_backward(in, dout.data(), nullptr, 4);
  for (double x : none.dv) EXPECT_EQ(x, 0.0);
}

TEST(KdaBackwardReference, CheckpointSpacingChangesNothingButRounding) {
  const auto in = random_inputs(3, 8, 8, {0, 17, 40}, KdaGate::LowerBound, true, 41);
  std::vector<double> dout(static_cast<std::size_t>(40 * 3 * 8)), dfinal(static_cast<std::size_t>(2 * 3 * 8 * 8));
  std::mt19937_64 rng(42);
  std::normal_distribution<double> nd(0.0, 1.0);
  for (auto& e : dout) e = nd(rng);
  for (auto& e : dfinal) e = nd(rng);
  const auto a = ptxevo::kernels::kda_backward(in, dout.data(), dfinal.data(), 1);
  const auto b = ptxevo::kernels::kda_backward(in, dout.data(), dfinal.data(), 5);
  const auto c = ptxevo::kernels::kda_backward(in, dout.data(), dfinal.data(), 1000);
  auto same = [](const std::vector<double>& x, const std::vector<double>& y, const char* name) {
    ASSERT_EQ(x.size(), y.size());
    for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-12 * (1 + std::abs(x[i]))) << name << "[" << i << "]";
  };
  for (const auto* other : {&b, &c}) {
    same(a.dq, other->dq, "dq");
    same(a.dk, other->dk, "dk");
    same(a.dv, other->dv, "dv");
    same(a.dg, other->dg, "dg");
    same(a.dbeta, other->dbeta, "dbeta");
    same(a.da_log, other->da_log, "dA_log");
    same(a.ddt_bias, other->ddt_bias, "ddt_bias");
    same(a.dinitial_state, other->dinitial_state, "dinitial_state");
  }
}

TEST(KdaBackwardReference, ForwardOnWidenedInputsIsTheRecurrentReference) {
  using ptxevo::evaluator::DType;
  using ptxevo::evaluator::HostTensor;
  const I heads = 2, kd = 16, vd = 8;
  const std::vector<I> cu = {0, 5, 12};
  for (const auto gate : {KdaGate::LowerBound, KdaGate::Softplus}) {
    const auto src = random_inputs(heads, kd, vd, cu, gate, true, 51);
    // Round to the engine's dtypes, then widen again.
    HostTensor q("q", DType::BF16, {12, heads, kd}), k("k", DType::BF16, {12, heads, kd}), g("g", DType::BF16, {12, heads, kd}),
        v("v", DType::BF16, {12, heads, vd}), beta("beta", DType::BF16, {12, heads}), a_log("A_log", DType::F32, {heads}),
        dt("dt_bias", DType::F32, {heads, kd}), st("initial_state", DType::F32, {2, heads, vd, kd});
    auto fill = [](HostTensor& t, const std::vector<double>& x) {
      for (I i = 0; i < t.numel(); ++i) t.set(i, x[static_cast<std::size_t>(i)]);
    };
    fill(q, src.q);
    fill(k, src.k);
    fill(g, src.g);
    fill(v, src.v);
    fill(beta, src.beta);
    fill(a_log, src.a_log);
    fill(dt, src.dt_bias);
    fill(st, src.initial_state);
    ptxevo::kernels::KdaProblem p;
    p.heads = heads;
    p.k_dim = kd;
    p.v_dim = vd;
    p.cu_seqlens = cu;
    p.gate = gate;
    p.lower_bound = src.lower_bound;
    p.scale = src.scale;
    p.q = q.data.data();
    p.k = k.data.data();
    p.g = g.data.data();
    p.v = v.data.data();
    p.beta = beta.data.data();
    p.a_log = a_log.data.data();
    p.dt_bias = dt.data.data();
    p.initial_state = st.data.data();
    std::vector<double> out_ref(12 * heads * vd), fin_ref(2 * heads * vd * kd), out(out_ref.size()), fin(fin_ref.size());
    ptxevo::kernels::kda_recurrent_reference(p, out_ref.data(), fin_ref.data());
    ptxevo::kernels::kda_forward(ptxevo::kernels::kda_inputs(p), out.data(), fin.data());
    EXPECT_EQ(out, out_ref);
    EXPECT_EQ(fin, fin_ref);
  }
}

// The chunked algorithm against the token-serial one: chunk sizes that divide the sequences and
// ones that do not, a chunk longer than every sequence, one token per chunk, both gates (the
// softplus one with strong decays), with and without states.
TEST(KdaBackwardReference, ChunkedAlgorithmMatchesTheRecurrentOne) {
  double worst = 0;
  for (const auto gate : {KdaGate::LowerBound, KdaGate::Softplus})
    for (const bool states : {true, false}) {
      auto in = random_inputs(2, 8, 6, {0, 7, 16, 33}, gate, states, 71);
      if (gate == KdaGate::Softplus)
        for (std::size_t i = 0; i < in.g.size(); i += 5) in.g[i] = 4.0;  // decays of several nats a token
      std::vector<double> dout(static_cast<std::size_t>(33 * 2 * 6)), dfinal(static_cast<std::size_t>(3 * 2 * 6 * 8));
      std::mt19937_64 rng(72);
      std::normal_distribution<double> nd(0.0, 1.0);
      for (auto& e : dout) e = nd(rng);
      for (auto& e : dfinal) e = nd(rng);
      const auto ref = ptxevo::kernels::kda_backward(in, dout.data(), states ? dfinal.data() : nullptr, 3);
      for (const I chunk : {1, 4, 8, 16, 64}) {
        SCOPED_TRACE("chunk " + std::to_string(chunk) + (gate == KdaGate::Softplus ? " softplus" : " lower bound") +
                     (states ? " with states" : ""));
        const auto got = ptxevo::kernels::kda_chunked_backward(in, dout.data(), states ? dfinal.data() : nullptr, chunk);
        auto close = [&worst](const std::vector<double>& x, const std::vector<double>& y, const char* name) {
          ASSERT_EQ(x.size(), y.size()) << name;
          double num = 0, den = 0;
          for (std::size_t i = 0; i < x.size(); ++i) {
            num += (x[i] - y[i]) * (x[i] - y[i]);
            den += y[i] * y[i];
          }
          const double rel = std::sqrt(num / std::max(den, 1e-300));
          worst = std::max(worst, rel);
          EXPECT_LT(rel, 1e-11) << name;
        };
        close(got.dq, ref.dq, "dq");
        close(got.dk, ref.dk, "dk");
        close(got.dv, ref.dv, "dv");
        close(got.dg, ref.dg, "dg");
        close(got.dbeta, ref.dbeta, "dbeta");
        close(got.da_log, ref.da_log, "dA_log");
        close(got.ddt_bias, ref.ddt_bias, "ddt_bias");
        if (states) close(got.dinitial_state, ref.dinitial_state, "dinitial_state");
      }
    }
  std::printf("worst relative L2 difference %.2e\n", worst);
}

TEST(KdaBackwardReference, BadInputsAreRefusedWithTheirName) {
  auto in = random_inputs(1, 4, 4, {0, 3}, KdaGate::LowerBound, false, 61);
  std::vector<double> dout(12, 1.0);
  EXPECT_THROW(ptxevo::kernels::kda_backward(in, dout.data(), nullptr, 0), std::invalid_argument);
  EXPECT_THROW(ptxevo::kernels::kda_backward(in, nullptr, nullptr, 4), std::invalid_argument);
  EXPECT_THROW(ptxevo::kernels::kda_chunked_backward(in, dout.data(), nullptr, 0), std::invalid_argument);
  in.dt_bias.pop_back();
  try {
    ptxevo::kernels::kda_backward(in, dout.data(), nullptr, 4);
    FAIL() << "a short dt_bias was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("dt_bias"), std::string::npos) << e.what();
  }
}

}  // namespace
