// Ops declared in files (examples/ops) on a real GPU: each example's seed passes the gate in
// every dtype and is timed against itself; its known-bad kernels are rejected with the reason
// their header names; a reference that leaves outputs unwritten or changes between runs is
// refused before any candidate is judged. Without a GPU every test skips and says why. Results go
// to $PTXEVO_RESULTS_DIR (default: the build directory) as declared_op_gpu_results.json.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "evaluator/evaluation.hpp"
#include "evaluator/runner.hpp"
#include "evaluator/spec.hpp"
#include "evaluator/toml_reader.hpp"
#include "kernels/builtin_ops.hpp"

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

// The reason codes a known-bad kernel's "// expect: a b" header allows.
std::set<std::string> expected_codes(const fs::path& f) {
  std::ifstream in(f);
  std::string line;
  std::set<std::string> out;
  while (std::getline(in, line))
    if (line.rfind("// expect:", 0) == 0) {
      std::istringstream s(line.substr(10));
      std::string c;
      while (s >> c) out.insert(c);
    }
  return out;
}

class DeclaredOpGpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    registry_ = new OpRegistry(kernels::builtin_ops());
    RunnerOptions ro;
    ro.worker_exe = kBin;
    ro.timeout_s = 60;
    runner_ = new Runner(ro);
    results_ = new json(json::object());
  }
  static void TearDownTestSuite() {
    const fs::path out = fs::path(env_or("PTXEVO_RESULTS_DIR", PTXEVO_BINARY_DIR)) / "declared_op_gpu_results.json";
    if (!results_->empty()) std::ofstream(out) << results_->dump(2);
    delete runner_;
    delete registry_;
    delete results_;
  }
  void SetUp() override {
    std::string why;
    if (!runner_->available(&why)) GTEST_SKIP() << "no GPU: " << why;
  }

  static Spec spec(const std::string& rel, const OpConfig& options = {}) {
    SpecResult sr = load_spec(kSourceDir + "/" + rel, *registry_);
    EXPECT_TRUE(sr.spec) << sr.error->format();
    Spec s = *sr.spec;
    for (const auto& [k, v] : options) s.config[k] = v;
    return s;
  }

  // seed 0: fresh inputs.
  static EvalReport evaluate(const Spec& s, const std::string& source, int max_bench, std::uint64_t seed = 0,
                             std::vector<std::string>* static_reasons = nullptr) {
    Builder builder(nullptr);
    ShapeSelection sel;
    sel.max_benchmark_shapes = max_bench;
    sel.include_untimed_benchmarks = false;
    if (seed == 0) seed = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    PreparedEvaluation p = prepare_evaluation(s, *registry_->find(s.op), builder, {source, "", {}, {}}, sel, seed);
    if (!p.reasons.empty()) {
      if (static_reasons) *static_reasons = p.reasons;
      EvalReport r;
      r.verdict = "fail (static)";
      r.reasons = p.reasons;
      return r;
    }
    p.request.timing.samples = 30;
    return runner_->evaluate(p.request);
  }

  static OpRegistry* registry_;
  static Runner* runner_;
  static json* results_;
};
OpRegistry* DeclaredOpGpu::registry_ = nullptr;
Runner* DeclaredOpGpu::runner_ = nullptr;
json* DeclaredOpGpu::results_ = nullptr;

TEST_F(DeclaredOpGpu, ExampleSeedsPassTheGateInEveryDtype) {
  json table = json::array();
  for (const char* rel : {"examples/ops/gelu_bias/gelu_bias.spec", "examples/ops/row_argmax/row_argmax.spec"}) {
    for (const char* dtype : {"bf16", "fp16", "fp32"}) {
      const Spec s = spec(rel, {{"dtype", dtype}});
      const EvalReport r = evaluate(s, "", 3);
      std::cout << s.op << " " << dtype << ": " << r.verdict << (r.fitness ? " fitness " + std::to_string(*r.fitness) : "")
                << (r.reasons.empty() ? "" : " " + r.reasons[0]) << "\n";
      table.push_back({{"op", s.op}, {"dtype", dtype}, {"report", to_json(r)}});
      EXPECT_EQ(r.verdict, "pass") << s.op << " " << dtype << ": " << (r.reasons.empty() ? "" : r.reasons[0]);
      ASSERT_TRUE(r.fitness.has_value());
      EXPECT_NEAR(*r.fitness, 1.0, 0.05) << "the seed against itself";
      EXPECT_NE(r.environment.at("benchmark_reference").find("the op's only reference"), std::string::npos);
    }
  }
  (*results_)["seeds"] = table;
}

TEST_F(DeclaredOpGpu, KnownBadKernelsAreRejectedWithTheRightReason) {
  json table = json::array();
  for (const char* ex : {"gelu_bias", "row_argmax"}) {
    const Spec s = spec(std::string("examples/ops/") + ex + "/" + ex + ".spec");
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(kSourceDir + "/examples/ops/" + ex + "/known_bad")) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    ASSERT_GE(files.size(), 2u);
    for (const auto& f : files) {
      const std::set<std::string> want = expected_codes(f);
      ASSERT_FALSE(want.empty()) << f << " has no '// expect:' header";
      const EvalReport r = evaluate(s, f.string(), 3);
      std::set<std::string> got;
      for (const auto& reason : r.reasons) got.insert(reason_code(reason));
      bool matched = false;
      for (const auto& c : got) matched |= want.count(c) > 0;
      std::cout << f.filename().string() << ": " << r.verdict << " " << (r.reasons.empty() ? "" : r.reasons[0]) << "\n";
      EXPECT_NE(r.verdict, "pass") << f;
      EXPECT_TRUE(matched) << f << ": " << (r.reasons.empty() ? "(no reason)" : r.reasons[0]);
      table.push_back({{"kernel", f.filename().string()}, {"verdict", r.verdict}, {"reasons", r.reasons}, {"matched", matched}});
    }
  }
  (*results_)["known_bad"] = table;
}

TEST_F(DeclaredOpGpu, ABadReferenceIsRefusedWithTheReason) {
  json table = json::array();
  for (const auto& [file, needle] : std::vector<std::pair<std::string, std::string>>{
           {"tests/gpu/declared/gelu_bias_lazy_ref.spec", "writes nothing to"},
           {"tests/gpu/declared/gelu_bias_clock_ref.spec", "differs between two runs on the same inputs"}}) {
    const EvalReport r = evaluate(spec(file), "", 1);
    std::cout << file << ": " << r.verdict << " " << (r.reasons.empty() ? "" : r.reasons[0]) << "\n";
    EXPECT_NE(r.verdict, "pass");
    ASSERT_FALSE(r.reasons.empty());
    EXPECT_NE(r.reasons[0].find(needle), std::string::npos) << r.reasons[0];
    table.push_back({{"spec", file}, {"verdict", r.verdict}, {"reasons", r.reasons}});
  }
  (*results_)["bad_references"] = table;
}

// The RMSNorm forward declared in a file judges the shipped known-bad kernels as the op compiled
// into ptxevo does: the same verdict and the same reason codes, kernel by kernel.
TEST_F(DeclaredOpGpu, DeclaredRmsNormRejectsTheKnownBadKernelsLikeTheBuiltIn) {
  const Spec builtin = spec("kernels/rmsnorm/rmsnorm_fwd.spec");
  const Spec declared = spec("kernels/rmsnorm/rmsnorm_fwd_declared.spec");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kSourceDir + "/kernels/rmsnorm/known_bad"))
    if (e.path().extension() == ".cu") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 12u);
  json table = json::array();
  for (const auto& f : files) {
    // The same input seed for both: a kernel wrong only on some inputs is judged on the same ones.
    const std::uint64_t seed = 1000 + table.size();
    const EvalReport a = evaluate(builtin, f.string(), 5, seed), b = evaluate(declared, f.string(), 5, seed);
    std::set<std::string> ca, cb;
    for (const auto& r : a.reasons) ca.insert(reason_code(r));
    for (const auto& r : b.reasons) cb.insert(reason_code(r));
    std::cout << f.filename().string() << ": built-in " << a.verdict << " " << (a.reasons.empty() ? "" : a.reasons[0])
              << "\n    declared " << b.verdict << " " << (b.reasons.empty() ? "" : b.reasons[0]) << "\n";
    EXPECT_NE(b.verdict, "pass") << f;
    EXPECT_EQ(a.verdict, b.verdict) << f;
    EXPECT_EQ(ca, cb) << f;
    table.push_back({{"kernel", f.filename().string()}, {"builtin", {{"verdict", a.verdict}, {"reasons", a.reasons}}},
                     {"declared", {{"verdict", b.verdict}, {"reasons", b.reasons}}}});
  }
  (*results_)["rmsnorm_known_bad"] = table;
}

}  // namespace
}  // namespace ptxevo::evaluator
