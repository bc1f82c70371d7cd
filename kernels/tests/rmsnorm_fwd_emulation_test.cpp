// A CPU emulation of the RMSNorm forward seed's index mapping and fp32 arithmetic
// (kernels/rmsnorm/rmsnorm_fwd.cu), bf16 x / fp32 w: every column read once and the result within
// the op's tolerance of the fp64 reference, on several distributions and plans; two known-bad
// downgrades of its reduction fall outside it. The op itself: rmsnorm_fwd_op_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "evaluator/tensor.hpp"
#include "kernels/rmsnorm/rmsnorm_fwd_op.hpp"
#include "kernels/tests/rmsnorm_test_support.hpp"

namespace {

using namespace rmsnorm_test;


float bf16_round(float v) { return static_cast<float>(ptxevo::evaluator::bf16_to_double(ptxevo::evaluator::double_to_bf16(v))); }

struct Emulated {
  std::vector<double> out;           // bf16 values
  std::vector<double> residual_out;  // bf16 values (with a residual)
  std::vector<int> reads;            // per column of the last row: times the first pass read it
};

// Mirrors the kernel for the plan of N (RmsNormFwdOp::dispatch): the row is one run of units
// (vectors when N % VEC == 0, else elements) or, clustered, c slices of ceil(units / c); thread t
// of a CTA takes units t, t + tpr, ... of its run (register units first, then the rest: the same
// increasing order); per-thread fmaf partials of h = x (+ residual) in fp32, the shfl.sync.bfly
// butterfly over min(tpr, 32) lanes, the shared-memory step over tpr / 32 warps, the CTAs' sums
// added in rank order, then (h * r) * w (+ b) rounded to bf16.
Emulated emulate_seed(const std::vector<float>& x, const std::vector<float>* res, const std::vector<float>& w,
                      const std::vector<float>* b, std::int64_t m, std::int64_t n, const RmsNormFwdOp::Geometry& g,
                      float eps) {
  Emulated e;
  e.out.assign(static_cast<std::size_t>(m * n), 0);
  if (res) e.residual_out.assign(static_cast<std::size_t>(m * n), 0);
  const auto d = RmsNormFwdOp::dispatch(RmsNormFwdOp::Config{}, g, m, n);
  const std::int64_t tpr = d.tpr, c = d.cluster;
  const std::int64_t unit = n % g.vec == 0 ? g.vec : 1;
  const std::int64_t nu = n / unit, slice = (nu + c - 1) / c;
  std::vector<float> h(static_cast<std::size_t>(n));
  for (std::int64_t row = 0; row < m; ++row) {
    for (std::int64_t col = 0; col < n; ++col) {
      const auto i = static_cast<std::size_t>(row * n + col);
      h[static_cast<std::size_t>(col)] = x[i] + (res ? (*res)[i] : 0.f);
    }
    std::vector<int> reads(static_cast<std::size_t>(n), 0);
    float total = 0.f;
    for (std::int64_t rank = 0; rank < c; ++rank) {
      const std::int64_t u0 = std::min(nu, rank * slice), len = std::min(nu - u0, slice);
      std::vector<float> part(static_cast<std::size_t>(tpr), 0.f);
      for (std::int64_t t = 0; t < tpr; ++t) {
        float ss = 0.f;
        for (std::int64_t k = t; k < len; k += tpr)
          for (std::int64_t q = 0; q < unit; ++q) {
            const std::int64_t col = (u0 + k) * unit + q;
            ++reads[static_cast<std::size_t>(col)];
            ss = std::fma(h[static_cast<std::size_t>(col)], h[static_cast<std::size_t>(col)], ss);
          }
        part[static_cast<std::size_t>(t)] = ss;
      }
      // Butterfly within groups of min(tpr, 32) lanes (simultaneous exchange).
      const std::int64_t lanes = std::min<std::int64_t>(tpr, 32);
      for (std::int64_t o = lanes / 2; o > 0; o /= 2) {
        std::vector<float> next(part);
        for (std::int64_t t = 0; t < tpr; ++t) next[static_cast<std::size_t>(t)] += part[static_cast<std::size_t>(t ^ o)];
        part = next;
      }
      float cta = part[0];
      if (tpr > 32) {
        const std::int64_t wpr = tpr / 32;
        std::vector<float> red(static_cast<std::size_t>(wpr));
        for (std::int64_t wi = 0; wi < wpr; ++wi) red[static_cast<std::size_t>(wi)] = part[static_cast<std::size_t>(wi * 32)];
        for (std::int64_t o = wpr / 2; o > 0; o /= 2) {
          std::vector<float> next(red);
          for (std::int64_t l = 0; l < wpr; ++l) next[static_cast<std::size_t>(l)] += red[static_cast<std::size_t>(l ^ o)];
          red = next;
        }
        cta = red[0];
      }
      total += cta;  // cluster_sum: slots in rank order (c = 1: 0 + cta, bitwise cta)
    }
    const float r = 1.0f / std::sqrt(total / static_cast<float>(n) + eps);  // rsqrt.approx: ~2^-23 relative
    for (std::int64_t col = 0; col < n; ++col) {
      const auto i = static_cast<std::size_t>(row * n + col), j = static_cast<std::size_t>(col);
      float y = (h[j] * r) * w[j];
      if (b) y += (*b)[j];
      e.out[i] = bf16_round(y);
      if (res) e.residual_out[i] = bf16_round(h[j]);
    }
    e.reads = reads;
  }
  return e;
}

struct Errors {
  double rel_l2 = 0, max_abs = 0;
};
Errors errors(const std::vector<double>& out, const HostTensor& ref) {
  double num = 0, den = 0, maxd = 0, maxr = 0;
  for (std::int64_t i = 0; i < ref.numel(); ++i) {
    const double d = out[static_cast<std::size_t>(i)] - ref.get(i);
    num += d * d;
    den += ref.get(i) * ref.get(i);
    maxd = std::max(maxd, std::abs(d));
    maxr = std::max(maxr, std::abs(ref.get(i)));
  }
  return {std::sqrt(num / den), maxd / std::max(1.0, maxr)};
}

enum class Dist { Normal, SparseSpikes, LargeUniform };

// x in bf16 (as the gate draws it: normal, sparse spikes of +-100 on N(0, 1e-2), U(-1e3, 1e3)).
std::vector<float> draw_x(Dist d, std::int64_t count, std::mt19937_64& rng) {
  std::normal_distribution<double> nd(0, 1);
  std::uniform_real_distribution<double> ud(0, 1);
  std::vector<float> x(static_cast<std::size_t>(count));
  for (auto& v : x) {
    double s = nd(rng);
    if (d == Dist::SparseSpikes) s = ud(rng) < 1e-3 ? (ud(rng) < 0.5 ? -100 : 100) : 1e-2 * s;
    if (d == Dist::LargeUniform) s = -1e3 + 2e3 * ud(rng);
    v = bf16_round(static_cast<float>(s));
  }
  return x;
}

struct Problem {
  std::vector<float> x, residual, w, b;
  std::vector<HostTensor> refs;
};
// With `residual_bias`: a bf16 residual from the same distribution and an fp32 bias (the op's).
Problem problem(Dist d, std::int64_t m, std::int64_t n, std::uint64_t seed, bool residual_bias = false) {
  RmsNormFwdOp op;
  const OpConfig cfg = residual_bias ? kResidualBias : OpConfig{};
  std::mt19937_64 rng(seed);
  Problem p;
  std::vector<HostTensor> in;
  auto host = [&](const std::string& name, DType t, std::vector<std::int64_t> shp, const std::vector<float>& v) {
    HostTensor h(name, t, std::move(shp));
    for (std::int64_t i = 0; i < h.numel(); ++i) h.set(i, v[static_cast<std::size_t>(i)]);
    in.push_back(std::move(h));
  };
  p.x = draw_x(d, m * n, rng);
  host("x", DType::BF16, {m, n}, p.x);
  for (const auto& desc : op.tensors(shape(m, n), cfg)) {
    if (!desc.fixed_distribution) continue;
    HostTensor t(desc.name, desc.dtype, desc.shape);
    op.fill_fixed(desc, rng, t);
    auto& v = desc.name == "w" ? p.w : p.b;
    for (std::int64_t i = 0; i < n; ++i) v.push_back(static_cast<float>(t.get(i)));
    in.push_back(std::move(t));
  }
  if (residual_bias) {
    p.residual = draw_x(d, m * n, rng);
    host("residual", DType::BF16, {m, n}, p.residual);
  }
  op.reference(shape(m, n), cfg, in, p.refs);
  return p;
}

const std::vector<Knobs>& emulated_knob_sets() {
  static const std::vector<Knobs> k = {
      {},
      {{"THREADS", I{128}}, {"TPR", I{32}}, {"VEC", I{4}}, {"ITEMS", I{1}}, {"CLUSTER", I{1}}},
      {{"THREADS", I{512}}, {"ITEMS", I{8}}, {"CLUSTER", I{4}}},
      {{"THREADS", I{64}}, {"TPR", I{8}}, {"VEC", I{2}}, {"ITEMS", I{4}}},
      {{"THREADS", I{1024}}, {"VEC", I{8}}, {"ITEMS", I{1}}, {"CLUSTER", I{2}}},
      {{"SPREAD_CTAS", I{132}}},  // the decode specs' default: rows spread over threads and clusters
      {{"SPREAD_CTAS", I{528}}, {"THREADS", I{128}}, {"ITEMS", I{2}}, {"CLUSTER", I{16}}},
      {{"SPREAD_CTAS", I{132}}, {"ITEMS", I{2}}, {"WIDE_ROWS", I{128}}},  // M = 3, N = 8192: the wide entry
      {{"MIN_CLUSTER", I{16}}, {"CLUSTER", I{16}}},  // N = 40000, 70001: clusters of 8 and 16, short slices
      {{"SMALL_THREADS", I{128}}, {"SMALL_ITEMS", I{2}}, {"SMALL_MIN_ROWS", I{1}}},  // N <= 2048: small entries
  };
  return k;
}

TEST(RmsNormFwdSeedEmulation, ReadsEveryColumnOnceAndPassesTheTolerance) {
  const auto tol = RmsNormFwdOp().tolerance("out", {});
  const RmsNormFwdOp::Config cfg;
  for (const auto& k : emulated_knob_sets()) {
    const auto g = RmsNormFwdOp::geometry(cfg, k);
    for (const auto& [m, n] : std::vector<std::pair<I, I>>{
             {1, 1}, {3, 7}, {5, 1000}, {7, 4097}, {4, 4096}, {3, 8192}, {2, 40000}, {2, 70001}}) {
      SCOPED_TRACE("M=" + std::to_string(m) + " N=" + std::to_string(n) + " knobs " + knobs_text(k) + " entry " +
                   RmsNormFwdOp::dispatch(cfg, g, m, n).entry);
      for (Dist d : {Dist::Normal, Dist::SparseSpikes, Dist::LargeUniform}) {
        const Problem p = problem(d, m, n, static_cast<std::uint64_t>(m * 1000 + n));
        const Emulated e = emulate_seed(p.x, nullptr, p.w, nullptr, m, n, g, 1e-6f);
        for (I c = 0; c < n; ++c) ASSERT_EQ(e.reads[static_cast<std::size_t>(c)], 1) << "column " << c;
        const Errors err = errors(e.out, ref_named(p.refs, "out"));
        // One bf16 rounding costs ~1.7e-3 RMS (see RmsNormFwdOp::tolerance) and at most 2^-8 of an
        // element; the fp32 arithmetic adds ~0. A few elements may all sit near the worst case.
        EXPECT_LT(err.rel_l2, m * n >= 1000 ? 2e-3 : 0.0040);
        EXPECT_LT(err.max_abs, tol.max_abs / 2);
      }
    }
  }
}

// With a residual and a bias: out and residual_out (h rounded once) stay within their tolerances.
TEST(RmsNormFwdSeedEmulation, ResidualAndBiasPassTheTolerance) {
  RmsNormFwdOp op;
  const auto tol = op.tolerance("out", kResidualBias);
  const auto rtol = op.tolerance("residual_out", kResidualBias);
  const RmsNormFwdOp::Config cfg;
  for (const auto& k : emulated_knob_sets()) {
    const auto g = RmsNormFwdOp::geometry(cfg, k);
    for (const auto& [m, n] : std::vector<std::pair<I, I>>{{3, 7}, {7, 4097}, {4, 4096}, {2, 40000}}) {
      SCOPED_TRACE("M=" + std::to_string(m) + " N=" + std::to_string(n) + " knobs " + knobs_text(k));
      for (Dist d : {Dist::Normal, Dist::SparseSpikes, Dist::LargeUniform}) {
        const Problem p = problem(d, m, n, static_cast<std::uint64_t>(m * 7 + n), true);
        const Emulated e = emulate_seed(p.x, &p.residual, p.w, &p.b, m, n, g, 1e-6f);
        const Errors err = errors(e.out, ref_named(p.refs, "out"));
        EXPECT_LT(err.rel_l2, tol.rel_l2 / 2);
        EXPECT_LT(err.max_abs, tol.max_abs / 2);
        const Errors rerr = errors(e.residual_out, ref_named(p.refs, "residual_out"));
        EXPECT_LT(rerr.rel_l2, rtol.rel_l2 / 2);
        EXPECT_LT(rerr.max_abs, rtol.max_abs / 2);
      }
    }
  }
}

// The reasoning behind the bf16 tolerance: the two downgrades of known_bad/ land far outside it.
TEST(RmsNormFwdSeedEmulation, DowngradedReductionsFailTheTolerance) {
  const auto tol = RmsNormFwdOp().tolerance("out", {});
  const std::int64_t m = 16, n = 4096;
  // bf16_accumulation.cu: one running bf16 sum per row.
  {
    const Problem p = problem(Dist::Normal, m, n, 11);
    std::vector<double> out(static_cast<std::size_t>(m * n));
    for (std::int64_t row = 0; row < m; ++row) {
      float acc = 0;
      for (std::int64_t c = 0; c < n; ++c) {
        const float v = p.x[static_cast<std::size_t>(row * n + c)];
        acc = bf16_round(acc + bf16_round(v * v));
      }
      const float r = 1.0f / std::sqrt(acc / static_cast<float>(n) + 1e-6f);
      for (std::int64_t c = 0; c < n; ++c)
        out[static_cast<std::size_t>(row * n + c)] = bf16_round(p.x[static_cast<std::size_t>(row * n + c)] * r * p.w[static_cast<std::size_t>(c)]);
    }
    EXPECT_GT(errors(out, ref_named(p.refs, "out")).rel_l2, 10 * tol.rel_l2);
  }
  // subsampled_reduction.cu: even columns only, doubled; caught by the sparse spikes.
  {
    const Problem p = problem(Dist::SparseSpikes, m, n, 12);
    std::vector<double> out(static_cast<std::size_t>(m * n));
    for (std::int64_t row = 0; row < m; ++row) {
      double ss = 0;
      for (std::int64_t c = 0; c < n; c += 2) ss += double{p.x[static_cast<std::size_t>(row * n + c)]} * p.x[static_cast<std::size_t>(row * n + c)];
      const double r = 1.0 / std::sqrt(2 * ss / static_cast<double>(n) + 1e-6);
      for (std::int64_t c = 0; c < n; ++c)
        out[static_cast<std::size_t>(row * n + c)] = bf16_round(static_cast<float>(p.x[static_cast<std::size_t>(row * n + c)] * r * p.w[static_cast<std::size_t>(c)]));
    }
    EXPECT_GT(errors(out, ref_named(p.refs, "out")).rel_l2, 10 * tol.rel_l2);
  }
}

}  // namespace
