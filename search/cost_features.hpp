// Features of one (candidate, shape) for the learned cost model (docs/prior_study.md 5.2-5.4): what
// a candidate is (knobs, PTX edits), what ptxas made of it (registers, spills, shared memory),
// how it launches on this shape (threads, grid, cluster, occupancy and wave tail computed
// exactly from the GPU's limits), the shape's roofline time, and what the main kernel's PTX holds
// (instruction mix by kind, access widths, cache hints, loops, bytes in flight against bandwidth
// times latency: search/ptx_profile.hpp). The same function serves a
// freshly built candidate and a row of the trace database, so a model fitted on the database
// scores new candidates with the same columns.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "evaluator/op.hpp"
#include "evaluator/ptxas.hpp"
#include "search/genome.hpp"
#include "search/ptx_profile.hpp"

namespace ptxevo::search {

// The GPU's limits that decide occupancy (H200 / sm_90 values by default).
struct GpuLimits {
  int sm_count = 132;
  int registers_per_sm = 65536;
  int max_threads_per_sm = 2048;
  int max_blocks_per_sm = 32;
  int shared_bytes_per_sm = 228 * 1024;
  int register_granularity = 256;  // registers are allocated per warp in units of this many
  double bandwidth_bytes_per_s = 4.2e12;  // measured copy bandwidth of the H200 (docs/targets.md)
};

// Column layout: generic columns, then one per knob of the seed (log2 of the value), then one
// per PTX pass (how often it is in the edit list). Fixed per (op, knob names, pass names), so
// rows of campaigns with the same seed share columns.
struct FeatureLayout {
  std::vector<std::string> knobs;   // sorted knob names
  std::vector<std::string> passes;  // sorted pass names
  std::vector<std::string> names() const;
  std::size_t size() const;
};

struct FeatureRow {
  std::vector<double> x;
  double roofline_ms = 0;        // bytes / bandwidth
  double analytic_log_time = 0;  // log(predicted ms / roofline ms): roofline over occupancy and wave tail
  double occupancy = 0;          // resident threads / max threads per SM of the main kernel
  double tail_efficiency = 1;    // waves / ceil(waves)
};

// `ptx`: the build's PTX profile (profile_ptx); empty leaves the IR columns 0 (ptx_profiled 0).
// Throws std::invalid_argument when the op rejects the knobs for this shape (no launch plan).
FeatureRow cost_features(const FeatureLayout& layout, const evaluator::Op& op, const evaluator::OpConfig& cfg,
                         const evaluator::Shape& shape, const Genome& genome,
                         const std::vector<evaluator::FunctionResources>& resources,
                         const std::vector<PtxProfile>& ptx, const GpuLimits& gpu = {});

// The columns filled from the PTX profile, [first, end) of every layout (they sit among the
// generic columns, before the knobs): the cost model drops them when they do not validate.
std::pair<std::size_t, std::size_t> ptx_feature_columns();

// Resident blocks of `threads` threads per SM for a kernel with these resources (0: none fit).
int blocks_per_sm(int threads, int registers, int shared_bytes, const GpuLimits& gpu);

// resources_json of the trace database back into FunctionResources.
std::vector<evaluator::FunctionResources> resources_from_json(const std::string& text);

}  // namespace ptxevo::search
