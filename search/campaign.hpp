// The campaign loop: proposals -> parallel builds (TBB, all cores) -> static screen -> one
// measurement queue per GPU (or a replay) -> gate -> timer -> trace database -> population.
// Builds of the next batch overlap the measurement of the current one, so the GPU does not wait
// for the compiler; the loop reports how much of the wall time the GPUs were busy.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <ostream>
#include <string>
#include <vector>

#include "evaluator/builder.hpp"
#include "evaluator/spec.hpp"
#include "mutators/pass.hpp"
#include "search/build_service.hpp"
#include "search/cost_model.hpp"
#include "search/llm_proposer.hpp"
#include "search/measurer.hpp"
#include "search/proposer.hpp"
#include "search/replay.hpp"
#include "search/strategy.hpp"
#include "tracedb/trace_db.hpp"

namespace ptxevo::search {

struct CampaignOptions {
  std::string arch;  // target, e.g. "sm_90a" (the spec's when empty)
  int islands = 4;
  int island_size = 6;
  int batch = 16;           // children per batch (one generation); builds run in parallel over them
  int initial = 12;         // random genomes besides the seeds in a fresh campaign
  // PTX edits on those random genomes: a share of them carries 1..max_edits distinct passes,
  // drawn among the passes this campaign uses that apply to the baseline's PTX (and not among
  // those that refused every parent so far). share 0: knob assignments only (as before).
  RandomEdits random_edits;
  // The PTX passes children and random genomes may carry, by name; nullopt: every built-in pass
  // but launch_bounds; empty: knob moves only.
  std::optional<std::vector<std::string>> ptx_passes;
  std::int64_t max_evaluations = 0;  // candidate evaluations; 0: the spec's budget (200 without one)
  double max_minutes = 0;            // 0: no wall-time limit
  double target_fitness = 0;         // stop once the best reaches it; 0: none
  int migrate_every = 4;             // batches between migrations
  int remeasure_every = 5;           // batches between re-measurements of the best
  int max_measurements = 3;          // ... until it has this many passing evaluations
  // Build rounds beyond the first that a batch may wait for to fill up to `batch` candidates
  // when some children were duplicates, failed to build or were screened out.
  int top_up_rounds = 3;
  // Build rounds (each about a batch of proposals, built in parallel) that run at once in the
  // background while the GPU measures: on the H200 one round at a time left 10 of 16 cores idle
  // in each round's slowest build, and the GPU waited for the compiler (busy 56%).
  int build_rounds = 2;
  // A PTX pass that refused this many parents in this campaign and applied to none is proposed
  // only rarely afterwards (refusals are not charged to the posterior, so it kept drawing them:
  // 205 of 537 builds on the H200).
  int refusals_before_rare = 4;
  std::uint64_t seed = 1;            // proposals (inputs are always fresh)
  int max_benchmark_shapes = -1;     // -1: every benchmark shape of the spec
  // Screen: more spill stores (summed over the module's entries) than this never reach the GPU.
  // Not 0: on the H200 the RMSNorm forward with ITEMS 8 spills 138 B in its cluster entry and
  // still ran N = 64K at 86% of the copy floor, against 69% for the spill-free ITEMS 4.
  std::int64_t max_spill_bytes = 256;
  // Warm start: a fresh population takes up to this many of the best distinct genomes of
  // earlier campaigns on the same op in this database (other specs, shapes or archs), in place
  // of as many random ones, capped at half the first population. -1: that half; 0: none.
  int warm_start = -1;
  bool final_check = true;           // re-measure the winner against the baseline at the end
  int benchmark_distributions = 1;   // input distributions per benchmark shape for candidates
  // The candidates' gate checks (evaluator::GateOptions); lowered only to measure what a check
  // costs a campaign (`--determinism-runs 1 --no-guard-pages --no-degenerate-rows`). The
  // winner's final check always runs the full gate.
  int determinism_runs = 3;
  bool guard_pages = true;
  bool degenerate_rows = true;
  // Candidates' timing stops per shape once the paired speedup's 95% CI is narrower than
  // timing_ci_width of the ratio, after at least timing_min_samples pairs (30 at most). On the
  // H200, 80% of a campaign's GPU time was timing at a fixed 30 pairs per shape, while most
  // shapes' CIs were under 1% wide. The final check always takes all 30.
  int timing_min_samples = 10;
  double timing_ci_width = 0.01;
  // The learned cost model picks what reaches the GPU: about build_factor x batch candidates are
  // built and screened per batch, the model (Thompson draws from its posterior, 5% random picks;
  // the analytic roofline/occupancy guess while it has too few rows) chooses `batch` of them,
  // and the rest wait in a reserve of at most reserve_factor x batch for later batches.
  bool cost_model = true;
  double build_factor = 1.5;
  int reserve_factor = 4;
  double progress_every_s = 0;       // 0: a progress line after every batch
};

struct CampaignResult {
  std::int64_t campaign_id = 0;
  bool resumed = false;
  std::string mode;           // "gpu", "replay" or "static"
  std::string stop_reason;    // "budget", "time", "target", "interrupted", "no-proposals", "measurer-failed"
  std::int64_t evaluations = 0;       // candidate evaluations in the database after the run
  std::int64_t evaluations_this_run = 0;
  std::int64_t built_this_run = 0;
  std::int64_t failures_this_run = 0;
  std::int64_t unmeasured_this_run = 0;
  std::int64_t abandoned_this_run = 0;  // left at the deadline: not built or not measured (a resume takes them)
  std::optional<Member> best;
  std::optional<evaluator::EvalReport> final_report;  // the winner re-measured
  double wall_s = 0;
  double measure_s = 0;    // time inside measurers, summed over them
  double prep_s = 0;       // of measure_s, the workers' shared host-side work (inputs, references)
  double gpu_s = 0;        // of measure_s, time the workers held their GPU (gate runs, timing)
  double prepare_s = 0;    // wall time the engine spent proposing, building and screening batches
  double build_s = 0;      // of prepare_s, waiting for the builder (NVRTC, passes, nvJitLink)
  double screen_s = 0;     // of prepare_s, the static screen, cost features and records
  double gpu_busy = 0;     // gpu_s / (wall_s * GPUs)
  double worker_busy = 0;  // measure_s / (wall_s * measurers)
  double candidates_per_gpu_hour = 0;
  // What chose the measured candidates (cost model on): Thompson draws, random picks, analytic guess.
  std::int64_t model_picks = 0, random_picks = 0, analytic_picks = 0;
  CampaignFitInfo last_fit;  // the cost model's latest fit
};

class CampaignEngine {
 public:
  // `measurers` empty: static mode (build and screen only, nothing measured). The engine does not
  // own them; one measurement thread runs per measurer.
  CampaignEngine(const evaluator::Spec& spec, const evaluator::Op& op, const evaluator::Builder& builder, tracedb::TraceDb& db,
                 std::vector<Measurer*> measurers, CampaignOptions opt, std::ostream& log, const std::atomic<bool>& stop);
  ~CampaignEngine();  // out of line: Item is complete only in campaign.cpp
  CampaignEngine(const CampaignEngine&) = delete;
  CampaignEngine& operator=(const CampaignEngine&) = delete;

  // Replay: proposals are projected onto the genomes the record holds, so every build is scored
  // (before run(); see ReplayProjection).
  void restrict_to(std::shared_ptr<const ReplayProjection> projection) { projection_ = std::move(projection); }

  // Turns the LLM agents on as the operator "llm" beside the rule agents (before run()).
  void use_llm(LlmAgents agents) { llm_agents_ = agents; }

  // The candidates' builds run there instead of on this process's builder (before run(); the
  // baseline and the winner's rebuilds stay local; null: this process's builder, the default).
  // Builds are deterministic, so the choices and the records do not depend on where they ran.
  void build_on(BuildService* builds) { builds_ = builds ? builds : &local_builds_; }

  CampaignResult run();

  // How to find the op options of an earlier campaign in the database (its spec), so its
  // measurements can inform this campaign's cost model; without it only earlier campaigns of
  // the same spec (same hash) count.
  void set_earlier_configs(std::function<std::optional<evaluator::OpConfig>(std::int64_t)> f) {
    earlier_config_ = std::move(f);
  }

 private:
  struct Item;
  struct Batch;
  struct Round;
  class LlmOperator;
  class Pipeline;  // the campaign's side of the search loop (campaign.cpp)

  std::string mode() const;
  int gpu_count() const;  // distinct devices among the measurers
  evaluator::BuildRequest build_request(const Genome& g) const;
  evaluator::EvalRequest common_request(std::uint64_t input_seed) const;
  // The strategy's next proposals: the first population (with warm-start genomes from this
  // database) or a batch of children, the LLM agents among the operators when allowed.
  std::vector<Proposal> propose(int generation, std::mt19937_64& rng, bool allow_llm = true);
  // Replaces each proposal outside the replay record by its nearest recorded genome not taken yet.
  void project_onto_record(std::vector<Proposal>& props);
  // Records proposals and starts their builds in the background. Ids in `in_flight` are built,
  // waiting or on their way to a measurer, and are not proposed again.
  std::unique_ptr<Round> launch(int generation, std::vector<Proposal> proposals, std::set<std::int64_t>& in_flight);
  // Waits for a round's builds, records them, screens, and hands what must be measured to the
  // strategy's reserve. Returns how many candidates it added.
  std::size_t finish(Round& round, std::set<std::int64_t>& in_flight);
  // The next batch for a measurer: `batch` of the reserve (the cost model's choice, or the
  // oldest first without it), plus a re-measurement of the best when asked.
  std::unique_ptr<Batch> dispatch(int generation, bool remeasure_best, std::set<std::int64_t>& in_flight,
                                  std::int64_t budget_left);
  void absorb(Batch& b);  // records the reports and tells the strategy
  void rebuild_population();
  void load_applicability();  // a resumed campaign's refusals and gate outcomes, told to the strategy
  void find_random_passes();
  void refit_model(CostModel& model, std::mt19937_64& rng);
  void progress(bool force);
  bool is_policy_op(const std::string& op) const { return strategy_.is_policy_op(op); }

  const evaluator::Spec& spec_;
  const evaluator::Op& op_;
  const evaluator::Builder& builder_;
  tracedb::TraceDb& db_;
  std::vector<Measurer*> measurers_;
  CampaignOptions opt_;
  std::ostream& log_;
  const std::atomic<bool>& stop_;

  std::shared_ptr<const mutators::PassRegistry> passes_;
  Proposer proposer_;
  EvolutionStrategy strategy_;
  std::map<std::int64_t, int> remeasures_in_flight_;  // candidate -> re-measurements queued, not absorbed
  FeatureLayout layout_;  // the cost model's columns
  // What the strategy's reserve does not hold: per waiting candidate, its cubin and build key.
  struct Waiting {
    MeasureItem measure;
    std::string build_key;
  };
  std::map<std::int64_t, Waiting> waiting_;
  std::function<std::optional<evaluator::OpConfig>(std::int64_t)> earlier_config_;
  // Cubins of measured candidates still in the population, for re-measurements without a rebuild.
  std::map<std::int64_t, std::vector<std::uint8_t>> cubins_;
  std::map<std::int64_t, std::string> keys_in_flight_;  // candidate on its way to a measurer -> build key
  std::map<std::string, std::string> sources_;  // seed name -> template text
  evaluator::BuildResult baseline_;
  std::vector<evaluator::ShapeCase> shapes_;
  std::int64_t campaign_id_ = 0;
  std::int64_t env_id_ = 0;
  std::int64_t budget_ = 0;
  CampaignResult result_;
  std::map<std::string, int> failure_codes_;
  double started_ = 0, last_progress_ = 0;
  // --minutes: the wall-clock deadline (0: none), and what adapts the work to it: the build
  // rounds' and the measurements' recent durations. At the deadline abandon_ cancels the builds
  // not started and the measurers' calls in flight.
  double deadline_ = 0;
  double round_build_s_ = 0;
  double measure_per_item_s_ = 0;  // a measurer's wall seconds an item (recent batches)
  double gpu_per_item_s_ = 0;      // GPU-held seconds an item (GPU measurers; 0: unknown)
  std::atomic<bool> abandon_{false};
  std::shared_ptr<const ReplayProjection> projection_;
  std::set<std::string> taken_;  // genome hashes of this campaign's candidates (with a projection)
  std::optional<LlmAgents> llm_agents_;
  LocalBuilds local_builds_{builder_};
  BuildService* builds_ = &local_builds_;
  std::unique_ptr<LlmProposer> llm_;
  bool is_llm(const Proposal& p) const { return llm_ && p.operator_id == LlmProposer::kOperator; }
  std::string instruction_mix_of(const Genome& g) const;
};

// "sm_90" -> "sm_90a", "sm_100" -> "sm_100a"; sm_90a and sm_100a as given; "" for others.
std::string normalize_arch(const std::string& arch);

}  // namespace ptxevo::search
