// ChatClient tests: a scripted transport with a manual clock for the retry loop, and end-to-end runs
// against the loopback server (real libcurl, real sockets, 127.0.0.1 only).
#include <gtest/gtest.h>

#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>

#include "agents/chat_client.hpp"
#include "agents/tests/manual_clock.hpp"
#include "agents/tests/loopback_server.hpp"

namespace ptxevo::agents {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr const char* kKeyEnv = "PTXEVO_AGENTS_TEST_KEY";
constexpr const char* kKey = "sk-test-SENTINEL-7f3a9c21d4e8b6";

const std::string kOpenAiOk = R"({"id":"c1","object":"chat.completion","choices":[{"index":0,
    "message":{"role":"assistant","content":"__global__ void k() {}"},"finish_reason":"stop"}],
    "usage":{"prompt_tokens":21,"completion_tokens":8,"total_tokens":29}})";

class SetKey : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::setenv(kKeyEnv, kKey, 1), 0); }
  void TearDown() override { ::unsetenv(kKeyEnv); }

  // Every log line the client emitted; checked for the key in each test.
  std::vector<std::string> log_lines;
  ChatClient::LogFn logger() {
    return [this](std::string_view line) { log_lines.emplace_back(line); };
  }
  void expect_no_key(const std::string& text) {
    EXPECT_EQ(text.find(kKey), std::string::npos) << text;
    EXPECT_EQ(text.find("SENTINEL"), std::string::npos) << text;
  }
  void expect_key_absent_everywhere(const Result& result) {
    if (!result.ok()) expect_no_key(result.error().message);
    for (const std::string& line : log_lines) expect_no_key(line);
  }
};

ChatRequest request() {
  ChatRequest r;
  r.system = "You write CUDA.";
  r.messages = {{"user", "optimize"}};
  r.max_tokens = 64;
  r.temperature = 0.2;
  return r;
}

// ---- scripted transport: the retry loop under a manual clock ----

struct ScriptedTransport final : HttpTransport {
  std::mutex mutex;
  std::deque<HttpResponse> script;
  std::vector<HttpRequest> seen;
  HttpResponse post(const HttpRequest& r) override {
    std::lock_guard lock(mutex);
    seen.push_back(r);
    HttpResponse next = script.front();
    script.pop_front();
    return next;
  }
};

HttpResponse response(int status, std::string body, std::map<std::string, std::string> headers = {}) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.headers = std::move(headers);
  return r;
}

class ScriptedClient : public SetKey {
 protected:
  std::shared_ptr<test::ManualTime> time = std::make_shared<test::ManualTime>();
  std::shared_ptr<ScriptedTransport> transport = std::make_shared<ScriptedTransport>();
  std::shared_ptr<CircuitBreaker> breaker = std::make_shared<CircuitBreaker>(
      BreakerConfig{}, [t = time] { return t->steady; });
  ChatClient client(RetryConfig config = {}) {
    return ChatClient({ApiKind::OpenAI, "https://api.example.test/v1", "m", kKeyEnv}, transport,
                      RetryPolicy(config, test::manual_clock(time)), breaker, logger());
  }
};

TEST_F(ScriptedClient, RetryAfterHonouredThenSuccess) {
  transport->script = {response(429, R"({"error":{"message":"slow","code":"rate_limit_exceeded"}})",
                                {{"retry-after", "3"}}),
                       response(200, kOpenAiOk)};
  const Result result = client().chat(request());
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(time->sleeps, std::vector<Millis>{Millis(3'000)});
  EXPECT_EQ(transport->seen.size(), 2U);
  EXPECT_EQ(breaker->state(), BreakerState::Closed);
  expect_key_absent_everywhere(result);
}

TEST_F(ScriptedClient, BackoffWithoutRetryAfter) {
  transport->script = {response(503, ""), response(502, ""), response(200, kOpenAiOk)};
  ASSERT_TRUE(client().chat(request()).ok());
  EXPECT_EQ(time->sleeps, (std::vector<Millis>{Millis(375), Millis(750)}));  // jitter factor 0.75
}

TEST_F(ScriptedClient, FatalNotRetried) {
  transport->script = {response(403, R"({"error":{"message":"no"}})"), response(200, kOpenAiOk)};
  const Result result = client().chat(request());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().kind, ErrorKind::Fatal);
  EXPECT_EQ(transport->seen.size(), 1U);
  EXPECT_TRUE(time->sleeps.empty());
  EXPECT_EQ(breaker->state(), BreakerState::Open);  // wrong key/permission: stays open
}

TEST_F(ScriptedClient, BadRequestDoesNotOpenTheCircuit) {
  transport->script = {response(400, R"({"error":{"message":"context too long"}})")};
  EXPECT_EQ(client().chat(request()).error().kind, ErrorKind::Fatal);
  EXPECT_EQ(breaker->state(), BreakerState::Closed);
}

TEST_F(ScriptedClient, DeadlineBoundsAttemptsAndWaits) {
  RetryConfig config;
  config.deadline = seconds(10);
  config.max_attempts = 100;
  for (int i = 0; i < 100; ++i) transport->script.push_back(response(500, ""));
  const auto start = time->steady;
  const Result result = client(config).chat(request());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().kind, ErrorKind::Retryable);
  EXPECT_LE(time->steady - start, seconds(10));
  // 375 + 750 + 1500 + 3000 = 5625 ms; the next wait (6000) would pass the deadline.
  EXPECT_EQ(transport->seen.size(), 5U);
  for (const HttpRequest& r : transport->seen) EXPECT_LE(r.timeout, seconds(10));
}

TEST_F(ScriptedClient, AttemptTimeoutIsTheSmallerOfCapAndRemaining) {
  RetryConfig config;
  config.deadline = seconds(30);
  config.attempt_timeout = seconds(29);
  transport->script = {response(500, ""), response(500, ""), response(200, kOpenAiOk)};
  ASSERT_TRUE(client(config).chat(request()).ok());
  EXPECT_EQ(transport->seen[0].timeout, seconds(29));
  EXPECT_EQ(transport->seen[2].timeout, seconds(30) - Millis(375 + 750));
}

TEST_F(ScriptedClient, OverlongRetryAfterOpensCircuitWithoutSleeping) {
  transport->script = {response(429, "{}", {{"retry-after", "9999"}})};
  const Result result = client().chat(request());
  EXPECT_EQ(result.error().kind, ErrorKind::Retryable);
  EXPECT_TRUE(time->sleeps.empty());
  EXPECT_EQ(breaker->state(), BreakerState::Open);
  time->advance(seconds(9'999));
  EXPECT_EQ(breaker->state(), BreakerState::HalfOpen);
}

TEST_F(ScriptedClient, OpenCircuitRefusesWithoutSending) {
  breaker->record_fatal();
  const Result result = client().chat(request());
  EXPECT_TRUE(result.error().circuit_open);
  EXPECT_TRUE(transport->seen.empty());
}

TEST_F(ScriptedClient, QuotaIsFatal) {
  transport->script = {response(429, R"({"error":{"message":"quota","code":"insufficient_quota"}})",
                                {{"retry-after", "1"}})};
  EXPECT_EQ(client().chat(request()).error().kind, ErrorKind::OutOfQuota);
  EXPECT_EQ(transport->seen.size(), 1U);
}

TEST_F(ScriptedClient, ShouldRetryHeaderOverrides) {
  transport->script = {response(400, "{}", {{"x-should-retry", "true"}}), response(200, kOpenAiOk)};
  EXPECT_TRUE(client().chat(request()).ok());
}

TEST_F(ScriptedClient, MissingKeyIsFatalAndNamesTheVariableOnly) {
  ::unsetenv(kKeyEnv);
  const Result result = client().chat(request());
  EXPECT_EQ(result.error().kind, ErrorKind::Fatal);
  EXPECT_NE(result.error().message.find(kKeyEnv), std::string::npos);
  EXPECT_TRUE(transport->seen.empty());
}

TEST_F(ScriptedClient, PlainHttpToRemoteHostRefused) {
  ChatClient remote({ApiKind::OpenAI, "http://api.example.test/v1", "m", kKeyEnv}, transport,
                    RetryPolicy({}, test::manual_clock(time)), breaker);
  EXPECT_EQ(remote.chat(request()).error().kind, ErrorKind::Fatal);
  EXPECT_TRUE(transport->seen.empty());
  EXPECT_TRUE(is_loopback_url("http://127.0.0.1:8080/v1"));
  EXPECT_TRUE(is_loopback_url("http://localhost/v1"));
  EXPECT_TRUE(is_loopback_url("http://[::1]:11434/v1"));
  EXPECT_FALSE(is_loopback_url("http://localhost.evil.test/v1"));
  EXPECT_FALSE(is_loopback_url("http://127.0.0.1.evil.test/"));
}

TEST(Redact, WholeKeyAndFragments) {
  const std::string key = "sk-proj-ABCDEFGHIJKLMNOP";
  EXPECT_EQ(redact("key sk-proj-ABCDEFGHIJKLMNOP!", key), "key <redacted>!");
  EXPECT_EQ(redact("Incorrect API key provided: sk-proj-****MNOP", key),
            "Incorrect API key provided: <redacted>****MNOP");
  EXPECT_EQ(redact("...IJKLMNOP", key), "...<redacted>");
  EXPECT_EQ(redact("nothing here", key), "nothing here");
  EXPECT_EQ(redact("abc", ""), "abc");
}

// ---- end to end over loopback ----

class Loopback : public SetKey {
 protected:
  std::shared_ptr<CircuitBreaker> breaker = std::make_shared<CircuitBreaker>();
  ChatClient client(const test::LoopbackServer& server, ApiKind kind, Millis deadline = seconds(5)) {
    RetryConfig config;
    config.deadline = deadline;
    const std::string base = kind == ApiKind::OpenAI ? server.base_url() + "/v1/" : server.base_url();
    return ChatClient({kind, base, "model-x", kKeyEnv}, std::make_shared<CurlTransport>(),
                      RetryPolicy(config, RetryClock::real(1)), breaker, logger());
  }
};

TEST_F(Loopback, OpenAiOverloadedThenOk) {
  test::LoopbackServer server({{529,
                                {{"Retry-After", "0"}},
                                R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})"},
                               {200, {}, kOpenAiOk}});
  const Result result = client(server, ApiKind::OpenAI).chat(request());
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result.reply().text, "__global__ void k() {}");
  EXPECT_EQ(result.reply().input_tokens, 21);
  EXPECT_EQ(result.reply().output_tokens, 8);

  const auto received = server.requests();
  ASSERT_EQ(received.size(), 2U);
  const test::ReceivedRequest& r = received[1];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.path, "/v1/chat/completions");
  EXPECT_EQ(r.headers.at("authorization"), std::string("Bearer ") + kKey);
  EXPECT_EQ(r.headers.at("content-type"), "application/json");
  const json body = json::parse(r.body);
  EXPECT_EQ(body["model"], "model-x");
  EXPECT_EQ(body["max_tokens"], 64);
  EXPECT_EQ(body["temperature"], 0.2);
  EXPECT_EQ(body["messages"][0]["role"], "system");
  EXPECT_EQ(body["messages"][1], (json{{"role", "user"}, {"content", "optimize"}}));
  EXPECT_EQ(received[0].body, r.body);  // the retry resends the same request
  EXPECT_FALSE(log_lines.empty());      // the retry was logged ...
  expect_key_absent_everywhere(result);  // ... without the key
}

TEST_F(Loopback, AnthropicHeadersAndBody) {
  test::LoopbackServer server({{200, {}, R"({"type":"message","role":"assistant",
      "content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn",
      "usage":{"input_tokens":3,"output_tokens":1}})"}});
  const Result result = client(server, ApiKind::Anthropic).chat(request());
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result.reply().text, "ok");
  const auto received = server.requests();
  ASSERT_EQ(received.size(), 1U);
  EXPECT_EQ(received[0].path, "/v1/messages");
  EXPECT_EQ(received[0].headers.at("x-api-key"), kKey);
  EXPECT_EQ(received[0].headers.at("anthropic-version"), "2023-06-01");
  EXPECT_EQ(received[0].headers.count("authorization"), 0U);
  const json body = json::parse(received[0].body);
  EXPECT_EQ(body["system"], "You write CUDA.");
  EXPECT_EQ(body["max_tokens"], 64);
  ASSERT_EQ(body["messages"].size(), 1U);
}

TEST_F(Loopback, UnauthorizedIsFatalAndRedacted) {
  // Some servers echo the key back: it must not survive into the error or the log.
  test::LoopbackServer server({{401, {}, std::string(R"({"error":{"message":"Incorrect API key provided: )") +
                                                kKey + R"(","type":"invalid_request_error","code":"invalid_api_key"}})"}});
  const Result result = client(server, ApiKind::OpenAI).chat(request());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().kind, ErrorKind::Fatal);
  EXPECT_EQ(result.error().http_status, 401);
  EXPECT_NE(result.error().message.find("<redacted>"), std::string::npos);
  EXPECT_EQ(server.requests().size(), 1U);
  expect_key_absent_everywhere(result);
  // The endpoint is now shut for the campaign: no second request goes out.
  const Result again = client(server, ApiKind::OpenAI).chat(request());
  EXPECT_TRUE(again.error().circuit_open);
  EXPECT_EQ(server.requests().size(), 1U);
}

TEST_F(Loopback, TruncatedReplyIsNotComplete) {
  test::LoopbackServer server({{200, {}, R"({"choices":[{"message":{"content":"__global__ void k("},
      "finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":64}})"}});
  const Result result = client(server, ApiKind::OpenAI).chat(request());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().kind, ErrorKind::Truncated);
  ASSERT_TRUE(result.error().partial);
  EXPECT_EQ(result.error().partial->output_tokens, 64);  // still billed
  EXPECT_EQ(server.requests().size(), 1U);
  expect_key_absent_everywhere(result);
}

TEST_F(Loopback, MalformedJson) {
  test::LoopbackServer server({{200, {}, R"({"choices":[{"message":)"}});
  const Result result = client(server, ApiKind::OpenAI).chat(request());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().kind, ErrorKind::Malformed);
  EXPECT_EQ(server.requests().size(), 1U);
  expect_key_absent_everywhere(result);
}

TEST_F(Loopback, StallEndsAtTheDeadline) {
  test::LoopbackServer server({{200, {}, "", /*stall=*/true}});
  const auto start = std::chrono::steady_clock::now();
  const Result result = client(server, ApiKind::OpenAI, milliseconds(300)).chat(request());
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().kind, ErrorKind::Retryable);
  EXPECT_NE(result.error().message.find("timed out"), std::string::npos) << result.error().message;
  EXPECT_LT(elapsed, seconds(5));  // generous: the point is that it does not hang
  EXPECT_EQ(server.requests().size(), 1U);
  expect_key_absent_everywhere(result);
}

TEST_F(Loopback, CancelAbortsAStalledCallAndIsNotAFailure) {
  test::LoopbackServer server({{200, {}, "", true}});
  std::atomic<bool> cancel{false};
  ChatClient c = client(server, ApiKind::OpenAI, seconds(30));
  c.set_cancel(&cancel);
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(300));
    cancel.store(true);
  });
  const auto t0 = std::chrono::steady_clock::now();
  const Result result = c.chat(request());
  stopper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, seconds(5));  // not the 30 s deadline
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.error().cancelled);
  EXPECT_EQ(breaker->consecutive_failures(), 0);
  // Once stopping, nothing more is sent.
  const Result again = c.chat(request());
  EXPECT_TRUE(again.error().cancelled);
  EXPECT_EQ(server.requests().size(), 1U);
}

TEST_F(Loopback, ConnectionRefusedIsRetryable) {
  std::string base;
  {
    test::LoopbackServer closed({});
    base = closed.base_url();
  }  // port released: nothing listens there now
  RetryConfig config;
  config.deadline = milliseconds(300);
  ChatClient c({ApiKind::OpenAI, base + "/v1", "m", kKeyEnv}, std::make_shared<CurlTransport>(),
               RetryPolicy(config, RetryClock::real(1)), breaker, logger());
  const Result result = c.chat(request());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().kind, ErrorKind::Retryable);
  EXPECT_EQ(result.error().http_status, 0);
  expect_key_absent_everywhere(result);
}

}  // namespace
}  // namespace ptxevo::agents
