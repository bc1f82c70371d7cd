// The single retry layer of a chat call (docs/agents.md, "Retries"). One overall deadline bounds
// every attempt and every wait; there is no retrying anywhere below this (libcurl doesn't).
// Time, sleeping and jitter are injected so tests run instantly and deterministically.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "agents/chat_types.hpp"

namespace ptxevo::agents {

using Millis = std::chrono::milliseconds;

struct RetryConfig {
  int max_attempts = 4;
  Millis deadline{900'000};          // whole logical call: all attempts and waits
  Millis attempt_timeout{600'000};   // per-attempt cap (the SDKs' default)
  Millis base_backoff{500};          // 0.5 s * 2^k ...
  Millis max_backoff{8'000};         // ... capped at 8 s, times jitter in [0.75, 1]
  Millis max_retry_after{120'000};   // a longer server-directed wait means: don't retry
};

// Injectable time sources. steady_now drives deadlines; wall_now only converts HTTP-date
// Retry-After values; sleep waits; jitter returns a value in [0, 1).
struct RetryClock {
  std::function<std::chrono::steady_clock::time_point()> steady_now;
  std::function<std::chrono::system_clock::time_point()> wall_now;
  std::function<void(Millis)> sleep;
  std::function<double()> jitter;

  // Real clocks and a seeded, internally locked RNG (so one policy can serve many threads).
  [[nodiscard]] static RetryClock real(std::uint64_t seed);
};

struct RetryDecision {
  bool retry = false;
  Millis wait{0};
  // Set when the server asked for a wait longer than max_retry_after: the breaker should stay
  // open that long instead of this call sleeping.
  std::optional<Millis> open_circuit_for;
  std::string why;  // for the log
};

// Parses Retry-After given as delta-seconds (integer or decimal) or as an IMF-fixdate HTTP date
// ("Sun, 06 Nov 1994 08:49:37 GMT"). A date in the past yields 0. nullopt when unparseable.
[[nodiscard]] std::optional<Millis> parse_retry_after(std::string_view value,
                                                      std::chrono::system_clock::time_point now);

// retry-after-ms first (OpenAI), then retry-after. Header names must be lower-case.
[[nodiscard]] std::optional<Millis> retry_after_from_headers(
    const std::map<std::string, std::string>& headers, std::chrono::system_clock::time_point now);

class RetryPolicy {
 public:
  RetryPolicy(RetryConfig config, RetryClock clock);

  [[nodiscard]] const RetryConfig& config() const { return config_; }
  [[nodiscard]] const RetryClock& clock() const { return clock_; }

  // After attempt number `attempt` (1-based) failed with `error`, with `remaining` time left
  // before the call's deadline: retry, and after how long?
  [[nodiscard]] RetryDecision decide(int attempt, const ChatError& error, Millis remaining) const;

  // The exponential backoff with jitter for the wait after attempt `attempt`.
  [[nodiscard]] Millis backoff(int attempt) const;

 private:
  RetryConfig config_;
  RetryClock clock_;
};

}  // namespace ptxevo::agents
