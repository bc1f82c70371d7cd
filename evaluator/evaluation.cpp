#include "evaluator/evaluation.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "evaluator/ir_checks.hpp"
#include "evaluator/knob_constraints.hpp"
#include "evaluator/template_source.hpp"

namespace ptxevo::evaluator {
namespace {

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

const SeedTemplate* baseline_seed(const Spec& spec) {
  for (const auto& s : spec.seeds)
    if (s.name == spec.baseline) return &s;
  return spec.seeds.empty() ? nullptr : &spec.seeds.front();
}

std::vector<ShapeCase> select_shapes(const Spec& spec, const ShapeSelection& sel) {
  std::vector<ShapeCase> shapes;
  if (sel.correctness)
    for (const auto& s : spec.correctness_shapes) shapes.push_back({s, ShapeClass::Correctness});
  if (sel.heldout)
    for (const auto& s : spec.heldout_shapes) shapes.push_back({s, ShapeClass::Heldout});
  // Every benchmark shape is gated; only the first max_benchmark_shapes are timed.
  int n = 0;
  for (const auto& s : spec.benchmark_shapes) {
    const bool timed = sel.max_benchmark_shapes < 0 || n++ < sel.max_benchmark_shapes;
    if (timed || sel.include_untimed_benchmarks) shapes.push_back({s, ShapeClass::Benchmark, timed});
  }
  return shapes;
}

PreparedEvaluation prepare_evaluation(const Spec& spec, const Op& op, const Builder& builder,
                                      const CandidateInput& input, const ShapeSelection& sel, std::uint64_t seed) {
  PreparedEvaluation p;
  const SeedTemplate* base_seed = baseline_seed(spec);
  if (!base_seed) {
    p.reasons.push_back("spec: no seed template to build the baseline from");
    return p;
  }
  for (const auto& k : base_seed->knobs) p.baseline_knobs[k.name] = k.default_value;
  // A --source that is one of the spec's seeds takes that seed's knobs and constraints; any other
  // source, the baseline's.
  const SeedTemplate* cand_seed = base_seed;
  if (!input.source_path.empty())
    for (const auto& s : spec.seeds) {
      std::error_code ec;
      if (std::filesystem::equivalent(s.source_path, input.source_path, ec)) cand_seed = &s;
    }
  for (const auto& k : cand_seed->knobs) p.candidate_knobs[k.name] = k.default_value;
  for (const auto& [name, value] : input.knob_overrides) {
    const auto knob = std::find_if(cand_seed->knobs.begin(), cand_seed->knobs.end(),
                                   [&](const KnobSpace& k) { return k.name == name; });
    if (knob == cand_seed->knobs.end()) {
      p.reasons.push_back("knobs: seed '" + cand_seed->name + "' has no knob '" + name + "'");
      return p;
    }
    // Only what the spec declares: a value outside its list was never meant to be searched or gated.
    if (std::find(knob->values.begin(), knob->values.end(), value) == knob->values.end()) {
      const auto str = [](const KnobValue& v) {
        const auto* i = std::get_if<std::int64_t>(&v);
        return i ? std::to_string(*i) : std::get<std::string>(v);
      };
      std::string list;
      for (const auto& v : knob->values) list += (list.empty() ? "" : ", ") + str(v);
      p.reasons.push_back("knobs: " + name + "=" + str(value) + " is not one of the values the spec declares for " +
                          name + " at " + spec.path + ":" + std::to_string(knob->line) + ":" + std::to_string(knob->col) +
                          " (" + list + ")");
      return p;
    }
    p.candidate_knobs[name] = value;
  }
  for (const auto& c : cand_seed->constraints) {
    bool holds = false;
    try {
      holds = constraint_holds(c, p.candidate_knobs);
    } catch (const std::exception& e) {
      p.reasons.push_back("knobs: constraint '" + c + "': " + e.what());
      return p;
    }
    if (!holds) {
      p.reasons.push_back("knobs: the knob values violate the constraint '" + c + "'");
      return p;
    }
  }

  auto request_for = [&](const std::string& path, const std::string& text, const Knobs& k) {
    BuildRequest r;
    r.name = std::filesystem::path(path).stem().string();
    r.source = text;
    r.source_path = path;
    r.defines = op.template_defines(spec.config);
    r.knobs = k;
    r.arch = spec.arch;
    return r;
  };
  std::string why;
  const auto base_template = read_template(base_seed->source_path, &why);
  if (!base_template) {
    p.reasons.push_back("build-failed: cannot read the baseline seed's source: " + why);
    return p;
  }
  const std::string* base_text = &base_template->text;
  BuildRequest cand_req = request_for(base_seed->source_path, *base_text, p.candidate_knobs);
  if (!input.source_path.empty()) {
    const auto source = read_template(input.source_path, &why);
    if (!source) {
      p.reasons.push_back("build-failed: " + why);
      return p;
    }
    cand_req = request_for(input.source_path, source->text, p.candidate_knobs);
  } else if (!input.ptx_path.empty()) {
    auto text = read_text(input.ptx_path);
    if (!text) {
      p.reasons.push_back("build-failed: cannot open " + input.ptx_path);
      return p;
    }
    cand_req = request_for(input.ptx_path, "", p.candidate_knobs);
    cand_req.ptx_override = *text;
  }
  cand_req.ptx_pass = input.ptx_pass;
  auto built = builder.build_all({cand_req, request_for(base_seed->source_path, *base_text, p.baseline_knobs)});
  p.candidate = std::move(built[0]);
  p.baseline = std::move(built[1]);
  if (!p.candidate.ok) p.reasons.push_back("build-failed: candidate at " + p.candidate.stage + ": " + p.candidate.error);
  if (!p.baseline.ok) p.reasons.push_back("build-failed: baseline at " + p.baseline.stage + ": " + p.baseline.error);
  if (!p.reasons.empty()) return p;

  p.shapes = select_shapes(spec, sel);
  for (const auto& sc : p.shapes) {
    LaunchPlan plan;
    try {
      plan = op.launch_plan(sc.shape, spec.config, p.candidate_knobs);
    } catch (const std::invalid_argument& e) {
      p.reasons.push_back(std::string("launch-plan: ") + e.what());
      return p;
    }
    for (const auto& v : check_ir(*p.candidate.module, plan)) {
      const std::string r = v.rule + ": " + v.message;
      if (std::find(p.reasons.begin(), p.reasons.end(), r) == p.reasons.end()) p.reasons.push_back(r);
    }
  }
  if (!p.reasons.empty()) return p;

  EvalRequest& req = p.request;
  req.op = spec.op;
  req.op_file = spec.op_file;
  req.config = spec.config;
  req.shapes = p.shapes;
  req.candidate_knobs = p.candidate_knobs;
  req.baseline_knobs = p.baseline_knobs;
  req.tolerances = spec.tolerances;
  req.seed = seed;
  req.candidate_cubin = p.candidate.cubin;
  req.baseline_cubin = p.baseline.cubin;
  return p;
}

}  // namespace ptxevo::evaluator
