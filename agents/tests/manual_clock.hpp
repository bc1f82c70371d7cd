// A manual clock for the retry and breaker tests: sleeping advances time instantly.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "agents/retry_policy.hpp"

namespace ptxevo::agents::test {

struct ManualTime {
  std::chrono::steady_clock::time_point steady{std::chrono::hours(1)};
  std::chrono::system_clock::time_point wall{std::chrono::seconds(1'700'000'000)};
  std::vector<Millis> sleeps;
  double jitter = 0.0;

  void advance(Millis by) {
    steady += by;
    wall += by;
  }
};

// The RetryClock shares the ManualTime so the test can inspect and move it.
inline RetryClock manual_clock(const std::shared_ptr<ManualTime>& time) {
  return RetryClock{
      [time] { return time->steady; },
      [time] { return time->wall; },
      [time](Millis wait) {
        time->sleeps.push_back(wait);
        time->advance(wait);
      },
      [time] { return time->jitter; },
  };
}

}  // namespace ptxevo::agents::test
