#include "search/strategy.hpp"

#include <algorithm>
#include <numeric>

#include "evaluator/eval_types.hpp"
#include "evaluator/spec.hpp"

namespace ptxevo::search {

namespace {

// A genome whose pass refused: "pass-refused: NAME: why" names the pass (the first of its edits
// that refused).
std::string refused_pass_of(const std::string& build_log) {
  const std::string tag = "pass-refused: ";
  if (build_log.rfind(tag, 0) != 0) return {};
  const auto end = build_log.find(':', tag.size());
  return end == std::string::npos ? std::string() : build_log.substr(tag.size(), end - tag.size());
}

}  // namespace

EvolutionStrategy::EvolutionStrategy(const Proposer& proposer, OperatorPosterior posterior,
                                     std::set<std::string> policy_ops, StrategyOptions o, std::uint64_t model_seed,
                                     std::ostream* log)
    : proposer_(proposer),
      policy_(std::move(posterior)),
      policy_ops_(std::move(policy_ops)),
      opt_(o),
      log_(log),
      population_(PopulationOptions{o.islands, o.island_size, 3, 0.01}),
      model_rng_(model_seed) {}

std::vector<Proposal> EvolutionStrategy::first_population(const std::vector<WarmGenome>& warm, int warm_wanted,
                                                          bool warm_as_random, std::mt19937_64& rng) {
  std::vector<Proposal> out;
  const int islands = population_.islands();
  int k = 0;
  for (const auto& g : proposer_.seeds()) {
    Proposal p;
    p.genome = g;
    p.operator_id = "seed";
    p.detail = "seed defaults";
    p.island = k++ % islands;
    out.push_back(std::move(p));
  }
  // Warm start: what did well before, in place of some of the random genomes, at most half the
  // first population. Its fitness there is against another baseline, so it is measured again.
  warm_taken_ = 0;
  const int cap = (static_cast<int>(out.size()) + opt_.initial) / 2;
  const int want = std::min(warm_wanted, cap);
  std::set<std::string> have;
  for (const auto& p : out) have.insert(p.genome.hash());
  for (const auto& w : warm) {
    if (warm_taken_ >= want || warm_taken_ >= opt_.initial) break;
    Proposal p;
    p.genome = w.genome;
    p.detail = w.detail;
    p.island = k % islands;
    if (warm_as_random) {
      p.operator_id = "random";  // a duplicate is dropped uncharged when it is built
    } else {
      if (!proposer_.admits(w.genome).empty() || !have.insert(w.genome.hash()).second) continue;
      p.operator_id = "warm_start";
      if (log_) *log_ << "warm_start: " << p.genome.describe() << " from " << p.detail << "\n";
    }
    ++k;
    out.push_back(std::move(p));
    ++warm_taken_;
  }
  // Random genomes, a share of them with PTX edits (of the passes that apply to the baseline
  // and have not refused every parent so far). Outside `inside_`, a few more draws.
  std::vector<std::string> edit_passes;
  for (const auto& pass : random_passes_)
    if (!rarely_applies("ptx:" + pass)) edit_passes.push_back(pass);
  const auto& seeds = proposer_.spec().seeds;
  first_random_.clear();
  for (int i = warm_taken_; i < opt_.initial; ++i) {
    const std::string& seed = seeds[static_cast<std::size_t>(i) % seeds.size()].name;
    for (int attempt = 0; attempt < 20; ++attempt) {
      auto g = proposer_.random_genome(seed, rng, opt_.random_edits, edit_passes);
      if (!g) break;
      if (inside_ && !inside_(*g)) {
        ++outside_;
        continue;
      }
      first_random_.push_back(*g);
      Proposal p;
      p.detail = g->edits.empty() ? "random knobs" : "random knobs and edits";
      p.genome = std::move(*g);
      p.operator_id = "random";
      p.island = k++ % islands;
      out.push_back(std::move(p));
      break;
    }
  }
  return out;
}

std::vector<Proposal> EvolutionStrategy::children(int generation, std::mt19937_64& rng, AgentOperator* agent) {
  std::vector<Proposal> out;
  const int islands = population_.islands();
  for (int i = 0; i < opt_.batch; ++i) {
    const int island = (generation * opt_.batch + i) % islands;
    const Member* parent = population_.select(island, rng);
    if (!parent) parent = population_.best();
    const Member* mate = population_.select(island, rng);
    if (mate == parent) mate = population_.select((island + 1) % islands, rng);
    const bool has_mate = mate && mate != parent && mate->genome.seed == parent->genome.seed;
    // A few tries: an operator may find no legal move for this parent.
    bool agent_tried = false;  // one agent attempt per slot; after that the rule agents fill it
    for (int attempt = 0; attempt < 6; ++attempt) {
      std::vector<std::string> ops;
      for (auto& o : proposer_.applicable(parent->genome, has_mate))
        if (is_policy_op(o)) ops.push_back(std::move(o));
      // A pass that refused this parent refuses it again; one that refused every parent so far
      // is offered only now and then (a later parent's code may suit it).
      const bool explore = std::uniform_real_distribution<double>(0, 1)(rng) < 0.05;
      std::erase_if(ops, [&](const std::string& o) {
        if (refused_pairs_.count({parent->candidate_id, o})) return true;
        // One child per (parent, pass) a round: whether a pass applies rarely depends on its
        // parameters, and the round's refusals are known only once it is built.
        if (o.rfind("ptx:", 0) == 0 && asked_this_round_.count({parent->candidate_id, o})) return true;
        if (explore || !rarely_applies(o)) return false;
        if (log_ && rare_logged_.insert(o).second)
          *log_ << o << ": refused " << applicability_.at(o).refused
                << " parents and applied to none; proposed only rarely from now on\n";
        return true;
      });
      const bool agent_open = agent && !agent_tried && agent->open();
      if (agent_open) ops.push_back(agent->id());
      std::string op;
      if (agent_open && std::uniform_real_distribution<double>(0, 1)(rng) < agent->share()) op = agent->id();
      else op = policy_.choose(ops, rng);
      if (op.empty()) break;
      if (agent && op == agent->id()) {
        agent_tried = true;
        auto r = agent->propose(*parent, island);
        if (!r.proposal) {
          // Down or out of budget is not the operator's fault; a rejected answer is a miss.
          if (r.handed_back) policy_.release(op);
          else policy_.credit(op, Outcome::Failed);
          continue;
        }
        out.push_back(std::move(*r.proposal));
        break;
      }
      std::string detail;
      auto child = proposer_.apply(op, parent->genome, has_mate ? &mate->genome : nullptr, rng, &detail);
      if (!child || *child == parent->genome) {
        policy_.release(op);  // no legal move: the operator did not apply, nothing to charge
        continue;
      }
      if (inside_ && !inside_(*child)) {  // e.g. other pass parameters than the universe's
        policy_.release(op);
        ++outside_;
        continue;
      }
      asked_this_round_.insert({parent->candidate_id, op});
      Proposal p;
      p.genome = std::move(*child);
      p.parent_id = parent->candidate_id;
      p.operator_id = op;
      p.detail = detail;
      p.island = island;
      out.push_back(std::move(p));
      break;
    }
  }
  return out;
}

void EvolutionStrategy::dropped(const Proposal& p) {
  if (is_policy_op(p.operator_id)) policy_.release(p.operator_id);
}

void EvolutionStrategy::recall_build(const std::string& op, std::optional<std::int64_t> parent, const Genome& g,
                                     bool refused, bool applied, const std::string& build_log) {
  if (op == "random") {
    // The first population's random edits: a refusal counts against the pass that refused, a
    // build as an application of each of its passes (no parent: no pair to remember).
    if (refused) {
      if (const auto pass = refused_pass_of(build_log); !pass.empty()) ++applicability_["ptx:" + pass].refused;
    } else if (applied) {
      for (const auto& e : g.edits) ++applicability_["ptx:" + e.pass].applied;
    }
    return;
  }
  if (op.rfind("ptx:", 0) != 0) return;
  if (refused) {
    ++applicability_[op].refused;
    if (parent) refused_pairs_.insert({*parent, op});
  } else if (applied) {
    ++applicability_[op].applied;
  }
}

void EvolutionStrategy::built(const Proposal& p, bool refused, bool applied, bool passed, const std::string& build_log) {
  recall_build(p.operator_id, p.parent_id, p.genome, refused, applied, build_log);
  if (passed || !is_policy_op(p.operator_id)) return;
  // A pass that refused this parent could not apply: not charged. Anything else failed.
  if (refused) policy_.release(p.operator_id);
  else policy_.credit(p.operator_id, Outcome::Failed);
}

void EvolutionStrategy::recall_gate(const Genome& g, bool passed) {
  validity_.add(validity_categories(g), {}, passed);  // rates only: no features recorded
}

void EvolutionStrategy::recall_member(int island, const Member& m) {
  measured_[m.candidate_id] = m;
  const int i = island % population_.islands();
  if (static_cast<int>(population_.members(i).size()) < opt_.island_size) population_.offer(i, m, std::nullopt);
}

bool EvolutionStrategy::rarely_applies(const std::string& op) const {
  const auto a = applicability_.find(op);
  return opt_.refusals_before_rare > 0 && a != applicability_.end() && a->second.applied == 0 &&
         a->second.refused >= opt_.refusals_before_rare;
}

std::vector<std::string> EvolutionStrategy::validity_categories(const Genome& g) {
  std::vector<std::string> out;
  const auto knobs = evaluator::knobs_to_json(g.knobs);
  for (const auto& [k, v] : knobs.items()) out.push_back(g.seed + ":" + k + "=" + v.dump());
  for (const auto& e : g.edits) out.push_back("pass:" + e.pass);
  if (!g.source.empty()) out.push_back("agent-source");
  return out;
}

double EvolutionStrategy::p_valid(const Genome& g, const std::vector<double>& features) {
  if (log_ && !validity_logged_ && validity_.model() == prior::ValidityModel::Logistic) {
    validity_logged_ = true;
    *log_ << "validity: " << validity_.failures() << " gate failures among " << validity_.rows()
          << " measured candidates; a logistic model on the cost features now predicts them (was: Beta rates per "
             "knob value and pass)\n";
  }
  return validity_.probability(validity_categories(g), features);
}

std::vector<Ready> EvolutionStrategy::take_oldest(std::size_t n) {
  n = std::min(n, reserve_.size());
  std::vector<Ready> out(std::make_move_iterator(reserve_.begin()),
                         std::make_move_iterator(reserve_.begin() + static_cast<std::ptrdiff_t>(n)));
  reserve_.erase(reserve_.begin(), reserve_.begin() + static_cast<std::ptrdiff_t>(n));
  return out;
}

Choice EvolutionStrategy::choose(std::size_t slots, const std::function<void(CostModel&, std::mt19937_64&)>& refit) {
  Choice out;
  if (reserve_.empty()) return out;
  if (model_dirty_) {
    model_dirty_ = false;
    refit(model_, model_rng_);
  }
  const auto n = static_cast<Eigen::Index>(reserve_.size());
  const auto cols = static_cast<Eigen::Index>(opt_.feature_columns);
  Eigen::MatrixXd X = Eigen::MatrixXd::Zero(n, cols);
  Eigen::VectorXd valid = Eigen::VectorXd::Ones(n), analytic(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const Ready& r = reserve_[static_cast<std::size_t>(i)];
    for (Eigen::Index j = 0; j < cols && j < static_cast<Eigen::Index>(r.features.size()); ++j)
      X(i, j) = r.features[static_cast<std::size_t>(j)];
    analytic(i) = r.analytic;
    valid(i) = p_valid(r.proposal.genome, r.features);
  }
  slots = std::min(slots, reserve_.size());
  if (slots == 0) return out;
  model_.mask(X);
  const auto picks = prior::select_batch(model_.model(), X, valid, analytic, slots, model_rng_, model_.selection_options());
  std::vector<bool> taken(reserve_.size(), false);
  for (const auto& p : picks) {
    taken[p.index] = true;
    out.picked.push_back(std::move(reserve_[p.index]));
    out.reasons.push_back(p.reason);
  }
  std::vector<Ready> rest;
  std::vector<double> score;  // predicted log time (lower is better) of what waits
  const bool cold = model_.cold();
  for (std::size_t i = 0; i < reserve_.size(); ++i) {
    if (taken[i]) continue;
    const auto row = static_cast<Eigen::Index>(i);
    score.push_back(cold ? analytic(row) : model_.model().mean(X.row(row).transpose()));
    rest.push_back(std::move(reserve_[i]));
  }
  reserve_ = std::move(rest);
  // A bounded reserve: the ones the model likes least give way (not charged: never judged).
  const std::size_t cap = static_cast<std::size_t>(std::max(1, opt_.reserve_factor * opt_.batch));
  if (reserve_.size() > cap) {
    std::vector<std::size_t> order(reserve_.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    // Ties by age (std::sort: libstdc++ 12's stable_sort trips clang's -Werror).
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return score[a] != score[b] ? score[a] < score[b] : a < b; });
    std::vector<Ready> kept;
    for (std::size_t k = 0; k < order.size(); ++k) {
      Ready& r = reserve_[order[k]];
      if (k < cap) {
        kept.push_back(std::move(r));
        continue;
      }
      dropped(r.proposal);
      out.evicted.push_back(std::move(r));
    }
    reserve_ = std::move(kept);
  }
  return out;
}

void EvolutionStrategy::measured(const Ready& r, const std::optional<Figures>& f) {
  const std::string& op = r.proposal.operator_id;
  validity_.add(validity_categories(r.proposal.genome), r.features, f.has_value());
  if (!f) {
    if (is_policy_op(op)) policy_.credit(op, Outcome::Failed);
    return;
  }
  Member child;
  child.candidate_id = r.candidate_id;
  child.genome = r.proposal.genome;
  child.fitness = f->fitness;
  child.fitness_low = f->low;
  child.fitness_high = f->high;
  if (is_policy_op(op)) {
    // The paired comparison with the best and the parent, through their fitness bounds.
    const Member* best = population_.best();
    const auto parent = r.proposal.parent_id ? measured_.find(*r.proposal.parent_id) : measured_.end();
    if (best && significantly_better(child, *best, 0.01))
      policy_.credit(op, Outcome::NewBest);
    else if (parent != measured_.end() && significantly_better(child, parent->second, 0.01))
      policy_.credit(op, Outcome::Faster, child.fitness / parent->second.fitness);
    else
      policy_.credit(op, Outcome::NotFaster);
  }
  measured_[child.candidate_id] = child;
  population_.offer(r.proposal.island, child, r.proposal.parent_id);
  model_dirty_ = true;
}

void EvolutionStrategy::remeasured(std::int64_t candidate_id, const Figures& f) {
  population_.remeasured(candidate_id, f.fitness, f.low, f.high);
  model_dirty_ = true;
}

}  // namespace ptxevo::search
