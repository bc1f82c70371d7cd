// Per-endpoint circuit breaker, so a dead or overloaded endpoint stops costing proposal slots
// (the scheduler hands them to the rule agents). Closed -> Open after `failure_threshold`
// consecutive retryable failures; Open -> HalfOpen after `cool_down`, letting one probe through;
// the probe's success closes it, its failure re-opens it. Fatal errors (bad key, model, URL,
// no quota) open it until reset(). Thread-safe: one breaker is shared by all calls to an endpoint.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>

namespace ptxevo::agents {

enum class BreakerState { Closed, Open, HalfOpen };

struct BreakerConfig {
  int failure_threshold = 5;
  std::chrono::milliseconds cool_down{300'000};
};

class CircuitBreaker {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  explicit CircuitBreaker(BreakerConfig config = {},
                          Clock clock = [] { return std::chrono::steady_clock::now(); });

  // May a request go out now? In HalfOpen only one probe is in flight at a time.
  [[nodiscard]] bool allow();
  void record_success();
  void record_failure();  // a retryable failure (transport, 429, 5xx, 529)
  void record_fatal();    // stays open until reset()
  // Open for a server-directed period (Retry-After beyond the retry limit), then half-open.
  void open_for(std::chrono::milliseconds period);
  void reset();

  [[nodiscard]] BreakerState state();
  [[nodiscard]] int consecutive_failures();

 private:
  void open_locked(std::chrono::milliseconds period);
  void refresh_locked();

  BreakerConfig config_;
  Clock clock_;
  std::mutex mutex_;
  BreakerState state_ = BreakerState::Closed;
  int failures_ = 0;
  bool permanent_ = false;
  bool probe_in_flight_ = false;
  std::chrono::steady_clock::time_point reopen_at_{};
};

}  // namespace ptxevo::agents
