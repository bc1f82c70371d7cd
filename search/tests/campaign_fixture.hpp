// Offline fixtures for the campaign tests: a tiny op (out = 2 x) with a real CUDA template that
// NVRTC builds in a fraction of a second, and a measurer whose "timings" are a known function
// of the knobs, so a search's progress, its duplicates and its resumes can be checked exactly.
#pragma once

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "evaluator/spec.hpp"
#include "search/measurer.hpp"

namespace ptxevo::search::testing {

class ScaleOp : public evaluator::Op {
 public:
  std::string name() const override { return "test_scale"; }
  std::string validate(const evaluator::OpConfig& cfg) const override { return cfg.empty() ? "" : "no options"; }
  std::vector<evaluator::TensorDesc> tensors(const evaluator::Shape& s, const evaluator::OpConfig&) const override {
    const std::int64_t n = s.at("N");
    return {{"x", evaluator::DType::F32, {n}, evaluator::Role::In, false},
            {"out", evaluator::DType::F32, {n}, evaluator::Role::Out, false}};
  }
  std::map<std::string, std::string> template_defines(const evaluator::OpConfig&) const override { return {}; }
  evaluator::LaunchPlan launch_plan(const evaluator::Shape& s, const evaluator::OpConfig&,
                                    const evaluator::Knobs& k) const override {
    const std::int64_t n = s.at("N");
    const auto block = evaluator::knob_int(k, "BLOCK", 64), unroll = evaluator::knob_int(k, "UNROLL", 1);
    evaluator::KernelLaunch l;
    l.entry = "scale";
    l.grid = {static_cast<std::uint32_t>((n + block * unroll - 1) / (block * unroll)), 1, 1};
    l.block = {static_cast<std::uint32_t>(block), 1, 1};
    l.args = {evaluator::ArgTensor{"x"}, evaluator::ArgTensor{"out"}, n};
    return {{l}};
  }
  void reference(const evaluator::Shape&, const evaluator::OpConfig&, const std::vector<evaluator::HostTensor>& t,
                 std::vector<evaluator::HostTensor>& ref) const override {
    evaluator::HostTensor out("out", evaluator::DType::F64, t.at(0).shape);
    for (std::int64_t i = 0; i < out.numel(); ++i) out.set(i, 2 * t.at(0).get(i));
    ref.push_back(std::move(out));
  }
  double bytes(const evaluator::Shape& s, const evaluator::OpConfig&) const override { return 8.0 * s.at("N"); }
  double flops(const evaluator::Shape& s, const evaluator::OpConfig&) const override { return 1.0 * s.at("N"); }
  evaluator::Tolerance tolerance(const std::string&, const evaluator::OpConfig&) const override { return {1e-6, 1e-6}; }
};

inline constexpr const char* kScaleTemplate = R"cu(
#ifndef BLOCK
#define BLOCK 64
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
#ifndef PAD
#define PAD 0
#endif
extern "C" __global__ void __launch_bounds__(BLOCK) scale(const float* __restrict__ x, float* __restrict__ out, long long n) {
  const long long base = (long long)blockIdx.x * BLOCK * UNROLL + threadIdx.x;
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    const long long i = base + (long long)u * BLOCK;
    if (i < n) out[i] = 2.0f * x[i] + (float)(PAD * 0);
  }
}
)cu";

inline constexpr const char* kScaleSpec = R"toml(
op = "test_scale"
arch = "sm_90a"

[shapes]
correctness = [ { N = 1 }, { N = 1000 } ]
benchmark = [ { N = 1048576 }, { N = 4096 } ]

[objective]
baseline = "scale"

[budget]
evaluations = 40

[[seed]]
name = "scale"
source = "scale.cu"
entry = "scale"
constraints = [ "BLOCK * UNROLL <= 1024" ]
[seed.knobs]
BLOCK = { values = [32, 64, 128, 256], default = 64 }
UNROLL = { values = [1, 2, 3, 4, 8], default = 1 }
PAD = { values = [0, 1, 2, 3], default = 0 }
)toml";

// Writes the spec and template into `dir` and parses the spec.
inline evaluator::Spec write_scale_spec(const std::filesystem::path& dir, const evaluator::OpRegistry& reg) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "scale.cu") << kScaleTemplate;
  std::ofstream(dir / "scale.spec") << kScaleSpec;
  auto r = evaluator::load_spec((dir / "scale.spec").string(), reg);
  if (!r.spec) throw std::runtime_error(r.error->format());
  return *r.spec;
}

// Speedup per shape is a known function of the knobs: best at BLOCK=256, UNROLL=4; UNROLL=3
// "fails the gate". Every call is counted per genome hash, so duplicates show.
class KnobModelMeasurer : public Measurer {
 public:
  explicit KnobModelMeasurer(int delay_ms = 0) : delay_ms_(delay_ms) {}
  std::string mode() const override { return "gpu"; }
  tracedb::Environment environment() const override {
    tracedb::Environment e;
    e.gpu = "knob model (test)";
    e.driver = "0";
    e.cuda = "test";
    return e;
  }
  static double speedup_of(const evaluator::Knobs& k) {
    const double block = static_cast<double>(evaluator::knob_int(k, "BLOCK", 64));
    const double unroll = static_cast<double>(evaluator::knob_int(k, "UNROLL", 1));
    return (1.0 + 0.1 * std::log2(block / 64.0)) * (1.0 + 0.08 * std::log2(unroll)) *
           (1.0 - 0.01 * static_cast<double>(evaluator::knob_int(k, "PAD", 0)));
  }
  std::vector<evaluator::EvalReport> measure(const evaluator::EvalRequest& common,
                                             const std::vector<MeasureItem>& items) override {
    if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
    std::vector<evaluator::EvalReport> out;
    std::lock_guard<std::mutex> lock(mu_);
    batch_sizes_.push_back(static_cast<int>(items.size()));
    gates_.push_back(common.gate);
    for (const auto& it : items) {
      ++calls_[it.genome_hash];
      ++total_;
      evaluator::EvalReport r;
      if (evaluator::knob_int(it.knobs, "UNROLL", 1) == 3) {
        r.verdict = "fail";
        r.reasons.push_back("tolerance: rel_l2 0.5 > 1e-06 [benchmark shape N=4096, normal inputs]");
        out.push_back(r);
        continue;
      }
      const double s = speedup_of(it.knobs);
      for (const auto& sc : common.shapes) {
        evaluator::ShapeReport sr;
        sr.shape = sc.shape;
        sr.cls = sc.cls;
        if (sc.cls == evaluator::ShapeClass::Benchmark) {
          evaluator::PairedRatio p;
          p.ratio = s;
          p.ci_low = s * 0.995;
          p.ci_high = s * 1.005;
          sr.speedup = p;
          evaluator::SampleStats st;
          st.median = 0.1 / s;
          st.ci_low = st.median * 0.99;
          st.ci_high = st.median * 1.01;
          sr.candidate_ms = st;
          st.median = 0.1;
          sr.baseline_ms = st;
          sr.floor_ms = 0.05;
          sr.fraction_of_floor = 0.05 / (0.1 / s);
        }
        r.shapes.push_back(sr);
      }
      r.verdict = "pass";
      r.fitness = s;
      out.push_back(r);
    }
    return out;
  }
  int calls(const std::string& hash) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = calls_.find(hash);
    return it == calls_.end() ? 0 : it->second;
  }
  int total() const {
    std::lock_guard<std::mutex> lock(mu_);
    return total_;
  }
  std::map<std::string, int> all_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  std::vector<int> batch_sizes() const {  // items per measure() call, in order
    std::lock_guard<std::mutex> lock(mu_);
    return batch_sizes_;
  }
  std::vector<evaluator::GateOptions> gates() const {  // the gate options of each measure() call
    std::lock_guard<std::mutex> lock(mu_);
    return gates_;
  }

 private:
  int delay_ms_;
  mutable std::mutex mu_;
  std::map<std::string, int> calls_;
  std::vector<int> batch_sizes_;
  std::vector<evaluator::GateOptions> gates_;
  int total_ = 0;
};

}  // namespace ptxevo::search::testing
