// ptxevo command line. Subcommands live in their own files; this only wires them to CLI11.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/eval_command.hpp"
#include "cli/ir_commands.hpp"
#include "cli/mutate_command.hpp"
#include "cli/worker_command.hpp"

int main(int argc, char** argv) {
  CLI::App app{"ptxevo: evolutionary search for fast, verified GPU kernels"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ptxevo 0.1.0");

  auto* ir = app.add_subcommand("ir", "Read PTX into the IR: print it canonically or show its analyses");
  ir->require_subcommand(1);
  ptxevo::cli::IrOptions opts;
  auto* print = ir->add_subcommand("print", "Parse FILE.ptx and write the canonical PTX to stdout");
  print->add_option("file", opts.file, "PTX file")->required();
  auto* stats = ir->add_subcommand("stats", "Parse FILE.ptx and print CFG, loop, register and memory analyses");
  stats->add_option("file", opts.file, "PTX file")->required();
  stats->add_flag("--json", opts.json, "Write the analyses as JSON");
  auto* verify = ir->add_subcommand("verify", "Parse and verify FILE.ptx; print problems as FILE:LINE:COL");
  verify->add_option("file", opts.file, "PTX file")->required();

  ptxevo::cli::EvalOptions eval_opts;
  auto* eval = app.add_subcommand("eval", "Build one candidate for SPEC, run the correctness gate and the timer");
  eval->add_option("spec", eval_opts.spec, "Spec file (TOML)")->required();
  auto* src = eval->add_option("--source", eval_opts.source, "CUDA C++ template to evaluate (default: the baseline seed)");
  eval->add_option("--ptx", eval_opts.ptx, "PTX to evaluate instead of a CUDA source")->excludes(src);
  eval->add_option("--knobs", eval_opts.knobs, "Knob values over the seed defaults: NAME=VALUE,...");
  eval->add_flag("--json", eval_opts.json, "Print the result as JSON");
  eval->add_option("--json-out", eval_opts.json_out, "Also write the JSON result to this file");
  eval->add_option("--device", eval_opts.device, "GPU ordinal")->capture_default_str();
  eval->add_option("--timeout", eval_opts.timeout_s, "Seconds before a hung candidate's worker is killed")->capture_default_str();
  eval->add_option("--max-benchmark-shapes", eval_opts.max_benchmark_shapes, "Time only the first N benchmark shapes");
  eval->add_option("--seed", eval_opts.seed, "Random seed for the inputs (default: fresh)");
  eval->add_flag("--no-cache", eval_opts.no_cache, "Do not use the on-disk build cache");

  int worker_device = 0, worker_in = 3, worker_out = 4;
  auto* worker = app.add_subcommand("worker", "GPU worker process (started by ptxevo itself)");
  worker->group("");  // hidden from --help
  worker->add_option("--device", worker_device);
  worker->add_option("--in-fd", worker_in);
  worker->add_option("--out-fd", worker_out);

  std::string mutate_file, mutate_pass;
  std::vector<std::string> mutate_params;
  bool mutate_list = false;
  auto* mutate = app.add_subcommand("mutate", "Apply one mutator pass to FILE.ptx and print the result (--list: the passes)");
  auto* mlist = mutate->add_flag("--list", mutate_list, "List the passes, one name per line");
  auto* mfile = mutate->add_option("file", mutate_file, "PTX file")->excludes(mlist);
  auto* mpass = mutate->add_option("--pass", mutate_pass, "Pass name (see --list)")->excludes(mlist);
  mutate->add_option("--params", mutate_params, "Pass parameters, key=value ...")->excludes(mlist);
  mfile->needs(mpass);
  mpass->needs(mfile);

  CLI11_PARSE(app, argc, argv);
  if (mutate->parsed()) {
    if (mutate_list) return ptxevo::cli::run_mutate_list(std::cout);
    if (mutate_file.empty()) {
      std::cerr << "ptxevo mutate: give --list, or FILE --pass NAME [--params k=v ...]\n";
      return 2;
    }
    return ptxevo::cli::run_mutate(mutate_file, mutate_pass, mutate_params, std::cout, std::cerr);
  }
  if (eval->parsed()) {
    eval_opts.self_exe = ptxevo::cli::self_executable(argv[0]);
    return ptxevo::cli::run_eval(eval_opts, std::cout, std::cerr);
  }
  if (worker->parsed()) return ptxevo::cli::run_worker(worker_device, worker_in, worker_out);
  if (print->parsed()) return ptxevo::cli::run_ir_print(opts, std::cout, std::cerr);
  if (stats->parsed()) return ptxevo::cli::run_ir_stats(opts, std::cout, std::cerr);
  if (verify->parsed()) return ptxevo::cli::run_ir_verify(opts, std::cout, std::cerr);
  return 2;
}
