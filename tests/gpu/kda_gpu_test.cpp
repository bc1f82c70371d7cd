// The kda_fwd seeds on a real GPU: the correctness gate (fp64 recurrent reference, every input
// distribution, the op's gate regimes, poison, determinism) on every shape of every
// kernels/kda/kda_fwd*.spec. The recurrent seed is timed against itself; the chunked tensor-core
// seed (kda_fwd_chunked.cu, the second seed of kda_fwd.spec) against the recurrent one, at its
// defaults on every spec and at every knob assignment its constraints admit on the main spec.
// Prints the worst RMSE / RMS of out and final_state per shape (docs/targets.md asks for the figure
// of every kernel) and the median ms, and writes kda_gpu_results.json to $PTXEVO_RESULTS_DIR
// (default: the build directory). Without a GPU every test skips and says why.
// Only the chunked seed: --gtest_filter='KdaGpu.Chunked*'.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "evaluator/evaluation.hpp"
#include "evaluator/knob_constraints.hpp"
#include "evaluator/runner.hpp"
#include "evaluator/spec.hpp"
#include "kernels/builtin_ops.hpp"
#include "kernels/kda/kda_fwd_op.hpp"

namespace ptxevo::evaluator {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}
const std::string kSourceDir = env_or("PTXEVO_SOURCE_DIR", PTXEVO_SOURCE_DIR);
const std::string kBin = env_or("PTXEVO_BIN", PTXEVO_BIN);

class KdaGpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    registry_ = new OpRegistry(kernels::builtin_ops());
    RunnerOptions ro;
    ro.worker_exe = kBin;
    // The fp64 host reference of a 8192-token, 96-head benchmark shape takes seconds per input
    // set on 16 cores, and the seed runs token by token.
    ro.timeout_s = 1800;
    runner_ = new Runner(ro);
    results_ = new json(json::object());
  }
  static void TearDownTestSuite() {
    const char* dir = std::getenv("PTXEVO_RESULTS_DIR");
    const fs::path out = fs::path(dir && *dir ? dir : PTXEVO_BINARY_DIR) / "kda_gpu_results.json";
    if (!results_->empty()) std::ofstream(out) << results_->dump(2);
    delete runner_;
    delete registry_;
    delete results_;
  }
  void SetUp() override {
    std::string why;
    if (!runner_->available(&why)) GTEST_SKIP() << "no GPU: " << why;
  }

  // Gates the seed of `file` on every shape (all benchmark shapes up to `max_bench`) and times it.
  void gate_seed(const std::string& file, int max_bench) {
    SpecResult sr = load_spec(kSourceDir + "/kernels/kda/" + file, *registry_);
    ASSERT_TRUE(sr.spec) << sr.error->format();
    const Spec& spec = *sr.spec;
    Builder builder(nullptr);
    ShapeSelection sel;
    sel.max_benchmark_shapes = max_bench;
    sel.include_untimed_benchmarks = false;  // a host reference of every KDA scenario would take minutes
    const auto seed = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    PreparedEvaluation p = prepare_evaluation(spec, *registry_->find(spec.op), builder, {}, sel, seed);
    ASSERT_TRUE(p.reasons.empty()) << p.reasons[0];
    p.request.gate.stop_at_first_failure = false;  // every shape's figures, even after a failure
    p.request.timing.samples = 10;
    p.request.timing.min_samples = 10;
    const EvalReport r = runner_->evaluate(p.request);
    (*results_)[file] = to_json(r);
    double worst_out = 0, worst_state = 0;
    for (const auto& s : r.shapes) {
      std::string line = std::string(to_string(s.cls)) + " " + shape_to_string(s.shape) + ":";
      for (const auto& [name, v] : s.rel_l2) line += " " + name + " rel_l2 " + std::to_string(v);
      if (s.candidate_ms) line += " median " + std::to_string(s.candidate_ms->median) + " ms";
      std::printf("%s %s%s\n", file.c_str(), line.c_str(), s.passed ? "" : "  FAILED");
      if (auto it = s.rel_l2.find("out"); it != s.rel_l2.end()) worst_out = std::max(worst_out, it->second);
      if (auto it = s.rel_l2.find("final_state"); it != s.rel_l2.end()) worst_state = std::max(worst_state, it->second);
    }
    std::printf("%s: verdict %s, worst rel_l2 out %.3g, final_state %.3g\n", file.c_str(), r.verdict.c_str(), worst_out,
                worst_state);
    ASSERT_EQ(r.verdict, "pass") << (r.reasons.empty() ? "" : r.reasons[0]);
    // Every shape ran and was checked; out is well inside the 1e-2 of the op's tolerance (an fp32
    // state and one bf16 rounding of out sit near 2e-3).
    EXPECT_EQ(r.shapes.size(), p.shapes.size());
    EXPECT_GT(worst_out, 0.0);
    EXPECT_LT(worst_out, 5e-3);
    EXPECT_LT(worst_state, 5e-3);
    ASSERT_TRUE(r.fitness.has_value());
    EXPECT_NEAR(*r.fitness, 1.0, 0.1);  // the seed against itself
  }

  // The chunked seed of kda_fwd.spec (the other specs do not name it: they get it here).
  SeedTemplate chunked_seed() {
    SpecResult sr = load_spec(kSourceDir + "/kernels/kda/kda_fwd.spec", *registry_);
    if (!sr.spec) throw std::runtime_error(sr.error->format());
    for (const auto& s : sr.spec->seeds)
      if (s.entry == kernels::KdaFwdOp::kChunkedEntry) return s;
    throw std::runtime_error("kda_fwd.spec has no seed with entry kda_fwd_chunked");
  }

  // Gates the chunked seed at `knobs` (over its defaults) on every correctness and held-out shape
  // of `file` and the first `max_bench` benchmark shapes, timed against the recurrent seed's
  // defaults: speedup > 1 means the chunked kernel is faster. Returns the fitness (geomean
  // speedup over the benchmark shapes; 0 when none were timed, as with max_bench = 0).
  double gate_chunked(const std::string& file, int max_bench, const Knobs& knobs, const std::string& label,
                      bool heldout = true) {
    SpecResult sr = load_spec(kSourceDir + "/kernels/kda/" + file, *registry_);
    if (!sr.spec) {
      ADD_FAILURE() << sr.error->format();
      return 0;
    }
    Spec spec = *sr.spec;
    const SeedTemplate chunked = chunked_seed();
    if (std::none_of(spec.seeds.begin(), spec.seeds.end(), [&](const SeedTemplate& s) { return s.name == chunked.name; }))
      spec.seeds.push_back(chunked);
    const std::string recurrent = spec.baseline;
    Builder builder(nullptr);
    ShapeSelection sel;
    sel.max_benchmark_shapes = max_bench;
    sel.include_untimed_benchmarks = false;  // a host reference of every KDA scenario would take minutes
    sel.heldout = heldout;
    const auto seed = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    // The chunked build as the candidate (prepared with itself as the baseline seed, so its knobs
    // and plans are its own), then the recurrent seed's build put in as the baseline.
    spec.baseline = chunked.name;
    CandidateInput in;
    in.knob_overrides = knobs;
    PreparedEvaluation p = prepare_evaluation(spec, *registry_->find(spec.op), builder, in, sel, seed);
    if (!p.reasons.empty()) {
      ADD_FAILURE() << label << ": " << p.reasons[0];
      return 0;
    }
    spec.baseline = recurrent;
    const PreparedEvaluation base = prepare_evaluation(spec, *registry_->find(spec.op), builder, {}, sel, seed);
    if (!base.reasons.empty()) {
      ADD_FAILURE() << label << ": " << base.reasons[0];
      return 0;
    }
    p.request.baseline_knobs = base.request.baseline_knobs;
    p.request.baseline_cubin = base.request.baseline_cubin;
    p.request.gate.stop_at_first_failure = false;
    p.request.timing.samples = 10;
    p.request.timing.min_samples = 10;
    const EvalReport r = runner_->evaluate(p.request);
    (*results_)[label] = to_json(r);
    double worst_out = 0, worst_state = 0;
    int flushed = 0;
    for (const auto& s : r.shapes) {
      std::string line = std::string(to_string(s.cls)) + " " + shape_to_string(s.shape) + ":";
      for (const auto& [name, v] : s.rel_l2) line += " " + name + " rel_l2 " + std::to_string(v);
      if (s.candidate_ms) line += " median " + std::to_string(s.candidate_ms->median) + " ms";
      if (s.baseline_ms) line += " (recurrent " + std::to_string(s.baseline_ms->median) + " ms)";
      std::printf("%s %s%s\n", label.c_str(), line.c_str(), s.passed ? "" : "  FAILED");
      // rel_l2 1 on a shape the gate passed: an all-zero output against a reference wholly below
      // fp32's normal range (T = 1 with beta ~ 1e-44: the fused kernel flushes it), which the gate
      // accepts by rule; the 5e-3 bound below is for outputs in the normal range.
      auto worst = [&](const char* name, double& w) {
        if (auto it = s.rel_l2.find(name); it != s.rel_l2.end()) {
          if (s.passed && it->second >= 1.0 - 1e-9) ++flushed;
          else w = std::max(w, it->second);
        }
      };
      worst("out", worst_out);
      worst("final_state", worst_state);
    }
    if (flushed > 0) std::printf("%s: %d output(s) below fp32's normal range, flushed to zero (gate: pass)\n", label.c_str(), flushed);
    std::printf("%s: verdict %s, worst rel_l2 out %.3g, final_state %.3g, speedup over the recurrent seed %.3g\n",
                label.c_str(), r.verdict.c_str(), worst_out, worst_state, r.fitness.value_or(0.0));
    EXPECT_EQ(r.verdict, "pass") << label << ": " << (r.reasons.empty() ? "" : r.reasons[0]);
    EXPECT_EQ(r.shapes.size(), p.shapes.size()) << label;
    // kernels/tests/kda_chunked_emulation_test.cpp's model of this blocking stays below 5e-3 on
    // every spec shape with its seeds; on the H200 fresh inputs have put the worst shape at 4.96e-3
    // and 5.02e-3 (T = 241, N = 7, no states), 5.81e-3 (the same shape, softplus gate) and
    // 6.005e-3 (T = 2, N = 2: 1,024 outputs; CHUNK 64, WY_TENSOR_CORES 1, a kernel unchanged since
    // it measured below 5.3e-3), bench/results/2026-12-01-h200-kda-gate-a2954e6: so 7e-3 here, a
    // regression alarm short of the op's gate (1e-2) that input noise on the smallest shapes does
    // not trip.
    EXPECT_GT(worst_out, 0.0) << label;
    EXPECT_LT(worst_out, 7e-3) << label;
    EXPECT_LT(worst_state, 7e-3) << label;
    return r.fitness.value_or(0.0);
  }

  static OpRegistry* registry_;
  static Runner* runner_;
  static json* results_;
};
OpRegistry* KdaGpu::registry_ = nullptr;
Runner* KdaGpu::runner_ = nullptr;
json* KdaGpu::results_ = nullptr;

// The six docs/targets.md scenarios (lower-bound gate, fp32 state in and out) and every correctness
// and held-out shape.
TEST_F(KdaGpu, SeedPassesTheGateOnTheMainSpec) { gate_seed("kda_fwd.spec", -1); }

TEST_F(KdaGpu, SeedPassesTheGateWithTheSoftplusGate) { gate_seed("kda_fwd_softplus.spec", 1); }

TEST_F(KdaGpu, SeedPassesTheGateWithOnlyAnInitialState) { gate_seed("kda_fwd_state_in.spec", 1); }

TEST_F(KdaGpu, SeedPassesTheGateWithOnlyAFinalState) { gate_seed("kda_fwd_state_out.spec", 1); }

TEST_F(KdaGpu, SeedPassesTheGateWithoutStates) { gate_seed("kda_fwd_no_state.spec", 1); }

// The chunked seed at its defaults: the six scenarios and every correctness and held-out shape of
// the main spec, then each other option combination on one benchmark shape.
TEST_F(KdaGpu, ChunkedSeedPassesTheGateOnTheMainSpec) { gate_chunked("kda_fwd.spec", -1, {}, "chunked kda_fwd.spec"); }

// The defaults are the prepare + recurrence pair (FUSED = 0); the fused kernel's defaults go
// through the same shapes.
TEST_F(KdaGpu, ChunkedSeedPassesTheGateOnEveryOtherSpec) {
  for (const char* file : {"kda_fwd_softplus.spec", "kda_fwd_state_in.spec", "kda_fwd_state_out.spec",
                           "kda_fwd_no_state.spec"}) {
    gate_chunked(file, 1, {}, std::string("chunked ") + file);
    gate_chunked(file, 1, kernels::KdaFwdOp::chunked_fused_knob_defaults(), std::string("chunked fused ") + file);
  }
}

// A knob's value as a label shows it (MMA is a string knob).
std::string value_text(const KnobValue& v) {
  if (const auto* str = std::get_if<std::string>(&v)) return *str;
  return std::to_string(std::get<std::int64_t>(v));
}

// FUSED = 0 at a covering set of its knobs (KdaFwdOp::split_covering_knobs, also built by
// kernels/tests/kda_fwd_build_test.cpp) on the main spec's correctness shapes.
TEST_F(KdaGpu, ChunkedSplitPassesTheGateOnACoveringSetOfKnobs) {
  int gated = 0;
  for (const Knobs& k : kernels::KdaFwdOp::split_covering_knobs()) {
    std::string label = "chunked split";
    for (const auto& [n, v] : k) label += " " + n + "=" + value_text(v);
    gate_chunked("kda_fwd.spec", 0, k, label, false);
    ++gated;
  }
  // 24 mma.sync, 3 wgmma, 1 PREPARE_CTAS, 3 WY_IN_RECURRENCE 1 (the defaults, SEQSPLIT 16, among
  // them), 1 WY_IN_RECURRENCE 2, SEQSPLIT 4.
  EXPECT_EQ(gated, 33);
}

// The defaults split the sequences of the correctness and held-out shapes (few chains: most of them,
// KdaFwdOp::seq_segments; the six scenarios have 64 or 96 chains and never split): the defaults
// without the sequence split (SEQSPLIT 1, the two-kernel plan on every shape), on every spec: the
// main spec's every shape, the other specs' correctness and held-out shapes and one benchmark shape.
TEST_F(KdaGpu, ChunkedSplitWithoutSequenceSplitPassesTheGateOnEverySpec) {
  Knobs k = kernels::KdaFwdOp::chunked_knob_defaults();
  k["SEQSPLIT"] = std::int64_t{1};
  gate_chunked("kda_fwd.spec", -1, k, "chunked no seqsplit kda_fwd.spec");
  for (const char* file : {"kda_fwd_softplus.spec", "kda_fwd_state_in.spec", "kda_fwd_state_out.spec",
                           "kda_fwd_no_state.spec"})
    gate_chunked(file, 1, k, std::string("chunked no seqsplit ") + file);
}

// MMA = wgmma (the recurrence's state products on warpgroup MMAs), the split's defaults otherwise:
// every shape of the main spec (the six scenarios included), then the softplus gate and the
// state-less spec on one benchmark shape each.
TEST_F(KdaGpu, ChunkedSplitWithWgmmaPassesTheGate) {
  Knobs k = kernels::KdaFwdOp::chunked_knob_defaults();
  k["MMA"] = std::string("wgmma");
  k["LMTERMS"] = std::int64_t{3};  // the one-pass prepare's single-term products are mma.sync only
  k["WY_IN_RECURRENCE"] = std::int64_t{0};    // and so is U = T' (V - Kd S) in the recurrence
  k["SEQSPLIT"] = std::int64_t{1};  // (the sequence split needs WY_IN_RECURRENCE 1)
  gate_chunked("kda_fwd.spec", -1, k, "chunked wgmma kda_fwd.spec");
  gate_chunked("kda_fwd_softplus.spec", 1, k, "chunked wgmma kda_fwd_softplus.spec");
  gate_chunked("kda_fwd_no_state.spec", 1, k, "chunked wgmma kda_fwd_no_state.spec");
}

// Every fused knob assignment the chunked seed's constraints admit (46, FUSED = 1; FUSED = 0 is
// the covering set above) on the main spec's correctness shapes (small: their references take
// milliseconds, so the sweep takes minutes); the held-out and benchmark shapes are left to the
// defaults' tests, the search times the rest.
TEST_F(KdaGpu, ChunkedSeedPassesTheGateAtEveryAdmittedKnobAssignment) {
  const SeedTemplate seed = chunked_seed();
  std::vector<Knobs> all = {{}};
  for (const auto& knob : seed.knobs) {
    std::vector<Knobs> next;
    for (const auto& k : all)
      for (const auto& v : knob.values) {
        Knobs e = k;
        e[knob.name] = v;
        next.push_back(e);
      }
    all = std::move(next);
  }
  int gated = 0;
  for (const auto& k : all) {
    bool ok = true;
    for (const auto& c : seed.constraints) ok = ok && constraint_holds(c, k);
    if (!ok || std::get<std::int64_t>(k.at("FUSED")) != 1) continue;
    std::string label = "chunked";
    for (const auto& [n, v] : k) label += " " + n + "=" + value_text(v);
    gate_chunked("kda_fwd.spec", 0, k, label, false);
    ++gated;
  }
  EXPECT_EQ(gated, 46);
}

}  // namespace
}  // namespace ptxevo::evaluator
