// The learned prior's replay proof (issue "Learned prior"; docs/prior_study.md 6): simulated
// campaigns over a measured closed universe (search/universe.hpp), cold against warm at equal
// budgets.
//
// The benchmark shapes are split into two sets (interleaved by default); a campaign's fitness is
// the geometric mean speedup over the baseline on its set's shapes. A "build" looks up the stored
// build status and resources, an "evaluation" the stored per-shape figures (with noise drawn
// within each shape's stored 95% CI; scores use the stored medians, the "true" fitness). The
// search is the campaign's own strategy (search/strategy.hpp: the first population and children
// under the operator posterior, applicability and validity, the population, the cost model's
// choice of each batch from about build_factor x batch built candidates), told what the universe
// recorded. Proposals outside the universe (e.g. a pass with other parameters) are drawn again
// and not charged (docs/prior_study.md 6.2); passes the universe lacks are not offered. The
// schedule is the campaign's search loop (search/search_loop.hpp): rounds built ahead, a batch
// queued behind the one being measured, re-measurements of the best; only the answers differ.
//
// The "earlier campaign" of a warm arm is a cold simulated campaign of the same budget on the
// OTHER shape set (its own seed); what it leaves behind is what a real earlier campaign in the
// same database leaves: operator evidence (carried in, capped per key), cost rows (weighted by
// environment and faded by the new campaign's own rows, with the guard), and its best distinct
// genomes as warm-start seeds (charged to the budget). Arms: cold (none of it), warm (all),
// posterior, cost_model, seeds (one each), and shuffled: all of it from an earlier campaign run
// on a universe whose figures were permuted across the passing candidates, its warm-start genomes
// drawn by those permuted labels from the random genomes that campaign drew for its first
// population (genomes it chose later carry what its operators reach, e.g. stacked PTX edits), so
// its first population is distributed as cold's: no gain by construction, and it must show none.
// Every arm's first population has the campaign's random genomes, a share with PTX edits.
//
// Reported per arm: evaluations until the true best-so-far reaches 95% and 100% of the cold
// campaigns' median gain over the baseline (in log fitness; the literal "95% of the fitness" is
// met by the baseline itself when gains are a few percent), censored at the budget; the ratio of
// medians to cold with a bootstrap CI; the fraction of seeds that reach it; the true best at the
// budget with a one-sided Mann-Whitney test against cold. Deterministic given the options.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "evaluator/op.hpp"
#include "evaluator/spec.hpp"
#include "search/cost_model.hpp"
#include "search/operator_posterior.hpp"
#include "search/prior/rank_metrics.hpp"
#include "search/proposer.hpp"
#include "search/universe.hpp"

namespace ptxevo::search {

struct StudyOptions {
  int seeds = 10;
  std::int64_t budget = 0;  // evaluations per campaign; 0: a third of the passing members, in whole batches
  int batch = 16;
  int islands = 4, island_size = 6, initial = 12;  // the campaign's defaults
  RandomEdits random_edits;  // the campaign's default share of random genomes with PTX edits
  double build_factor = 1.5;
  int reserve_factor = 4;
  int build_rounds = 2, top_up_rounds = 3;  // CampaignOptions': rounds building at once, rounds a batch waits for
  int migrate_every = 4, remeasure_every = 5, max_measurements = 3;
  int refusals_before_rare = 4;  // CampaignOptions::refusals_before_rare
  bool noise = true;          // measured figures drawn within each shape's stored 95% CI
  std::uint64_t seed = 1;     // the seed list (seed, seed + 1, ...) every arm shares
  std::size_t resamples = 10000;
  std::vector<std::string> arms;        // empty: kStudyArms
  std::vector<std::size_t> set_a;       // benchmark-shape indices of set A; empty: every other shape from the first
  bool both_directions = true;          // also target set B from set A
  int threads = 0;                      // 0: TBB's default
};

inline const std::vector<std::string> kStudyArms = {"cold", "warm", "posterior", "cost_model", "seeds", "shuffled"};

// One simulated campaign.
struct StudyRun {
  std::vector<double> best_true;  // true fitness of the best candidate measured so far, after each evaluation
  std::int64_t evaluations = 0, failed = 0, duplicates = 0, outside = 0, remeasures = 0, warm_seeds = 0;
  double final_best = 0;  // best_true at the end (0: nothing passed)
};

struct ArmSummary {
  std::string arm;
  std::vector<StudyRun> runs;       // one per seed
  std::vector<double> e95, e100;    // evaluations to reach the targets; +inf: not within the budget
  std::vector<double> final_best;
  double median95 = 0, median100 = 0;
  double reached95 = 0, reached100 = 0;  // fraction of seeds
  prior::RatioInterval r95, r100;        // median E_arm / median E_cold
  prior::MannWhitney final_vs_cold;      // H1: this arm's true best at the budget is larger
  double median_final = 0;
};

struct StudyDirection {
  std::string target_name, source_name;
  std::vector<evaluator::Shape> target_shapes, source_shapes;
  double optimum = 0;  // best true fitness in the universe on the target set
  double f_cold = 0;   // median (the lower one) over cold seeds of the true best at the budget
  double target95 = 0, target100 = 0;
  double random95 = 0, random100 = 0;  // expected evaluations of random search without replacement
  std::vector<ArmSummary> arms;
  const ArmSummary* arm(const std::string& name) const;
};

// How well the cost model ranks this universe's measured members within each benchmark shape:
// 5-fold cross-validation over members (Bayesian linear regression on every column, on every
// column but the PTX profile's, and the analytic roofline/occupancy guess), mean within-shape
// Spearman of the predicted against the measured log time. NaN where undefined.
struct CostModelCheck {
  std::size_t rows = 0, profiled_rows = 0, columns = 0;
  double spearman_all = std::numeric_limits<double>::quiet_NaN();
  double spearman_without_ptx = std::numeric_limits<double>::quiet_NaN();
  double spearman_analytic = std::numeric_limits<double>::quiet_NaN();
};

struct StudyResult {
  std::int64_t budget = 0;
  int seeds = 0;
  std::size_t members = 0, buildable = 0, passing = 0;
  std::vector<std::string> warnings;
  std::string provenance;
  bool synthetic = false;
  StudyOptions options;
  std::vector<StudyDirection> directions;
  CostModelCheck cost_check;  // of the (target) universe
  double seconds = 0;
};

// Throws std::invalid_argument naming the problem when the universe holds no measurements, its
// seed is not the spec's first, or an option is out of range.
StudyResult run_prior_study(const Universe& u, const evaluator::Spec& spec, const evaluator::Op& op,
                            const StudyOptions& o);

// Transfer between two universes of the same op and seed, e.g. the same grid measured under a
// bf16 and an fp16 spec (the H200 confirmation's transfer): earlier campaigns on every benchmark
// shape of `source`, the new ones on every benchmark shape of `target` (and, with
// both_directions, the other way). The earlier campaigns' best genomes reach the target as its
// members with the same genome (those it lacks are dropped); their cost rows only when both
// universes have the same feature layout. Budget: a third of the target's passing members unless
// given. Throws std::invalid_argument as run_prior_study, or when the universes' seeds or ops differ.
StudyResult run_prior_study_transfer(const Universe& source, const evaluator::Spec& source_spec, const Universe& target,
                                     const evaluator::Spec& target_spec, const evaluator::Op& op, const StudyOptions& o);

// One cold simulated campaign on every benchmark shape of `u`, its proposals seeded by `seed`:
// the genomes it measured, in order (re-measurements of the best included), and its run. A
// campaign with the same options and seed, given the same builds and measurements, measures the
// same genomes in the same order: one search loop (search/search_loop.hpp) drives both
// (search/tests/search_loop_test.cpp). Throws std::invalid_argument as run_prior_study.
struct SimulatedCampaign {
  std::vector<Genome> measured;
  StudyRun run;
};
SimulatedCampaign simulate_campaign(const Universe& u, const evaluator::Spec& spec, const evaluator::Op& op,
                                    const StudyOptions& o, std::uint64_t seed, std::int64_t budget);

// The table, with the provenance and what each column means.
std::string format_study(const StudyResult& r);

}  // namespace ptxevo::search
