// Parse and print throughput of the PTX IR on the largest PTX file of the test corpus (the
// corpus round-trip test writes it under build*/corpus/), or on the file named by
// PTXEVO_BENCH_PTX. Goal: >= 50 MB/s parse.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "ir/parser.hpp"
#include "ir/printer.hpp"

namespace {

std::string pick_file() {
  if (const char* e = std::getenv("PTXEVO_BENCH_PTX"); e && *e) return e;
  namespace fs = std::filesystem;
  std::string best;
  std::uintmax_t best_size = 0;
  for (const char* dir : {PTXEVO_BINARY_DIR "/corpus", PTXEVO_SOURCE_DIR "/tests/corpus/triton/ptx"}) {
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file() && e.path().extension() == ".ptx" && e.file_size() > best_size) {
        best_size = e.file_size();
        best = e.path().string();
      }
  }
  return best;
}

const std::string& input() {
  static const std::string text = [] {
    const std::string path = pick_file();
    if (path.empty()) {
      std::cerr << "no PTX found: run the test suite first (it writes build/corpus/) or set PTXEVO_BENCH_PTX\n";
      std::exit(2);
    }
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    std::cerr << "benchmark input: " << path << " (" << ss.str().size() << " bytes)\n";
    return ss.str();
  }();
  return text;
}

void BM_Parse(benchmark::State& state) {
  const std::string& text = input();
  for (auto _ : state) {
    auto r = ptxevo::ir::parse_ptx(text);
    if (!r.ok()) state.SkipWithError(r.error->message.c_str());
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(text.size()));
}
BENCHMARK(BM_Parse)->Unit(benchmark::kMillisecond);

void BM_Print(benchmark::State& state) {
  auto r = ptxevo::ir::parse_ptx(input());
  if (!r.ok()) {
    state.SkipWithError(r.error->message.c_str());
    return;
  }
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::string out = ptxevo::ir::print_module(*r.module);
    bytes = out.size();
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_Print)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
