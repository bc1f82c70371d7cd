#include "agents/llm_agent.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include "agents/device_code_screen.hpp"

namespace ptxevo::agents {

LlmAgent::LlmAgent(const ChatClient& client, std::shared_ptr<CircuitBreaker> breaker, Budget& budget,
                   CallRecorder& recorder, AgentOptions options, LogFn log)
    : client_(client),
      breaker_(std::move(breaker)),
      budget_(budget),
      recorder_(recorder),
      options_(options),
      log_(std::move(log)) {}

bool LlmAgent::available() const { return breaker_->state() != BreakerState::Open; }

LlmAgent::Sent LlmAgent::send(const ChatRequest& request_in, Role role, int turn, std::vector<std::int64_t>& call_ids) {
  ChatRequest request = request_in;
  if (!request.temperature) request.temperature = options_.temperature;
  if (token_scale_ > 1.0) {
    const double grown = static_cast<double>(request.max_tokens) * token_scale_;
    request.max_tokens = std::max(request.max_tokens, static_cast<int>(std::min<double>(grown, options_.max_tokens_cap)));
  }
  CallRecord rec;
  rec.role = std::string(to_string(role));
  rec.turn = turn;
  rec.model = request.model.empty() ? client_.config().model : request.model;
  rec.endpoint = client_.config().base_url;
  std::size_t bytes = request.system.size();
  for (const auto& m : request.messages) bytes += m.content.size();
  rec.request_bytes = static_cast<std::int64_t>(bytes);
  Sent sent;

  if (!available()) {
    rec.status = "circuit-open";
    rec.error = "circuit breaker open for " + client_.url();
    call_ids.push_back(recorder_.record_call(rec));
    sent.error = ReplyError{"E_ENDPOINT_DOWN", rec.error};
    sent.handed_back = true;
    return sent;
  }
  auto reservation = budget_.reserve(worst_case_input_tokens(bytes, request.messages.size() + 1), request.max_tokens);
  if (const auto* why = std::get_if<std::string>(&reservation)) {
    rec.status = "budget-refused";
    rec.error = *why;
    call_ids.push_back(recorder_.record_call(rec));
    if (log_) log_("llm " + rec.role + ": not sent: " + *why);
    sent.error = ReplyError{"E_BUDGET", *why};
    sent.handed_back = true;
    return sent;
  }
  const Reservation reserved = std::get<Reservation>(reservation);
  rec.reserved_input_tokens = reserved.input_tokens;
  rec.reserved_output_tokens = reserved.output_tokens;

  const auto t0 = std::chrono::steady_clock::now();
  const Result result = client_.chat(request);
  rec.latency_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();

  std::optional<ChatReply> reply;
  if (result.ok()) {
    reply = result.reply();
    rec.status = "ok";
  } else {
    const ChatError& e = result.error();
    rec.http_status = e.http_status;
    rec.error = e.message;  // redacted by the client
    if (e.kind == ErrorKind::Truncated && e.partial) {
      reply = *e.partial;
      rec.status = "truncated";
    } else {
      rec.status = e.circuit_open ? "circuit-open" : (e.cancelled ? "cancelled" : "error");
    }
  }
  if (reply) {
    rec.stop_reason = reply->stop_reason;
    if (reply->input_tokens > 0 || reply->output_tokens > 0) {
      rec.input_tokens = reply->input_tokens;
      rec.output_tokens = reply->output_tokens;
    }
    if (result.ok() || rec.status == "truncated") rec.http_status = 200;
  }
  // An error response (4xx/5xx) is not billed, and an open circuit sent nothing. A call with no
  // response at all (timeout, reset) may have been billed: its worst case stays charged.
  if (rec.status == "circuit-open") {
    budget_.release(reserved);
    rec.input_tokens = 0;
    rec.output_tokens = 0;
  } else if (rec.status == "error" && rec.http_status != 0) {
    budget_.settle(reserved, std::int64_t{0}, std::int64_t{0});
    rec.input_tokens = 0;
    rec.output_tokens = 0;
    rec.cost_usd = budget_.cost(0, 0);
  } else {
    rec.cost_usd = budget_.settle(reserved, rec.input_tokens, rec.output_tokens);
    if (!rec.input_tokens) rec.input_tokens = reserved.input_tokens;
    if (!rec.output_tokens) rec.output_tokens = reserved.output_tokens;
  }
  call_ids.push_back(recorder_.record_call(rec));

  const auto grow = [&] {
    // The answer did not fit: later calls get more room (the budget reserves it like any other).
    if (static_cast<double>(request.max_tokens) < options_.max_tokens_cap) token_scale_ *= 1.5;
  };
  if (rec.status == "truncated") {
    grow();
    sent.error = ReplyError{"E_TRUNCATED", "the reply stopped at the length limit (" +
                                               std::to_string(request.max_tokens) + " tokens); it is never parsed"};
    return sent;
  }
  if (!result.ok()) {
    sent.error = ReplyError{"E_ENDPOINT", rec.error};
    sent.handed_back = true;
    return sent;
  }
  if (reply->stop_reason == "refused" || reply->stop_reason == "filtered") {
    sent.error = ReplyError{"E_REFUSED", "the model stopped with " + reply->stop_reason};
    return sent;
  }
  if (normalize_reply(reply->text).find_first_not_of(" \t\n") == std::string::npos && reply->output_tokens > 0) {
    grow();
    sent.error = ReplyError{"E_LOST_TO_REASONING", "empty content after " + std::to_string(reply->output_tokens) +
                                                       " output tokens (spent on reasoning)"};
    return sent;
  }
  sent.text = reply->text;
  return sent;
}

void LlmAgent::converse(ChatRequest request, Role role, int fix_turns, const PromptContext& context,
                        AgentAttempt& attempt) {
  while (true) {
    Sent sent = send(request, role, fix_turns, attempt.call_ids);
    std::optional<ReplyError> rejection = sent.error;
    std::optional<ParsedReply> parsed;
    if (sent.text) {
      auto result = parse_reply(*sent.text, context.parent_source, context.knob_domains);
      if (auto* e = std::get_if<ReplyError>(&result)) {
        rejection = *e;
      } else {
        parsed = std::get<ParsedReply>(std::move(result));
        if (parsed->kind != PatchKind::Knobs) {
          const auto violations = screen_device_code(parsed->source);
          if (!violations.empty()) rejection = ReplyError{"E_SCREEN", describe(violations)};
        } else if (context.knob_check) {
          // A combination the spec forbids would build and fail later with messages that never
          // name the rule: refuse it here, naming the constraint.
          std::map<std::string, std::string> merged = context.parent_knobs;
          for (const auto& [k, v] : parsed->knobs) merged[k] = v;
          const std::string broken = context.knob_check(merged);
          if (!broken.empty()) rejection = ReplyError{"E_KNOB_INVALID", broken};
        }
      }
      request.messages.push_back({"assistant", *sent.text});
    }
    if (!rejection) {
      attempt.reply = std::move(parsed);
      attempt.rejection.reset();
      attempt.conversation = Conversation{std::move(request), fix_turns};
      return;
    }
    attempt.rejections.push_back({*rejection, std::string(to_string(role)), attempt.call_ids.back()});
    attempt.rejection = rejection;
    if (log_) log_("llm " + std::string(to_string(role)) + ": rejected " + rejection->code + ": " + rejection->detail);
    if (sent.handed_back) {
      attempt.handed_back = true;
      return;
    }
    // A truncated reply is not in the conversation; the fixer is told what happened instead.
    if (fix_turns >= options_.max_fix_turns) return;
    ++fix_turns;
    role = Role::Fixer;
    if (!sent.text) request.messages.push_back({"assistant", "(reply lost: " + rejection->code + ")"});
    request.messages.push_back(fixer_turn(rejection->code + ": " + rejection->detail));
  }
}

AgentAttempt LlmAgent::propose(const PromptContext& context, std::string_view focus) {
  AgentAttempt attempt;
  attempt.strategy = std::string(focus);
  bool planned = false;
  if (options_.use_planner) {
    Sent sent = send(planner_request(context, options_.planner_max_tokens), Role::Planner, 0, attempt.call_ids);
    if (sent.handed_back) {
      attempt.rejection = sent.error;
      attempt.rejections.push_back({*sent.error, "planner", attempt.call_ids.back()});
      attempt.handed_back = true;
      return attempt;
    }
    if (sent.text) {
      auto plan = parse_plan(*sent.text);
      if (auto* p = std::get_if<Plan>(&plan)) {
        attempt.strategy = p->strategy + (p->hypothesis.empty() ? "" : " (expected: " + p->hypothesis + ")");
        planned = true;
      } else {
        // Recorded; the focus line stands in for the plan.
        attempt.rejections.push_back({std::get<ReplyError>(plan), "planner", attempt.call_ids.back()});
      }
    } else if (sent.error) {
      attempt.rejections.push_back({*sent.error, "planner", attempt.call_ids.back()});
    }
  }
  converse(coder_request(context, attempt.strategy, coder_allowance(context.parent_source.size(), options_), planned),
           Role::Coder, 0, context, attempt);
  return attempt;
}

int coder_allowance(std::size_t parent_bytes, const AgentOptions& options) {
  // A whole-file answer repeats the parent: about one token per 3.5 bytes of CUDA, plus the
  // envelope and a margin for the change itself. Without the room it is cut off at the limit.
  const double whole_file = static_cast<double>(parent_bytes) / 3.5 * 1.25 + 1024.0;
  return static_cast<int>(std::min<double>(options.max_tokens_cap, std::max<double>(options.max_tokens, whole_file)));
}

AgentAttempt LlmAgent::fix(Conversation conversation, std::string_view error, const PromptContext& context) {
  AgentAttempt attempt;
  if (conversation.fix_turns >= options_.max_fix_turns) {
    attempt.rejection = ReplyError{"E_FIX_TURNS", "no fixer turns left for this lineage"};
    return attempt;
  }
  conversation.request.messages.push_back(fixer_turn(error));
  converse(std::move(conversation.request), Role::Fixer, conversation.fix_turns + 1, context, attempt);
  return attempt;
}

}  // namespace ptxevo::agents
