#include <gtest/gtest.h>

#include "agents/circuit_breaker.hpp"

namespace ptxevo::agents {
namespace {

using std::chrono::seconds;

struct Breaker {
  std::chrono::steady_clock::time_point now{std::chrono::hours(1)};
  CircuitBreaker breaker{BreakerConfig{3, seconds(300)}, [this] { return now; }};
};

TEST(CircuitBreaker, OpensAfterConsecutiveFailures) {
  Breaker b;
  EXPECT_EQ(b.breaker.state(), BreakerState::Closed);
  b.breaker.record_failure();
  b.breaker.record_failure();
  EXPECT_TRUE(b.breaker.allow());
  b.breaker.record_failure();
  EXPECT_EQ(b.breaker.state(), BreakerState::Open);
  EXPECT_FALSE(b.breaker.allow());
}

TEST(CircuitBreaker, SuccessResetsTheCount) {
  Breaker b;
  b.breaker.record_failure();
  b.breaker.record_failure();
  b.breaker.record_success();
  b.breaker.record_failure();
  b.breaker.record_failure();
  EXPECT_EQ(b.breaker.state(), BreakerState::Closed);
  EXPECT_EQ(b.breaker.consecutive_failures(), 2);
}

TEST(CircuitBreaker, HalfOpensAfterCoolDownWithOneProbe) {
  Breaker b;
  for (int i = 0; i < 3; ++i) b.breaker.record_failure();
  b.now += seconds(299);
  EXPECT_FALSE(b.breaker.allow());
  b.now += seconds(1);
  EXPECT_EQ(b.breaker.state(), BreakerState::HalfOpen);
  EXPECT_TRUE(b.breaker.allow());   // the probe
  EXPECT_FALSE(b.breaker.allow());  // nobody else while it is in flight
  b.breaker.record_success();
  EXPECT_EQ(b.breaker.state(), BreakerState::Closed);
  EXPECT_TRUE(b.breaker.allow());
}

TEST(CircuitBreaker, FailedProbeReopens) {
  Breaker b;
  for (int i = 0; i < 3; ++i) b.breaker.record_failure();
  b.now += seconds(300);
  ASSERT_TRUE(b.breaker.allow());
  b.breaker.record_failure();
  EXPECT_EQ(b.breaker.state(), BreakerState::Open);
  b.now += seconds(299);
  EXPECT_FALSE(b.breaker.allow());
  b.now += seconds(1);
  EXPECT_TRUE(b.breaker.allow());
}

TEST(CircuitBreaker, FatalStaysOpenUntilReset) {
  Breaker b;
  b.breaker.record_fatal();
  b.now += std::chrono::hours(48);
  EXPECT_EQ(b.breaker.state(), BreakerState::Open);
  b.breaker.record_success();  // a stray success cannot undo a bad key
  EXPECT_FALSE(b.breaker.allow());
  b.breaker.reset();
  EXPECT_TRUE(b.breaker.allow());
}

TEST(CircuitBreaker, OpenForServerDirectedPeriod) {
  Breaker b;
  b.breaker.open_for(seconds(10));
  EXPECT_FALSE(b.breaker.allow());
  b.now += seconds(10);
  EXPECT_TRUE(b.breaker.allow());
}

}  // namespace
}  // namespace ptxevo::agents
