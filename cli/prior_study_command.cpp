#include "cli/prior_study_command.hpp"

#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

#include "kernels/builtin_ops.hpp"
#include "search/prior_study.hpp"
#include "search/universe.hpp"

namespace ptxevo::cli {

namespace {

struct PriorStudyCliOptions {
  std::string universe;
  std::string spec;  // default: the universe's own spec path, as given, or beside the universe file
  std::string source_universe, source_spec;  // transfer between two universes (run_prior_study_transfer)
  search::StudyOptions study;
  std::vector<std::size_t> set_a;
  bool no_noise = false;
  bool one_direction = false;
};

// Loads a measured universe and its spec (given, or the universe's recorded path, or beside it).
bool load(const std::string& path, const std::string& given_spec, const evaluator::OpRegistry& registry,
          search::Universe* u, evaluator::Spec* spec, std::string* spec_path, std::ostream& err) {
  namespace fs = std::filesystem;
  try {
    *u = search::load_universe(path);
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return false;
  }
  if (u->measured_count() == 0) {
    err << "error: universe " << path << " holds no measurements (" << (u->note.empty() ? "built only" : u->note)
        << "); measure it with `ptxevo universe` on a GPU of " << u->arch << "\n";
    return false;
  }
  *spec_path = given_spec;
  if (spec_path->empty()) {
    const fs::path recorded = u->spec_file;
    const fs::path beside = fs::path(path).parent_path() / recorded.filename();
    *spec_path = fs::exists(recorded) ? recorded.string() : beside.string();
  }
  auto sr = evaluator::load_spec(*spec_path, registry);
  if (!sr.spec) {
    err << sr.error->format() << "\n(the universe " << path << " was made from " << u->spec_file
        << "; give it with --spec or --source-spec)\n";
    return false;
  }
  *spec = *sr.spec;
  spec->arch = u->arch;
  return true;
}

int run(const PriorStudyCliOptions& o, std::ostream& out, std::ostream& err) {
  const evaluator::OpRegistry registry = kernels::builtin_ops();
  search::Universe u, su;
  evaluator::Spec spec, source_spec;
  std::string spec_path, source_spec_path;
  if (!load(o.universe, o.spec, registry, &u, &spec, &spec_path, err)) return 1;
  const bool transfer = !o.source_universe.empty();
  if (transfer && !load(o.source_universe, o.source_spec, registry, &su, &source_spec, &source_spec_path, err)) return 1;
  if (transfer && !o.set_a.empty()) {
    err << "error: --set-a splits one universe's shapes; with --source-universe every shape of each is used\n";
    return 1;
  }
  search::StudyOptions so = o.study;
  so.set_a = o.set_a;
  so.noise = !o.no_noise;
  so.both_directions = !o.one_direction;
  try {
    if (transfer) {
      const auto r = search::run_prior_study_transfer(su, source_spec, u, spec, *registry.find(spec.op), so);
      out << "universe " << o.universe << ", spec " << spec_path << "; earlier campaigns on universe "
          << o.source_universe << ", spec " << source_spec_path << "\n"
          << search::format_study(r);
    } else {
      const auto r = search::run_prior_study(u, spec, *registry.find(spec.op), so);
      out << "universe " << o.universe << ", spec " << spec_path << "\n" << search::format_study(r);
    }
  } catch (const std::exception& e) {
    err << "error: " << o.universe << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

void register_prior_study_command(CLI::App& app) {
  auto o = std::make_shared<PriorStudyCliOptions>();
  auto* cmd = app.add_subcommand("prior-study",
                                 "The learned prior's replay proof: cold against warm simulated campaigns on a measured "
                                 "closed universe (ptxevo universe), with ablations and a shuffled-label control");
  cmd->add_option("--universe", o->universe, "Universe file measured on a GPU (ptxevo universe --out)")->required();
  cmd->add_option("--spec", o->spec, "Spec file (default: the universe's, as recorded, or beside the universe file)");
  cmd->add_option("--source-universe", o->source_universe,
                  "Earlier campaigns on this universe (every benchmark shape) and the new ones on --universe (every "
                  "benchmark shape), e.g. the same grid under a bf16 and an fp16 spec; default: two shape sets of "
                  "--universe");
  cmd->add_option("--source-spec", o->source_spec, "Spec file of --source-universe (default: as for --spec)");
  cmd->add_option("--seeds", o->study.seeds, "Campaigns per arm")->check(CLI::Range(1, 1000))->capture_default_str();
  cmd->add_option("--budget", o->study.budget,
                  "Evaluations per campaign (default: a third of the passing candidates, in whole batches)");
  cmd->add_option("--batch", o->study.batch, "Candidates measured per batch")->check(CLI::Range(1, 256))->capture_default_str();
  cmd->add_option("--build-factor", o->study.build_factor, "Candidates built per measured one")
      ->check(CLI::Range(1.0, 8.0))
      ->capture_default_str();
  cmd->add_option("--build-rounds", o->study.build_rounds,
                  "Rounds of proposals building at once, ahead of the measurer (the campaign's default)")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  cmd->add_option("--top-up-rounds", o->study.top_up_rounds,
                  "Rounds beyond the first a batch may wait for to fill up (the campaign's default)")
      ->check(CLI::Range(0, 16))
      ->capture_default_str();
  cmd->add_option("--random-edit-share", o->study.random_edits.share,
                  "Share of the first population's random genomes that carry PTX edits (the campaign's default)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--random-max-edits", o->study.random_edits.max_edits,
                  "Such a genome carries 1 to this many distinct passes (the campaign's default)")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  cmd->add_option("--seed", o->study.seed, "First seed of the list every arm shares")->capture_default_str();
  cmd->add_option("--arms", o->study.arms, "Arms to run, comma-separated (cold,warm,posterior,cost_model,seeds,shuffled; default all)")
      ->delimiter(',');
  cmd->add_option("--set-a", o->set_a,
                  "Benchmark-shape indices (0-based, spec order, comma-separated) of shape set A; default: every other one "
                  "from the first")
      ->delimiter(',');
  cmd->add_option("--resamples", o->study.resamples, "Bootstrap resamples")->capture_default_str();
  cmd->add_flag("--no-noise", o->no_noise, "Evaluations return the stored medians (no draw within the CI)");
  cmd->add_flag("--one-direction", o->one_direction,
                "Only target set A (earlier campaigns on set B); with --source-universe, only the new campaigns on --universe");
  cmd->add_option("--threads", o->study.threads, "Threads (0: all cores)")->capture_default_str();
  cmd->callback([o] {
    const int rc = run(*o, std::cout, std::cerr);
    if (rc != 0) throw CLI::RuntimeError(rc);
    throw CLI::Success();
  });
}

}  // namespace ptxevo::cli
