#include <gtest/gtest.h>

#include "agents/retry_policy.hpp"
#include "agents/tests/manual_clock.hpp"

namespace ptxevo::agents {
namespace {

using std::chrono::seconds;
using test::ManualTime;

ChatError retryable(std::optional<Millis> retry_after = std::nullopt) {
  ChatError error;
  error.kind = ErrorKind::Retryable;
  error.http_status = 529;
  error.retry_after = retry_after;
  return error;
}

TEST(RetryAfter, ParsesSecondsDecimalsAndDates) {
  const auto now = std::chrono::system_clock::from_time_t(784111777);  // Sun, 06 Nov 1994 08:49:37
  EXPECT_EQ(parse_retry_after("0", now), Millis(0));
  EXPECT_EQ(parse_retry_after(" 3 ", now), Millis(3'000));
  EXPECT_EQ(parse_retry_after("1.5", now), Millis(1'500));
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now), Millis(10'000));
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now), Millis(0));  // past
  EXPECT_FALSE(parse_retry_after("soon", now));
  EXPECT_FALSE(parse_retry_after("3s", now));
  EXPECT_FALSE(parse_retry_after("", now));
  EXPECT_EQ(retry_after_from_headers({{"retry-after-ms", "250"}, {"retry-after", "9"}}, now),
            Millis(250));
  EXPECT_EQ(retry_after_from_headers({{"retry-after", "9"}}, now), Millis(9'000));
  EXPECT_FALSE(retry_after_from_headers({}, now));
}

TEST(RetryPolicy, BackoffIsExponentialCappedAndJittered) {
  auto time = std::make_shared<ManualTime>();
  RetryPolicy policy({}, test::manual_clock(time));
  time->jitter = 0.999999;  // factor ~1
  EXPECT_NEAR(static_cast<double>(policy.backoff(1).count()), 500, 1);
  EXPECT_NEAR(static_cast<double>(policy.backoff(2).count()), 1000, 1);
  EXPECT_NEAR(static_cast<double>(policy.backoff(6).count()), 8000, 1);  // capped
  time->jitter = 0.0;  // factor 0.75
  EXPECT_EQ(policy.backoff(1), Millis(375));
  EXPECT_EQ(policy.backoff(40), Millis(6000));
}

TEST(RetryPolicy, HonoursRetryAfter) {
  RetryPolicy policy({}, test::manual_clock(std::make_shared<ManualTime>()));
  const RetryDecision d = policy.decide(1, retryable(Millis(3'000)), seconds(60));
  EXPECT_TRUE(d.retry);
  EXPECT_EQ(d.wait, Millis(3'000));
}

TEST(RetryPolicy, NeverRetriesNonRetryableKinds) {
  RetryPolicy policy({}, test::manual_clock(std::make_shared<ManualTime>()));
  for (ErrorKind kind : {ErrorKind::Fatal, ErrorKind::OutOfQuota, ErrorKind::Truncated,
                         ErrorKind::Malformed}) {
    ChatError error = retryable(Millis(0));
    error.kind = kind;
    EXPECT_FALSE(policy.decide(1, error, seconds(60)).retry) << to_string(kind);
  }
  ChatError open = retryable();
  open.circuit_open = true;
  EXPECT_FALSE(policy.decide(1, open, seconds(60)).retry);
}

TEST(RetryPolicy, StopsWhenWaitWouldPassDeadline) {
  RetryPolicy policy({}, test::manual_clock(std::make_shared<ManualTime>()));
  EXPECT_FALSE(policy.decide(1, retryable(Millis(5'000)), Millis(4'999)).retry);
  EXPECT_FALSE(policy.decide(1, retryable(), Millis(100)).retry);  // backoff >= 375 ms
  EXPECT_TRUE(policy.decide(1, retryable(), Millis(10'000)).retry);
}

TEST(RetryPolicy, StopsAfterMaxAttempts) {
  RetryConfig config;
  config.max_attempts = 3;
  RetryPolicy policy(config, test::manual_clock(std::make_shared<ManualTime>()));
  EXPECT_TRUE(policy.decide(2, retryable(), seconds(600)).retry);
  EXPECT_FALSE(policy.decide(3, retryable(), seconds(600)).retry);
}

TEST(RetryPolicy, OverlongRetryAfterOpensCircuitInsteadOfSleeping) {
  RetryPolicy policy({}, test::manual_clock(std::make_shared<ManualTime>()));
  const RetryDecision d = policy.decide(1, retryable(seconds(9'999)), seconds(900));
  EXPECT_FALSE(d.retry);
  ASSERT_TRUE(d.open_circuit_for);
  EXPECT_EQ(*d.open_circuit_for, seconds(9'999));
}

TEST(RetryClock, RealJitterInRangeAndSeeded) {
  RetryClock a = RetryClock::real(42);
  RetryClock b = RetryClock::real(42);
  for (int i = 0; i < 100; ++i) {
    const double x = a.jitter();
    EXPECT_GE(x, 0.0);
    EXPECT_LT(x, 1.0);
    EXPECT_EQ(x, b.jitter());
  }
}

}  // namespace
}  // namespace ptxevo::agents
