#include "cli/universe_command.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "cli/eval_command.hpp"
#include "evaluator/build_cache.hpp"
#include "evaluator/builder.hpp"
#include "evaluator/evaluation.hpp"
#include "evaluator/runner.hpp"
#include "evaluator/spec.hpp"
#include "mutators/pass.hpp"
#include "cli/arch_option.hpp"
#include "cli/spec_context.hpp"
#include "search/campaign.hpp"
#include "search/measurer.hpp"
#include "search/universe.hpp"

namespace ptxevo::cli {

namespace fs = std::filesystem;
using namespace evaluator;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

int run_universe_command(const UniverseOptions& o, std::ostream& out, std::ostream& err) {
  int status = 0;
  const auto ctx = SpecContext::load(o.spec, o.arch, o.no_cache, err, &status);
  if (!ctx) return status;
  const Spec& spec = ctx->spec();
  const std::string arch = spec.arch;
  if (spec.seeds.empty()) {
    err << "error: " << o.spec << " has no seed template\n";
    return 1;
  }
  const Op& op = ctx->op();
  const SeedTemplate& seed = spec.seeds.front();
  if (const auto* base = baseline_seed(spec); !base || base->name != seed.name) {
    err << "error: " << o.spec << ": the universe is built over the first seed, '" << seed.name
        << "', which must be the baseline (the campaign's first population starts from it)\n";
    return 1;
  }

  // ---- the closed set ----
  std::string why;
  const auto grid = search::make_grid(seed, o.vary, &why);
  if (!why.empty()) {
    err << "error: " << why << "\n";
    return 2;
  }
  const SeedTemplate restricted = search::restrict_seed(seed, grid);
  const auto all = search::grid_assignments(restricted);
  const auto picked = search::thin_assignments(all, default_knobs(seed), o.stride, o.max);
  if (picked.empty()) {
    err << "error: no knob assignment of the grid meets the seed's constraints\n";
    return 2;
  }
  const auto passes = mutators::builtin_passes();
  std::vector<search::PtxEdit> edits;
  for (const auto& text : o.edits) {
    auto e = search::parse_edit(text, passes, &why);
    if (!e) {
      err << "error: " << why << "\n";
      return 2;
    }
    if (e->pass == "launch_bounds") {
      err << "error: --edits launch_bounds: campaigns never propose it (the knobs own the CTA size)\n";
      return 2;
    }
    for (const auto& have : edits)
      if (have.pass == e->pass) {
        err << "error: --edits names " << e->pass << " twice (a campaign adds a pass at most once)\n";
        return 2;
      }
    edits.push_back(std::move(*e));
  }
  search::Universe u;
  u.edits = edits;
  u.max_edits = o.max_edits;
  u.spec_file = o.spec;
  u.spec_hash = sha256_hex(read_file(o.spec));
  u.op = spec.op;
  u.arch = arch;
  u.seed = seed.name;
  u.grid = grid;
  u.closed = picked.size() == all.size();
  u.benchmark_shapes = spec.benchmark_shapes;
  u.created_at = utc_now();
  for (auto& g : search::universe_genomes(seed.name, picked, edits, o.max_edits)) {
    search::UniverseMember m;
    m.genome = std::move(g);
    m.genome_hash = m.genome.hash();
    u.members.push_back(std::move(m));
  }

  // ---- what an earlier run of this command already has ----
  std::size_t kept = 0;
  if (fs::exists(o.out) && !o.fresh) {
    search::Universe old;
    try {
      old = search::load_universe(o.out);
    } catch (const std::exception& e) {
      err << "error: " << e.what() << "\n(pass --fresh to overwrite it)\n";
      return 1;
    }
    if (const std::string m = search::universe_mismatch(old, spec, u.spec_hash); !m.empty()) {
      err << "error: " << o.out << " holds a universe that does not fit " << o.spec << ": " << m
          << " (pass --fresh to overwrite it)\n";
      return 1;
    }
    if (old.synthetic) {
      err << "error: " << o.out << " holds SYNTHETIC timings (a test fixture); pass --fresh to overwrite it\n";
      return 1;
    }
    std::map<std::string, const search::UniverseMember*> by_hash;
    for (const auto& m : old.members) by_hash[m.genome_hash] = &m;
    for (auto& m : u.members) {
      auto it = by_hash.find(m.genome_hash);
      if (it == by_hash.end() || (!it->second->measured() && it->second->build == "pending")) continue;
      m = *it->second;
      kept += m.measured() ? 1 : 0;
    }
    u.created_at = old.created_at.empty() ? u.created_at : old.created_at;
    u.gpu = old.gpu;
    u.driver = old.driver;
    u.commit = old.commit;
    u.measured_at = old.measured_at;
    u.toolchain = old.toolchain;
  }

  // ---- where timings come from: a GPU of this arch, or nothing ----
  const Builder& builder = ctx->builder();
  std::vector<std::unique_ptr<search::Measurer>> owned;
  std::string why_no_gpu;
  for (int w = 0; w < std::max(1, o.workers_per_gpu); ++w) {
    RunnerOptions ro;
    ro.worker_exe = o.self_exe;
    ro.device = 0;
    ro.timeout_s = o.timeout_s;
    auto runner = std::make_unique<Runner>(ro);
    std::string reason;
    if (!runner->available(&reason)) {
      why_no_gpu = reason;
      break;
    }
    const std::string dev_arch = runner->device().value("arch", std::string());
    if (search::normalize_arch(dev_arch) != arch) {
      why_no_gpu = "the GPU is " + runner->device().value("name", std::string("?")) + " (" + dev_arch + "), not " + arch;
      break;
    }
    owned.push_back(std::make_unique<search::GpuMeasurer>(std::move(runner), builder.toolchain(), 0));
  }
  if (!why_no_gpu.empty()) owned.clear();
  std::vector<search::Measurer*> measurers;
  for (auto& m : owned) measurers.push_back(m.get());

  const std::size_t n = u.members.size();
  std::string banner;
  if (measurers.empty()) {
    banner = "STATIC: no GPU for " + arch + " (" + why_no_gpu + "). " + std::to_string(n) +
             " candidates are built and screened; NOTHING IS MEASURED" +
             (kept > 0 ? " this run (the file keeps the " + std::to_string(kept) + " members measured before)."
                       : " and the file holds no timings.");
    if (u.measured_count() == 0) u.note = "built and screened only: no GPU for " + arch + " (" + why_no_gpu + ")";
  } else {
    banner = "GPU: measuring " + std::to_string(n - kept) + " of " + std::to_string(n) + " candidates (" +
             std::to_string(kept) + " measured before) on " + measurers.front()->environment().gpu + " (" +
             std::to_string(measurers.size()) + " workers), every benchmark shape, " + std::to_string(o.batch) +
             " per batch.";
    u.note = "";
  }
  out << banner << "\n"
      << "grid over " << seed.name << ": ";
  for (const auto& g : grid)
    if (g.values.size() > 1) {
      out << g.name << "={";
      for (std::size_t i = 0; i < g.values.size(); ++i)
        out << (i ? "," : "") << (std::holds_alternative<std::int64_t>(g.values[i]) ? std::to_string(std::get<std::int64_t>(g.values[i]))
                                                                                  : std::get<std::string>(g.values[i]));
      out << "} ";
    }
  out << "(others at their defaults): " << all.size() << " admitted assignments";
  if (!edits.empty()) {
    out << ", each with every subset of " << edits.size() << " PTX edits";
    if (o.max_edits >= 0) out << " (at most " << o.max_edits << ")";
  }
  out << ", " << n << " in the file"
      << (u.closed ? " (closed)" : " (a thinned subset: not closed under knob moves)") << std::endl;

  std::atomic<bool> stop{false};
  search::UniverseRunOptions ro;
  ro.batch = o.batch;
  ro.max_minutes = o.minutes;
  ro.commit = o.commit;
  search::UniverseRunResult res;
  try {
    res = search::run_universe(u, spec, op, builder, measurers, ro, out,
                               [&](const search::Universe& x) { search::write_universe(o.out, x); }, stop);
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n(what was measured so far is in " << o.out << "; the same command continues)\n";
    return 1;
  }

  out << "\n" << banner << "\n";
  out << "built " << res.built << " this run: " << res.failed << " failed to build, " << res.screened << " screened out\n";
  if (res.profiled + res.stale > 0)
    out << "PTX profiles added to " << res.profiled << " members built before they existed"
        << (res.stale ? " (" + std::to_string(res.stale) + " build different PTX now: left without)" : std::string()) << "\n";
  if (res.stop_reason == "static") {
    if (kept > 0)
      out << "nothing was measured this run (no GPU): " << o.out << " keeps its " << kept << " measured members\n";
    else
      out << "nothing was measured (no GPU): " << o.out << " holds builds and resources only\n";
  } else {
    out << "measured " << res.measured << " this run (" << res.passed << " passed the gate); " << u.measured_count() << " of "
        << n << " measured in the file, " << u.passing_count() << " passing; " << res.wall_s << " s\n";
    std::vector<const search::UniverseMember*> best;
    for (const auto& m : u.members)
      if (m.verdict == "pass" && m.fitness) best.push_back(&m);
    std::sort(best.begin(), best.end(), [](const auto* a, const auto* b) { return *a->fitness > *b->fitness; });
    for (std::size_t i = 0; i < best.size() && i < 5; ++i)
      out << "  " << *best[i]->fitness << "  " << best[i]->genome.describe() << "\n";
    if (res.left > 0)
      out << "partial (" << res.stop_reason << "): " << res.left
          << " candidates are not measured yet; run the same command again to measure them\n";
  }
  out << "wrote " << o.out << "\n";
  return res.stop_reason == "measurer-failed" || res.stop_reason == "baseline-build-failed" ? 1 : 0;
}

void register_universe_command(CLI::App& app, const char* argv0) {
  auto o = std::make_shared<UniverseOptions>();
  o->self_exe = self_executable(argv0);
  auto* cmd = app.add_subcommand(
      "universe", "Build, screen and (on a GPU) measure every knob assignment of a grid: the closed candidate set of the "
                  "prior's replay study");
  cmd->add_option("spec", o->spec, "Spec file (TOML); the grid is over its first seed")->required();
  cmd->add_option("--out", o->out, "Universe file (JSON) to write; an existing one of the same spec is continued")->required();
  cmd->add_option("--vary", o->vary,
                  "NAME=v1,v2,... (values from the spec; NAME alone: all): knobs the grid varies; the others stay at "
                  "their defaults. None given: every knob over its whole list");
  cmd->add_option("--edits", o->edits,
                  "PASS[:key=value...] (repeatable): each knob assignment also comes with every subset of these PTX "
                  "edits, in this order (`ptxevo mutate --list` lists the passes)");
  cmd->add_option("--max-edits", o->max_edits, "At most this many edits per member (-1: any)")->capture_default_str();
  cmd->add_option("--stride", o->stride, "Keep every K-th admitted assignment (the set is then not closed)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max", o->max, "At most N assignments, evenly spaced (0: all; the set is then not closed)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--batch", o->batch, "Candidates per worker call")->check(CLI::Range(1, 256))->capture_default_str();
  cmd->add_option("--minutes", o->minutes, "Start no batch after this many minutes (0: no limit); rerun to continue");
  cmd->add_option("--commit", o->commit, "Commit the binaries were built from (provenance)");
  cmd->add_option("--arch", o->arch, kArchHelp);
  cmd->add_option("--workers-per-gpu", o->workers_per_gpu, "Worker processes taking turns on the GPU")->capture_default_str();
  cmd->add_option("--timeout", o->timeout_s, "Seconds per candidate before a hung worker is killed")->capture_default_str();
  cmd->add_flag("--fresh", o->fresh, "Overwrite --out instead of continuing it");
  cmd->add_flag("--no-cache", o->no_cache, "Do not use the on-disk build cache");
  cmd->callback([o] {
    const int rc = run_universe_command(*o, std::cout, std::cerr);
    if (rc != 0) throw CLI::RuntimeError(rc);
    throw CLI::Success();
  });
}

}  // namespace ptxevo::cli
