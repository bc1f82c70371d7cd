// Builds per second of the build pipeline (NVRTC -> PTX IR -> print -> nvJitLink) on a
// realistic kernel: the RMSNorm corpus source (bf16, cuda_bf16.h, three kernels) for sm_90a.
// Every request gets a distinct -DBENCH_TAG that lands in the PTX, so neither the build cache
// nor build_all's duplicate folding can skip a link; the caches (ours, and NVRTC's and
// nvJitLink's driver-backed ones) are off except where named.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "evaluator/builder.hpp"

namespace {

using ptxevo::evaluator::BuildCache;
using ptxevo::evaluator::Builder;
using ptxevo::evaluator::BuildRequest;
using ptxevo::evaluator::BuildResult;

std::string corpus_source() {
  const std::string path = PTXEVO_SOURCE_DIR "/tests/corpus/cuda/rmsnorm_bf16.cu";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "cannot read " << path << "\n";
    std::exit(2);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  // A global whose initializer is the knob: it changes the PTX without changing the kernels.
  return ss.str() + "\n__device__ int ptxevo_bench_tag = BENCH_TAG;\n";
}

BuildRequest request(const std::string& source, std::int64_t tag) {
  BuildRequest r;
  r.name = "rmsnorm_bf16_" + std::to_string(tag);
  r.source = source;
  r.source_path = "rmsnorm_bf16.cu";
  r.knobs = {{"BENCH_TAG", tag}};
  r.arch = "sm_90a";
  // Where a driver is installed NVRTC 13 caches in the driver's compute cache, which would
  // turn a rerun of this benchmark (same tags) into cache hits.
  r.nvrtc_options = {"--no-cache"};
  return r;
}

void check(benchmark::State& state, const BuildResult& r) {
  if (!r.ok) state.SkipWithError(("[" + r.stage + "] " + r.error).c_str());
}

void BM_BuildOne(benchmark::State& state) {
  const std::string source = corpus_source();
  const Builder builder(nullptr);
  std::int64_t tag = 0;
  for (auto _ : state) check(state, builder.build(request(source, tag++)));
  state.counters["builds/s"] = benchmark::Counter(static_cast<double>(tag), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_BuildOne)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_BuildAll(benchmark::State& state) {
  const std::string source = corpus_source();
  const Builder builder(nullptr);
  const std::size_t batch = 2 * std::max(1u, std::thread::hardware_concurrency());
  std::int64_t tag = 0;
  for (auto _ : state) {
    std::vector<BuildRequest> reqs;
    for (std::size_t i = 0; i < batch; ++i) reqs.push_back(request(source, tag++));
    for (const auto& r : builder.build_all(reqs)) check(state, r);
  }
  state.counters["batch"] = static_cast<double>(batch);
  state.counters["builds/s"] = benchmark::Counter(static_cast<double>(tag), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_BuildAll)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same request again with a warm build cache: a link-cache hit (NVRTC still runs).
void BM_BuildLinkCached(benchmark::State& state) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ptxevo-build-bench-" + std::to_string(getpid()));
  {
    BuildCache cache(dir);
    const Builder builder(&cache);
    const BuildRequest req = request(corpus_source(), 0);
    check(state, builder.build(req));  // fills the cache
    std::int64_t n = 0;
    for (auto _ : state) {
      BuildResult r = builder.build(req);
      check(state, r);
      if (!r.cache_hit) state.SkipWithError("expected a cache hit");
      ++n;
    }
    state.counters["builds/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsRate);
  }
  fs::remove_all(dir);
}
BENCHMARK(BM_BuildLinkCached)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
