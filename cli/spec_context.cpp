#include "cli/spec_context.hpp"

#include "cli/arch_option.hpp"
#include "cli/build_command.hpp"
#include "cli/campaign_command.hpp"
#include "kernels/builtin_ops.hpp"
#include "mutators/pass.hpp"
#include "search/genome_build.hpp"

namespace ptxevo::cli {

CachedBuilder::CachedBuilder(bool no_cache) {
  if (!no_cache && !evaluator::BuildCache::default_dir().empty()) cache_.emplace(evaluator::BuildCache::default_dir());
  builder_ = std::make_unique<evaluator::Builder>(cache_ ? &*cache_ : nullptr);
}

std::unique_ptr<SpecContext> SpecContext::load(const std::string& spec_path, const std::string& arch, bool no_cache,
                                               std::ostream& err, int* status) {
  std::unique_ptr<SpecContext> ctx(new SpecContext(no_cache));
  ctx->registry_ = kernels::builtin_ops();
  evaluator::SpecResult sr = evaluator::load_spec(spec_path, ctx->registry_);
  if (!sr.spec) {
    err << sr.error->format() << "\n";
    *status = 1;
    return nullptr;
  }
  ctx->spec_ = *sr.spec;
  if (!apply_arch_option(arch, ctx->spec_, err)) {
    *status = 2;
    return nullptr;
  }
  ctx->op_ = ctx->registry_.find(ctx->spec_.op);
  return ctx;
}

bool candidate_input(const SpecContext& ctx, const std::string& spec_path, const CandidateOptions& o,
                     evaluator::CandidateInput* input, std::ostream& err) {
  input->source_path = o.source;
  input->ptx_path = o.ptx;
  std::string kerr;
  if (!parse_knob_list(o.knobs, input->knob_overrides, &kerr)) {
    err << "error: " << kerr << "\n";
    return false;
  }
  // Knobs under an op's old names take the current ones, as in a spec.
  try {
    input->knob_overrides = evaluator::canonical_knobs(ctx.op(), std::move(input->knob_overrides));
  } catch (const std::invalid_argument& e) {
    err << "error: --knobs: " << e.what() << "\n";
    return false;
  }
  if (o.candidate <= 0) return true;
  // A campaign's candidate: the seed, knobs and PTX edits it was measured with.
  try {
    const search::Genome g = search::load_candidate_genome(
        o.db.empty() ? (default_run_dir(spec_path) / "campaign.db").string() : o.db, o.candidate);
    const evaluator::SeedTemplate* base = evaluator::baseline_seed(ctx.spec());
    if (!g.source.empty() || !base || g.seed != base->name) {
      err << "error: candidate " << o.candidate << " is not built from the baseline seed's template; only such "
          << "candidates can be taken by id\n";
      return false;
    }
    for (const auto& [k, v] : evaluator::canonical_knobs(ctx.op(), g.knobs)) input->knob_overrides[k] = v;
    if (!g.edits.empty())
      input->ptx_pass = search::edit_pass(g.edits, std::make_shared<const mutators::PassRegistry>(mutators::builtin_passes()));
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return false;
  }
  return true;
}

}  // namespace ptxevo::cli
