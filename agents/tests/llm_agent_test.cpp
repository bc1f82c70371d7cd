// The planner / coder / fixer roles end to end over the loopback server, replaying transcripts:
// every call is reserved and recorded with its tokens, every rejection comes back with its
// code, truncated replies are never parsed, and the key appears nowhere.
#include <gtest/gtest.h>

#include <cstdlib>

#include "agents/llm_agent.hpp"
#include "agents/tests/loopback_server.hpp"
#include "agents/tests/transcript.hpp"

namespace ptxevo::agents {
namespace {

constexpr const char* kKeyEnv = "PTXEVO_AGENT_TEST_KEY";
constexpr const char* kKey = "sk-agent-SENTINEL-0b1c2d3e4f5a6978";

const std::string kParent =
    "extern \"C\" __global__ void scale(const float* __restrict__ x, float* __restrict__ out, long long n) {\n"
    "  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) out[i] = 2.0f * x[i];\n"
    "}\n";

struct MemoryRecorder final : CallRecorder {
  std::vector<CallRecord> calls;
  std::int64_t record_call(const CallRecord& c) override {
    calls.push_back(c);
    return static_cast<std::int64_t>(calls.size());
  }
};

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::setenv(kKeyEnv, kKey, 1), 0); }
  void TearDown() override { ::unsetenv(kKeyEnv); }

  void serve(const std::string& transcript, ApiKind kind = ApiKind::OpenAI) {
    server = std::make_unique<test::LoopbackServer>(
        test::load_transcript(std::string(PTXEVO_AGENTS_TRANSCRIPTS) + "/" + transcript));
    RetryConfig retry;
    retry.deadline = std::chrono::seconds(5);
    const std::string base = kind == ApiKind::OpenAI ? server->base_url() + "/v1" : server->base_url();
    client = std::make_unique<ChatClient>(EndpointConfig{kind, base, "replayed-model", kKeyEnv},
                                          std::make_shared<CurlTransport>(), RetryPolicy(retry, RetryClock::real(3)),
                                          breaker, [this](std::string_view l) { log.emplace_back(l); });
    agent = std::make_unique<LlmAgent>(*client, breaker, *budget, recorder, options,
                                       [this](std::string_view l) { log.emplace_back(l); });
  }

  PromptContext context() const {
    PromptContext c;
    c.arch = "sm_90a";
    c.op = "test_scale";
    c.parent_source = kParent;
    c.knob_domains = {{"BLOCK", {"64", "128"}}};
    return c;
  }

  void expect_no_key() const {
    for (const auto& l : log) EXPECT_EQ(l.find("SENTINEL"), std::string::npos) << l;
    for (const auto& c : recorder.calls) EXPECT_EQ(c.error.find("SENTINEL"), std::string::npos) << c.error;
  }

  std::shared_ptr<CircuitBreaker> breaker = std::make_shared<CircuitBreaker>();
  std::unique_ptr<Budget> budget = std::make_unique<Budget>(BudgetCaps{}, Price{1.0, 4.0}, "replayed-model");
  MemoryRecorder recorder;
  AgentOptions options;
  std::vector<std::string> log;
  std::unique_ptr<test::LoopbackServer> server;
  std::unique_ptr<ChatClient> client;
  std::unique_ptr<LlmAgent> agent;
};

TEST_F(AgentTest, PlannerThenCoder) {
  serve("happy_openai.jsonl");
  const AgentAttempt a = agent->propose(context(), "rule focus: memory bound");
  ASSERT_TRUE(a.reply) << (a.rejection ? a.rejection->detail : "");
  EXPECT_EQ(a.reply->name, "two_per_thread");
  EXPECT_EQ(a.strategy, "process two elements per thread (expected: fewer blocks, same bandwidth)");
  ASSERT_EQ(recorder.calls.size(), 2U);
  EXPECT_EQ(recorder.calls[0].role, "planner");
  EXPECT_EQ(recorder.calls[1].role, "coder");
  EXPECT_EQ(recorder.calls[1].input_tokens, 1200);
  EXPECT_EQ(recorder.calls[1].output_tokens, 300);
  ASSERT_TRUE(recorder.calls[1].cost_usd);
  EXPECT_DOUBLE_EQ(*recorder.calls[1].cost_usd, (1200 * 1.0 + 300 * 4.0) / 1e6);
  EXPECT_GT(recorder.calls[1].reserved_output_tokens, 0);
  const auto requests = server->requests();
  ASSERT_EQ(requests.size(), 2U);
  // The coder is told the planner's strategy; no request carries the key in its body.
  EXPECT_NE(requests[1].body.find("process two elements per thread"), std::string::npos);
  for (const auto& r : requests) EXPECT_EQ(r.body.find("SENTINEL"), std::string::npos);
  EXPECT_EQ(budget->spent().calls, 2);
  expect_no_key();
}

// A knob reply inside the declared values but against the seed's constraints is refused at the
// reply stage, naming the constraint, and the fixer gets that reason.
TEST_F(AgentTest, KnobRepliesMustSatisfyTheConstraints) {
  options.use_planner = false;
  serve("knobs_forbidden_then_fixed.jsonl");
  PromptContext c = context();
  c.knob_constraints = {"BLOCK * UNROLL <= 256"};
  c.parent_knobs = {{"BLOCK", "64"}, {"UNROLL", "4"}};
  c.knob_check = [](const std::map<std::string, std::string>& k) -> std::string {
    return std::stoi(k.at("BLOCK")) * std::stoi(k.at("UNROLL")) <= 256 ? "" : "the knobs violate the spec's constraint 'BLOCK * UNROLL <= 256'";
  };
  const AgentAttempt a = agent->propose(c, "focus");
  ASSERT_TRUE(a.reply) << (a.rejection ? a.rejection->detail : "");
  EXPECT_EQ(a.reply->knobs.at("BLOCK"), "64");
  ASSERT_EQ(a.rejections.size(), 1U);
  EXPECT_EQ(a.rejections[0].error.code, "E_KNOB_INVALID");
  EXPECT_NE(a.rejections[0].error.detail.find("BLOCK * UNROLL <= 256"), std::string::npos);
  const auto requests = server->requests();
  ASSERT_EQ(requests.size(), 2U);
  EXPECT_NE(requests[0].body.find("Knob constraints (every knob assignment must satisfy all of them)"), std::string::npos);
  EXPECT_NE(requests[1].body.find("BLOCK * UNROLL <= 256"), std::string::npos);
}

// A 30 KB parent needs about 11.7k tokens to be written back whole: the coder gets them (the
// default 8192 would cut a faithful answer off), never more than the cap.
TEST(CoderAllowance, RoomForAWholeFileAnswer) {
  AgentOptions o;
  EXPECT_EQ(coder_allowance(2000, o), o.max_tokens);
  EXPECT_GE(coder_allowance(30 * 1024, o), 30 * 1024 / 3.5 * 1.2);
  EXPECT_EQ(coder_allowance(1 << 20, o), o.max_tokens_cap);
}

TEST_F(AgentTest, MalformedReplyGoesToTheFixer) {
  options.use_planner = false;
  serve("malformed_then_fixed.jsonl");
  const AgentAttempt a = agent->propose(context(), "focus");
  ASSERT_TRUE(a.reply);
  EXPECT_EQ(a.reply->kind, PatchKind::Edits);
  EXPECT_NE(a.reply->source.find("x[i] + x[i]"), std::string::npos);
  ASSERT_EQ(a.rejections.size(), 1U);
  EXPECT_EQ(a.rejections[0].error.code, "E_NO_ENVELOPE");
  ASSERT_EQ(recorder.calls.size(), 2U);
  EXPECT_EQ(recorder.calls[1].role, "fixer");
  EXPECT_EQ(recorder.calls[1].turn, 1);
  const auto requests = server->requests();
  EXPECT_NE(requests[1].body.find("E_NO_ENVELOPE"), std::string::npos);
  ASSERT_TRUE(a.conversation);
  EXPECT_EQ(a.conversation->fix_turns, 1);
}

TEST_F(AgentTest, HostileRepliesAreRejectedAfterTwoFixerTurns) {
  options.use_planner = false;
  serve("hostile.jsonl");
  const AgentAttempt a = agent->propose(context(), "focus");
  EXPECT_FALSE(a.reply);
  ASSERT_EQ(a.rejections.size(), 3U);
  for (const auto& r : a.rejections) EXPECT_EQ(r.error.code, "E_SCREEN");
  EXPECT_NE(a.rejections[0].error.detail.find("host-function"), std::string::npos) << a.rejections[0].error.detail;
  EXPECT_NE(a.rejections[0].error.detail.find("include"), std::string::npos);
  EXPECT_NE(a.rejections[1].error.detail.find("clock-read"), std::string::npos);
  EXPECT_NE(a.rejections[2].error.detail.find("persistent-global"), std::string::npos);
  EXPECT_EQ(recorder.calls.size(), 3U);  // coder + at most two fixer turns
  EXPECT_FALSE(a.handed_back);
}

TEST_F(AgentTest, TruncatedReplyIsNeverParsed) {
  options.use_planner = false;
  options.max_fix_turns = 0;
  serve("truncated.jsonl");
  const AgentAttempt a = agent->propose(context(), "focus");
  EXPECT_FALSE(a.reply);  // the body inside was complete-looking; it is still not used
  ASSERT_TRUE(a.rejection);
  EXPECT_EQ(a.rejection->code, "E_TRUNCATED");
  ASSERT_EQ(recorder.calls.size(), 1U);
  EXPECT_EQ(recorder.calls[0].status, "truncated");
  EXPECT_EQ(recorder.calls[0].output_tokens, 4096);  // billed tokens still count
}

TEST_F(AgentTest, TruncationGivesTheNextCallMoreRoom) {
  options.use_planner = false;
  options.max_fix_turns = 1;
  options.max_tokens = 4096;
  serve("truncated.jsonl");
  const AgentAttempt a = agent->propose(context(), "focus");
  ASSERT_TRUE(a.reply);  // the fixer's turn, with room to finish
  const auto requests = server->requests();
  ASSERT_EQ(requests.size(), 2U);
  EXPECT_EQ(nlohmann::json::parse(requests[0].body)["max_tokens"], 4096);
  EXPECT_EQ(nlohmann::json::parse(requests[1].body)["max_tokens"], 6144);
  EXPECT_EQ(recorder.calls[1].reserved_output_tokens, 6144);  // the budget reserved the larger figure
}

TEST_F(AgentTest, RateLimitAndOverloadAreRetriedWithinOneCall) {
  options.use_planner = false;
  serve("overloaded_then_ok.jsonl");
  const AgentAttempt a = agent->propose(context(), "focus");
  ASSERT_TRUE(a.reply);
  EXPECT_EQ(server->requests().size(), 3U);
  EXPECT_EQ(recorder.calls.size(), 1U);  // one logical call
  EXPECT_EQ(recorder.calls[0].status, "ok");
}

TEST_F(AgentTest, OutOfQuotaHandsTheSlotBack) {
  options.use_planner = false;
  serve("out_of_quota.jsonl");
  const AgentAttempt a = agent->propose(context(), "focus");
  EXPECT_TRUE(a.handed_back);
  ASSERT_TRUE(a.rejection);
  EXPECT_EQ(a.rejection->code, "E_ENDPOINT");
  EXPECT_EQ(server->requests().size(), 1U);  // not retried
  EXPECT_FALSE(agent->available());         // the breaker stays open
  const AgentAttempt b = agent->propose(context(), "focus");
  EXPECT_TRUE(b.handed_back);
  EXPECT_EQ(recorder.calls.back().status, "circuit-open");
  EXPECT_EQ(server->requests().size(), 1U);
}

TEST_F(AgentTest, BudgetRefusalSendsNothing) {
  budget = std::make_unique<Budget>(BudgetCaps{.max_calls = {}, .max_input_tokens = {}, .max_output_tokens = 100, .max_usd = {}}, std::nullopt, "m");
  options.use_planner = false;
  serve("happy_openai.jsonl");
  const AgentAttempt a = agent->propose(context(), "focus");
  EXPECT_TRUE(a.handed_back);
  EXPECT_EQ(a.rejection->code, "E_BUDGET");
  EXPECT_EQ(recorder.calls.at(0).status, "budget-refused");
  EXPECT_TRUE(server->requests().empty());
}

TEST_F(AgentTest, AnthropicMessagesReadTextBlocksOnly) {
  serve("anthropic_roles.jsonl", ApiKind::Anthropic);
  const AgentAttempt a = agent->propose(context(), "focus");
  ASSERT_TRUE(a.reply) << (a.rejection ? a.rejection->detail : "");
  EXPECT_EQ(a.strategy, "two elements per thread");
  EXPECT_EQ(a.reply->source.find("decoy"), std::string::npos);  // thinking is never read for code
  const auto requests = server->requests();
  ASSERT_EQ(requests.size(), 2U);
  EXPECT_EQ(requests[0].path, "/v1/messages");
  EXPECT_EQ(requests[0].headers.at("x-api-key"), kKey);
  EXPECT_EQ(recorder.calls[1].input_tokens, 800);
  EXPECT_EQ(recorder.calls[1].output_tokens, 120);
}

TEST_F(AgentTest, AnswerLostToReasoningAndProseAreRecordedThenFixed) {
  options.max_fix_turns = 1;
  serve("reasoning_and_bad_plan.jsonl");
  const AgentAttempt a = agent->propose(context(), "rule focus: the slowest shape");
  ASSERT_TRUE(a.reply);
  ASSERT_EQ(a.rejections.size(), 2U);
  EXPECT_EQ(a.rejections[0].error.code, "E_LOST_TO_REASONING");
  EXPECT_EQ(a.rejections[0].role, "planner");
  EXPECT_EQ(a.rejections[1].error.code, "E_NO_ENVELOPE");
  EXPECT_EQ(a.rejections[1].role, "coder");
  EXPECT_EQ(a.strategy, "rule focus: the slowest shape");  // the focus line stood in for the plan
  EXPECT_EQ(recorder.calls[0].output_tokens, 1024);         // reasoning tokens are billed
  EXPECT_NE(server->requests()[1].body.find("rule focus: the slowest shape"), std::string::npos);
}

TEST_F(AgentTest, FixerTurnsAreCapped) {
  serve("happy_openai.jsonl");
  Conversation spent;
  spent.fix_turns = options.max_fix_turns;
  const AgentAttempt a = agent->fix(spent, "nvrtc: error", context());
  EXPECT_FALSE(a.reply);
  EXPECT_EQ(a.rejection->code, "E_FIX_TURNS");
  EXPECT_TRUE(server->requests().empty());
}

TEST_F(AgentTest, KeyEchoedByTheServerIsRedacted) {
  options.use_planner = false;
  server = nullptr;
  std::vector<test::ScriptedResponse> script = {
      {401, {}, std::string(R"({"error":{"message":"Incorrect API key provided: )") + kKey + R"(","code":"invalid_api_key"}})"}};
  server = std::make_unique<test::LoopbackServer>(script);
  client = std::make_unique<ChatClient>(EndpointConfig{ApiKind::OpenAI, server->base_url() + "/v1", "m", kKeyEnv},
                                        std::make_shared<CurlTransport>(), RetryPolicy({}, RetryClock::real(3)), breaker,
                                        [this](std::string_view l) { log.emplace_back(l); });
  agent = std::make_unique<LlmAgent>(*client, breaker, *budget, recorder, options, [this](std::string_view l) { log.emplace_back(l); });
  const AgentAttempt a = agent->propose(context(), "focus");
  EXPECT_TRUE(a.handed_back);
  EXPECT_EQ(server->requests().at(0).headers.at("authorization"), std::string("Bearer ") + kKey);
  EXPECT_EQ(a.rejection->detail.find("SENTINEL"), std::string::npos);
  expect_no_key();
}

}  // namespace
}  // namespace ptxevo::agents
