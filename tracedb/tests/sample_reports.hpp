// Small EvalReports and a per-test database path, shared by the trace database tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "evaluator/eval_types.hpp"

namespace ptxevo::tracedb::testing {

// A report with two correctness shapes and one timed benchmark shape.
inline evaluator::EvalReport sample_report(double fitness, const std::string& verdict = "pass") {
  evaluator::EvalReport r;
  r.verdict = verdict;
  if (verdict != "pass") r.reasons = {"tolerance: rel_l2 0.5 > 0.01"};
  for (int i = 0; i < 2; ++i) {
    evaluator::ShapeReport s;
    s.shape = {{"M", 128 << i}, {"N", 256}};
    s.cls = evaluator::ShapeClass::Correctness;
    s.passed = verdict == "pass";
    s.rel_l2 = {{"y", 1e-7 * (i + 1)}};
    s.max_abs = {{"y", 2e-6}};
    r.shapes.push_back(s);
  }
  evaluator::ShapeReport b;
  b.shape = {{"M", 32768}, {"N", 4096}};
  b.cls = evaluator::ShapeClass::Benchmark;
  b.rel_l2 = {{"y", 3e-7}};
  b.max_abs = {{"y", 1e-6}};
  b.candidate_ms = evaluator::SampleStats{30, 0.5, 0.49, 0.51, 0.5, 0.48, 0.6};
  b.baseline_ms = evaluator::SampleStats{30, 0.5 * fitness, 0.49 * fitness, 0.51 * fitness, 0.5 * fitness, 0.4, 0.7};
  b.speedup = evaluator::PairedRatio{30, fitness, fitness * 0.98, fitness * 1.02};
  b.floor_ms = 0.3;
  b.fraction_of_floor = 0.6;
  b.pool_sets = 8;
  b.launches_per_batch = 4;
  r.shapes.push_back(b);
  if (verdict == "pass") r.fitness = fitness;
  r.environment = {{"gpu", "NVIDIA H200"}, {"driver", "580.65"}};
  r.copy_bandwidth = 4.0e12;
  r.seconds = 1.25;
  return r;
}

// A fresh path per test (its -wal and -shm siblings included), removed afterwards.
class TempDbPath {
 public:
  TempDbPath() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("ptxevo-trace-test-" + std::to_string(getpid()) + "-" + info->test_suite_name() + "-" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~TempDbPath() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TempDbPath(const TempDbPath&) = delete;
  TempDbPath& operator=(const TempDbPath&) = delete;
  std::filesystem::path db() const { return dir_ / "trace.db"; }

 private:
  std::filesystem::path dir_;
};

}  // namespace ptxevo::tracedb::testing
