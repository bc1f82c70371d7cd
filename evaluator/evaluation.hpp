// One candidate from source to verdict, shared by `ptxevo eval`, the GPU tests and (later) the
// campaign: build candidate and baseline, run the static IR checks on every launch the gate
// will make, and prepare the worker request.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "evaluator/builder.hpp"
#include "evaluator/eval_types.hpp"
#include "evaluator/spec.hpp"

namespace ptxevo::evaluator {

struct CandidateInput {
  std::string source_path;  // CUDA template; empty: the baseline seed's
  std::string ptx_path;     // PTX instead of a template
  Knobs knob_overrides;     // over the seed's defaults
  // PTX edits of a campaign genome, applied after NVRTC (see search/genome_build.hpp).
  std::function<std::string(ir::Module&)> ptx_pass;
};

struct ShapeSelection {
  int max_benchmark_shapes = -1;  // timed benchmark shapes (the rest are gated only); -1: all
  bool correctness = true;
  bool heldout = true;
  // False leaves out the benchmark shapes past max_benchmark_shapes altogether (`ptxevo build
  // --shapes correctness`, and GPU tests that cannot afford a host reference of every benchmark
  // shape); campaigns and eval always gate them.
  bool include_untimed_benchmarks = true;
};

struct PreparedEvaluation {
  BuildResult candidate;
  BuildResult baseline;
  Knobs candidate_knobs;
  Knobs baseline_knobs;
  std::vector<ShapeCase> shapes;
  // Non-empty: rejected before any GPU run (build failure, static IR violation, bad knobs).
  std::vector<std::string> reasons;
  EvalRequest request;  // ready for Runner::evaluate when `reasons` is empty
};

const SeedTemplate* baseline_seed(const Spec& spec);
std::vector<ShapeCase> select_shapes(const Spec& spec, const ShapeSelection& sel);

PreparedEvaluation prepare_evaluation(const Spec& spec, const Op& op, const Builder& builder,
                                      const CandidateInput& input, const ShapeSelection& sel, std::uint64_t seed);

}  // namespace ptxevo::evaluator
