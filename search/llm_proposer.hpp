// The LLM agents as one proposal operator ("llm") of the campaign, beside the rule agents and
// chosen by the same operator posterior. A proposal is a child genome whose source the model
// wrote (or whose knobs it chose); it is then recorded, built through NVRTC, screened by the
// same IR checks and gated like any other candidate. Every call lands in llm_calls, every
// answer that does not become a measured candidate in agent_rejections with its reason. A
// candidate that fails to build or pass the gate is queued for the fixer (at most two turns per
// lineage); the campaign sends queued fixes as soon as it learns of the failure, each in a build
// round of its own. While the endpoint's breaker is open, or the budget refuses, the slot goes
// back to the rule agents.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>

#include "agents/llm_agent.hpp"
#include "evaluator/spec.hpp"
#include "search/population.hpp"
#include "search/proposer.hpp"
#include "tracedb/trace_db.hpp"

namespace ptxevo::search {

// The name the compiler gives agent-written source in its messages.
inline constexpr const char* kAgentSourceName = "candidate.cu";

// A build error for the fixer: the error, then the lines of the agent's source that it cites
// ("candidate.cu(123): ..."), numbered, with three lines of context (at most five places).
std::string build_error_for_fixer(const std::string& error, const std::string& source);

// Writes each chat call into the trace database of the running campaign.
class TraceCallRecorder final : public agents::CallRecorder {
 public:
  explicit TraceCallRecorder(tracedb::TraceDb& db) : db_(db) {}
  void set_campaign(std::int64_t campaign_id) { campaign_id_ = campaign_id; }
  std::int64_t record_call(const agents::CallRecord& call) override;

 private:
  tracedb::TraceDb& db_;
  std::int64_t campaign_id_ = 0;
};

// What the CLI (or a test) hands the campaign to turn the LLM agents on.
struct LlmAgents {
  agents::LlmAgent* agent = nullptr;
  agents::Budget* budget = nullptr;
  TraceCallRecorder* recorder = nullptr;
  double share = 0;  // at least this fraction of child slots offered to the LLM (0: the posterior alone)
};

struct LlmProposal {
  std::optional<Proposal> proposal;
  bool handed_back = false;  // the endpoint gave nothing (down, out of budget): not the operator's fault
};

class LlmProposer {
 public:
  static constexpr const char* kOperator = "llm";
  using SourceOf = std::function<std::string(const Genome&)>;
  using MixOf = std::function<std::string(const Genome&)>;

  LlmProposer(LlmAgents agents, tracedb::TraceDb& db, std::int64_t campaign_id, const evaluator::Spec& spec,
              const evaluator::Op& op, std::string arch, SourceOf source_of, MixOf mix, std::ostream& log);

  [[nodiscard]] bool available() const;
  [[nodiscard]] double share() const { return agents_.share; }
  // Planner + coder on `parent`.
  LlmProposal propose(const Member& parent, int island);
  // A failed child waits for the fixer.
  [[nodiscard]] bool fix_queued() const { return !fixes_.empty(); }
  // The fixer on the oldest failed child (its lineage's island); the fix leaves the queue
  // whatever the answer.
  LlmProposal fix();
  // A proposed child got its candidate row: records what it was meant to be.
  void recorded(const Genome& child, std::int64_t candidate_id);
  // A proposed child failed to build, pass the screen or the gate: record why, queue a fix.
  void failed(const Genome& child, std::int64_t candidate_id, const std::string& stage, const std::string& error);
  // A proposed child was measured: its conversation is done.
  void measured(const Genome& child);
  // A proposed child was not recorded (another proposal of the round is the same genome): its
  // call gets an E_DUPLICATE rejection row instead of a proposal row.
  void dropped(const Genome& child, const std::string& why);
  // The campaign ends: answers proposed but never recorded get an E_NOT_BUILT rejection row, so
  // every call ends as a candidate with its proposal row or as a rejection.
  void campaign_ended();

 private:
  struct Lineage {
    Member parent;
    int island = 0;
    agents::Conversation conversation;
    tracedb::LlmProposalRow proposal;  // candidate_id unset until recorded()
  };
  struct PendingFix {
    Lineage lineage;
    std::int64_t failed_candidate = 0;
    std::string error;
  };
  LlmProposal finish(const agents::AgentAttempt& attempt, const Member& parent, int island, const std::string& asked,
                     const agents::Conversation* fallback_conversation);
  void reject(const agents::Rejection& r, std::optional<std::int64_t> parent_id);

  LlmAgents agents_;
  tracedb::TraceDb& db_;
  std::int64_t campaign_id_;
  const evaluator::Spec& spec_;
  const evaluator::Op& op_;
  std::string arch_;
  SourceOf source_of_;
  MixOf mix_of_;
  std::ostream& log_;
  std::map<std::string, Lineage> lineages_;  // child genome hash -> its conversation
  std::map<std::string, std::string> mix_cache_;  // genome hash -> instruction mix (a build each)
  std::string mix_of(const Genome& g);
  std::deque<PendingFix> fixes_;
};

}  // namespace ptxevo::search
