// The campaign's proposals: the strategy's (search/strategy.hpp), with warm-start genomes from the
// trace database and the LLM agents as an operator, and in replay their projection onto the
// record. The rest of the loop is in campaign.cpp.
#include <cstdio>
#include <set>

#include "search/campaign.hpp"

namespace ptxevo::search {

using nlohmann::json;

// The LLM agents as the strategy sees them: one more operator, asked for a child in a slot.
class CampaignEngine::LlmOperator : public AgentOperator {
 public:
  LlmOperator(LlmProposer& llm, const std::atomic<bool>& stop) : llm_(llm), stop_(stop) {}
  const std::string& id() const override { return id_; }
  bool open() const override { return !stop_.load() && llm_.available(); }
  double share() const override { return llm_.share(); }
  Answer propose(const Member& parent, int island) override {
    auto r = llm_.propose(parent, island);
    return Answer{std::move(r.proposal), r.handed_back};
  }

 private:
  LlmProposer& llm_;
  const std::atomic<bool>& stop_;
  const std::string id_ = LlmProposer::kOperator;
};

std::vector<Proposal> CampaignEngine::propose(int generation, std::mt19937_64& rng, bool allow_llm) {
  if (!strategy_.population().empty()) {
    if (!allow_llm || !llm_) return strategy_.children(generation, rng, nullptr);
    LlmOperator agent(*llm_, stop_);
    return strategy_.children(generation, rng, &agent);
  }
  // A fresh population. Warm start: what did well on this op before, in place of some of the
  // random genomes, at most half the first population.
  const int cap = (static_cast<int>(proposer_.seeds().size()) + opt_.initial) / 2;
  const int want = opt_.warm_start < 0 ? cap : std::min(opt_.warm_start, cap);
  std::vector<WarmGenome> warm;
  if (want > 0) {
    // A deep list: the very best of an earlier campaign may all lie outside this spec's space.
    for (const auto& e : db_.earlier_best(campaign_id_, spec_.op, std::max(64, want * 16))) {
      WarmGenome w;
      try {
        w.genome = genome_from_json(json::parse(e.genome_json), op_);
      } catch (const std::exception&) {
        continue;
      }
      char fit[32];
      std::snprintf(fit, sizeof fit, "%.4f", e.fitness);
      w.detail = "candidate " + std::to_string(e.candidate_id) + " of campaign " + std::to_string(e.campaign_id) +
                 " (" + e.arch + (e.gpu.empty() ? "" : ", " + e.gpu) + "): fitness " + fit + " there";
      warm.push_back(std::move(w));
    }
  }
  return strategy_.first_population(warm, want, false, rng);
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
      strategy_.dropped(p);
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
