// What the engine asks a GPU worker to evaluate, and what comes back. Both travel as JSON
// between processes (cubins as separate binary blobs), so a candidate that crashes its worker
// cannot take the engine or anything recorded with it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/op.hpp"
#include "evaluator/timer_stats.hpp"

namespace ptxevo::evaluator {

enum class ShapeClass { Correctness, Heldout, Benchmark };
const char* to_string(ShapeClass c);

struct ShapeCase {
  Shape shape;
  ShapeClass cls = ShapeClass::Correctness;
  // Benchmark shapes only: timed against the baseline. --max-benchmark-shapes clears it past the
  // first N: those shapes are still gated, never timed.
  bool timed = true;
};

struct TimingOptions {
  int samples = 30;              // measured batches per kernel, at most
  // Sequential stopping: after min_samples pairs (and every two after), stop once the paired
  // speedup's 95% CI is narrower than stop_rel_ci of the ratio. min_samples == samples (the
  // default, used by `ptxevo eval` and a campaign's final check) always takes every sample; a
  // campaign stops early on quiet shapes, where most of its GPU time went.
  int min_samples = 30;
  double stop_rel_ci = 0;
  int warmup_batches = 3;
  double target_batch_ms = 1.0;  // launches per batch chosen so a batch lasts about this long
  double pool_l2_multiple = 2.0; // input sets rotate over at least this many times the L2 size
  double pool_memory_fraction = 0.4;  // of free device memory, at most
};

struct GateOptions {
  int distributions_correctness = 4;  // distributions per correctness / held-out shape
  int distributions_benchmark = 2;    // per benchmark shape (inputs of 10^9 elements are slow on the CPU)
  // Runs of each candidate per shape and distribution whose outputs must agree bit for bit
  // (1: no determinism check). The first two alternate the poison pattern; each later one starts
  // the candidate beside a kernel that occupies a share of the SMs for a few microseconds, so its
  // CTAs are placed and finish in another order: an order-dependent reduction that agreed twice
  // on an idle GPU differs there.
  int determinism_runs = 3;
  // One more input distribution on every shape when an input declares degenerate rows
  // (TensorDesc::degenerate_rows). False only to measure what it costs (`ptxevo eval
  // --no-degenerate-rows`).
  bool degenerate_rows = true;
  bool stop_at_first_failure = true;  // a rejected candidate need not be run on every shape
  // Gate runs put every tensor against unmapped guard pages (gpu_context.hpp). False only to
  // measure what they cost (`ptxevo eval --no-guard-pages`): reads outside a tensor then pass.
  bool guard_pages = true;
};

struct EvalRequest {
  std::string op;
  std::string op_file;  // where the op is declared, when it is declared in a file (the worker loads it)
  OpConfig config;
  std::vector<ShapeCase> shapes;
  Knobs candidate_knobs;
  Knobs baseline_knobs;
  std::map<std::string, Tolerance> tolerances;  // overrides per output
  std::uint64_t seed = 0;                       // fresh per evaluation
  GateOptions gate;
  TimingOptions timing;
  bool time_benchmarks = true;
  // Blobs (not in JSON): candidate and baseline cubins.
  std::vector<std::uint8_t> candidate_cubin;
  std::vector<std::uint8_t> baseline_cubin;
};

struct ShapeReport {
  Shape shape;
  ShapeClass cls = ShapeClass::Correctness;
  bool passed = true;
  std::vector<std::string> reasons;        // "tolerance: ...", each prefixed by its rule
  std::map<std::string, double> rel_l2;    // worst over distributions, per output
  std::map<std::string, double> max_abs;
  // Benchmark shapes only:
  std::optional<SampleStats> candidate_ms;
  std::optional<SampleStats> baseline_ms;
  std::optional<PairedRatio> speedup;      // baseline / candidate
  double floor_ms = 0;
  double fraction_of_floor = 0;            // floor_ms / candidate median (1.0 = at the copy bandwidth)
  int pool_sets = 0;
  int launches_per_batch = 0;
};

struct EvalReport {
  std::string verdict = "not-run";  // "pass", "fail", "fault", "timeout", "not-run"
  std::vector<std::string> reasons;  // union over shapes, plus run-level failures
  std::vector<ShapeReport> shapes;
  std::optional<double> fitness;     // geometric mean of benchmark speedups (pass only)
  std::map<std::string, std::string> environment;  // gpu, driver, sm count, l2, copy bandwidth
  double copy_bandwidth = 0;         // bytes/s measured by the worker
  double seconds = 0;
  // Of `seconds`, the host-side work a batch shares (inputs, fp64 references, uploads), with
  // the GPU idle: what separates time in the worker from time the GPU was busy.
  double prep_seconds = 0;
  // Of `seconds`, the time the worker held the GPU (gate runs, timing), its share of the batch.
  double gpu_seconds = 0;
  // Wall seconds by phase of the worker's batch (its share): the gate's guarded buffers
  // ("gate_alloc", before the GPU lock is taken, so it may include waiting on another worker's
  // work), the timing pool's buffers ("pool_alloc") and their inputs drawn or uploaded and
  // outputs poisoned ("pool_fill"), freeing ("free"), inputs and references drawn or computed on
  // the device ("device_prep"), gate runs and their checks ("gate"), interleaved timing
  // ("timing"), re-checks of the timed outputs ("timed_checks"). Says where an evaluation's GPU
  // time goes.
  std::map<std::string, double> phase_seconds;
};

// Several candidates gated and timed in one worker call: inputs, references and the timing pool
// are made once per shape and shared, which is what makes a campaign's throughput. Each
// candidate's report is what a single evaluation of it would have said.
struct BatchEvalRequest {
  EvalRequest common;  // op, config, shapes, baseline, tolerances, seed, options (candidate_* unused)
  std::vector<Knobs> knobs;                       // per candidate
  std::vector<std::vector<std::uint8_t>> cubins;  // per candidate (blobs, not in JSON)
};

nlohmann::json knobs_to_json(const Knobs& k);
Knobs knobs_from_json(const nlohmann::json& j);

nlohmann::json to_json(const EvalRequest& r);  // without blobs
EvalRequest request_from_json(const nlohmann::json& j);
nlohmann::json to_json(const EvalReport& r);
EvalReport report_from_json(const nlohmann::json& j);
nlohmann::json to_json(const SampleStats& s);
nlohmann::json to_json(const PairedRatio& p);

// "unwritten-output: 12 of 4096 ..." -> "unwritten-output"
std::string reason_code(const std::string& reason);

// Held-out shapes are never seen by the search. What an evaluation said about them: their shape
// reports and the run-level reasons that name them ("[heldout shape ...]").
struct HeldoutResults {
  std::vector<ShapeReport> shapes;
  std::vector<std::string> reasons;
  bool failed = false;
  bool empty() const { return shapes.empty() && reasons.empty(); }
};
inline constexpr const char* kHeldoutFailed =
    "heldout: a held-out shape failed (what failed is kept for the user, never shown to the search)";
// Cuts the held-out shapes out of `r` and returns them; when one failed, `r` keeps the single
// reason kHeldoutFailed in their place. The verdict and fitness stay as they are.
HeldoutResults redact_heldout(EvalReport& r);
nlohmann::json to_json(const HeldoutResults& h);

}  // namespace ptxevo::evaluator
