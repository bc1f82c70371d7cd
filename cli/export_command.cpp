#include "cli/export_command.hpp"

#include <CLI/CLI.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "cli/arch_option.hpp"
#include "cli/build_command.hpp"
#include "kernels/builtin_ops.hpp"

namespace ptxevo::cli {

namespace {

std::string knob_list(const evaluator::Knobs& k) {
  std::string s;
  for (const auto& [name, v] : k) {
    s += (s.empty() ? "" : ",") + name + "=";
    if (const auto* i = std::get_if<std::int64_t>(&v)) s += std::to_string(*i);
    else s += std::get<std::string>(v);
  }
  return s;
}

// ptx: the candidate's final PTX, rebuilt and described by `ptxevo build` (cubin, resources,
// launch.json for every shape), plus export.json with the provenance.
int write_ptx(const exporter::ExportRequest& r, const exporter::ResolvedCandidate& c, std::ostream& out,
              std::ostream& err) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(r.out_dir, ec);
  const fs::path ptx = fs::path(r.out_dir) / "kernel.ptx";
  {
    std::ofstream f(ptx, std::ios::binary | std::ios::trunc);
    f << c.build.build.ptx;
    if (!f) {
      err << ptx.string() << ": error: cannot write the file\n";
      return 1;
    }
  }
  BuildOptions b;
  b.spec = c.spec.path;
  b.arch = c.spec.arch;
  b.ptx = ptx.string();
  b.knobs = knob_list(c.build.knobs);
  b.out_dir = r.out_dir;
  b.shapes = "all";
  b.no_cache = r.no_cache;
  if (const int rc = run_build(b, out, err); rc != 0) return rc;
  nlohmann::ordered_json meta = {{"format", "ptx"},
                                 {"op", c.spec.op},
                                 {"arch", c.spec.arch},
                                 {"genome", c.genome.to_json()},
                                 {"knobs", b.knobs},
                                 {"toolchain", c.build.toolchain},
                                 {"provenance", exporter::provenance_json(c.provenance)}};
  std::ofstream(fs::path(r.out_dir) / "export.json") << meta.dump(2) << "\n";
  return 0;
}

}  // namespace

int run_export(const exporter::ExportRequest& r, std::ostream& out, std::ostream& err) {
  try {
    const exporter::ResolvedCandidate c =
        exporter::resolve_candidate(r, std::make_shared<const evaluator::OpRegistry>(kernels::builtin_ops()));
    const std::string what = c.provenance.candidate_id ? "candidate " + std::to_string(*c.provenance.candidate_id) +
                                                             " of " + c.provenance.db_path
                                                       : "spec " + c.spec.path + " (" + c.genome.describe() + ")";
    if (r.format == "ptx") {
      if (const int rc = write_ptx(r, c, out, err); rc != 0) return rc;
      out << "exported " << what << " as PTX to " << r.out_dir << "\n";
      return 0;
    }
    const exporter::ExportOutcome o = exporter::write_export(r, c);
    out << "exported " << what << " (" << r.format << "):\n";
    for (const auto& f : o.files) out << "  " << f << "\n";
    if (o.check)
      out << "verified: nvcc compiles it for " << c.spec.arch << " to the candidate's PTX (" << o.check->comparison.entries
          << " entries, " << o.check->comparison.instructions << " instructions and labels, same modulo names)\n";
    else if (r.verify)
      out << "not verified: nvcc was not found at $CUDA_HOME/bin or /usr/local/cuda/bin\n";
    return 0;
  } catch (const exporter::ExportError& e) {
    err << "error: " << e.what() << "\n";
    return 1;
  }
}

void register_export_command(CLI::App& app) {
  auto r = std::make_shared<exporter::ExportRequest>();
  auto candidate = std::make_shared<std::int64_t>(0);
  auto campaign = std::make_shared<std::int64_t>(0);
  auto no_verify = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("export", "Write a candidate as CUDA source, a PyTorch extension or PTX + launch.json");
  cmd->add_option("spec", r->spec, "Spec file (default with --db: the campaign's own)");
  cmd->add_option("--db", r->db, "Trace database: exports its campaign's winner, or --candidate");
  auto* cand = cmd->add_option("--candidate", *candidate, "Candidate id in --db");
  auto* camp = cmd->add_option("--campaign", *campaign, "Campaign id in --db (default: the latest)");
  cmd->add_option("--seed-name", r->seed, "Without --db: the seed template by name (default: the spec's baseline)");
  cmd->add_option("--knobs", r->knobs, "Without --db: knob values over the seed's defaults, NAME=VALUE,...");
  cmd->add_option("--edits", r->edits, "Without --db: PTX edits, pass[:key=value...],... (ptxevo mutate --list)");
  cmd->add_option("--arch", r->arch, std::string(kArchHelp) + " (with --db: the campaign's)");
  cmd->add_option("--format", r->format, "cuda, torch or ptx")->check(CLI::IsMember({"cuda", "torch", "ptx"}))->capture_default_str();
  cmd->add_option("--out", r->out_dir, "Output directory")->required();
  cmd->add_flag("--no-verify", *no_verify, "Do not compile the .cu with nvcc and compare its PTX with the candidate's");
  cmd->add_flag("--no-cache", r->no_cache, "Do not use the on-disk build cache");
  cmd->callback([=] {
    if (cand->count() > 0) r->candidate = *candidate;
    if (camp->count() > 0) r->campaign = *campaign;
    r->verify = !*no_verify;
    if (!normalize_arch_option(r->arch, std::cerr)) throw CLI::RuntimeError(2);
    const int rc = run_export(*r, std::cout, std::cerr);
    if (rc != 0) throw CLI::RuntimeError(rc);
    throw CLI::Success();
  });
}

}  // namespace ptxevo::cli
