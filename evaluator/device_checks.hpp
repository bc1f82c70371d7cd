// The gate's figures computed on the GPU by trusted kernels the worker builds at start-up from
// the source in device_checks.cpp (NVRTC, like any template; nothing a candidate supplies).
// Poison fills, output statistics against the fp64 reference (the same OutputStats that
// check_output computes on the host, so judge_output applies the same rules), and position-
// dependent content fingerprints for the determinism, input-mutation and timed-output checks.
// Moving gigabytes of outputs to the host for every candidate is what limited a campaign's
// throughput; with these, a candidate's gate costs milliseconds of GPU time per shape.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "evaluator/gate.hpp"
#include "evaluator/gpu_context.hpp"

namespace ptxevo::evaluator {

class DeviceChecks {
 public:
  // Builds the checking kernels for the context's device; nullopt with *why when that fails
  // (the evaluator then checks on the host).
  static std::unique_ptr<DeviceChecks> create(GpuContext& ctx, std::string* why);

  // Output dtypes the statistics kernels handle (floating point).
  static bool supports(DType t);

  // Every element of the buffer set to `bits` (the poison pattern of its dtype).
  void fill(CUdeviceptr p, DType t, std::int64_t n, std::uint64_t bits);
  // Statistics of `out` (n elements of dtype t) against `ref` (n doubles); `poison` is the bit
  // pattern the output held before the run. Also returns the output's fingerprint.
  OutputStats stats(CUdeviceptr out, DType t, CUdeviceptr ref, std::int64_t n, std::uint64_t poison,
                    std::uint64_t* fingerprint);
  // n elements of dtype t (floating point) drawn from distribution d on the device; the same
  // (seed, d) always gives the same data. Throws std::invalid_argument for other dtypes.
  void random_fill(CUdeviceptr p, DType t, std::int64_t n, Distribution d, std::uint64_t seed);
  static bool can_random_fill(DType t) { return supports(t); }
  // Overwrites the even rows (`row_len` elements each) with the degenerate kinds in turn, as
  // Distribution::DegenerateRows defines; the odd rows keep what random_fill drew.
  void degenerate_rows(CUdeviceptr p, DType t, std::int64_t n, std::int64_t row_len,
                       const std::vector<DegenerateRow>& kinds, std::uint64_t seed);
  // Order-independent, position-dependent hash of `bytes` bytes.
  std::uint64_t fingerprint(CUdeviceptr p, std::size_t bytes);
  // `ctas` CTAs that each hold an SM slot for `ns` nanoseconds, on a stream of their own (they
  // run beside whatever the context's stream launches next); wait_occupied() waits for them.
  void occupy(int ctas, std::int64_t ns);
  void wait_occupied();

  DeviceChecks(GpuContext& ctx, std::unique_ptr<GpuModule> m);
  ~DeviceChecks();
  DeviceChecks(const DeviceChecks&) = delete;
  DeviceChecks& operator=(const DeviceChecks&) = delete;

 private:
  GpuContext& ctx_;
  std::unique_ptr<GpuModule> module_;
  CUdeviceptr scratch_ = 0;  // the statistics block
  CUstream side_stream_ = nullptr;
};

// The kernels' CUDA source (for tests that compile it without a GPU).
const char* device_checks_source();

}  // namespace ptxevo::evaluator
