// The search loop: rounds of proposals built ahead of the measurers, batches chosen from the
// strategy's reserve and queued at them, their results told to the strategy, until the budget is
// spent. One loop for a campaign (search/campaign.cpp: builds in the background, GPUs or a replay
// in measurement threads, the trace database) and the prior study (search/prior_study.cpp: a
// measured universe answers at once), so the study replays the campaign's own schedule: which
// population each round's children come from, how many batches are queued before one answers,
// when the best is measured again.
//
// Only counts decide, never timing, unless the pipeline has a deadline: a loop over a pipeline
// that answers deterministically makes the same choices every run.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "search/proposer.hpp"
#include "search/strategy.hpp"

namespace ptxevo::search {

struct LoopOptions {
  std::int64_t budget = 0;  // candidate evaluations (or, without measurers, builds)
  int batch = 16;           // candidates per batch, and proposals per call of the strategy
  int measurers = 1;        // batches measured at once; 0: build and screen only
  // About build_factor x batch built candidates per batch when the cost model chooses.
  bool choosing = true;
  double build_factor = 1.5;
  int reserve_factor = 4;   // the reserve holds at most reserve_factor x batch
  int build_rounds = 2;     // rounds building at once
  int top_up_rounds = 3;    // rounds a batch may wait for beyond the first to fill up
  int migrate_every = 4;    // batches between migrations (0: never)
  int remeasure_every = 5;  // batches between re-measurements of the best (0: never)
};

// What the loop drives. Rounds and batches are the pipeline's own; the loop only counts them.
class SearchPipeline {
 public:
  // A round of proposals on its way through build and screen.
  struct Round {
    virtual ~Round() = default;
    std::size_t proposed = 0;  // proposals the round was given
    std::size_t building = 0;  // of them, recorded and building (not dropped at once as seen before)
    bool agents_only = false;  // LLM answers only: finished first, not counted in the yield
  };
  struct Collected {
    std::size_t candidates = 0;  // candidate items the batch held (re-measurements aside)
    bool failed = false;         // the measurer failed: the loop only drains what is in flight
  };
  virtual ~SearchPipeline() = default;

  // The strategy's next proposals (the first population, or children), the LLM agents among the
  // operators when allowed.
  virtual std::vector<Proposal> propose(bool allow_llm) = 0;
  // Starts building one round of proposals; one or more rounds (LLM answers may build apart).
  virtual std::vector<std::unique_ptr<Round>> launch(std::vector<Proposal> proposals) = 0;
  // Waits for a round and hands its screened candidates to the strategy's reserve; how many.
  virtual std::size_t finish(Round& round) = 0;
  // Chooses up to min(batch, slots) candidates of the reserve and hands them, with a
  // re-measurement of the best when asked, to a measurer. Returns the candidate items sent
  // (0 and no re-measurement: nothing was sent).
  struct Dispatched {
    std::size_t candidates = 0;
    bool sent = false;
  };
  virtual Dispatched dispatch(std::int64_t slots, bool remeasure_best) = 0;
  // Waits for a batch sent earlier and absorbs its results (the strategy is told).
  virtual Collected collect() = 0;
  // Candidate evaluations the budget has spent (measured or, in a replay, unmeasured).
  virtual std::int64_t evaluations_done() const = 0;
  // Builds finished in this run (the budget without measurers).
  virtual std::int64_t built() const = 0;

  // ---- optional: a campaign's stop conditions, deadline and LLM fixes ----
  // Why to stop now ("interrupted", "time", "target"), or "" to go on. `batches_in_flight`: sent
  // and not collected.
  virtual std::string stop_reason(int /*batches_in_flight*/) const { return ""; }
  // False when a round started now could not be built and measured before the deadline.
  virtual bool round_fits_deadline() const { return true; }
  // Candidates the measurers can still finish before the deadline, less `queued` ahead; nullopt:
  // no deadline (or nothing known yet).
  virtual std::optional<std::int64_t> deadline_capacity(std::int64_t /*queued*/) const { return std::nullopt; }
  // A failed LLM answer waits for the fixer; launch_fix starts its round (null: nothing came).
  virtual bool fix_waiting() const { return false; }
  virtual std::unique_ptr<Round> launch_fix() { return nullptr; }
  // The loop stops for `reason`; rounds still building are finished next.
  virtual void stopping(const std::string& /*reason*/) {}
  virtual void progress() {}  // after a round without measurers, after a batch with them
};

struct LoopResult {
  std::string stop_reason;  // "budget", "no-proposals", "measurer-failed", or the pipeline's
  int batches = 0;
  double prepare_s = 0;     // wall time spent proposing, building and screening (not collecting)
};

// Runs the loop until the budget is spent or the pipeline stops it. `pending`: proposals to build
// before any new one (a resumed campaign's, recorded and not built), a batch at a time.
LoopResult run_search_loop(EvolutionStrategy& strategy, SearchPipeline& pipeline, const LoopOptions& o,
                           std::vector<Proposal> pending = {});

}  // namespace ptxevo::search
