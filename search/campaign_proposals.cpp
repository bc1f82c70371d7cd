// The campaign's proposals: a fresh population (seeds, warm start, random genomes) or a batch of
// children from the rule agents and the LLM agents under the operator posterior, and in replay
// their projection onto the record. The rest of the loop is in campaign.cpp.
#include <cstdio>
#include <set>

#include "search/campaign.hpp"

namespace ptxevo::search {

using nlohmann::json;

std::vector<Proposal> CampaignEngine::propose(int generation, std::mt19937_64& rng, bool allow_llm) {
  std::vector<Proposal> out;
  const int islands = population_.islands();
  if (population_.empty()) {
    // A fresh population: the seeds at their defaults, then random valid knob assignments.
    int k = 0;
    for (const auto& g : proposer_.seeds()) {
      Proposal p;
      p.genome = g;
      p.operator_id = "seed";
      p.detail = "seed defaults";
      p.island = k++ % islands;
      out.push_back(std::move(p));
    }
    // Warm start: what did well on this op before, in place of some of the random genomes.
    // Fitness from another campaign is against another baseline, so each is measured again here
    // (and charged to the budget) like any candidate.
    int warm = 0;
    const int cap = (static_cast<int>(out.size()) + opt_.initial) / 2;
    const int want = opt_.warm_start < 0 ? cap : std::min(opt_.warm_start, cap);
    if (want > 0) {
      // A deep list: the very best of an earlier campaign may all lie outside this spec's space.
      std::set<std::string> have;
      for (const auto& p : out) have.insert(p.genome.hash());
      for (const auto& e : db_.earlier_best(campaign_id_, spec_.op, std::max(64, want * 16))) {
        if (warm >= want || warm >= opt_.initial) break;
        Genome g;
        try {
          g = genome_from_json(json::parse(e.genome_json), op_);
        } catch (const std::exception&) {
          continue;
        }
        if (!proposer_.admits(g).empty() || !have.insert(g.hash()).second) continue;
        Proposal p;
        p.genome = std::move(g);
        p.operator_id = "warm_start";
        char fit[32];
        std::snprintf(fit, sizeof fit, "%.4f", e.fitness);
        p.detail = "candidate " + std::to_string(e.candidate_id) + " of campaign " + std::to_string(e.campaign_id) +
                   " (" + e.arch + (e.gpu.empty() ? "" : ", " + e.gpu) + "): fitness " + fit + " there";
        p.island = k++ % islands;
        log_ << "warm_start: " << p.genome.describe() << " from " << p.detail << "\n";
        out.push_back(std::move(p));
        ++warm;
      }
    }
    // Random genomes, a share of them with PTX edits (passes that apply to the baseline and
    // have not refused every parent so far).
    std::vector<std::string> edit_passes;
    for (const auto& pass : random_passes_)
      if (!rarely_applies("ptx:" + pass)) edit_passes.push_back(pass);
    for (int i = warm; i < opt_.initial; ++i) {
      const auto& seeds = spec_.seeds;
      const auto& s = seeds[static_cast<std::size_t>(i) % seeds.size()];
      if (auto g = proposer_.random_genome(s.name, rng, opt_.random_edits, edit_passes)) {
        Proposal p;
        p.genome = *g;
        p.operator_id = "random";
        p.detail = g->edits.empty() ? "random knobs" : "random knobs and edits";
        p.island = k++ % islands;
        out.push_back(std::move(p));
      }
    }
    return out;
  }
  for (int i = 0; i < opt_.batch; ++i) {
    const int island = (generation * opt_.batch + i) % islands;
    const Member* parent = population_.select(island, rng);
    if (!parent) parent = population_.best();
    const Member* mate = population_.select(island, rng);
    if (mate == parent) mate = population_.select((island + 1) % islands, rng);
    const bool has_mate = mate && mate != parent && mate->genome.seed == parent->genome.seed;
    // A few tries: an operator may find no legal move for this parent.
    bool llm_tried = false;  // one LLM attempt per slot; after that the rule agents fill it
    for (int attempt = 0; attempt < 6; ++attempt) {
      auto ops = proposer_.applicable(parent->genome, has_mate);
      // A pass that refused this parent refuses it again; one that refused every parent so far
      // is offered only now and then (a later parent's code may suit it).
      const bool explore = std::uniform_real_distribution<double>(0, 1)(rng) < 0.05;
      std::erase_if(ops, [&](const std::string& o) {
        if (refused_pairs_.count({parent->candidate_id, o})) return true;
        // One child per (parent, pass) a round: whether a pass applies rarely depends on its
        // parameters, and the round's refusals are known only once it is built.
        if (o.rfind("ptx:", 0) == 0 && asked_this_round_.count({parent->candidate_id, o})) return true;
        if (explore || !rarely_applies(o)) return false;
        if (rare_logged_.insert(o).second)
          log_ << o << ": refused " << applicability_.at(o).refused
               << " parents and applied to none; proposed only rarely from now on\n";
        return true;
      });
      const bool llm_open = allow_llm && llm_ && !llm_tried && !stop_.load() && llm_->available();
      if (llm_open) ops.push_back(LlmProposer::kOperator);
      std::string op;
      if (llm_open && std::uniform_real_distribution<double>(0, 1)(rng) < llm_->share()) {
        op = LlmProposer::kOperator;  // the configured minimum share, outside the posterior's draw
      } else {
        op = policy_.choose(ops, rng);
      }
      if (op.empty()) break;
      if (op == LlmProposer::kOperator) {
        llm_tried = true;
        auto r = llm_->propose(*parent, island);
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

void CampaignEngine::project_onto_record(std::vector<Proposal>& props) {
  if (!projection_) return;
  std::vector<Proposal> kept;
  for (auto& p : props) {
    // Agent-written device code is in no record, and an LLM's knob answer is what the model
    // asked for: both stay as written (scored if the record holds them, else unmeasured), so
    // the LLM is never credited with a genome it did not propose.
    if (!p.genome.source.empty() || is_llm(p)) {
      taken_.insert(p.genome.hash());
      kept.push_back(std::move(p));
      continue;
    }
    auto g = projection_->project(p.genome, taken_);
    if (!g) {  // every recorded genome is taken: nothing left to score
      if (is_policy_op(p.operator_id)) policy_.release(p.operator_id);
      continue;
    }
    if (!(*g == p.genome)) {
      p.detail += (p.detail.empty() ? "" : "; ") + std::string("projected onto the replay record from ") + p.genome.describe();
      p.genome = std::move(*g);
    }
    taken_.insert(p.genome.hash());
    kept.push_back(std::move(p));
  }
  props = std::move(kept);
}

}  // namespace ptxevo::search
