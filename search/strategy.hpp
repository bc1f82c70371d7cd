// The search's decisions, apart from how candidates are built and measured: which genomes to try
// (the first population, then children of the population under the operator posterior), what a
// build or a measurement teaches (operator credit, pass applicability, validity rates, the
// population), and which built candidates go to the GPU (the cost model's Thompson choice
// weighted by P(passes the gate)).
//
// The campaign drives it through real builds, the trace database and measurers
// (search/campaign.hpp); the prior study through a measured universe (search/prior_study.hpp).
// One strategy for both, so the study replays the campaign's own choices.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "search/cost_model.hpp"
#include "search/operator_posterior.hpp"
#include "search/population.hpp"
#include "search/prior/logistic_validity.hpp"
#include "search/prior/selection.hpp"
#include "search/proposer.hpp"

namespace ptxevo::search {

struct StrategyOptions {
  int islands = 4, island_size = 6;
  int batch = 16;    // children per round of proposals, and candidates chosen per batch
  int initial = 12;  // random genomes besides the seeds in the first population
  RandomEdits random_edits;
  // A PTX pass that refused this many parents and applied to none is proposed only rarely.
  int refusals_before_rare = 4;
  int reserve_factor = 4;  // built candidates kept waiting: at most reserve_factor x batch
  std::size_t feature_columns = 0;  // the cost model's columns (Ready::features may be shorter: zeros)
};

// A measurement as the strategy uses it: the geometric-mean speedup and its CI bounds.
struct Figures {
  double fitness = 0, low = 0, high = 0;
};

// A built, screened candidate waiting for the GPU. Features are the cost model's columns averaged
// over the benchmark shapes (the model is linear: the mean row predicts the mean log time).
struct Ready {
  Proposal proposal;
  std::int64_t candidate_id = 0;
  std::vector<double> features;
  double analytic = 0;
};

// A genome an earlier campaign did well with, offered for the first population.
struct WarmGenome {
  Genome genome;
  std::string detail;
};

// An operator outside the rule agents (the LLM agents), asked for a child in a slot.
class AgentOperator {
 public:
  virtual ~AgentOperator() = default;
  virtual const std::string& id() const = 0;
  virtual bool open() const = 0;    // may be asked now
  virtual double share() const = 0;  // minimum share of slots, outside the posterior's draw
  struct Answer {
    std::optional<Proposal> proposal;
    bool handed_back = false;  // nothing, and not the operator's fault (down, out of budget)
  };
  virtual Answer propose(const Member& parent, int island) = 0;
};

// What the cost model chose from the reserve.
struct Choice {
  std::vector<Ready> picked;
  std::vector<prior::PickReason> reasons;  // per picked
  std::vector<Ready> evicted;              // the ones the model liked least, over the reserve's cap
};

// The cost model's seed in a campaign whose proposals are seeded with `seed` (the campaign's and
// the prior study's simulated campaigns alike).
inline std::uint64_t strategy_model_seed(std::uint64_t seed) { return seed * 0x9e3779b97f4a7c15ULL + 17; }

class EvolutionStrategy {
 public:
  // `policy_ops`: operators the posterior chooses among (others are never credited).
  // `model_seed` seeds the cost model's draws; `log` (may be null) gets what a user should know.
  EvolutionStrategy(const Proposer& proposer, OperatorPosterior posterior, std::set<std::string> policy_ops,
                    StrategyOptions o, std::uint64_t model_seed, std::ostream* log);

  // ---- set-up ----
  void add_policy_operator(const std::string& op) { policy_ops_.insert(op); }
  bool is_policy_op(const std::string& op) const { return policy_ops_.count(op) > 0; }
  // The passes a random genome of the first population may carry (those that apply to the baseline).
  void set_random_passes(std::vector<std::string> passes) { random_passes_ = std::move(passes); }
  // Proposals outside `inside` are drawn again and not charged (the prior study: outside its
  // universe); default: every genome is inside.
  void restrict_proposals(std::function<bool(const Genome&)> inside) { inside_ = std::move(inside); }
  OperatorPosterior& posterior() { return policy_; }
  Population& population() { return population_; }
  const Population& population() const { return population_; }

  // ---- proposals ----
  // The first population: the seeds at their defaults, up to `warm_wanted` of `warm` (legal for
  // this spec, distinct), then random genomes up to `initial`. With `warm_as_random` the warm
  // genomes are taken as they come, as random genomes (the prior study's shuffled control).
  std::vector<Proposal> first_population(const std::vector<WarmGenome>& warm, int warm_wanted, bool warm_as_random,
                                         std::mt19937_64& rng);
  // `batch` children of the population, one per slot (islands in turn from generation x batch);
  // `agent` (may be null) is offered each slot once.
  std::vector<Proposal> children(int generation, std::mt19937_64& rng, AgentOperator* agent);
  // A new round of proposals: one child per (parent, pass) a round.
  void new_round() { asked_this_round_.clear(); }
  int warm_taken() const { return warm_taken_; }
  const std::vector<Genome>& first_random() const { return first_random_; }  // as drawn
  std::int64_t outside() const { return outside_; }  // proposals drawn again (restrict_proposals)

  // ---- what builds teach ----
  // Never judged (a duplicate, cancelled, outside, not selected, unmeasured): nothing charged.
  void dropped(const Proposal& p);
  // A build: a pass that refused counts against it (and that (parent, pass) is never proposed
  // again); `applied` (it built) counts for its passes; not `passed` (failed or screened out)
  // charges the operator unless a pass refused.
  void built(const Proposal& p, bool refused, bool applied, bool passed, const std::string& build_log);
  // The same applicability, from a resumed campaign's records (nothing charged).
  void recall_build(const std::string& op, std::optional<std::int64_t> parent, const Genome& g, bool refused,
                    bool applied, const std::string& build_log);
  // A resumed campaign's gate outcome (validity rates only).
  void recall_gate(const Genome& g, bool passed);
  // A resumed campaign's measured member.
  void recall_member(int island, const Member& m);

  // ---- the reserve and the choice ----
  void add_ready(Ready r) { reserve_.push_back(std::move(r)); }
  const std::vector<Ready>& reserve() const { return reserve_; }
  // The oldest `n` (without a cost model).
  std::vector<Ready> take_oldest(std::size_t n);
  // Up to `slots` of the reserve by the cost model's choice, after `refit(model, rng)` when a
  // measurement arrived since the last; the reserve then keeps at most reserve_factor x batch.
  Choice choose(std::size_t slots, const std::function<void(CostModel&, std::mt19937_64&)>& refit);

  // ---- what measurements teach ----
  // A candidate's gate and timing: nullopt when it failed the gate.
  void measured(const Ready& r, const std::optional<Figures>& f);
  void remeasured(std::int64_t candidate_id, const Figures& f);

  // The categories whose validity rates judge a genome: "seed:KNOB=value" per knob, "pass:NAME"
  // per PTX edit, "agent-source".
  static std::vector<std::string> validity_categories(const Genome& g);

 private:
  double p_valid(const Genome& g, const std::vector<double>& features);
  bool rarely_applies(const std::string& op) const;

  const Proposer& proposer_;
  OperatorPosterior policy_;
  std::set<std::string> policy_ops_;
  StrategyOptions opt_;
  std::ostream* log_;
  Population population_;
  std::function<bool(const Genome&)> inside_;
  std::vector<std::string> random_passes_;
  std::map<std::int64_t, Member> measured_;  // candidate -> its latest figures (for credit)
  struct Applicability {
    int refused = 0, applied = 0;
  };
  std::map<std::string, Applicability> applicability_;
  std::set<std::pair<std::int64_t, std::string>> refused_pairs_, asked_this_round_;
  std::set<std::string> rare_logged_;
  // P(a screened candidate passes the gate): Beta rates per knob value and pass, the weakest
  // counting; a logistic model on the cost features once 50 failures and 50 passes are known.
  // Failures never enter the time model, so without this it kept choosing what fails.
  prior::ValidityEstimator validity_{2.0, 0.25};
  bool validity_logged_ = false;
  std::vector<Ready> reserve_;
  CostModel model_;
  std::mt19937_64 model_rng_;
  bool model_dirty_ = true;
  int warm_taken_ = 0;
  std::vector<Genome> first_random_;
  std::int64_t outside_ = 0;
};

}  // namespace ptxevo::search
