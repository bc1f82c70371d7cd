#include "agents/retry_policy.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

namespace ptxevo::agents {

RetryClock RetryClock::real(std::uint64_t seed) {
  struct Rng {
    std::mutex mutex;
    std::mt19937_64 engine;
  };
  auto rng = std::make_shared<Rng>();
  rng->engine.seed(seed);
  return RetryClock{
      [] { return std::chrono::steady_clock::now(); },
      [] { return std::chrono::system_clock::now(); },
      [](Millis wait) { std::this_thread::sleep_for(wait); },
      [rng] {
        std::lock_guard lock(rng->mutex);
        return std::uniform_real_distribution<double>(0.0, 1.0)(rng->engine);
      },
  };
}

std::optional<Millis> parse_retry_after(std::string_view value,
                                        std::chrono::system_clock::time_point now) {
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
  if (value.empty()) return std::nullopt;
  if (std::isdigit(static_cast<unsigned char>(value.front())) != 0) {
    double seconds = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
    if (ec != std::errc() || end != value.data() + value.size() || !std::isfinite(seconds)) {
      return std::nullopt;
    }
    // Clamp before converting so a huge value cannot overflow the integer duration.
    seconds = std::min(seconds, 1e9);
    return Millis(static_cast<std::int64_t>(std::llround(seconds * 1000.0)));
  }
  // IMF-fixdate only (RFC 9110 says senders must use it); parsed by hand to stay locale-free.
  static constexpr std::string_view kMonths = "JanFebMarAprMayJunJulAugSepOctNovDec";
  const std::string text(value);
  char month_name[4] = {};
  int day = 0;
  int year = 0;
  int hour = 0;
  int minute = 0;
  int second = 0;
  if (std::sscanf(text.c_str(), "%*3s, %2d %3s %4d %2d:%2d:%2d GMT", &day, month_name, &year,
                  &hour, &minute, &second) != 6) {
    return std::nullopt;
  }
  const auto month_pos = kMonths.find(std::string_view(month_name, 3));
  if (month_pos == std::string_view::npos || month_pos % 3 != 0) return std::nullopt;
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = static_cast<int>(month_pos / 3);
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const std::time_t when = timegm(&tm);
  if (when == static_cast<std::time_t>(-1)) return std::nullopt;
  const auto delta = std::chrono::system_clock::from_time_t(when) - now;
  return std::max(Millis(0), std::chrono::duration_cast<Millis>(delta));
}

std::optional<Millis> retry_after_from_headers(const std::map<std::string, std::string>& headers,
                                               std::chrono::system_clock::time_point now) {
  if (auto ms = headers.find("retry-after-ms"); ms != headers.end()) {
    if (auto parsed = parse_retry_after(ms->second, now)) return Millis(parsed->count() / 1000);
  }
  if (auto header = headers.find("retry-after"); header != headers.end()) {
    return parse_retry_after(header->second, now);
  }
  return std::nullopt;
}

RetryPolicy::RetryPolicy(RetryConfig config, RetryClock clock)
    : config_(config), clock_(std::move(clock)) {}

Millis RetryPolicy::backoff(int attempt) const {
  const int exponent = std::clamp(attempt - 1, 0, 30);
  const double raw = static_cast<double>(config_.base_backoff.count()) * std::ldexp(1.0, exponent);
  const double capped = std::min(raw, static_cast<double>(config_.max_backoff.count()));
  const double jitter = 0.75 + 0.25 * std::clamp(clock_.jitter(), 0.0, 1.0);
  return Millis(static_cast<std::int64_t>(capped * jitter));
}

RetryDecision RetryPolicy::decide(int attempt, const ChatError& error, Millis remaining) const {
  RetryDecision decision;
  if (error.kind != ErrorKind::Retryable) {
    decision.why = "not retryable (" + std::string(to_string(error.kind)) + ")";
    return decision;
  }
  if (error.circuit_open) {
    decision.why = "circuit open";
    return decision;
  }
  if (error.retry_after && *error.retry_after > config_.max_retry_after) {
    decision.open_circuit_for = *error.retry_after;
    decision.why = "server asked to wait " + std::to_string(error.retry_after->count()) +
                   " ms, more than the " + std::to_string(config_.max_retry_after.count()) +
                   " ms limit";
    return decision;
  }
  if (attempt >= config_.max_attempts) {
    decision.why = "attempts exhausted";
    return decision;
  }
  decision.wait = error.retry_after ? *error.retry_after : backoff(attempt);
  // Waiting the whole remaining time would leave nothing for the next attempt.
  if (decision.wait >= remaining) {
    decision.why = "next wait of " + std::to_string(decision.wait.count()) +
                   " ms would pass the deadline";
    decision.wait = Millis(0);
    return decision;
  }
  decision.retry = true;
  decision.why = error.retry_after ? "honouring Retry-After" : "backoff";
  return decision;
}

}  // namespace ptxevo::agents
