// ptxevo command line. Subcommands live in their own files; this only wires them to CLI11.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/ir_commands.hpp"

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

  CLI11_PARSE(app, argc, argv);
  if (print->parsed()) return ptxevo::cli::run_ir_print(opts, std::cout, std::cerr);
  if (stats->parsed()) return ptxevo::cli::run_ir_stats(opts, std::cout, std::cerr);
  if (verify->parsed()) return ptxevo::cli::run_ir_verify(opts, std::cout, std::cerr);
  return 2;
}
