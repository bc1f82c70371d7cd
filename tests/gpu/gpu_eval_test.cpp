// The evaluator on a real GPU: the seed passes; every known-bad RMSNorm kernel is rejected
// with the reason its header names; faulting and hanging kernels take down only their worker.
// Without a GPU every test skips and says why. Results go to $PTXEVO_RESULTS_DIR (default:
// the build directory) as gpu_eval_results.json.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <iostream>
#include <set>
#include <sstream>

#include "evaluator/build_cache.hpp"
#include "evaluator/evaluation.hpp"
#include "evaluator/gpu_context.hpp"
#include "evaluator/gpu_evaluation.hpp"
#include "evaluator/runner.hpp"
#include "evaluator/spec.hpp"
#include "kernels/builtin_ops.hpp"
#include "tma/tma_copy_op.hpp"

namespace ptxevo::evaluator {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Built-in paths can be overridden, so binaries built on one machine run on another.
std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}
const std::string kSourceDir = env_or("PTXEVO_SOURCE_DIR", PTXEVO_SOURCE_DIR);
const std::string kBin = env_or("PTXEVO_BIN", PTXEVO_BIN);
const std::string kSpec = kSourceDir + "/kernels/rmsnorm/rmsnorm_fwd.spec";

std::string header_line(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  for (int i = 0; i < 5 && std::getline(in, line); ++i) {
    const auto at = line.find(key);
    if (at != std::string::npos) {
      std::string v = line.substr(at + key.size());
      v.erase(0, v.find_first_not_of(' '));
      return v;
    }
  }
  return "";
}

std::set<std::string> split_codes(const std::string& s) {
  std::set<std::string> out;
  std::stringstream ss(s.substr(0, s.find(' ')));
  std::string c;
  while (std::getline(ss, c, '|'))
    if (!c.empty()) out.insert(c);
  return out;
}

class GpuEval : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    registry_ = new OpRegistry(kernels::builtin_ops());
    SpecResult sr = load_spec(kSpec, *registry_);
    ASSERT_TRUE(sr.spec) << sr.error->format();
    spec_ = new Spec(*sr.spec);
    RunnerOptions ro;
    ro.worker_exe = kBin;
    ro.timeout_s = 60;
    runner_ = new Runner(ro);
    results_ = new json(json::object());
  }
  static void TearDownTestSuite() {
    const char* dir = std::getenv("PTXEVO_RESULTS_DIR");
    const fs::path out = fs::path(dir && *dir ? dir : PTXEVO_BINARY_DIR) / "gpu_eval_results.json";
    if (!results_->empty()) std::ofstream(out) << results_->dump(2);
    delete runner_;
    delete spec_;
    delete registry_;
    delete results_;
  }
  void SetUp() override {
    std::string why;
    if (!runner_->available(&why)) GTEST_SKIP() << "no GPU: " << why;
  }

  PreparedEvaluation prepare(const std::string& source, int max_bench) {
    Builder builder(nullptr);
    ShapeSelection sel;
    sel.max_benchmark_shapes = max_bench;
    sel.include_untimed_benchmarks = false;  // the tests choose what they gate
    const auto seed = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    return prepare_evaluation(*spec_, *registry_->find(spec_->op), builder, {source, "", {}, {}}, sel, seed);
  }

  EvalReport run_seed() {
    PreparedEvaluation p = prepare("", 1);
    EXPECT_TRUE(p.reasons.empty());
    p.request.timing.samples = 30;
    return runner_->evaluate(p.request);
  }

  static OpRegistry* registry_;
  static Spec* spec_;
  static Runner* runner_;
  static json* results_;
};
OpRegistry* GpuEval::registry_ = nullptr;
Spec* GpuEval::spec_ = nullptr;
Runner* GpuEval::runner_ = nullptr;
json* GpuEval::results_ = nullptr;

TEST_F(GpuEval, SeedPassesTheGateAndIsTimedAgainstItself) {
  PreparedEvaluation p = prepare("", 3);
  ASSERT_TRUE(p.reasons.empty()) << p.reasons[0];
  EvalReport r = runner_->evaluate(p.request);
  (*results_)["seed_vs_itself"] = to_json(r);
  ASSERT_EQ(r.verdict, "pass") << (r.reasons.empty() ? "" : r.reasons[0]);
  ASSERT_TRUE(r.fitness.has_value());
  // The same kernel against itself: the paired ratio must sit near 1.
  EXPECT_NEAR(*r.fitness, 1.0, 0.05);
  for (const auto& s : r.shapes) {
    if (s.cls != ShapeClass::Benchmark) continue;
    ASSERT_TRUE(s.candidate_ms.has_value());
    EXPECT_GE(s.candidate_ms->n, 30u);
    EXPECT_GT(s.fraction_of_floor, 0.05);
    EXPECT_LE(s.fraction_of_floor, 1.10);
    EXPECT_GE(s.pool_sets, 1);
  }
}

TEST_F(GpuEval, KnownBadKernelsAreRejectedWithTheRightReason) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kSourceDir + "/kernels/rmsnorm/known_bad"))
    if (e.path().extension() == ".cu") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 12u);
  json table = json::array();
  for (const auto& f : files) {
    const std::set<std::string> expected = split_codes(header_line(f.string(), "// expect:"));
    ASSERT_FALSE(expected.empty()) << f << " has no '// expect:' header";
    // Benchmark shapes up to N = 4096 include the shape a size-keyed branch targets.
    PreparedEvaluation p = prepare(f.string(), 5);
    std::vector<std::string> reasons = p.reasons;
    std::string verdict = "fail (static)";
    if (reasons.empty()) {
      EvalReport r = runner_->evaluate(p.request);
      verdict = r.verdict;
      reasons = r.reasons;
    }
    std::set<std::string> got;
    for (const auto& r : reasons) got.insert(reason_code(r));
    bool matched = false;
    for (const auto& c : got) matched |= expected.count(c) > 0;
    std::string expected_text, got_text;
    for (const auto& c : expected) expected_text += c + " ";
    for (const auto& c : got) got_text += c + " ";
    std::cout << f.filename().string() << ": verdict " << verdict << "; expected {" << expected_text << "} got {"
              << got_text << "}\n";
    EXPECT_NE(verdict, "pass") << f << " passed the gate";
    EXPECT_TRUE(matched) << f << ": expected one of {" << expected_text << "}, got {" << got_text << "}: "
                         << (reasons.empty() ? "" : reasons[0]);
    table.push_back({{"kernel", f.filename().string()}, {"expected", expected}, {"verdict", verdict},
                     {"reasons", reasons}, {"matched", matched}});
  }
  (*results_)["known_bad"] = table;
}

TEST_F(GpuEval, FaultingKernelsTakeDownOnlyTheirWorker) {
  json table = json::array();
  for (const char* name : {"fault_illegal_address", "fault_trap", "fault_misaligned"}) {
    const int restarts_before = runner_->restarts();
    PreparedEvaluation p = prepare(kSourceDir + "/tests/gpu/kernels/" + std::string(name) + ".cu", 1);
    ASSERT_TRUE(p.reasons.empty()) << p.reasons[0];
    EvalReport r = runner_->evaluate(p.request);
    EXPECT_EQ(r.verdict, "fault") << name;
    ASSERT_FALSE(r.reasons.empty());
    // An illegal address, with every tensor against guard pages, is reported as out-of-bounds.
    EXPECT_EQ(reason_code(r.reasons[0]), std::string(name) == "fault_illegal_address" ? "out-of-bounds" : "launch-failed")
        << r.reasons[0];
    EXPECT_GT(runner_->restarts(), restarts_before) << "the worker should have ended after a sticky error";
    // The next candidate gets a fresh worker and passes.
    EvalReport after = run_seed();
    EXPECT_EQ(after.verdict, "pass") << name << ": " << (after.reasons.empty() ? "" : after.reasons[0]);
    table.push_back({{"kernel", name}, {"verdict", r.verdict}, {"reasons", r.reasons}, {"seed_after", after.verdict}});
  }
  (*results_)["faults"] = table;
}

TEST_F(GpuEval, HangingKernelIsKilledByTheWatchdog) {
  RunnerOptions ro;
  ro.worker_exe = kBin;
  ro.timeout_s = 20;
  Runner short_runner(ro);
  PreparedEvaluation p = prepare(kSourceDir + "/tests/gpu/kernels/hang_infinite_loop.cu", 1);
  ASSERT_TRUE(p.reasons.empty()) << p.reasons[0];
  const auto t0 = std::chrono::steady_clock::now();
  EvalReport r = short_runner.evaluate(p.request);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.verdict, "timeout");
  EXPECT_LT(s, 60);
  PreparedEvaluation seed = prepare("", 1);
  EvalReport after = short_runner.evaluate(seed.request);
  EXPECT_EQ(after.verdict, "pass") << (after.reasons.empty() ? "" : after.reasons[0]);
  (*results_)["hang"] = {{"verdict", r.verdict}, {"reasons", r.reasons}, {"seconds", s}, {"seed_after", after.verdict}};
}

// The TMA test op: builds and passes the static checks anywhere; runs where a GPU is.
struct TmaCopyFixture {
  OpRegistry registry;
  std::optional<Spec> spec;
  TmaCopyFixture() {
    registry.add(std::make_unique<tests::TmaCopyOp>());
    SpecResult sr = load_spec(kSourceDir + "/tests/gpu/tma/tma_copy.spec", registry);
    if (sr.spec) spec = *sr.spec;
    else ADD_FAILURE() << sr.error->format();
  }
  PreparedEvaluation prepare() const {
    Builder builder(nullptr);
    return prepare_evaluation(*spec, *registry.find("tma_copy_2d"), builder, {}, {}, 12345);
  }
};

TEST(TmaCopy, BuildsAndPassesTheStaticChecks) {
  TmaCopyFixture f;
  ASSERT_TRUE(f.spec.has_value());
  PreparedEvaluation p = f.prepare();
  ASSERT_TRUE(p.reasons.empty()) << p.reasons[0];
  EXPECT_NE(p.candidate.ptx.find("cp.async.bulk.tensor.2d"), std::string::npos);
  EXPECT_NE(p.candidate.ptx.find(".align 64 .b8 tma_copy_2d_param_0[128]"), std::string::npos) << "tensor map parameter";
}

TEST_F(GpuEval, TensorMapLaunchArgumentRunsThroughTheGate) {
  TmaCopyFixture f;
  ASSERT_TRUE(f.spec.has_value());
  PreparedEvaluation p = f.prepare();
  ASSERT_TRUE(p.reasons.empty()) << p.reasons[0];
  // The worker knows only the built-in ops, so this runs in-process on a context of its own.
  DriverLoad load = load_cuda_driver();
  ASSERT_TRUE(load.driver) << load.reason;
  GpuContext ctx(load.driver, 0);
  GpuEvaluator ev(ctx);
  EvalReport r = ev.evaluate(*f.registry.find("tma_copy_2d"), p.request);
  (*results_)["tma_copy_2d"] = to_json(r);
  EXPECT_EQ(r.verdict, "pass") << (r.reasons.empty() ? "" : r.reasons[0]);
}

// The guard pages as the gate lays them out: the payload's bytes are mapped, the byte just past
// its end (AfterEnd) or just before its start (BeforeStart) is not, so the copy engine refuses to
// read it (as a kernel's load faults); the cuMemAlloc fallback (None) has readable zones there.
TEST(GuardPages, TheBytesNextToThePayloadAreUnmapped) {
  DriverLoad load = load_cuda_driver();
  if (!load.driver) GTEST_SKIP() << "no GPU: " << load.reason;
  GpuContext ctx(load.driver, 0);
  const CudaDriver& api = ctx.api();
  for (const std::size_t bytes : {std::size_t{10000}, std::size_t{524288}, std::size_t{3}}) {
    for (const GuardSide side : {GuardSide::AfterEnd, GuardSide::BeforeStart, GuardSide::None}) {
      DeviceBuffer b(&api, bytes, side, 16);
      std::uint8_t byte = 0;
      EXPECT_EQ(api.cuMemcpyDtoH(&byte, b.ptr(), 1), CUDA_SUCCESS);
      EXPECT_EQ(api.cuMemcpyDtoH(&byte, b.ptr() + bytes - 1, 1), CUDA_SUCCESS);
      const CUresult after = api.cuMemcpyDtoH(&byte, b.ptr() + ((bytes + 15) / 16) * 16, 1);
      const CUresult before = api.cuMemcpyDtoH(&byte, b.ptr() - 1, 1);
      std::cout << "bytes " << bytes << " side " << static_cast<int>(side) << " guard_pages " << b.guard_pages()
                << " ptr " << std::hex << b.ptr() << std::dec << " after " << after << " before " << before << "\n";
      if (side == GuardSide::AfterEnd) {
        EXPECT_NE(after, CUDA_SUCCESS) << bytes;
      } else if (side == GuardSide::BeforeStart) {
        EXPECT_NE(before, CUDA_SUCCESS) << bytes;
      } else {
        EXPECT_EQ(after, CUDA_SUCCESS);
      }
      EXPECT_TRUE(b.canaries_intact());
    }
  }
}

}  // namespace
}  // namespace ptxevo::evaluator
