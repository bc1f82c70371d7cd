#include "evaluator/eval_types.hpp"

#include <cmath>

namespace ptxevo::evaluator {

using nlohmann::json;

const char* to_string(ShapeClass c) {
  switch (c) {
    case ShapeClass::Correctness: return "correctness";
    case ShapeClass::Heldout: return "heldout";
    case ShapeClass::Benchmark: return "benchmark";
  }
  return "?";
}

namespace {

ShapeClass shape_class_from(const std::string& s) {
  if (s == "heldout") return ShapeClass::Heldout;
  if (s == "benchmark") return ShapeClass::Benchmark;
  return ShapeClass::Correctness;
}

}  // namespace

json knobs_to_json(const Knobs& k) {
  json j = json::object();
  for (const auto& [n, v] : k) {
    if (const auto* i = std::get_if<std::int64_t>(&v)) j[n] = *i;
    else j[n] = std::get<std::string>(v);
  }
  return j;
}

Knobs knobs_from_json(const json& j) {
  Knobs k;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it->is_number_integer()) k[it.key()] = it->get<std::int64_t>();
    else k[it.key()] = it->get<std::string>();
  }
  return k;
}

namespace {

json finite_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

SampleStats stats_from(const json& j) {
  SampleStats s;
  s.n = j.value("n", 0);
  s.median = j.value("median", 0.0);
  s.ci_low = j.value("ci_low", 0.0);
  s.ci_high = j.value("ci_high", 0.0);
  s.mean = j.value("mean", 0.0);
  s.min = j.value("min", 0.0);
  s.max = j.value("max", 0.0);
  return s;
}

PairedRatio ratio_from(const json& j) {
  PairedRatio p;
  p.n = j.value("n", 0);
  p.ratio = j.value("ratio", 1.0);
  p.ci_low = j.value("ci_low", 1.0);
  p.ci_high = j.value("ci_high", 1.0);
  return p;
}

}  // namespace

json to_json(const SampleStats& s) {
  return {{"n", s.n}, {"median", s.median}, {"ci_low", s.ci_low}, {"ci_high", s.ci_high},
          {"mean", s.mean}, {"min", s.min}, {"max", s.max}};
}

json to_json(const PairedRatio& p) {
  return {{"n", p.n}, {"ratio", p.ratio}, {"ci_low", p.ci_low}, {"ci_high", p.ci_high}, {"significant", p.significant()}};
}

json to_json(const EvalRequest& r) {
  json shapes = json::array();
  for (const auto& s : r.shapes) {
    json js = {{"shape", s.shape}, {"class", to_string(s.cls)}};
    if (!s.timed) js["timed"] = false;
    shapes.push_back(std::move(js));
  }
  json tol = json::object();
  for (const auto& [k, t] : r.tolerances) tol[k] = {{"rel_l2", t.rel_l2}, {"max_abs", t.max_abs}};
  return {{"op", r.op},
          {"op_file", r.op_file},
          {"config", r.config},
          {"shapes", shapes},
          {"candidate_knobs", knobs_to_json(r.candidate_knobs)},
          {"baseline_knobs", knobs_to_json(r.baseline_knobs)},
          {"tolerances", tol},
          {"seed", r.seed},
          {"gate",
           {{"distributions_correctness", r.gate.distributions_correctness},
            {"distributions_benchmark", r.gate.distributions_benchmark},
            {"determinism_runs", r.gate.determinism_runs},
            {"degenerate_rows", r.gate.degenerate_rows},
            {"stop_at_first_failure", r.gate.stop_at_first_failure},
            {"guard_pages", r.gate.guard_pages}}},
          {"timing",
           {{"samples", r.timing.samples},
            {"min_samples", r.timing.min_samples},
            {"stop_rel_ci", r.timing.stop_rel_ci},
            {"warmup_batches", r.timing.warmup_batches},
            {"target_batch_ms", r.timing.target_batch_ms},
            {"pool_l2_multiple", r.timing.pool_l2_multiple},
            {"pool_memory_fraction", r.timing.pool_memory_fraction}}},
          {"time_benchmarks", r.time_benchmarks}};
}

EvalRequest request_from_json(const json& j) {
  EvalRequest r;
  r.op = j.at("op").get<std::string>();
  r.op_file = j.value("op_file", std::string());
  r.config = j.at("config").get<OpConfig>();
  for (const auto& s : j.at("shapes"))
    r.shapes.push_back({s.at("shape").get<Shape>(), shape_class_from(s.at("class")), s.value("timed", true)});
  r.candidate_knobs = knobs_from_json(j.at("candidate_knobs"));
  r.baseline_knobs = knobs_from_json(j.at("baseline_knobs"));
  for (auto it = j.at("tolerances").begin(); it != j.at("tolerances").end(); ++it)
    r.tolerances[it.key()] = {it->at("rel_l2").get<double>(), it->at("max_abs").get<double>()};
  r.seed = j.at("seed").get<std::uint64_t>();
  const auto& g = j.at("gate");
  r.gate.distributions_correctness = g.at("distributions_correctness");
  r.gate.distributions_benchmark = g.at("distributions_benchmark");
  r.gate.determinism_runs = g.contains("determinism_runs") ? g.at("determinism_runs").get<int>()
                                                            : (g.value("check_determinism", true) ? 2 : 1);
  r.gate.stop_at_first_failure = g.value("stop_at_first_failure", true);
  r.gate.guard_pages = g.value("guard_pages", true);
  r.gate.degenerate_rows = g.value("degenerate_rows", true);
  const auto& t = j.at("timing");
  r.timing.samples = t.at("samples");
  r.timing.min_samples = t.value("min_samples", r.timing.samples);
  r.timing.stop_rel_ci = t.value("stop_rel_ci", 0.0);
  r.timing.warmup_batches = t.at("warmup_batches");
  r.timing.target_batch_ms = t.at("target_batch_ms");
  r.timing.pool_l2_multiple = t.at("pool_l2_multiple");
  r.timing.pool_memory_fraction = t.at("pool_memory_fraction");
  r.time_benchmarks = j.at("time_benchmarks");
  return r;
}

json to_json(const EvalReport& r) {
  json shapes = json::array();
  for (const auto& s : r.shapes) {
    json js = {{"shape", s.shape}, {"class", to_string(s.cls)}, {"passed", s.passed}, {"reasons", s.reasons}};
    json l2 = json::object(), ma = json::object();
    for (const auto& [k, v] : s.rel_l2) l2[k] = finite_or_null(v);
    for (const auto& [k, v] : s.max_abs) ma[k] = finite_or_null(v);
    js["rel_l2"] = l2;
    js["max_abs"] = ma;
    if (s.candidate_ms) js["candidate_ms"] = to_json(*s.candidate_ms);
    if (s.baseline_ms) js["baseline_ms"] = to_json(*s.baseline_ms);
    if (s.speedup) js["speedup"] = to_json(*s.speedup);
    if (s.candidate_ms) {
      js["floor_ms"] = s.floor_ms;
      js["fraction_of_floor"] = s.fraction_of_floor;
      js["pool_sets"] = s.pool_sets;
      js["launches_per_batch"] = s.launches_per_batch;
    }
    shapes.push_back(js);
  }
  json j = {{"verdict", r.verdict}, {"reasons", r.reasons}, {"shapes", shapes}, {"environment", r.environment},
            {"copy_bandwidth", r.copy_bandwidth}, {"seconds", r.seconds}, {"prep_seconds", r.prep_seconds}, {"gpu_seconds", r.gpu_seconds}};
  j["fitness"] = r.fitness ? json(*r.fitness) : json(nullptr);
  if (!r.phase_seconds.empty()) j["phase_seconds"] = r.phase_seconds;
  return j;
}

EvalReport report_from_json(const json& j) {
  EvalReport r;
  r.verdict = j.at("verdict").get<std::string>();
  r.reasons = j.at("reasons").get<std::vector<std::string>>();
  for (const auto& js : j.at("shapes")) {
    ShapeReport s;
    s.shape = js.at("shape").get<Shape>();
    s.cls = shape_class_from(js.at("class"));
    s.passed = js.at("passed");
    s.reasons = js.at("reasons").get<std::vector<std::string>>();
    for (auto it = js.at("rel_l2").begin(); it != js.at("rel_l2").end(); ++it)
      s.rel_l2[it.key()] = it->is_null() ? NAN : it->get<double>();
    for (auto it = js.at("max_abs").begin(); it != js.at("max_abs").end(); ++it)
      s.max_abs[it.key()] = it->is_null() ? NAN : it->get<double>();
    if (js.contains("candidate_ms")) s.candidate_ms = stats_from(js["candidate_ms"]);
    if (js.contains("baseline_ms")) s.baseline_ms = stats_from(js["baseline_ms"]);
    if (js.contains("speedup")) s.speedup = ratio_from(js["speedup"]);
    s.floor_ms = js.value("floor_ms", 0.0);
    s.fraction_of_floor = js.value("fraction_of_floor", 0.0);
    s.pool_sets = js.value("pool_sets", 0);
    s.launches_per_batch = js.value("launches_per_batch", 0);
    r.shapes.push_back(std::move(s));
  }
  if (!j.at("fitness").is_null()) r.fitness = j.at("fitness").get<double>();
  r.environment = j.at("environment").get<std::map<std::string, std::string>>();
  r.copy_bandwidth = j.value("copy_bandwidth", 0.0);
  r.seconds = j.value("seconds", 0.0);
  r.prep_seconds = j.value("prep_seconds", 0.0);
  r.gpu_seconds = j.value("gpu_seconds", 0.0);
  if (j.contains("phase_seconds")) r.phase_seconds = j.at("phase_seconds").get<std::map<std::string, double>>();
  return r;
}

std::string reason_code(const std::string& reason) {
  const auto c = reason.find(':');
  return c == std::string::npos ? reason : reason.substr(0, c);
}

HeldoutResults redact_heldout(EvalReport& r) {
  HeldoutResults h;
  std::vector<ShapeReport> kept;
  for (auto& s : r.shapes) {
    if (s.cls != ShapeClass::Heldout) {
      kept.push_back(std::move(s));
      continue;
    }
    h.failed |= !s.passed;
    h.shapes.push_back(std::move(s));
  }
  r.shapes = std::move(kept);
  // The gate tags a shape's reasons "[heldout shape M=..., ...]"; a fault's reason names the shape
  // it happened on the same way.
  std::vector<std::string> reasons;
  for (auto& reason : r.reasons) {
    if (reason.find("[heldout shape") != std::string::npos) {
      h.failed = true;
      h.reasons.push_back(std::move(reason));
    } else {
      reasons.push_back(std::move(reason));
    }
  }
  if (h.failed) reasons.push_back(kHeldoutFailed);
  r.reasons = std::move(reasons);
  return h;
}

json to_json(const HeldoutResults& h) {
  EvalReport holder;
  holder.shapes = h.shapes;
  return {{"failed", h.failed}, {"reasons", h.reasons}, {"shapes", to_json(holder).at("shapes")}};
}

}  // namespace ptxevo::evaluator
