// A campaign or evaluation spec, read from TOML. Every error names FILE:LINE:COL and what was
// expected. The format is documented in docs/spec.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "evaluator/op.hpp"
#include "evaluator/spec_error.hpp"

namespace ptxevo::evaluator {

struct KnobSpace {
  std::string name;
  std::vector<KnobValue> values;  // ordered: neighbour moves step through this list
  KnobValue default_value;
  std::uint32_t line = 0, col = 0;  // where the spec declares it (for errors naming the spec's line)
};

struct SeedTemplate {
  std::string name;
  std::string source_path;  // resolved relative to the spec file
  std::string entry;        // kernel entry (extern "C")
  std::vector<KnobSpace> knobs;
  std::vector<std::string> constraints;  // knob_constraints.hpp expressions, e.g. "THREADS % TPR == 0"
};

// The seed's default knob assignment (its baseline configuration).
Knobs default_knobs(const SeedTemplate& seed);

struct Spec {
  std::string path;
  std::string op;
  std::string op_file;        // the op's declaration, when it is declared in a file (resolved path)
  OpConfig config;            // [options], every value as a string (see docs/spec.md)
  std::string arch = "sm_90a";
  std::vector<Shape> benchmark_shapes;
  std::vector<Shape> correctness_shapes;
  std::vector<Shape> heldout_shapes;
  std::map<std::string, Tolerance> tolerances;  // per output; missing: the op's default
  std::string baseline;       // name of the seed whose default knobs are the baseline
  std::string metric = "geomean_speedup";
  std::int64_t budget_evaluations = 0;  // 0: the spec sets no limit
  double budget_minutes = 0;            // 0: the spec sets no limit
  std::vector<SeedTemplate> seeds;
};


struct SpecResult {
  std::optional<Spec> spec;
  std::optional<SpecError> error;
};

// Parses and validates (op exists, its options are valid, shapes name the op's dimensions,
// tolerances name its outputs, seed sources exist, knobs and constraints are consistent).
// `registry` supplies the ops. Never throws for a bad spec: the first problem is the error.
// A file that cannot be read is an error at line 0, column 0.
SpecResult load_spec(const std::string& path, const OpRegistry& registry);
// `path` names the text in errors and anchors relative seed sources.
SpecResult parse_spec(const std::string& text, const std::string& path, const OpRegistry& registry);

}  // namespace ptxevo::evaluator
