#include "search/llm_proposer.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

#include "search/llm_evidence.hpp"
#include "tracedb/queries.hpp"

namespace ptxevo::search {

namespace {

constexpr std::size_t kMaxLineages = 64;  // conversations kept for fixes; beyond it, one is dropped

std::string stage_of(const std::string& code) {
  if (code == "E_SCREEN") return "screen";
  if (code == "E_NOT_BUILT") return "campaign";
  if (code == "E_BUDGET") return "budget";
  if (code == "E_ENDPOINT" || code == "E_ENDPOINT_DOWN") return "endpoint";
  return "reply";
}

// The rule-made focus line used when there is no plan: the shape furthest from its floor.
std::string focus_of(const agents::PromptContext& c) {
  const agents::ShapeFigure* worst = nullptr;
  for (const auto& s : c.shapes)
    if (s.fraction_of_floor && (!worst || *s.fraction_of_floor < *worst->fraction_of_floor)) worst = &s;
  if (!worst) return "make the kernel faster on every benchmark shape without changing its results";
  char buf[200];
  std::snprintf(buf, sizeof buf, "the parent reaches %.0f%% of the roofline floor on %s; make it faster there without changing results",
                100 * *worst->fraction_of_floor, worst->shape.c_str());
  return buf;
}

}  // namespace

std::int64_t TraceCallRecorder::record_call(const agents::CallRecord& c) {
  tracedb::LlmCallRow row;
  row.role = c.role;
  row.turn = c.turn;
  row.model = c.model;
  row.endpoint = c.endpoint;
  row.status = c.status;
  row.error = c.error;
  row.stop_reason = c.stop_reason;
  row.http_status = c.http_status;
  row.request_bytes = c.request_bytes;
  row.reserved_input_tokens = c.reserved_input_tokens;
  row.reserved_output_tokens = c.reserved_output_tokens;
  row.input_tokens = c.input_tokens;
  row.output_tokens = c.output_tokens;
  row.cost_usd = c.cost_usd;
  row.latency_ms = c.latency_ms;
  return db_.record_llm_call(campaign_id_, row);
}

LlmProposer::LlmProposer(LlmAgents agents, tracedb::TraceDb& db, std::int64_t campaign_id, const evaluator::Spec& spec,
                         const evaluator::Op& op, std::string arch, SourceOf source_of, MixOf mix, std::ostream& log)
    : agents_(agents),
      db_(db),
      campaign_id_(campaign_id),
      spec_(spec),
      op_(op),
      arch_(std::move(arch)),
      source_of_(std::move(source_of)),
      mix_of_(std::move(mix)),
      log_(log) {
  agents_.recorder->set_campaign(campaign_id_);
  // A resumed campaign spent what its recorded calls say.
  const tracedb::LlmSpend s = db_.llm_spend(campaign_id_);
  agents_.budget->restore({s.calls, s.input_tokens, s.output_tokens, s.usd, s.unpriced_calls});
}

bool LlmProposer::available() const { return agents_.agent->available(); }

void LlmProposer::reject(const agents::Rejection& r, std::optional<std::int64_t> parent_id) {
  tracedb::AgentRejection row;
  row.parent_id = parent_id;
  row.call_id = r.call_id;
  row.role = r.role;
  row.stage = stage_of(r.error.code);
  row.code = r.error.code;
  row.reason = r.error.detail;
  db_.record_agent_rejection(campaign_id_, row);
}

LlmProposal LlmProposer::finish(const agents::AgentAttempt& attempt, const Member& parent, int island,
                                const std::string& asked, const agents::Conversation* fallback) {
  for (const auto& r : attempt.rejections) reject(r, parent.candidate_id);
  // Who wrote the answer: a coder's conversation that needed fixer turns ends with the fixer's.
  const std::string role =
      asked == "fixer" || (attempt.reply && attempt.conversation && attempt.conversation->fix_turns > 0) ? "fixer" : asked;
  LlmProposal out;
  out.handed_back = attempt.handed_back;
  if (!attempt.reply) {
    if (attempt.rejections.empty() && attempt.rejection) {
      reject({*attempt.rejection, role, std::nullopt}, parent.candidate_id);
    }
    log_ << "llm " << role << ": no usable answer for candidate " << parent.candidate_id << " ("
         << (attempt.rejection ? attempt.rejection->code : "none") << ")"
         << (attempt.handed_back ? "; the slot goes to the rule agents" : "") << std::endl;
    return out;
  }
  const agents::ParsedReply& reply = *attempt.reply;
  Genome child = parent.genome;
  if (reply.kind == agents::PatchKind::Knobs) {
    for (const auto& [given, value] : reply.knobs) {
      // An answer may name a knob as an older record or document did.
      const std::string name = evaluator::canonical_knob_name(op_, given);
      auto it = child.knobs.find(name);
      const bool numeric = it != child.knobs.end() && std::holds_alternative<std::int64_t>(it->second);
      child.knobs[name] = numeric ? evaluator::KnobValue(std::stoll(value)) : evaluator::KnobValue(value);
    }
  } else {
    child.source = reply.source;
    child.edits.clear();  // PTX edits were made for the parent's PTX, not this source's
    if (child.source == source_of_(Genome{parent.genome.seed, {}, {}, ""})) child.source.clear();
  }
  if (child == parent.genome) {
    reject({{"E_NO_CHANGE", "the answer leaves the parent unchanged"}, role,
            attempt.call_ids.empty() ? std::nullopt : std::optional<std::int64_t>(attempt.call_ids.back())},
           parent.candidate_id);
    log_ << "llm " << role << ": the answer leaves candidate " << parent.candidate_id << " unchanged" << std::endl;
    return out;
  }
  {
    // Already proposed in this campaign (by anyone): a repeat costs a slot and teaches nothing.
    if (const auto seen = tracedb::candidate_with_genome(db_.connection(), campaign_id_, child.hash())) {
      reject({{"E_DUPLICATE", "the answer repeats candidate " + std::to_string(*seen)}, role,
              attempt.call_ids.empty() ? std::nullopt : std::optional<std::int64_t>(attempt.call_ids.back())},
             parent.candidate_id);
      log_ << "llm " << role << ": the answer repeats candidate " << *seen << std::endl;
      return out;
    }
  }
  if (lineages_.count(child.hash())) {
    // The same answer twice in one round (two calls, one genome): the later call is the duplicate.
    reject({{"E_DUPLICATE", "the answer repeats another answer of this round"}, role,
            attempt.call_ids.empty() ? std::nullopt : std::optional<std::int64_t>(attempt.call_ids.back())},
           parent.candidate_id);
    log_ << "llm " << role << ": the answer repeats another of this round" << std::endl;
    return out;
  }
  Proposal p;
  p.genome = child;
  p.parent_id = parent.candidate_id;
  p.operator_id = kOperator;
  p.detail = role + ": " + (reply.name.empty() ? std::string("unnamed") : reply.name) + " (" +
             std::string(agents::to_string(reply.kind)) + ")";
  p.island = island;
  if (attempt.conversation || fallback) {
    if (lineages_.size() >= kMaxLineages) lineages_.erase(lineages_.begin());
    tracedb::LlmProposalRow meta;
    if (!attempt.call_ids.empty()) meta.call_id = attempt.call_ids.back();
    meta.role = role;
    meta.kind = std::string(agents::to_string(reply.kind));
    meta.name = reply.name.empty() ? "unnamed" : reply.name;
    meta.rationale = reply.rationale;
    meta.strategy = attempt.strategy;
    lineages_[child.hash()] = Lineage{parent, island, attempt.conversation ? *attempt.conversation : *fallback, meta};
  }
  log_ << "llm " << role << ": proposes " << p.detail << " from candidate " << parent.candidate_id << std::endl;
  out.proposal = std::move(p);
  return out;
}

LlmProposal LlmProposer::fix() {
  if (fixes_.empty()) return {};
  PendingFix fix = std::move(fixes_.front());
  fixes_.pop_front();
  EvidenceInput in{campaign_id_, arch_, &fix.lineage.parent, source_of_(fix.lineage.parent.genome),
                   mix_of(fix.lineage.parent.genome)};
  const auto context = gather_evidence(db_, spec_, op_, in);
  const auto attempt = agents_.agent->fix(fix.lineage.conversation, fix.error, context);
  return finish(attempt, fix.lineage.parent, fix.lineage.island, "fixer", nullptr);
}

LlmProposal LlmProposer::propose(const Member& parent, int island) {
  EvidenceInput in{campaign_id_, arch_, &parent, source_of_(parent.genome), mix_of(parent.genome)};
  const auto context = gather_evidence(db_, spec_, op_, in);
  const auto attempt = agents_.agent->propose(context, focus_of(context));
  return finish(attempt, parent, island, "coder", nullptr);
}

std::string build_error_for_fixer(const std::string& error, const std::string& source) {
  std::set<long> cited;
  const std::string tag = std::string(kAgentSourceName) + "(";
  for (auto at = error.find(tag); at != std::string::npos && cited.size() < 5; at = error.find(tag, at + 1)) {
    char* end = nullptr;
    const long line = std::strtol(error.c_str() + at + tag.size(), &end, 10);
    if (end && *end == ')' && line > 0) cited.insert(line);
  }
  if (cited.empty()) return error;
  std::vector<std::string> lines;
  std::istringstream in(source);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string out = error + "\nThe lines of " + kAgentSourceName + " (your source, as built) that the errors cite:\n```cuda\n";
  long shown_to = 0;
  for (const long c : cited) {
    const long from = std::max(std::max(1L, c - 3), shown_to + 1), to = std::min(static_cast<long>(lines.size()), c + 3);
    if (from > shown_to + 1 && shown_to > 0) out += "...\n";
    for (long n = from; n <= to; ++n) {
      char num[32];
      std::snprintf(num, sizeof num, "%5ld | ", n);
      out += num + lines[static_cast<std::size_t>(n - 1)] + "\n";
    }
    shown_to = std::max(shown_to, to);
  }
  return out + "```";
}

void LlmProposer::failed(const Genome& child, std::int64_t candidate_id, const std::string& stage,
                         const std::string& error) {
  tracedb::AgentRejection row;
  row.candidate_id = candidate_id;
  row.role = "coder";
  // The documented stages: a build failure is "build" whichever step failed (nvrtc, parse, pass,
  // link); that step leads the reason.
  const bool built = stage == "gate" || stage == "screen";
  row.stage = built ? stage : "build";
  row.code = stage == "gate" ? "E_GATE" : (stage == "screen" ? "E_IR_CHECK" : "E_BUILD");
  row.reason = (built ? "" : stage + ": ") + (error.empty() ? "(no message)" : error);
  auto it = lineages_.find(child.hash());
  if (it != lineages_.end()) {
    row.parent_id = it->second.parent.candidate_id;
    row.call_id = it->second.proposal.call_id;
    row.role = it->second.proposal.role;
  }
  db_.record_agent_rejection(campaign_id_, row);
  if (it == lineages_.end()) return;
  if (it->second.conversation.fix_turns < agents_.agent->options().max_fix_turns) {
    const std::string shown = built || child.source.empty() ? error : build_error_for_fixer(error, child.source);
    fixes_.push_back({std::move(it->second), candidate_id, stage + " failed: " + shown});
  } else {
    log_ << "llm: candidate " << candidate_id << " failed (" << stage << ") with no fixer turns left; lineage abandoned"
         << std::endl;
  }
  lineages_.erase(it);
}

std::string LlmProposer::mix_of(const Genome& g) {
  const std::string key = g.hash();
  if (auto it = mix_cache_.find(key); it != mix_cache_.end()) return it->second;
  if (mix_cache_.size() >= 256) mix_cache_.clear();  // parents change slowly; a bound keeps it small
  return mix_cache_[key] = mix_of_(g);
}

void LlmProposer::dropped(const Genome& child, const std::string& why) {
  auto it = lineages_.find(child.hash());
  if (it == lineages_.end() || it->second.proposal.candidate_id != 0) return;
  reject({{"E_DUPLICATE", why}, it->second.proposal.role, it->second.proposal.call_id}, it->second.parent.candidate_id);
  lineages_.erase(it);
}

void LlmProposer::campaign_ended() {
  for (auto it = lineages_.begin(); it != lineages_.end();) {
    if (it->second.proposal.candidate_id == 0) {
      reject({{"E_NOT_BUILT", "the campaign ended before this answer was built"}, it->second.proposal.role,
              it->second.proposal.call_id},
             it->second.parent.candidate_id);
      it = lineages_.erase(it);
    } else {
      ++it;
    }
  }
}

void LlmProposer::recorded(const Genome& child, std::int64_t candidate_id) {
  auto it = lineages_.find(child.hash());
  if (it == lineages_.end()) return;
  it->second.proposal.candidate_id = candidate_id;
  db_.record_llm_proposal(campaign_id_, it->second.proposal);
}

void LlmProposer::measured(const Genome& child) { lineages_.erase(child.hash()); }

}  // namespace ptxevo::search
