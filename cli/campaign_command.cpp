#include "cli/campaign_command.hpp"
#include "cli/campaign_mpi.hpp"
#include "cli/spec_context.hpp"
#include "cluster/session.hpp"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include <curl/curl.h>

#include "cli/arch_option.hpp"
#include "cli/llm_setup.hpp"
#include "evaluator/build_cache.hpp"
#include "evaluator/builder.hpp"
#include "evaluator/runner.hpp"
#include "evaluator/spec.hpp"
#include "kernels/builtin_ops.hpp"
#include "mutators/pass.hpp"
#include "search/campaign.hpp"
#include "search/campaign_files.hpp"
#include "search/measurer.hpp"
#include "search/proposer.hpp"
#include "report/data.hpp"
#include "report/html.hpp"
#include "search/replay.hpp"
#include "tracedb/queries.hpp"
#include "tracedb/trace_db.hpp"

namespace ptxevo::cli {

using namespace evaluator;
namespace fs = std::filesystem;

namespace {

std::string fmt_rho(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

// Ctrl-C (SIGINT) and SIGTERM stop the campaign cleanly: no new batches, the ones in flight
// finish and are recorded. A second signal exits at once (the database is crash-safe).
// The signals are taken synchronously by a thread of this object, so no handler and no global.
class StopOnSignal {
 public:
  explicit StopOnSignal(std::atomic<bool>& flag) : flag_(flag) {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGUSR2);  // our own "done" signal
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
    thread_ = std::thread([this] {
      int sig = 0;
      while (sigwait(&set_, &sig) == 0) {
        if (sig == SIGUSR2) return;
        if (flag_.exchange(true)) std::_Exit(130);
        std::fprintf(stderr, "\nstopping: finishing the batches in flight (press Ctrl-C again to quit at once)\n");
      }
    });
  }
  ~StopOnSignal() {
    pthread_kill(thread_.native_handle(), SIGUSR2);
    thread_.join();
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

 private:
  std::atomic<bool>& flag_;
  sigset_t set_{}, old_{};
  std::thread thread_;
};


}  // namespace

fs::path default_run_dir(const std::string& spec) { return fs::path("ptxevo-runs") / fs::path(spec).stem(); }

fs::path default_replay(const std::string& spec) {
  const fs::path p(spec);
  const std::string name = p.stem().string() + ".replay.json";
  const fs::path beside = p.parent_path() / name;
  if (fs::exists(beside)) return beside;
  std::error_code ec;
  for (fs::path dir = fs::absolute(p, ec).parent_path(); !ec && !dir.empty(); dir = dir.parent_path()) {
    const fs::path candidate = dir / "data" / "replay" / name;
    if (fs::exists(candidate)) {
      const fs::path rel = fs::proximate(candidate, ec);  // as the user would type it from here
      return !ec && !rel.empty() && *rel.begin() != ".." ? rel : candidate;
    }
    if (dir == dir.parent_path()) break;
  }
  return beside;
}

namespace {

// Each timed shape: candidate and baseline medians, paired speedup with its CI, fraction of floor.
void print_shape_table(const EvalReport& r, std::ostream& out) {
  out << "  shape                   cand ms     base ms     speedup [95% CI]        of floor\n";
  for (const auto& s : r.shapes) {
    if (!s.speedup || !s.candidate_ms || !s.baseline_ms) continue;
    char line[256];
    std::snprintf(line, sizeof line, "  %-22s  %-10.5f  %-10.5f  %5.3f [%5.3f, %5.3f]    %5.1f%%\n",
                  shape_to_string(s.shape).c_str(), s.candidate_ms->median, s.baseline_ms->median, s.speedup->ratio,
                  s.speedup->ci_low, s.speedup->ci_high, 100 * s.fraction_of_floor);
    out << line;
  }
}

// The winner's replayed figures per benchmark shape: its recorded evaluation, measured on the
// record's GPU, not here.
void print_replayed_best(tracedb::TraceDb& db, std::int64_t candidate, std::ostream& out) {
  const auto json = tracedb::latest_passing_report(db.connection(), candidate);
  if (!json) return;
  const EvalReport r = report_from_json(nlohmann::json::parse(*json));
  const auto gpu = r.environment.find("gpu");
  out << "its replayed speedups (recorded on " << (gpu != r.environment.end() ? gpu->second : std::string("the record's GPU"))
      << ", not measured here):\n";
  print_shape_table(r, out);
}

void print_final(const EvalReport& r, std::ostream& out) {
  out << "winner re-measured against the baseline: verdict " << r.verdict;
  if (r.fitness) out << ", fitness " << *r.fitness;
  out << "\n";
  print_shape_table(r, out);
  for (const auto& reason : r.reasons) out << "  reason: " << reason << "\n";
}

}  // namespace

namespace {

// libcurl's one-time global state, for the LLM agents' HTTP calls, held for the campaign.
class CurlGlobal {
 public:
  CurlGlobal() : ok_(curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK) {}
  ~CurlGlobal() {
    if (ok_) curl_global_cleanup();
  }
  CurlGlobal(const CurlGlobal&) = delete;
  CurlGlobal& operator=(const CurlGlobal&) = delete;
  bool ok() const { return ok_; }

 private:
  bool ok_;
};

}  // namespace

int run_campaign(const CampaignCliOptions& o, std::ostream& out, std::ostream& err) {
  if (o.mpi && o.mpi->rank() != 0) return serve_campaign_rank(o, *o.mpi, err);
  const bool use_llm = o.llm.agents == "llm";
  if (const std::string why = llm_options_error(o.llm); !why.empty()) {
    err << "error: " << why << "\n";
    return 2;
  }
  std::optional<CurlGlobal> curl;
  if (use_llm && !curl.emplace().ok()) {
    err << "error: libcurl could not initialise; run without --agents llm\n";
    return 1;
  }
  int status = 0;
  const auto ctx = SpecContext::load(o.spec, o.arch, o.no_cache, err, &status);
  if (!ctx) return status;
  const Spec& spec = ctx->spec();
  const std::string arch = spec.arch;
  const Op& op = ctx->op();
  const OpRegistry& registry = ctx->registry();

  // The run folder first: the database and report live outside the sources.
  const fs::path db_path = o.db.empty() ? default_run_dir(o.spec) / "campaign.db" : fs::path(o.db);
  {
    std::error_code ec;
    const bool existed = fs::exists(db_path, ec);
    if (!db_path.parent_path().empty()) fs::create_directories(db_path.parent_path(), ec);
    if (ec) {
      err << "error: cannot create the run folder " << db_path.parent_path().string() << ": " << ec.message()
          << " (choose another place with --db FILE)\n";
      return 1;
    }
    out << "run folder: " << (db_path.parent_path().empty() ? fs::path(".") : db_path.parent_path()).string()
        << " (trace database " << db_path.filename().string()
        << (existed ? ", resumed: delete the folder to start afresh" : "") << ")" << std::endl;
  }

  const Builder& builder = ctx->builder();

  // ---- where the timings come from ----
  std::vector<std::unique_ptr<search::Measurer>> owned;
  std::string why_no_gpu;
  if (!o.replay_only) {
    // Several workers per GPU: while one prepares inputs and references on the host, another
    // has the GPU (they take turns through a lock; no timing overlaps another's kernels).
    for (int d = 0; d < std::max(1, o.gpus); ++d) {
      bool device_ok = true;
      for (int w = 0; w < std::max(1, o.workers_per_gpu) && device_ok; ++w) {
        RunnerOptions ro;
        ro.worker_exe = o.self_exe;
        ro.device = d;
        ro.timeout_s = o.timeout_s;
        auto runner = std::make_unique<Runner>(ro);
        std::string reason;
        if (!runner->available(&reason)) {
          if (d == 0 && w == 0) why_no_gpu = reason;
          device_ok = false;
          break;
        }
        const std::string dev_arch = runner->device().value("arch", std::string());
        if (search::normalize_arch(dev_arch) != arch) {
          if (d == 0 && w == 0)
            why_no_gpu = "the GPU is " + runner->device().value("name", std::string("?")) + " (" + dev_arch + "), not " + arch;
          device_ok = false;
          break;
        }
        owned.push_back(std::make_unique<search::GpuMeasurer>(std::move(runner), builder.toolchain(), d));
      }
      if (!device_ok) break;
    }
  }
  std::string banner;
  std::shared_ptr<const search::ReplayProjection> projection;
  if (owned.empty()) {
    const fs::path replay_path = o.replay.empty() ? default_replay(o.spec) : fs::path(o.replay);
    const std::string no_gpu = o.replay_only ? "--replay given" : "no GPU for " + arch + " (" + why_no_gpu + ")";
    if (fs::exists(replay_path)) {
      search::ReplayData data;
      try {
        data = search::load_replay(replay_path);
        search::canonicalize_replay(data, op);
      } catch (const std::exception& e) {
        err << "error: " << e.what() << "\n";
        return 1;
      }
      const std::string mismatch = search::replay_mismatch(data, spec, arch);
      if (!mismatch.empty()) {
        if (!o.replay.empty()) {
          err << "error: replay data " << replay_path.string() << " does not fit " << o.spec << ": " << mismatch << "\n";
          return 1;
        }
        banner = "STATIC: " + no_gpu + ", and the replay data " + replay_path.string() + " does not fit (" + mismatch +
                 "). Candidates are built and screened; nothing is measured and no fitness is recorded.";
      } else {
        banner = "REPLAY: " + no_gpu + ". Timings come from " + replay_path.string() + " (" +
                 std::to_string(data.records.size()) + " candidates measured on " + data.gpu + ", driver " + data.driver +
                 ", commit " + data.commit + ", " + data.recorded_at +
                 "). Candidates are built for real here; nothing is measured on this machine. The search proposes only "
                 "what the record holds.";
        projection = std::make_shared<const search::ReplayProjection>(data, spec);
        owned.push_back(std::make_unique<search::ReplayMeasurer>(std::move(data)));
      }
    } else {
      if (!o.replay.empty()) {
        err << "error: replay data " << replay_path.string() << " does not exist\n";
        return 1;
      }
      banner = "STATIC: " + no_gpu + ", and no replay data (" + replay_path.string() +
               "). Candidates are built and screened; nothing is measured and no fitness is recorded.";
    }
  } else {
    std::set<int> devices;
    for (const auto& m : owned) devices.insert(m->device());
    banner = "GPU: measuring on " + std::to_string(devices.size()) + " x " +
             static_cast<search::GpuMeasurer*>(owned.front().get())->environment().gpu + " (" +
             std::to_string(owned.size()) + " workers).";
  }
  out << banner << std::endl;

  // Under mpirun the other ranks build and measure; rank 0's own GPU workers step aside.
  std::unique_ptr<MpiCampaign> mpi;
  if (o.mpi && o.mpi->size() > 1) {
    const std::string mode = owned.empty() ? "static" : owned.front()->mode();
    owned.clear();
    std::string why;
    try {
      mpi = start_mpi_campaign(o, *o.mpi, mode, fs::absolute(o.replay.empty() ? default_replay(o.spec) : fs::path(o.replay)).string(),
                               builder, out, &why);
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (!mpi) {
      err << "error: " << why << "\n";
      return 1;
    }
    for (auto& m : mpi->measurers) owned.push_back(std::unique_ptr<search::Measurer>(m.release()));
    mpi->measurers.clear();
    out << mpi->banner << std::endl;
  }

  std::optional<std::vector<std::string>> ptx_passes;
  if (!o.passes.empty()) {
    ptx_passes.emplace();
    if (o.passes != "none") {
      std::stringstream list(o.passes);
      for (std::string name; std::getline(list, name, ',');)
        if (!name.empty()) ptx_passes->push_back(name);
    }
    try {
      const auto registry_of_passes = mutators::builtin_passes();
      search::Proposer check(spec, registry_of_passes, &*ptx_passes);
    } catch (const std::invalid_argument& e) {
      err << "error: --passes: " << e.what() << "\n";
      return 2;
    }
  }

  std::optional<tracedb::TraceDb> db;
  try {
    db.emplace(tracedb::TraceDb::open(db_path));
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return 1;
  }

  search::CampaignOptions co;
  co.arch = arch;
  co.islands = o.islands;
  co.island_size = o.island_size;
  co.batch = o.batch;
  co.max_spill_bytes = o.max_spill_bytes;
  co.timing_min_samples = o.min_samples;
  co.timing_ci_width = o.ci_width;
  co.cost_model = !o.no_cost_model;
  co.build_factor = o.build_factor;
  co.random_edits.share = o.random_edit_share;
  co.random_edits.max_edits = o.random_max_edits;
  co.build_rounds = o.build_rounds;
  co.ptx_passes = ptx_passes;
  co.warm_start = o.warm_start;
  co.initial = o.initial;
  co.max_evaluations = o.budget;
  co.max_minutes = o.minutes;
  co.target_fitness = o.target;
  co.seed = o.seed;
  co.max_benchmark_shapes = o.max_benchmark_shapes;
  co.final_check = !o.no_final;
  co.determinism_runs = o.determinism_runs;
  co.guard_pages = !o.no_guard_pages;
  co.degenerate_rows = !o.no_degenerate_rows;
  std::vector<search::Measurer*> measurers;
  for (auto& m : owned) measurers.push_back(m.get());

  std::ostream& log = o.quiet ? err : out;
  std::unique_ptr<LlmSetup> llm;
  if (use_llm) {
    std::string why;
    llm = make_llm_setup(o.llm, *db, log, o.seed, why);
    if (!llm) {
      err << "error: " << why << "\n";
      return 2;
    }
    out << "LLM agents: " << describe_endpoint(o.llm) << ", beside the rule agents under the operator posterior"
        << std::endl;
  }
  std::atomic<bool> stop{false};
  search::CampaignResult res;
  {
    StopOnSignal signals(stop);
    try {
      search::CampaignEngine engine(spec, op, builder, *db, measurers, co, log, stop);
      // Earlier campaigns of other specs feed the cost model when their spec is still found.
      const std::filesystem::path db_dir = std::filesystem::path(db_path).parent_path();
      engine.set_earlier_configs([&registry, &db, db_dir](std::int64_t id) {
        return search::campaign_spec_config(*db, id, db_dir, registry);
      });
      if (projection) engine.restrict_to(projection);
      if (mpi) engine.build_on(mpi->builds.get());
      if (llm) {
        llm->client->set_cancel(&stop);  // Ctrl-C aborts a call in flight instead of waiting for the model
        engine.use_llm(llm->handles());
      }
      res = engine.run();
    } catch (const std::exception& e) {
      err << "error: " << e.what() << "\n(everything recorded so far is in " << db_path.string()
          << "; running the same command again resumes)\n";
      return 1;
    }
  }

  out << "\n" << banner << "\n";
  out << "campaign " << res.campaign_id << (res.resumed ? " (resumed)" : "") << " stopped: " << res.stop_reason << "; "
      << res.evaluations << " candidate evaluations in total, " << res.evaluations_this_run << " this run, "
      << res.built_this_run << " built, " << res.failures_this_run << " rejected, " << res.unmeasured_this_run
      << " unmeasured"
      << (res.abandoned_this_run > 0 ? ", " + std::to_string(res.abandoned_this_run) +
                                           " abandoned at the deadline or with a lost rank (kept as pending: running the same command "
                                           "again resumes them)"
                                     : std::string())
      << "\n";
  if (mpi) {
    mpi->hub->stop();
    out << "MPI: " << mpi->builds->built_remotely() << " builds on the building ranks";
    if (mpi->builds->built_locally() > 0)
      out << ", " << mpi->builds->built_locally() << " on rank 0 after the last building rank was lost";
    for (const auto& r : mpi->hub->ranks())
      if (!r.alive) out << "; rank " << r.rank << " (" << (r.role.empty() ? "no role" : r.role) << ") was lost";
    out << "\n";
  }
  if (res.mode == "static") {
    out << "nothing was measured: no fitness recorded\n";
  } else if (res.best) {
    out << "best: candidate " << res.best->candidate_id << ", fitness " << res.best->fitness << " [" << res.best->fitness_low
        << ", " << res.best->fitness_high << "] (geomean speedup over the baseline"
        << (res.mode == "replay" ? ", REPLAYED" : "") << ")\n  " << res.best->genome.describe() << "\n";
  } else {
    out << "no candidate passed the gate yet\n";
  }
  if (res.model_picks + res.random_picks + res.analytic_picks > 0)
    out << "cost model: chose " << res.model_picks << " candidates by Thompson draws, " << res.analytic_picks
        << " by the analytic roofline/occupancy guess (too few rows), " << res.random_picks << " at random; fitted on "
        << res.last_fit.own_rows << " rows of this campaign"
        << (res.last_fit.earlier_rows
                ? std::string(" and ") + (res.last_fit.earlier_kept ? "" : "not ") + "on " +
                      std::to_string(res.last_fit.earlier_rows) + " rows of earlier campaigns" +
                      (res.last_fit.earlier_kept ? "" : " (the guard dropped them: they ranked this campaign's rows worse)")
                : std::string())
        << (res.last_fit.ptx_evaluated
                ? std::string("; PTX profile columns ") + (res.last_fit.ptx_used ? "used" : "left out") +
                      " (cross-validated Spearman " + fmt_rho(res.last_fit.rho_with_ptx) + " with, " +
                      fmt_rho(res.last_fit.rho_without_ptx) + " without)"
                : std::string())
        << "\n";
  {
    // Where the engine's own time went: on the H200 the GPU waited for the builds.
    char line[200];
    std::snprintf(line, sizeof line,
                  "engine: proposing, building and screening took %.0f s of %.0f s wall (builder %.0f s, screen and "
                  "records %.0f s); %lld builds\n",
                  res.prepare_s, res.wall_s, res.build_s, res.screen_s, static_cast<long long>(res.built_this_run));
    out << line;
  }
  if (res.mode == "gpu") {
    char line[200];
    std::snprintf(line, sizeof line,
                  "GPU busy %.0f%% of %.0f s wall time (held by a worker for gate runs and timing; workers spent "
                  "%.0f s on host-side inputs and references; proposing and building took %.0f s); %.0f candidates "
                  "per GPU-hour\n",
                  100 * res.gpu_busy, res.wall_s, res.prep_s, res.prepare_s, res.candidates_per_gpu_hour);
    out << line;
  }
  if (llm) {
    const tracedb::LlmSpend spend = db->llm_spend(res.campaign_id);
    const std::int64_t rejections = tracedb::count_agent_rejections(db->connection(), res.campaign_id);
    out << "LLM: " << spend.calls << " calls, " << spend.input_tokens << " input + " << spend.output_tokens
        << " output tokens, $" << spend.usd
        << (spend.unpriced_calls > 0 ? " plus " + std::to_string(spend.unpriced_calls) + " calls of unknown price" : std::string())
        << "; " << rejections << " rejected answers (table agent_rejections)"
        << (llm->agent->available() ? "" : "; the endpoint is down: the rule agents carried on") << "\n";
  }
  if (res.final_report) print_final(*res.final_report, out);
  if (res.mode == "replay" && res.best) print_replayed_best(*db, res.best->candidate_id, out);
  // The HTML report beside the database, rewritten after every run.
  const fs::path html = db_path.parent_path() / (db_path.stem().string() + ".html");
  try {
    const report::ReportData data = report::load_report(db_path, res.campaign_id);
    std::ofstream page(html, std::ios::binary | std::ios::trunc);
    report::write_report_html(data, page);
    page.close();
    if (!page) throw std::runtime_error("cannot write " + html.string());
    out << "report: " << html.string() << " (HTML, plots); in the terminal: ptxevo report --db " << db_path.string()
        << "\n";
  } catch (const std::exception& e) {
    err << "warning: no HTML report written: " << e.what() << "\n";
    out << "report: ptxevo report --db " << db_path.string() << " --campaign " << res.campaign_id << " [--html FILE]\n";
  }
  if (res.mode != "gpu")
    out << "on a GPU: the same command on a machine with a GPU of " << arch
        << " measures every candidate for real (gate and timer) instead of "
        << (res.mode == "replay" ? "replaying the record" : "building only") << "; docs/campaign.md\n";
  return res.stop_reason == "measurer-failed" || res.stop_reason == "baseline-build-failed" ? 1 : 0;
}

int run_replay_export(const ReplayExportOptions& o, std::ostream& out, std::ostream& err) {
  const OpRegistry registry = kernels::builtin_ops();
  try {
    if (!fs::exists(o.db)) throw std::runtime_error("trace database " + o.db + " does not exist");
    auto db = tracedb::TraceDb::open(o.db);
    // The campaign: as given, else the latest GPU campaign (of SPEC's op and arch when SPEC is given).
    std::optional<Spec> given;
    if (!o.spec.empty()) {
      SpecResult sr = load_spec(o.spec, registry);
      if (!sr.spec) {
        err << sr.error->format() << "\n";
        return 1;
      }
      given = *sr.spec;
      if (!apply_arch_option(o.arch, *given, err)) return 2;
    }
    std::int64_t id = o.campaign;
    if (id == 0) {
      const std::string op = given ? given->op : "", arch = given ? given->arch : "";
      const auto latest = tracedb::latest_gpu_campaign(db.connection(), op, arch);
      if (!latest)
        throw std::runtime_error("no GPU campaign" + (given ? " for " + op + " on " + arch : std::string()) + " in " + o.db);
      id = *latest;
    }
    Spec spec;
    if (given) {
      spec = *given;
    } else {
      // Without SPEC: the spec recorded with the campaign, at the campaign's arch.
      SpecResult sr = search::load_campaign_spec(db.connection(), id, "", registry);
      if (!sr.spec) throw std::runtime_error(sr.error->format());
      spec = *sr.spec;
      if (auto arch = tracedb::campaign_arch(db.connection(), id)) spec.arch = std::move(*arch);
      if (!apply_arch_option(o.arch, spec, err)) return 2;
    }
    const auto data = search::export_replay(db, id, spec, o.commit);
    if (data.records.empty()) throw std::runtime_error("campaign " + std::to_string(id) + " has no GPU evaluations");
    search::write_replay(o.out, data);
    out << "wrote " << data.records.size() << " records of campaign " << id << " (" << data.gpu << ") to " << o.out << "\n";
    return 0;
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace ptxevo::cli
