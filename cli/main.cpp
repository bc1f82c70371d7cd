// ptxevo command line. Subcommands live in their own files; this only wires them to CLI11.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>
#include <string>

#include "cli/arch_option.hpp"
#include "cli/build_command.hpp"
#include "cli/campaign_command.hpp"
#include "cli/eval_command.hpp"
#include "cli/export_command.hpp"
#include "cli/ir_commands.hpp"
#include "cli/mutate_command.hpp"
#include "cli/prior_command.hpp"
#include "cli/prior_study_command.hpp"
#include "cli/report_command.hpp"
#include "cli/universe_command.hpp"
#include "cli/worker_command.hpp"
#include "cluster/session.hpp"

namespace {

int run_cli(int argc, char** argv, ptxevo::cluster::Session* mpi) {
  CLI::App app{"ptxevo: evolutionary search for fast, verified GPU kernels"};
  // `ptxevo [options] SPEC` runs the campaign; everything else is a subcommand.
  app.require_subcommand(0, 1);
  ptxevo::cli::CampaignCliOptions camp;
  app.add_option("spec", camp.spec, "Spec file (TOML): run or resume its campaign");
  app.add_option("--arch", camp.arch, ptxevo::cli::kArchHelp);
  app.add_option("--db", camp.db, "Trace database (default: ptxevo-runs/<spec stem>/campaign.db, the run folder, with its HTML report)");
  app.add_option("--replay", camp.replay,
                 "Take timings from this replay data instead of a GPU (default without a GPU: <spec stem>.replay.json beside the spec, else in the nearest data/replay/ above it)");
  app.add_option("--budget", camp.budget, "Candidate evaluations (default: the spec's [budget])");
  app.add_option("--minutes", camp.minutes, "Wall-time limit in minutes");
  app.add_option("--target", camp.target, "Stop once the best fitness reaches this");
  app.add_option("--islands", camp.islands, "Islands of the population")->capture_default_str();
  app.add_option("--island-size", camp.island_size, "Members per island")->capture_default_str();
  app.add_option("--batch", camp.batch, "Children per batch (one GPU call)")->capture_default_str();
  app.add_option("--warm-start", camp.warm_start,
                 "Genomes of earlier campaigns on the same op in this database to start from (-1: up to half "
                 "the first population; 0: none)")
      ->capture_default_str();
  app.add_option("--max-spill-bytes", camp.max_spill_bytes,
                 "Static screen: candidates with more spill stores than this (bytes, all entries) are not measured")
      ->capture_default_str();
  app.add_option("--min-samples", camp.min_samples,
                 "Timing: paired samples per benchmark shape before a candidate's timing may stop early (30: "
                 "always take all 30)")
      ->check(CLI::Range(6, 30))
      ->capture_default_str();
  app.add_option("--ci-width", camp.ci_width,
                 "Timing: stop a shape once its speedup's 95% CI is narrower than this fraction (0: never early)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--initial", camp.initial, "Random genomes besides the seeds in a new campaign")->capture_default_str();
  app.add_option("--seed", camp.seed, "Seed of the proposals (inputs are always fresh)")->capture_default_str();
  app.add_option("--max-benchmark-shapes", camp.max_benchmark_shapes, "Time only the first N benchmark shapes (every shape is still gated)");
  app.add_option("--gpus", camp.gpus, "GPUs to measure on")->capture_default_str();
  app.add_option("--workers-per-gpu", camp.workers_per_gpu,
                 "Worker processes per GPU (they take turns on it: one prepares inputs while another measures)")
      ->capture_default_str();
  app.add_option("--timeout", camp.timeout_s, "Seconds per candidate before a hung worker is killed")->capture_default_str();
  app.add_flag("--no-final", camp.no_final, "Skip re-measuring the winner at the end");
  app.add_option("--determinism-runs", camp.determinism_runs,
                 "Candidates' gate: runs per shape and distribution that must agree bit for bit (lower only to "
                 "measure what the check costs; the winner's final check runs the full gate)")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  app.add_flag("--no-guard-pages", camp.no_guard_pages,
               "Candidates gated without guard pages, to measure what they cost (the final check keeps them)");
  app.add_flag("--no-degenerate-rows", camp.no_degenerate_rows,
               "Candidates gated without degenerate rows, to measure what they cost (the final check keeps them)");
  app.add_option("--build-factor", camp.build_factor,
                 "Candidates built and screened per batch slot before a queued batch goes out, for the cost model "
                 "to choose from (1: no choice); a GPU worker with nothing to do never waits for them")
      ->check(CLI::Range(1.0, 8.0))
      ->capture_default_str();
  app.add_option("--random-edit-share", camp.random_edit_share,
                 "Share of the first population's random genomes that carry PTX edits (of passes that apply)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--random-max-edits", camp.random_max_edits, "Such a genome carries 1 to this many distinct passes")
      ->check(CLI::Range(1, 8))
      ->capture_default_str();
  app.add_flag("--no-cost-model", camp.no_cost_model,
               "Measure candidates in proposal order instead of letting the learned cost model choose among them");
  app.add_option("--passes", camp.passes,
                 "PTX passes the campaign's children and random genomes may carry, comma-separated ('none': knob "
                 "moves only; default: every built-in pass but launch_bounds)");
  app.add_option("--build-rounds", camp.build_rounds,
                 "Build rounds (about a batch of proposals each) running at once while the GPU measures")
      ->check(CLI::Range(1, 8))
      ->capture_default_str();
  app.add_flag("--no-cache", camp.no_cache, "Do not use the on-disk build cache");
  app.add_option("--rank-timeout", camp.rank_timeout_s,
                 "Under mpirun: seconds a rank may stay silent (no heartbeat) before it counts as lost and the "
                 "campaign goes on without it")
      ->check(CLI::Range(2.0, 3600.0))
      ->capture_default_str();
  app.add_flag("--quiet", camp.quiet, "Progress lines to stderr");
  ptxevo::cli::add_agent_options(app, camp);

  ptxevo::cli::ReplayExportOptions rx;
  auto* replay = app.add_subcommand("replay", "Replay data: measurements recorded on a GPU, for campaigns without one");
  replay->require_subcommand(1);
  auto* rexport = replay->add_subcommand("export", "Write replay data from a GPU campaign in a trace database");
  rexport->add_option("spec", rx.spec, "Spec file (TOML); default: the one recorded with the campaign");
  rexport->add_option("--db", rx.db, "Trace database")->required();
  rexport->add_option("--out", rx.out, "Replay data file to write (JSON)")->required();
  rexport->add_option("--commit", rx.commit, "Commit the measured binaries were built from (provenance)");
  rexport->add_option("--campaign", rx.campaign, "Campaign id (default: the latest GPU campaign of SPEC)");
  rexport->add_option("--arch", rx.arch, ptxevo::cli::kArchHelp);
  app.set_version_flag("--version", "ptxevo 0.1.0");
  ptxevo::cli::register_export_command(app);
  ptxevo::cli::register_universe_command(app, argv[0]);
  ptxevo::cli::register_prior_study_command(app);

  auto* ir = app.add_subcommand("ir", "Read PTX into the IR: print it canonically or show its analyses");
  ir->require_subcommand(1);
  ptxevo::cli::IrOptions opts;
  auto* print = ir->add_subcommand("print", "Parse FILE.ptx and write the canonical PTX to stdout");
  print->add_option("file", opts.file, "PTX file")->required();
  print->add_flag("--no-verify", opts.no_verify, "Print without running the IR verifier first");
  auto* stats = ir->add_subcommand("stats", "Parse FILE.ptx and print CFG, loop, register and memory analyses");
  stats->add_option("file", opts.file, "PTX file")->required();
  stats->add_flag("--json", opts.json, "Write the analyses as JSON");
  auto* verify = ir->add_subcommand("verify", "Parse and verify FILE.ptx; print problems as FILE:LINE:COL");
  verify->add_option("file", opts.file, "PTX file")->required();

  ptxevo::cli::EvalOptions eval_opts;
  auto* eval = app.add_subcommand("eval", "Build one candidate for SPEC, run the correctness gate and the timer");
  eval->add_option("spec", eval_opts.spec, "Spec file (TOML)")->required();
  eval->add_option("--arch", eval_opts.arch, ptxevo::cli::kArchHelp);
  auto* src = eval->add_option("--source", eval_opts.source, "CUDA C++ template to evaluate (default: the baseline seed)");
  eval->add_option("--ptx", eval_opts.ptx, "PTX to evaluate instead of a CUDA source")->excludes(src);
  eval->add_option("--knobs", eval_opts.knobs, "Knob values over the seed defaults: NAME=VALUE,...");
  eval->add_option("--candidate", eval_opts.candidate, "A campaign candidate by id (its knobs and PTX edits; needs --db)");
  eval->add_option("--db", eval_opts.db, "Trace database holding --candidate (default: the spec's run folder, ptxevo-runs/<spec stem>/campaign.db)");
  eval->add_flag("--json", eval_opts.json, "Print the result as JSON");
  eval->add_option("--json-out", eval_opts.json_out, "Also write the JSON result to this file");
  eval->add_option("--device", eval_opts.device, "GPU ordinal")->capture_default_str();
  eval->add_option("--timeout", eval_opts.timeout_s, "Seconds before a hung candidate's worker is killed")->capture_default_str();
  eval->add_option("--max-benchmark-shapes", eval_opts.max_benchmark_shapes, "Time only the first N benchmark shapes (every shape is still gated)");
  eval->add_option("--seed", eval_opts.seed, "Random seed for the inputs (default: fresh)");
  eval->add_flag("--no-cache", eval_opts.no_cache, "Do not use the on-disk build cache");
  eval->add_flag("--no-guard-pages", eval_opts.no_guard_pages,
                 "Gate without guard pages, to measure what they cost (reads outside a tensor then pass)");
  eval->add_option("--determinism-runs", eval_opts.determinism_runs,
                   "Runs per shape and input distribution whose outputs must agree bit for bit; runs after the "
                   "second start beside kernels occupying part of the GPU (1: no determinism check)")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  eval->add_flag("--no-degenerate-rows", eval_opts.no_degenerate_rows,
                 "Gate without the degenerate-rows distribution, to measure what it costs (zero, constant, tiny and "
                 "denormal rows then go untested)");
  eval->add_option("--repeat", eval_opts.repeat,
                   "Gate the candidate N times on fresh inputs (no timing) and count verdicts and reasons: how "
                   "often a flaky defect escapes")
      ->check(CLI::Range(1, 100000));

  ptxevo::cli::BuildOptions build_opts;
  auto* build = app.add_subcommand("build", "Build one candidate for SPEC and write its cubin, PTX and launch.json to --out");
  build->add_option("spec", build_opts.spec, "Spec file (TOML)")->required();
  build->add_option("--arch", build_opts.arch, ptxevo::cli::kArchHelp);
  auto* bsrc = build->add_option("--source", build_opts.source, "CUDA C++ template to build (default: the baseline seed)");
  build->add_option("--ptx", build_opts.ptx, "PTX to build instead of a CUDA source")->excludes(bsrc);
  build->add_option("--knobs", build_opts.knobs, "Knob values over the seed defaults: NAME=VALUE,...");
  build->add_option("--candidate", build_opts.candidate, "A campaign candidate by id (its knobs and PTX edits; needs --db)");
  build->add_option("--db", build_opts.db, "Trace database holding --candidate (default: the spec's run folder, ptxevo-runs/<spec stem>/campaign.db)");
  build->add_option("--out", build_opts.out_dir, "Directory for kernel.cubin, kernel.ptx, resources.json, launch.json")->required();
  build->add_option("--shapes", build_opts.shapes, "Shapes in launch.json: benchmark, correctness, heldout or all")->capture_default_str();
  build->add_flag("--no-cache", build_opts.no_cache, "Do not use the on-disk build cache");

  int worker_device = 0, worker_in = 3, worker_out = 4;
  auto* worker = app.add_subcommand("worker", "GPU worker process (started by ptxevo itself)");
  worker->group("");  // hidden from --help
  worker->add_option("--device", worker_device);
  worker->add_option("--in-fd", worker_in);
  worker->add_option("--out-fd", worker_out);

  std::string mutate_file, mutate_pass;
  std::vector<std::string> mutate_params;
  bool mutate_list = false, mutate_no_verify = false;
  auto* mutate = app.add_subcommand("mutate", "Apply one mutator pass to FILE.ptx and print the result (--list: the passes)");
  auto* mlist = mutate->add_flag("--list", mutate_list, "List the passes, one name per line");
  auto* mfile = mutate->add_option("file", mutate_file, "PTX file")->excludes(mlist);
  auto* mpass = mutate->add_option("--pass", mutate_pass, "Pass name (see --list)")->excludes(mlist);
  mutate->add_option("--params", mutate_params, "Pass parameters, key=value ...")->excludes(mlist);
  mutate->add_flag("--no-verify", mutate_no_verify, "Apply the pass without running the IR verifier on FILE first");
  mfile->needs(mpass);
  mpass->needs(mfile);

  ptxevo::cli::PriorOptions prior_opts;
  auto* prior = app.add_subcommand("prior",
                                   "What the learned prior believes: campaigns feeding it, operator posteriors, the "
                                   "cost model's held-out rank correlation");
  prior->add_option("--db", prior_opts.db, "Trace database")->required();
  prior->add_option("--top", prior_opts.top, "Operators listed per posterior key")->capture_default_str();
  ptxevo::cli::ReportOptions report_opts;
  std::int64_t report_campaign = 0;
  auto* report = app.add_subcommand("report", "Summarise a campaign from the trace database; --html writes a page with plots");
  report->add_option("--db", report_opts.db, "Trace database (default: the one campaign under ./ptxevo-runs/, else ./ptxevo.db)");
  auto* rcampaign = report->add_option("--campaign", report_campaign, "Campaign id (default: the most recently active)");
  report->add_option("--html", report_opts.html, "Also write a self-contained HTML report to this file");

  CLI11_PARSE(app, argc, argv);
  if (mpi && mpi->size() > 1 && !app.get_subcommands().empty()) {
    if (mpi->rank() == 0) std::cerr << "error: only the campaign (ptxevo SPEC ...) runs under mpirun; run subcommands alone\n";
    return 2;
  }
  camp.mpi = mpi;
  if (rexport->parsed()) return ptxevo::cli::run_replay_export(rx, std::cout, std::cerr);
  if (app.get_subcommands().empty()) {
    if (camp.spec.empty()) {
      std::cerr << app.help() << "\nptxevo: give a spec file to run its campaign, or a subcommand\n";
      return 2;
    }
    camp.self_exe = ptxevo::cli::self_executable(argv[0]);
    camp.replay_only = !camp.replay.empty();  // --replay: timings from the record, even beside a GPU
    return ptxevo::cli::run_campaign(camp, std::cout, std::cerr);
  }
  if (prior->parsed()) return ptxevo::cli::run_prior(prior_opts, std::cout, std::cerr);
  if (report->parsed()) {
    if (rcampaign->count() > 0) report_opts.campaign = report_campaign;
    return ptxevo::cli::run_report(report_opts, std::cout, std::cerr);
  }
  if (mutate->parsed()) {
    if (mutate_list) return ptxevo::cli::run_mutate_list(std::cout);
    if (mutate_file.empty()) {
      std::cerr << "ptxevo mutate: give --list, or FILE --pass NAME [--params k=v ...]\n";
      return 2;
    }
    return ptxevo::cli::run_mutate(mutate_file, mutate_pass, mutate_params, !mutate_no_verify, std::cout, std::cerr);
  }
  if (eval->parsed()) {
    eval_opts.self_exe = ptxevo::cli::self_executable(argv[0]);
    return ptxevo::cli::run_eval(eval_opts, std::cout, std::cerr);
  }
  if (build->parsed()) return ptxevo::cli::run_build(build_opts, std::cout, std::cerr);
  if (worker->parsed()) return ptxevo::cli::run_worker(worker_device, worker_in, worker_out);
  if (print->parsed()) return ptxevo::cli::run_ir_print(opts, std::cout, std::cerr);
  if (stats->parsed()) return ptxevo::cli::run_ir_stats(opts, std::cout, std::cerr);
  if (verify->parsed()) return ptxevo::cli::run_ir_verify(opts, std::cout, std::cerr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // Under mpirun or srun the campaign spreads over the job's ranks; run alone, MPI stays unloaded.
  // GPU workers are this binary's children and inherit the launcher's environment: they never join.
  const bool gpu_worker = argc > 1 && std::string(argv[1]) == "worker";
  std::unique_ptr<ptxevo::cluster::Session> mpi;
  try {
    if (!gpu_worker) mpi = ptxevo::cluster::Session::join_if_launched(&argc, &argv);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  const int rc = run_cli(argc, argv, mpi.get());
  return mpi ? mpi->finish(rc) : rc;
}
