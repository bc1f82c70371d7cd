// One chat endpoint (OpenAI-compatible or Anthropic): builds the request, sends it through the
// transport under the retry policy and the endpoint's circuit breaker, and returns a complete
// reply or a classified, redacted error.
//
// Key handling: the config names an environment variable; the key is read from it at call time
// (getenv), placed only in the outgoing header, and never stored, logged or put in an error
// message. Everything the client emits (errors, log lines) goes through redact() as well,
// because some servers echo parts of the key back in 401 bodies. getenv is not safe against a
// concurrent setenv: set the variables before starting threads.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "agents/chat_types.hpp"
#include "agents/circuit_breaker.hpp"
#include "agents/http_transport.hpp"
#include "agents/openai_format.hpp"
#include "agents/retry_policy.hpp"

namespace ptxevo::agents {

enum class ApiKind { OpenAI, Anthropic };

struct EndpointConfig {
  ApiKind kind = ApiKind::OpenAI;
  // OpenAI-compatible: up to and including /v1 (POST {base_url}/chat/completions), e.g.
  // http://127.0.0.1:8000/v1. Anthropic: the host root (POST {base_url}/v1/messages).
  std::string base_url;
  std::string model;  // used when ChatRequest::model is empty
  // Name of the environment variable holding the key. Empty: send no auth header (Ollama,
  // servers started without --api-key).
  std::string key_env;
  MaxTokensField max_tokens_field = MaxTokensField::MaxTokens;  // OpenAI dialect only
  std::chrono::milliseconds connect_timeout{5'000};
  // Plain http:// is refused unless the host is loopback, so a key never crosses a network in
  // clear text; this flag is the explicit opt-out (--insecure-endpoint).
  bool allow_plain_http_remote = false;
};

// Replaces `secret`, and every fragment of it of 8 or more characters (or the whole secret when
// shorter), with "<redacted>".
[[nodiscard]] std::string redact(std::string_view text, std::string_view secret);

// True for http(s) URLs whose host is 127.0.0.1, localhost or [::1].
[[nodiscard]] bool is_loopback_url(std::string_view url);

class ChatClient {
 public:
  using LogFn = std::function<void(std::string_view line)>;

  // The breaker is shared by every client of the same endpoint; the transport must be
  // thread-safe (CurlTransport is).
  ChatClient(EndpointConfig config, std::shared_ptr<HttpTransport> transport, RetryPolicy policy,
             std::shared_ptr<CircuitBreaker> breaker, LogFn log = {});

  // Blocks for at most the policy's deadline (plus one connect timeout at worst, from libcurl's
  // granularity). Truncated replies come back as ErrorKind::Truncated with the reply in
  // ChatError::partial, so a length stop can never be mistaken for a complete answer.
  [[nodiscard]] Result chat(const ChatRequest& request) const;

  // A flag that, once true, ends calls early: the transfer in flight is aborted and no retry or
  // wait follows. It must outlive the client. Null: calls end only at their deadline.
  void set_cancel(const std::atomic<bool>* cancel) { cancel_ = cancel; }

  [[nodiscard]] std::string url() const;
  [[nodiscard]] const EndpointConfig& config() const { return config_; }

 private:
  [[nodiscard]] Result interpret(const HttpResponse& response) const;
  void log(std::string_view line, std::string_view secret) const;

  EndpointConfig config_;
  std::shared_ptr<HttpTransport> transport_;
  RetryPolicy policy_;
  std::shared_ptr<CircuitBreaker> breaker_;
  LogFn log_;
  const std::atomic<bool>* cancel_ = nullptr;
};

}  // namespace ptxevo::agents
