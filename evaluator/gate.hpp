// The correctness gate's pure logic: input distributions, poison, output checks against the
// fp64 reference, determinism and fingerprints, the roofline floor. No GPU code here, so every
// rule is tested on the CPU with synthetic outputs (evaluator/tests/gate_test.cpp).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "evaluator/op.hpp"
#include "evaluator/tensor.hpp"

namespace ptxevo::evaluator {

// Draws every element of `t` from `d` (fresh per call; the caller seeds `rng`).
//  Normal: N(0,1). LargeUniform: U(-1e3, 1e3) (bf16-representable magnitudes, stresses
//  overflow of fp16/bf16 accumulations). SparseSpikes: N(0, 1e-2) with about 0.1% of elements
//  set to +-1e2 (a strided subsample misses them). HeavyTail: Student-t with 2 degrees of freedom.
void fill_distribution(Distribution d, std::mt19937_64& rng, HostTensor& t);
// Distribution::DegenerateRows over a normal draw: even row 2j (rows of `row_len` elements) of
// kind kinds[j % kinds.size()], odd rows untouched. Floating-point dtypes only.
void overlay_degenerate_rows(HostTensor& t, std::int64_t row_len, const std::vector<DegenerateRow>& kinds,
                             std::uint64_t seed);
// The smallest normal value of a floating-point dtype (below it: denormals).
double smallest_normal(DType t);

// Two different poison patterns (quiet NaNs with different payloads for floats, 0xA5.. and
// 0x5A.. for integers); a kernel that leaves an element unwritten shows it.
void poison(HostTensor& t, int pattern);
// The bit pattern of poison `pattern` (0 or 1) for one element of dtype `t`.
std::uint64_t poison_bits(DType t, int pattern);
// Elements still holding poison pattern `pattern`.
std::int64_t count_poison(const HostTensor& t, int pattern);

struct OutputCheck {
  std::string tensor;
  bool passed = false;
  std::string reason;          // empty when passed; otherwise the first rule that failed
  std::int64_t nonfinite = 0;  // NaN/Inf elements in the candidate's output
  std::int64_t unwritten = 0;  // elements still holding the poison
  double rel_l2 = 0;           // ||out - ref||_2 / ||ref||_2
  double max_abs = 0;          // max |out - ref| / max(1, max |ref|)
  double out_rms = 0;
  double ref_rms = 0;
};

// The figures the rules below are decided on; computed on the host by check_output, or on the
// GPU by the worker's trusted checking kernels (device_checks.hpp) for large outputs.
struct OutputStats {
  std::int64_t unwritten = 0, nonfinite = 0, ref_nonfinite = 0, counted = 0;
  double sum_d2 = 0, sum_r2 = 0, sum_o2 = 0;
  double max_d = 0, max_r = 0;
  double out_min = 0, out_max = 0, ref_min = 0, ref_max = 0;
};
// Applies the rules of check_output to figures already accumulated.
OutputCheck judge_output(const std::string& tensor, DType out_dtype, std::int64_t numel, const OutputStats& a,
                         const Tolerance& tol);

// Rules, in order: every element written (no poison left); finite before any tolerance;
// relative L2 and normalized max-abs within `tol`; not trivially small or constant when the
// reference is not (rms below 1e-3 of the reference's, or zero variance where the reference
// varies). `poison_pattern` is the pattern the output was filled with before the run.
OutputCheck check_output(const HostTensor& out, const HostTensor& ref, const Tolerance& tol, int poison_pattern);

// Index of the first byte-level difference, or -1 when bitwise equal (shapes must match).
std::int64_t first_difference(const HostTensor& a, const HostTensor& b);

// 64-bit content fingerprint of a tensor's bytes (FNV-1a, 4 lanes), for timed-output re-checks.
std::uint64_t fingerprint(const HostTensor& t);
std::uint64_t fingerprint_bytes(const void* data, std::size_t n);

// Order-independent checksum of inputs before and after a run (input mutation).
std::uint64_t checksum(const std::vector<HostTensor>& ts);

struct FloorCheck {
  bool plausible = true;
  double floor_ms = 0;  // max(bytes / copy bandwidth, flops / peak)
  std::string reason;
};
// A time below the floor is a measurement error (or a cheat), never a speedup.
FloorCheck check_floor(double time_ms, double bytes, double flops, double copy_bytes_per_s, double peak_flops);

}  // namespace ptxevo::evaluator
