#include "search/search_loop.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <iterator>
#include <numeric>

namespace ptxevo::search {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

LoopResult run_search_loop(EvolutionStrategy& strategy, SearchPipeline& pipeline, const LoopOptions& o,
                           std::vector<Proposal> pending) {
  LoopResult result;
  const bool measuring = o.measurers > 0;
  int in_flight = 0, empty_rounds = 0;
  std::int64_t queued = 0;  // candidate items handed to measurers and not yet collected
  bool measurer_failed = false;
  double yield_estimate = 0.5;  // candidates that reach the reserve per proposal (duplicates, failed builds, screens)
  std::deque<std::unique_ptr<SearchPipeline::Round>> building;
  bool first_population_launched = !strategy.population().empty();
  // Candidates a batch waits for: `batch`, or with the cost model enough that it has a choice.
  const auto target = static_cast<std::size_t>(
      std::max(1, o.choosing && measuring ? static_cast<int>(std::ceil(o.batch * o.build_factor)) : o.batch));
  const std::size_t reserve_cap = static_cast<std::size_t>(std::max(o.reserve_factor, 1) * std::max(1, o.batch));

  auto out_of_budget = [&]() -> std::string {
    if (measurer_failed) return "measurer-failed";
    if (auto why = pipeline.stop_reason(in_flight); !why.empty()) return why;
    if (measuring ? pipeline.evaluations_done() + queued >= o.budget : pipeline.built() >= o.budget) return "budget";
    return "";
  };
  // What the budget already holds: measured, at a measurer, waiting, or expected from builds.
  auto committed = [&]() -> std::int64_t {
    if (!measuring)
      return pipeline.built() + static_cast<std::int64_t>(std::accumulate(
                                    building.begin(), building.end(), std::size_t{0},
                                    [](std::size_t n, const auto& r) { return n + r->building; }));
    std::int64_t expected = 0;
    for (const auto& r : building) expected += static_cast<std::int64_t>(std::ceil(yield_estimate * static_cast<double>(r->building)));
    return pipeline.evaluations_done() + queued + static_cast<std::int64_t>(strategy.reserve().size()) + expected;
  };
  // The next proposals: what was pending first, a batch at a time; never more than the budget
  // has left counting `held` (the rest waits, unrecorded, for a later round).
  auto next_proposals = [&](std::int64_t held, bool allow_llm) -> std::vector<Proposal> {
    std::vector<Proposal> props;
    if (!pending.empty()) {
      const std::size_t take = std::min<std::size_t>(pending.size(), static_cast<std::size_t>(std::max(1, o.batch)));
      props.assign(std::make_move_iterator(pending.begin()), std::make_move_iterator(pending.begin() + static_cast<std::ptrdiff_t>(take)));
      pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(take));
    } else {
      props = pipeline.propose(allow_llm);
    }
    const std::int64_t left = o.budget - held;
    if (left <= 0) {
      pending.insert(pending.begin(), std::make_move_iterator(props.begin()), std::make_move_iterator(props.end()));
      return {};
    }
    if (static_cast<std::int64_t>(props.size()) > left) {
      pending.insert(pending.begin(), std::make_move_iterator(props.begin() + left), std::make_move_iterator(props.end()));
      props.resize(static_cast<std::size_t>(left));
    }
    return props;
  };
  // Keeps up to build_rounds rounds building, each sized by the yield seen so far to bring about
  // `target` candidates.
  auto launch_rounds = [&] {
    while (static_cast<int>(building.size()) < std::max(1, o.build_rounds)) {
      if (!out_of_budget().empty()) return;
      if (!pipeline.round_fits_deadline()) return;
      if (strategy.reserve().size() >= reserve_cap) return;  // the measurers are the bottleneck: no need to build more
      const bool first = strategy.population().empty();
      // The first population is building or measured and nothing has come back: another round
      // now would be another first population (seeds and random genomes again), not children.
      if (first && first_population_launched && pending.empty() &&
          (in_flight > 0 || !building.empty() || !strategy.reserve().empty()))
        return;
      const double per_call = std::max(1.0, static_cast<double>(o.batch) * std::max(0.2, yield_estimate));
      const int calls = first ? 1 : std::clamp(static_cast<int>(std::ceil(static_cast<double>(target) / per_call)), 1, 8);
      std::vector<Proposal> props;
      for (int k = 0; k < calls; ++k) {
        // Only a round's first call asks the LLM agents: filling it is the cheap rule agents' job.
        auto p = next_proposals(committed() + static_cast<std::int64_t>(std::ceil(yield_estimate * static_cast<double>(props.size()))), k == 0);
        if (p.empty()) break;
        for (auto& x : p) props.push_back(std::move(x));
        if (first) break;
      }
      if (first) first_population_launched = true;
      if (props.empty()) {
        ++empty_rounds;
        return;
      }
      strategy.new_round();
      for (auto& r : pipeline.launch(std::move(props))) building.push_back(std::move(r));
    }
  };
  // A failed LLM answer goes to the fixer as soon as the loop learns of it, in a round of its own
  // outside the round cap: in a short campaign it would otherwise wait for a slot the posterior
  // gives the LLM, which may never come.
  auto launch_fixes = [&] {
    while (pipeline.fix_waiting() && out_of_budget().empty()) {
      if (!pipeline.round_fits_deadline() || committed() >= o.budget) return;
      if (auto r = pipeline.launch_fix()) building.push_back(std::move(r));
    }
  };

  std::string stop_reason;
  while (true) {
    stop_reason = out_of_budget();
    const double prep_t0 = now_s();
    launch_fixes();
    launch_rounds();
    // Fill the measurers plus one batch ready: the measurers never wait for the builds running ahead.
    while (measuring && in_flight < o.measurers + 1 && stop_reason.empty()) {
      // A measurer with nothing to do takes a plain batch now; otherwise the queued batch waits
      // until the model has its choice.
      const std::size_t want = in_flight < o.measurers ? static_cast<std::size_t>(std::max(1, o.batch)) : target;
      int rounds_waited = 0;
      while (strategy.reserve().size() < want && !building.empty() &&
             (rounds_waited <= o.top_up_rounds || strategy.reserve().empty())) {
        auto r = std::move(building.front());
        building.pop_front();
        const std::size_t added = pipeline.finish(*r);
        if (!r->agents_only) {
          if (r->proposed > 0)
            yield_estimate = 0.7 * yield_estimate + 0.3 * static_cast<double>(added) / static_cast<double>(r->proposed);
          ++rounds_waited;
          // Every child a duplicate, a failed build or screened out, round after round: the
          // space reachable from this population is spent.
          empty_rounds = added > 0 ? 0 : empty_rounds + 1;
        }
        stop_reason = empty_rounds > 50 ? "no-proposals" : out_of_budget();
        if (!stop_reason.empty()) break;
        launch_fixes();
        launch_rounds();  // keep the builders busy while this batch goes out
      }
      if (strategy.reserve().empty() || !stop_reason.empty()) break;
      const bool remeasure = o.remeasure_every > 0 && result.batches > 0 && result.batches % o.remeasure_every == 0;
      std::int64_t slots = std::max<std::int64_t>(0, o.budget - (pipeline.evaluations_done() + queued));
      const auto capacity = pipeline.deadline_capacity(queued);
      if (capacity) {
        slots = std::min(slots, std::max<std::int64_t>(0, *capacity));
        if (slots == 0) break;
      }
      const auto sent = pipeline.dispatch(slots, remeasure);
      ++result.batches;
      if (o.migrate_every > 0 && result.batches % o.migrate_every == 0) strategy.population().migrate();
      if (!sent.sent) break;
      queued += static_cast<std::int64_t>(sent.candidates);
      ++in_flight;
    }
    if (!measuring && !building.empty()) {
      // Build and screen only: one round at a time.
      auto r = std::move(building.front());
      building.pop_front();
      const std::size_t added = pipeline.finish(*r);
      if (!r->agents_only) empty_rounds = added > 0 || r->building > 0 ? 0 : empty_rounds + 1;
      pipeline.progress();
    }
    result.prepare_s += now_s() - prep_t0;
    if (empty_rounds > 50 && in_flight == 0) {
      stop_reason = "no-proposals";
      break;
    }
    if (in_flight == 0) {
      if (!stop_reason.empty()) break;
      continue;  // nothing building and nothing to measure: proposals came back empty (counted above)
    }
    const SearchPipeline::Collected c = pipeline.collect();
    --in_flight;
    queued -= static_cast<std::int64_t>(c.candidates);
    if (c.failed) {
      measurer_failed = true;
      stop_reason = "measurer-failed";
      continue;  // what was in flight stays built; a resumed campaign measures it
    }
    pipeline.progress();
  }
  pipeline.stopping(stop_reason);
  // Builds still running finish and are recorded.
  while (!building.empty()) {
    pipeline.finish(*building.front());
    building.pop_front();
  }
  result.stop_reason = stop_reason.empty() ? "budget" : stop_reason;
  return result;
}

}  // namespace ptxevo::search
