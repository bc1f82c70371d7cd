// The KDA forward's device reference kernel (kernels/kda/kda_device_reference.cuh) run on the CPU:
// compiled as host C++ on the CUDA machine of kda_host_emulation.hpp (each thread a coroutine,
// barriers and shuffles between them, threads resumed in random order), every CTA of its plan
// launched with the plan's grid and arguments, against kda_recurrent_reference on batched and
// packed shapes, both gates, with and without states. fp64 both sides: they agree to rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <variant>
#include <vector>

#include "kernels/tests/kda_host_emulation.hpp"

#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wshadow"

namespace kda_host {
// shfl.sync.bfly of a double: both 32-bit halves through the float exchange, bits untouched.
inline double shfl_bfly_f64(double v, int lane_mask) {
  unsigned int w[2];
  std::memcpy(w, &v, 8);
  for (unsigned int& x : w) x = float_as_uint(shfl_bfly(uint_as_float(x), lane_mask));
  double r;
  std::memcpy(&r, w, 8);
  return r;
}
}  // namespace kda_host

// One CTA runs at a time, so a function-local static is the CTA's shared memory.
#undef __shared__
#define __shared__ static
#define __shfl_xor_sync(mask, v, o) ::kda_host::shfl_bfly_f64((v), (o))
#define KDA_REF_ENTRY inline

namespace lower_bound_gate {
#define KDA_GATE_SOFTPLUS 0
#define KDA_LOWER_BOUND (-5.0)
#define KDA_SCALE (0.08838834764831845)
#include "kernels/kda/kda_device_reference.cuh"
#undef KDA_GATE_SOFTPLUS
#undef KDA_LOWER_BOUND
#undef KDA_SCALE
}  // namespace lower_bound_gate

namespace softplus_gate {
#define KDA_GATE_SOFTPLUS 1
#define KDA_LOWER_BOUND (-5.0)
#define KDA_SCALE (0.125)
#include "kernels/kda/kda_device_reference.cuh"
#undef KDA_GATE_SOFTPLUS
#undef KDA_LOWER_BOUND
#undef KDA_SCALE
}  // namespace softplus_gate

#include "evaluator/tensor.hpp"
#include "kernels/kda/kda_device_reference.hpp"
#include "kernels/kda/kda_reference.hpp"

namespace {

using ptxevo::evaluator::DType;
using ptxevo::evaluator::HostTensor;
using ptxevo::kernels::KdaGate;
using I = std::int64_t;
constexpr I D = 128;

struct Case {
  I batch, tokens, heads;
  std::vector<I> cu_seqlens;  // packed when it has more than two entries or batch is 1
  bool packed;
};

void run(const Case& c, KdaGate gate, bool initial, bool final_state, std::uint64_t seed) {
  const I t_total = c.cu_seqlens.back(), n = static_cast<I>(c.cu_seqlens.size()) - 1, h = c.heads;
  HostTensor q("q", DType::BF16, {t_total, h, D}), k("k", DType::BF16, {t_total, h, D}),
      v("v", DType::BF16, {t_total, h, D}), g("g", DType::BF16, {t_total, h, D}), beta("beta", DType::BF16, {t_total, h}),
      a_log("A_log", DType::F32, {h}), dt("dt_bias", DType::F32, {h, D}), st("initial_state", DType::F32, {n, h, D, D});
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  for (HostTensor* x : {&q, &k, &v, &st})
    for (I i = 0; i < x->numel(); ++i) x->set(i, nd(rng));
  for (I i = 0; i < g.numel(); ++i) g.set(i, 2.0 * nd(rng));
  for (I i = 0; i < beta.numel(); ++i) beta.set(i, 2.0 * nd(rng));
  for (I i = 0; i < a_log.numel(); ++i) a_log.set(i, -0.5 + 0.3 * nd(rng));
  for (I i = 0; i < dt.numel(); ++i) dt.set(i, 0.5 * nd(rng));
  const bool softplus = gate == KdaGate::Softplus;
  ptxevo::kernels::KdaProblem p;
  p.heads = h;
  p.k_dim = D;
  p.v_dim = D;
  p.cu_seqlens = c.cu_seqlens;
  p.gate = gate;
  p.lower_bound = -5.0;
  p.scale = softplus ? 0.125 : 0.08838834764831845;
  p.q = q.data.data();
  p.k = k.data.data();
  p.v = v.data.data();
  p.g = g.data.data();
  p.beta = beta.data.data();
  p.a_log = a_log.data.data();
  p.dt_bias = dt.data.data();
  p.initial_state = initial ? st.data.data() : nullptr;
  std::vector<double> out_ref(static_cast<std::size_t>(t_total * h * D)), fin_ref(static_cast<std::size_t>(n * h * D * D));
  ptxevo::kernels::kda_recurrent_reference(p, out_ref.data(), fin_ref.data());

  // The plan the op gives, run CTA by CTA; NaN-poisoned outputs, so an unwritten element fails.
  ptxevo::kernels::KdaDims dims;
  dims.batch = c.batch;
  dims.tokens = c.tokens;
  dims.heads = h;
  dims.sequences = n;
  dims.packed = c.packed;
  dims.cu_seqlens = c.cu_seqlens;
  ptxevo::kernels::KdaRefConfig rc;
  rc.softplus_gate = softplus;
  rc.lower_bound = p.lower_bound;
  rc.scale = p.scale;
  rc.initial_state = initial;
  rc.final_state = final_state;
  const auto plan = ptxevo::kernels::kda_fwd_device_reference_plan(rc, dims);
  ASSERT_EQ(plan.plan.kernels.size(), 1u);
  const auto& l = plan.plan.kernels[0];
  ASSERT_EQ(l.block.x, static_cast<unsigned>(D));
  std::vector<double> out(out_ref.size(), std::nan("")), fin(fin_ref.size(), std::nan(""));
  const auto* cu = c.packed ? c.cu_seqlens.data() : nullptr;
  const auto u16 = [](const HostTensor& t) { return reinterpret_cast<const unsigned short*>(t.data.data()); };
  const auto f32 = [](const HostTensor& t) { return reinterpret_cast<const float*>(t.data.data()); };
  ASSERT_EQ(std::get<std::int64_t>(l.args[11]), c.tokens);
  for (unsigned x = 0; x < l.grid.x; ++x)
    for (unsigned y = 0; y < l.grid.y; ++y)
      for (unsigned z = 0; z < l.grid.z; ++z) {
        kda_host::run_cta(static_cast<int>(l.block.x), {x, y, z}, 0, [&] {
          const auto* init = initial ? f32(st) : nullptr;
          double* fo = final_state ? fin.data() : nullptr;
          if (softplus)
            softplus_gate::ptxevo_ref_kda_fwd(u16(q), u16(k), u16(v), u16(g), u16(beta), f32(a_log), f32(dt),
                                              reinterpret_cast<const long long*>(cu), init, out.data(), fo, c.tokens,
                                              static_cast<int>(h));
          else
            lower_bound_gate::ptxevo_ref_kda_fwd(u16(q), u16(k), u16(v), u16(g), u16(beta), f32(a_log), f32(dt),
                                                 reinterpret_cast<const long long*>(cu), init, out.data(), fo, c.tokens,
                                                 static_cast<int>(h));
        });
        ASSERT_EQ(kda_host::g_cta.fault, "") << "CTA " << x << "," << y << "," << z;
      }
  double worst = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    ASSERT_TRUE(std::isfinite(out[i])) << "out[" << i << "] unwritten";
    worst = std::max(worst, std::abs(out[i] - out_ref[i]) / (1.0 + std::abs(out_ref[i])));
  }
  if (final_state)
    for (std::size_t i = 0; i < fin.size(); ++i) {
      ASSERT_TRUE(std::isfinite(fin[i])) << "final_state[" << i << "] unwritten";
      worst = std::max(worst, std::abs(fin[i] - fin_ref[i]) / (1.0 + std::abs(fin_ref[i])));
    }
  EXPECT_LT(worst, 1e-12);
}

TEST(KdaDeviceReferenceOnHost, BatchedRowsLowerBoundGateBothStates) {
  run({2, 3, 1, {0, 3, 6}, false}, KdaGate::LowerBound, true, true, 1);
}

TEST(KdaDeviceReferenceOnHost, PackedSequencesSoftplusGateNoInitialState) {
  run({1, 5, 2, {0, 1, 3, 5}, true}, KdaGate::Softplus, false, true, 2);
}

TEST(KdaDeviceReferenceOnHost, NoFinalState) { run({1, 3, 1, {0, 3}, false}, KdaGate::LowerBound, true, false, 3); }

}  // namespace
