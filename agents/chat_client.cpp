#include "agents/chat_client.hpp"

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

#include "agents/anthropic_format.hpp"

namespace ptxevo::agents {
namespace {

constexpr std::string_view kRedacted = "<redacted>";

ChatError make_error(ErrorKind kind, std::string message) {
  ChatError error;
  error.kind = kind;
  error.message = std::move(message);
  return error;
}

std::string millis(std::chrono::milliseconds value) {
  return std::to_string(value.count()) + " ms";
}

}  // namespace

std::string redact(std::string_view text, std::string_view secret) {
  if (secret.empty()) return std::string(text);
  const std::size_t min_fragment = std::min<std::size_t>(8, secret.size());
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    // Longest run starting at i that occurs somewhere in the secret.
    std::size_t length = 0;
    while (i + length < text.size() &&
           secret.find(text.substr(i, length + 1)) != std::string_view::npos) {
      ++length;
    }
    if (length >= min_fragment) {
      out += kRedacted;
      i += length;
    } else {
      out += text[i];
      ++i;
    }
  }
  return out;
}

bool is_loopback_url(std::string_view url) {
  for (std::string_view scheme : {"http://", "https://"}) {
    if (url.rfind(scheme, 0) != 0) continue;
    std::string_view rest = url.substr(scheme.size());
    for (std::string_view host : {"127.0.0.1", "localhost", "[::1]"}) {
      if (rest.rfind(host, 0) == 0) {
        const std::string_view after = rest.substr(host.size());
        if (after.empty() || after.front() == ':' || after.front() == '/') return true;
      }
    }
  }
  return false;
}

ChatClient::ChatClient(EndpointConfig config, std::shared_ptr<HttpTransport> transport,
                       RetryPolicy policy, std::shared_ptr<CircuitBreaker> breaker, LogFn log)
    : config_(std::move(config)),
      transport_(std::move(transport)),
      policy_(std::move(policy)),
      breaker_(std::move(breaker)),
      log_(std::move(log)) {
  while (!config_.base_url.empty() && config_.base_url.back() == '/') config_.base_url.pop_back();
}

std::string ChatClient::url() const {
  return config_.base_url +
         (config_.kind == ApiKind::OpenAI ? "/chat/completions" : "/v1/messages");
}

void ChatClient::log(std::string_view line, std::string_view secret) const {
  if (log_) log_(redact(line, secret));
}

Result ChatClient::interpret(const HttpResponse& response) const {
  const bool openai = config_.kind == ApiKind::OpenAI;
  if (response.status == 0) {
    return make_error(ErrorKind::Retryable,
                      std::string(response.timed_out ? "timed out" : "transport error") + ": " +
                          response.error);
  }
  if (response.status >= 200 && response.status < 300) {
    auto parsed = openai ? openai_parse_reply(response.body) : anthropic_parse_reply(response.body);
    if (auto* reply = std::get_if<ChatReply>(&parsed)) return std::move(*reply);
    return std::get<ChatError>(std::move(parsed));
  }
  ChatError error = openai ? openai_parse_error(response.status, response.body)
                           : anthropic_parse_error(response.status, response.body);
  error.retry_after = retry_after_from_headers(response.headers, policy_.clock().wall_now());
  // Both SDKs obey this non-standard override; a quota error stays fatal regardless.
  if (auto hint = response.headers.find("x-should-retry");
      hint != response.headers.end() && error.kind != ErrorKind::OutOfQuota) {
    if (hint->second == "true") error.kind = ErrorKind::Retryable;
    if (hint->second == "false") error.kind = ErrorKind::Fatal;
  }
  return error;
}

Result ChatClient::chat(const ChatRequest& request_in) const {
  if (!config_.allow_plain_http_remote && config_.base_url.rfind("https://", 0) != 0 &&
      !is_loopback_url(config_.base_url)) {
    return make_error(ErrorKind::Fatal,
                      "refusing base URL " + config_.base_url +
                          ": plain http is allowed for loopback only");
  }
  // Read at call time and kept only in this frame and the outgoing header.
  std::string key;
  if (!config_.key_env.empty()) {
    const char* value = std::getenv(config_.key_env.c_str());
    if (value == nullptr || *value == '\0') {
      return make_error(ErrorKind::Fatal,
                        "environment variable " + config_.key_env + " is not set or empty");
    }
    key = value;
  }

  ChatRequest request = request_in;
  if (request.model.empty()) request.model = config_.model;
  HttpRequest http;
  http.url = url();
  http.connect_timeout = config_.connect_timeout;
  http.headers.emplace_back("Content-Type", "application/json");
  if (config_.kind == ApiKind::OpenAI) {
    http.body = openai_request_json(request, config_.max_tokens_field).dump();
    if (!key.empty()) http.headers.emplace_back("Authorization", "Bearer " + key);
  } else {
    http.body = anthropic_request_json(request).dump();
    if (!key.empty()) http.headers.emplace_back("x-api-key", key);
    http.headers.emplace_back("anthropic-version", std::string(kAnthropicVersion));
  }

  const RetryConfig& retry = policy_.config();
  const RetryClock& clock = policy_.clock();
  const auto deadline = clock.steady_now() + retry.deadline;
  const auto remaining = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock.steady_now());
  };
  // Every exit goes through here so nothing unredacted leaves the client.
  const auto fail = [&](ChatError error, int attempt, std::string_view why) -> Result {
    error.message = redact(error.message + " [attempt " + std::to_string(attempt) + ", " +
                               std::string(why) + "]",
                           key);
    log("chat " + http.url + " failed: " + error.message, key);
    return error;
  };

  http.cancel = cancel_;
  const auto cancelled = [&] { return cancel_ != nullptr && cancel_->load(); };
  const auto cancel_error = [&] {
    ChatError error = make_error(ErrorKind::Retryable, "cancelled: the campaign is stopping");
    error.cancelled = true;
    return error;
  };
  for (int attempt = 1;; ++attempt) {
    if (cancelled()) return fail(cancel_error(), attempt, "not sent");
    if (!breaker_->allow()) {
      ChatError error = make_error(ErrorKind::Retryable, "circuit breaker open for " + http.url);
      error.circuit_open = true;
      return fail(std::move(error), attempt, "not sent");
    }
    const auto left = remaining();
    if (left.count() <= 0) {
      return fail(make_error(ErrorKind::Retryable, "deadline exceeded"), attempt, "not sent");
    }
    http.timeout = std::min(left, retry.attempt_timeout);
    const HttpResponse response = transport_->post(http);
    // A cancelled transfer says nothing about the endpoint: the breaker is not told.
    if (response.cancelled || cancelled()) return fail(cancel_error(), attempt, "aborted");
    Result result = interpret(response);

    if (result.ok()) {
      breaker_->record_success();
      ChatReply reply = result.reply();
      if (reply.truncated()) {
        ChatError error = make_error(
            ErrorKind::Truncated, "reply truncated at max_tokens=" +
                                      std::to_string(request.max_tokens) + " (length stop)");
        error.http_status = response.status;
        error.partial = std::move(reply);
        return fail(std::move(error), attempt, "not retried");
      }
      log("chat " + http.url + " ok: attempt " + std::to_string(attempt) + ", " +
              std::to_string(reply.input_tokens) + " in / " +
              std::to_string(reply.output_tokens) + " out tokens",
          key);
      return reply;
    }

    ChatError error = result.error();
    switch (error.kind) {
      case ErrorKind::Retryable: breaker_->record_failure(); break;
      case ErrorKind::OutOfQuota: breaker_->record_fatal(); break;
      case ErrorKind::Fatal:
        // Wrong key, permission or model/URL: every later call would fail the same way.
        // A 400/413/422 is about this request only, and shows the endpoint is alive.
        if (error.http_status == 401 || error.http_status == 403 || error.http_status == 404) {
          breaker_->record_fatal();
        } else {
          breaker_->record_success();
        }
        break;
      case ErrorKind::Truncated:
      case ErrorKind::Malformed: breaker_->record_success(); break;  // it answered
    }
    const RetryDecision decision = policy_.decide(attempt, error, remaining());
    if (decision.open_circuit_for) breaker_->open_for(*decision.open_circuit_for);
    if (!decision.retry) return fail(std::move(error), attempt, decision.why);
    log("chat " + http.url + " attempt " + std::to_string(attempt) + ": " + error.message +
            "; retrying in " + millis(decision.wait) + " (" + decision.why + ")",
        key);
    // With a cancel flag, wait in slices so a stop request is honoured during a long wait.
    if (cancel_ == nullptr) clock.sleep(decision.wait);
    for (auto left_to_wait = cancel_ ? decision.wait : Millis(0); left_to_wait.count() > 0 && !cancelled();) {
      const auto slice = std::min(left_to_wait, std::chrono::milliseconds(200));
      clock.sleep(slice);
      left_to_wait -= slice;
    }
  }
}

}  // namespace ptxevo::agents
