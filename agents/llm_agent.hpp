// The LLM roles over one chat endpoint: a planner that names one optimisation, a coder that
// writes it (a whole source, SEARCH/REPLACE edits or knob values), and a fixer that gets the
// exact rejection, compile or gate error and at most `max_fix_turns` turns in the same
// conversation. Every HTTP call is reserved against the Budget first and reported to a
// CallRecorder (the trace database) with its tokens and cost; every rejected reply comes back
// with a stable code and the reason. Nothing here compiles or runs anything: the caller builds
// the accepted source through NVRTC and the same checks as every candidate.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agents/chat_client.hpp"
#include "agents/llm_budget.hpp"
#include "agents/prompt_builder.hpp"
#include "agents/reply_parser.hpp"

namespace ptxevo::agents {

// One logical chat call as the trace database stores it. Never holds the key or headers.
struct CallRecord {
  std::string role;     // planner, coder, fixer
  int turn = 0;         // 0 for the first call of a conversation, then 1, 2 for fixer turns
  std::string model;
  std::string endpoint;  // base URL (no credentials ever appear in it)
  std::string status;    // ok, truncated, error, budget-refused, circuit-open
  std::string error;     // redacted error message, or the budget's reason
  std::string stop_reason;
  int http_status = 0;
  std::int64_t request_bytes = 0;
  std::int64_t reserved_input_tokens = 0;
  std::int64_t reserved_output_tokens = 0;
  std::optional<std::int64_t> input_tokens;   // nullopt: nothing charged (not sent)
  std::optional<std::int64_t> output_tokens;
  std::optional<double> cost_usd;  // nullopt: unpriced or not sent; never silently 0
  std::int64_t latency_ms = 0;
};

class CallRecorder {
 public:
  virtual ~CallRecorder() = default;
  virtual std::int64_t record_call(const CallRecord& call) = 0;  // returns the row id
};

struct AgentOptions {
  int max_tokens = 8192;          // coder and fixer; a coder gets more when a whole-file answer needs it
  int planner_max_tokens = 1024;
  bool use_planner = true;
  int max_fix_turns = 2;
  std::optional<double> temperature;
  // After a reply cut off by the length limit or lost to reasoning, later calls get 1.5x the
  // output tokens, up to this many.
  int max_tokens_cap = 32768;
};

// A conversation kept so the fixer can continue it.
struct Conversation {
  ChatRequest request;  // system + every turn so far, the last one the assistant's
  int fix_turns = 0;
};

// One rejected answer (or call), tied to the call that produced it.
struct Rejection {
  ReplyError error;
  std::string role;
  std::optional<std::int64_t> call_id;
};

struct AgentAttempt {
  std::optional<ParsedReply> reply;     // accepted by the envelope parser and the lexical screen
  std::optional<ReplyError> rejection;  // the last rejection when no reply was accepted
  std::vector<Rejection> rejections;    // every rejection on the way (fixed ones included)
  std::optional<Conversation> conversation;
  std::vector<std::int64_t> call_ids;
  std::string strategy;        // the planner's (or the focus line)
  bool handed_back = false;    // no usable answer from the endpoint: give the slot to the rule agents
};

class LlmAgent {
 public:
  using LogFn = std::function<void(std::string_view)>;
  LlmAgent(const ChatClient& client, std::shared_ptr<CircuitBreaker> breaker, Budget& budget, CallRecorder& recorder,
           AgentOptions options, LogFn log = {});

  // False while the endpoint's circuit breaker is open.
  [[nodiscard]] bool available() const;

  // Planner (when enabled) then coder, with fixer turns for replies the parser or the lexical
  // screen rejects.
  AgentAttempt propose(const PromptContext& context, std::string_view focus);
  // A fixer turn on a conversation whose accepted reply then failed to build or pass the gate.
  AgentAttempt fix(Conversation conversation, std::string_view error, const PromptContext& context);

  [[nodiscard]] const AgentOptions& options() const { return options_; }

 private:
  struct Sent {
    std::optional<std::string> text;  // the reply's text when it came back complete
    std::optional<ReplyError> error;
    bool handed_back = false;
  };
  Sent send(const ChatRequest& request, Role role, int turn, std::vector<std::int64_t>& call_ids);
  // Parses and screens; on rejection runs fixer turns while any are left.
  void converse(ChatRequest request, Role role, int fix_turns, const PromptContext& context, AgentAttempt& attempt);

  const ChatClient& client_;
  std::shared_ptr<CircuitBreaker> breaker_;
  Budget& budget_;
  CallRecorder& recorder_;
  AgentOptions options_;
  LogFn log_;
  double token_scale_ = 1.0;  // grows after truncated or reasoning-only replies (this endpoint, this campaign)
};

// The coder's output-token allowance for a parent of `parent_bytes`: options.max_tokens, or more
// when a whole-file answer (the parent repeated with the change) would not fit, up to
// options.max_tokens_cap.
[[nodiscard]] int coder_allowance(std::size_t parent_bytes, const AgentOptions& options);

}  // namespace ptxevo::agents
