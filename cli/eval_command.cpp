#include "cli/eval_command.hpp"

#include "cli/build_command.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "evaluator/build_cache.hpp"
#include "evaluator/builder.hpp"
#include "evaluator/evaluation.hpp"
#include "evaluator/runner.hpp"
#include "evaluator/spec.hpp"
#include "mutators/pass.hpp"
#include "cli/spec_context.hpp"
#include "cli/campaign_command.hpp"
#include "search/campaign.hpp"
#include "search/genome_build.hpp"

namespace ptxevo::cli {

using namespace evaluator;
using nlohmann::json;

namespace {


std::string fmt(double v, int prec = 4) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*g", prec, v);
  return b;
}

json build_json(const BuildResult& b) {
  json res = json::array();
  for (const auto& f : b.resources)
    res.push_back({{"function", f.name}, {"registers", f.registers}, {"spill_stores", f.spill_stores},
                   {"spill_loads", f.spill_loads}, {"stack_frame", f.stack_frame}, {"shared_bytes", f.shared_bytes}});
  return {{"ok", b.ok}, {"stage", b.stage}, {"error", b.error}, {"key", b.key}, {"cache_hit", b.cache_hit},
          {"seconds", b.seconds}, {"resources", res}};
}

void print_build(const std::string& what, const BuildResult& b, std::ostream& out) {
  out << what << ": " << (b.ok ? "built" : "build failed at " + b.stage) << (b.cache_hit ? " (cache hit)" : "") << "\n";
  for (const auto& f : b.resources)
    out << "  " << f.name << ": " << f.registers << " registers, " << f.spill_stores << " B spill stores, "
        << f.stack_frame << " B stack, " << f.shared_bytes << " B static shared\n";
  if (!b.ok) out << b.error << "\n";
}

void print_report(const EvalReport& r, std::ostream& out) {
  out << "verdict: " << r.verdict;
  if (r.fitness) out << "   fitness (geomean speedup over baseline): " << fmt(*r.fitness);
  out << "\n";
  if (!r.environment.empty())
    out << "gpu: " << r.environment.at("gpu") << ", CUDA driver API " << r.environment.at("driver_version")
        << ", copy bandwidth " << fmt(r.copy_bandwidth / 1e12, 3) << " TB/s\n";
  out << "class        shape                 gate   rel_l2(out)  cand ms     base ms     speedup [95% CI]        of floor\n";
  for (const auto& s : r.shapes) {
    char line[512];
    const double l2 = s.rel_l2.count("out") ? s.rel_l2.at("out") : (s.rel_l2.empty() ? 0 : s.rel_l2.begin()->second);
    std::string timing;
    if (s.candidate_ms && s.baseline_ms && s.speedup) {
      char t[256];
      std::snprintf(t, sizeof t, "%-11.5f %-11.5f %5.3f [%5.3f, %5.3f]    %5.1f%%", s.candidate_ms->median,
                    s.baseline_ms->median, s.speedup->ratio, s.speedup->ci_low, s.speedup->ci_high,
                    100.0 * s.fraction_of_floor);
      timing = t;
    }
    std::snprintf(line, sizeof line, "%-12s %-21s %-6s %-12.3g %s\n", to_string(s.cls), shape_to_string(s.shape).c_str(),
                  s.passed ? "pass" : "FAIL", l2, timing.c_str());
    out << line;
  }
  for (const auto& reason : r.reasons) out << "  reason: " << reason << "\n";
}

// `--repeat N`: the gate alone, N times on fresh inputs; verdicts and first-reason codes
// counted. A defect that shows only now and then (an order-dependent reduction, a race) is
// measured by how often it passes.
int repeat_gate(Runner& runner, EvalRequest req, const EvalOptions& o, std::uint64_t seed, std::ostream& out) {
  req.time_benchmarks = false;
  int passed = 0;
  std::map<std::string, int> codes;
  json verdicts = json::array();
  const auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < o.repeat; ++k) {
    req.seed = seed + 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(k + 1);
    const EvalReport r = runner.evaluate(req);
    if (r.verdict == "pass") ++passed;
    else ++codes[r.reasons.empty() ? r.verdict : reason_code(r.reasons.front())];
    verdicts.push_back({{"seed", req.seed}, {"verdict", r.verdict}, {"reasons", r.reasons}});
    if (!o.json && ((k + 1) % 10 == 0 || k + 1 == o.repeat))
      out << "[" << k + 1 << "/" << o.repeat << "] passed " << passed << std::endl;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  json j = {{"spec", o.spec}, {"repeat", o.repeat}, {"determinism_runs", req.gate.determinism_runs}, {"passed", passed},
            {"failed_by_code", codes}, {"seconds", s}, {"evaluations", verdicts}};
  if (!o.json_out.empty()) std::ofstream(o.json_out) << j.dump(2) << "\n";
  if (o.json) {
    out << j.dump(2) << "\n";
  } else {
    out << "repeat: " << o.repeat << " gate-only evaluations on fresh inputs (determinism runs "
        << req.gate.determinism_runs << "), " << fmt(s, 3) << " s\n  passed: " << passed << "\n";
    for (const auto& [code, n] : codes) out << "  failed: " << n << " (" << code << ")\n";
  }
  return 0;
}

}  // namespace

int run_eval(const EvalOptions& o, std::ostream& out, std::ostream& err) {
  int status = 0;
  const auto ctx = SpecContext::load(o.spec, o.arch, o.no_cache, err, &status);
  if (!ctx) return status;
  const Spec& spec = ctx->spec();
  const Op& op = ctx->op();
  CandidateInput input;
  if (!candidate_input(*ctx, o.spec, {o.source, o.ptx, o.knobs, o.db, o.candidate}, &input, err)) return 1;
  const Builder& builder = ctx->builder();
  ShapeSelection sel;
  sel.max_benchmark_shapes = o.max_benchmark_shapes;
  const std::uint64_t seed =
      o.seed ? o.seed : static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  PreparedEvaluation p = prepare_evaluation(spec, op, builder, input, sel, seed);

  json j = {{"spec", o.spec}, {"op", spec.op}, {"arch", spec.arch}, {"seed", seed},
            {"candidate_knobs", to_json(p.request).value("candidate_knobs", json::object())},
            {"candidate_build", build_json(p.candidate)}, {"baseline_build", build_json(p.baseline)}};
  auto finish = [&](const EvalReport& r, int code) {
    j["report"] = to_json(r);
    if (!o.json_out.empty()) std::ofstream(o.json_out) << j.dump(2) << "\n";
    if (o.json) {
      out << j.dump(2) << "\n";
    } else {
      print_build("candidate", p.candidate, out);
      print_build("baseline", p.baseline, out);
      print_report(r, out);
    }
    return code;
  };
  p.request.gate.guard_pages = !o.no_guard_pages;
  p.request.gate.determinism_runs = o.determinism_runs;
  p.request.gate.degenerate_rows = !o.no_degenerate_rows;
  EvalReport report;
  if (!p.reasons.empty()) {
    report.verdict = "fail";
    report.reasons = p.reasons;
    return finish(report, 1);
  }
  RunnerOptions ro;
  ro.worker_exe = o.self_exe;
  ro.device = o.device;
  ro.timeout_s = o.timeout_s;
  Runner runner(ro);
  std::string why;
  if (!runner.available(&why)) {
    report.verdict = "not-run";
    report.reasons.push_back("no-gpu: " + why + "; the candidate was built and checked statically, nothing was run");
    return finish(report, 0);
  }
  // A cubin for another target cannot run here: say so rather than fail to load it.
  if (const std::string dev = runner.device().value("arch", std::string()); search::normalize_arch(dev) != spec.arch) {
    report.verdict = "not-run";
    report.reasons.push_back("no-gpu: the GPU is " + runner.device().value("name", std::string("?")) + " (" + dev +
                             "), not " + spec.arch + "; the candidate was built and checked statically, nothing was run");
    return finish(report, 0);
  }
  if (o.repeat > 0) return repeat_gate(runner, p.request, o, seed, out);
  report = runner.evaluate(p.request);
  return finish(report, report.verdict == "pass" ? 0 : 1);
}

std::string self_executable(const char* argv0) {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(argv0) : p.string();
}

}  // namespace ptxevo::cli
