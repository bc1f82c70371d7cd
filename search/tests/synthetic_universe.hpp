// TEST FIXTURE ONLY: SYNTHETIC timings for a universe of real builds, so the prior study can be
// developed and tested before a GPU has measured the universe. Nothing here was measured; the
// universe it returns says so (synthetic = true) and every study table built on it is marked.
// Never write it where the shipped data lives (data/universes/).
//
// The model, per (candidate, benchmark shape): time = roofline x exp(inefficiency), where the
// inefficiency is what a kernel engineer would guess for RMSNorm forward: half the analytic
// occupancy / wave-tail term of cost_features, idle lanes when a row gets more threads than it
// has vectors, re-reads when a long row overflows its cluster's registers (CLUSTER 1 worst),
// narrow vectors at large N, streaming stores helping only at large N, spills, PTX edits (cache
// hints and streaming stores help where the data outgrows L2); plus a
// candidate-level and a per-shape idiosyncrasy from a hash of the genome (what no feature
// explains). Speedup = baseline time / time, with a 95% CI of +-0.4% (+-1% below N = 2048).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "evaluator/spec.hpp"
#include "search/cost_features.hpp"
#include "search/universe.hpp"

namespace ptxevo::search::testing {

// A standard normal from a string (deterministic across platforms: no <random> distribution).
inline double hash_normal(const std::string& key) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : key) h = (h ^ ch) * 1099511628211ULL;
  auto unit = [&h] {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (static_cast<double>(h >> 11) + 0.5) / 9007199254740992.0;
  };
  const double u1 = unit(), u2 = unit();
  return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

inline double synthetic_log_inefficiency(const evaluator::Op& op, const evaluator::OpConfig& cfg,
                                         const evaluator::Shape& shape, const UniverseMember& m) {
  const FeatureLayout none;
  const FeatureRow f = cost_features(none, op, cfg, shape, m.genome, m.resources, m.ptx_profile);
  auto knob = [&](const char* n) { return static_cast<double>(evaluator::knob_int(m.genome.knobs, n, 0)); };
  const double N = static_cast<double>(shape.at("N"));
  const double vec = knob("VEC"), threads = knob("THREADS"), tpr = knob("TPR"), items = knob("ITEMS");
  const double cluster = knob("CLUSTER");
  const double need = std::ceil(N / (items * vec));
  double x = 0.5 * f.analytic_log_time;
  if (need <= threads) {
    const double t = std::max(tpr, std::exp2(std::ceil(std::log2(std::max(1.0, need)))));
    x += 0.06 * std::log2(std::max(1.0, t / need));  // lanes without a vector to load
  } else {
    const double c = std::min(cluster, std::exp2(std::ceil(std::log2(need / threads))));
    const double held = c * threads;
    if (cluster <= 1) x += 0.30;                     // one CTA per row, the rest re-read
    else if (held < need) x += 0.15 * (1 - held / need);
    x += 0.02 * std::log2(c);                        // cluster synchronisation
  }
  if (vec < 8 && N >= 8192) x += 0.03;
  if (knob("STORE_HINT") > 0) x += N >= 65536 ? -0.02 : 0.01;
  // PTX edits: cache hints and streaming stores pay off where the data no longer fits in L2.
  for (const auto& e : m.genome.edits) {
    if (e.pass == "l2_evict_hint") x += N >= 16384 ? -0.012 : -0.004;
    if (e.pass == "store_streaming") x += N >= 65536 ? -0.006 : (N < 4096 ? 0.003 : 0.0);
    if (e.pass == "fast_math") x -= 0.003;
    if (e.pass == "hoist_global_loads") x += N >= 32768 ? -0.004 : 0.002;
  }
  std::int64_t spills = 0;
  for (const auto& r : m.resources) spills += r.spill_stores;
  x += 0.002 * std::sqrt(static_cast<double>(spills));
  x += 0.015 * hash_normal(m.genome_hash) + 0.008 * hash_normal(m.genome_hash + evaluator::shape_to_string(shape));
  return x;
}

// `builds`: a universe of real builds (no timings). Every buildable member "passes" except a
// few by hash (a gate failure); the baseline (seed defaults) must be a buildable member.
inline Universe synthetic_universe(Universe builds, const evaluator::Spec& spec, const evaluator::Op& op) {
  Universe u = std::move(builds);
  u.synthetic = true;
  u.note = "SYNTHETIC timings from search/tests/synthetic_universe.hpp (a test fixture); nothing was measured";
  u.gpu = "synthetic";
  const auto defaults = evaluator::default_knobs(restrict_seed(spec.seeds.front(), u.grid));
  const UniverseMember* base = nullptr;
  for (const auto& m : u.members)
    if (m.genome.knobs == defaults && m.genome.edits.empty() && m.build == "ok") base = &m;
  if (!base) return u;
  std::vector<double> base_x;
  for (const auto& s : u.benchmark_shapes) base_x.push_back(synthetic_log_inefficiency(op, spec.config, s, *base));
  const UniverseMember base_copy = *base;
  for (auto& m : u.members) {
    m.shapes.clear();
    m.fitness.reset();
    if (m.build != "ok") {
      m.verdict = "unmeasured";
      continue;
    }
    if (hash_normal(m.genome_hash + "gate") > 2.0 && !(m.genome == base_copy.genome)) {  // about 2%
      m.verdict = "fail";
      m.reasons = {"tolerance: synthetic gate failure"};
      continue;
    }
    m.verdict = "pass";
    m.reasons.clear();
    double log_fit = 0;
    for (std::size_t j = 0; j < u.benchmark_shapes.size(); ++j) {
      const auto& sh = u.benchmark_shapes[j];
      const double roofline_ms = op.bytes(sh, spec.config) / GpuLimits{}.bandwidth_bytes_per_s * 1e3;
      const double x = synthetic_log_inefficiency(op, spec.config, sh, m);
      UniverseShape s;
      s.shape = sh;
      s.candidate_ms = roofline_ms * std::exp(x);
      s.baseline_ms = roofline_ms * std::exp(base_x[j]);
      s.speedup = std::exp(base_x[j] - x);
      const double half = sh.at("N") < 2048 ? 0.01 : 0.004;
      s.speedup_low = s.speedup * (1 - half);
      s.speedup_high = s.speedup * (1 + half);
      s.candidate_low = s.candidate_ms * (1 - half);
      s.candidate_high = s.candidate_ms * (1 + half);
      s.samples = 10;
      s.fraction_of_floor = roofline_ms / s.candidate_ms;
      log_fit += std::log(s.speedup);
      m.shapes.push_back(s);
    }
    m.fitness = std::exp(log_fit / static_cast<double>(u.benchmark_shapes.size()));
  }
  return u;
}

}  // namespace ptxevo::search::testing
