#include "agents/circuit_breaker.hpp"

#include <utility>

namespace ptxevo::agents {

CircuitBreaker::CircuitBreaker(BreakerConfig config, Clock clock)
    : config_(config), clock_(std::move(clock)) {}

void CircuitBreaker::refresh_locked() {
  if (state_ == BreakerState::Open && !permanent_ && clock_() >= reopen_at_) {
    state_ = BreakerState::HalfOpen;
    probe_in_flight_ = false;
  }
}

void CircuitBreaker::open_locked(std::chrono::milliseconds period) {
  state_ = BreakerState::Open;
  probe_in_flight_ = false;
  reopen_at_ = clock_() + period;
}

bool CircuitBreaker::allow() {
  std::lock_guard lock(mutex_);
  refresh_locked();
  switch (state_) {
    case BreakerState::Closed: return true;
    case BreakerState::Open: return false;
    case BreakerState::HalfOpen:
      if (probe_in_flight_) return false;
      probe_in_flight_ = true;
      return true;
  }
  return false;
}

void CircuitBreaker::record_success() {
  std::lock_guard lock(mutex_);
  if (permanent_) return;  // only reset() undoes a fatal error
  state_ = BreakerState::Closed;
  failures_ = 0;
  probe_in_flight_ = false;
}

void CircuitBreaker::record_failure() {
  std::lock_guard lock(mutex_);
  if (permanent_) return;
  ++failures_;
  // A failed probe re-opens at once; otherwise wait for the threshold.
  if (state_ == BreakerState::HalfOpen || failures_ >= config_.failure_threshold) {
    open_locked(config_.cool_down);
  }
}

void CircuitBreaker::record_fatal() {
  std::lock_guard lock(mutex_);
  permanent_ = true;
  state_ = BreakerState::Open;
  probe_in_flight_ = false;
}

void CircuitBreaker::open_for(std::chrono::milliseconds period) {
  std::lock_guard lock(mutex_);
  if (permanent_) return;
  open_locked(period);
}

void CircuitBreaker::reset() {
  std::lock_guard lock(mutex_);
  state_ = BreakerState::Closed;
  failures_ = 0;
  permanent_ = false;
  probe_in_flight_ = false;
}

BreakerState CircuitBreaker::state() {
  std::lock_guard lock(mutex_);
  refresh_locked();
  return state_;
}

int CircuitBreaker::consecutive_failures() {
  std::lock_guard lock(mutex_);
  return failures_;
}

}  // namespace ptxevo::agents
