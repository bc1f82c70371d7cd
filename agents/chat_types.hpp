// Provider-neutral chat request / reply / error types shared by the wire formats, the retry
// layer and the client. Plain data: no I/O, no secrets (the API key never enters these types).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace ptxevo::agents {

struct ChatMessage {
  std::string role;  // "user" or "assistant"; the system text goes in ChatRequest::system
  std::string content;
};

struct ChatRequest {
  std::string model;  // empty: use the endpoint's configured model
  std::string system;
  std::vector<ChatMessage> messages;
  int max_tokens = 1024;
  std::optional<double> temperature;  // omitted from the wire when unset (reasoning models)
};

struct ChatReply {
  std::string text;
  // Normalized: "stop" (natural end), "length" (hit max_tokens), "tool", "filtered", "refused",
  // or the provider's own value when it has no mapping.
  std::string stop_reason;
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
  nlohmann::json raw;  // the whole reply, for the trace DB

  // A length stop means the text is cut off: callers must never parse it as a complete answer.
  [[nodiscard]] bool truncated() const { return stop_reason == "length"; }
};

enum class ErrorKind {
  Retryable,   // 408/409/429/5xx/529, transport errors and timeouts
  Fatal,       // 400/401/403/404/413/422 and other 4xx: wrong key, model or URL
  OutOfQuota,  // quota / spend limit / credit balance: fatal for the endpoint
  Truncated,   // reply stopped on the length limit
  Malformed,   // a 2xx whose body is not the expected JSON
};

[[nodiscard]] std::string_view to_string(ErrorKind kind);

struct ChatError {
  ErrorKind kind = ErrorKind::Fatal;
  int http_status = 0;  // 0 when no HTTP response arrived
  std::string message;  // redacted by ChatClient before it leaves the client
  std::string code;     // provider code/type when present (e.g. "insufficient_quota")
  // Server-directed wait (Retry-After / retry-after-ms), already converted to a duration.
  std::optional<std::chrono::milliseconds> retry_after;
  bool circuit_open = false;         // refused locally because the endpoint's breaker is open
  bool cancelled = false;            // the caller's cancel flag ended the call
  std::optional<ChatReply> partial;  // set for Truncated: usage still counts against the budget
};

// Either a complete reply or an error; a tiny stand-in for C++23 std::expected.
class Result {
 public:
  Result(ChatReply reply) : value_(std::move(reply)) {}  // NOLINT: implicit by design
  Result(ChatError error) : value_(std::move(error)) {}  // NOLINT: implicit by design
  [[nodiscard]] bool ok() const { return std::holds_alternative<ChatReply>(value_); }
  [[nodiscard]] const ChatReply& reply() const { return std::get<ChatReply>(value_); }
  [[nodiscard]] const ChatError& error() const { return std::get<ChatError>(value_); }

 private:
  std::variant<ChatReply, ChatError> value_;
};

// Status-only classification (the SDKs' table). Body-dependent refinements (quota) are done by
// the format parsers on top of this.
[[nodiscard]] ErrorKind classify_status(int http_status);

// True when an error code/type/message says the account is out of money rather than rate
// limited: retrying cannot help.
[[nodiscard]] bool mentions_out_of_quota(std::string_view text);

// First `max_bytes` of a body, cut on a UTF-8 boundary, for error messages.
[[nodiscard]] std::string clip(std::string_view text, std::size_t max_bytes = 2048);

}  // namespace ptxevo::agents
