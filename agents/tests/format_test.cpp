// Wire-format tests for both APIs: request JSON, reply parsing, usage, truncation, and every
// error shape listed in docs/agents.md.
#include <gtest/gtest.h>

#include "agents/anthropic_format.hpp"
#include "agents/openai_format.hpp"

namespace ptxevo::agents {
namespace {

using nlohmann::json;

ChatRequest sample_request() {
  ChatRequest request;
  request.model = "m1";
  request.system = "be terse";
  request.messages = {{"user", "hi"}, {"assistant", "hello"}, {"user", "write a kernel"}};
  request.max_tokens = 256;
  return request;
}

TEST(OpenAiFormat, RequestJson) {
  ChatRequest request = sample_request();
  request.temperature = 0.5;
  const json body = openai_request_json(request);
  EXPECT_EQ(body["model"], "m1");
  ASSERT_EQ(body["messages"].size(), 4U);
  EXPECT_EQ(body["messages"][0], (json{{"role", "system"}, {"content", "be terse"}}));
  EXPECT_EQ(body["messages"][3]["content"], "write a kernel");
  EXPECT_EQ(body["max_tokens"], 256);
  EXPECT_FALSE(body.contains("max_completion_tokens"));
  EXPECT_EQ(body["temperature"], 0.5);
  EXPECT_EQ(body["stream"], false);
}

TEST(OpenAiFormat, RequestJsonDialectAndOmittedSampling) {
  const json body = openai_request_json(sample_request(), MaxTokensField::MaxCompletionTokens);
  EXPECT_EQ(body["max_completion_tokens"], 256);
  EXPECT_FALSE(body.contains("max_tokens"));
  EXPECT_FALSE(body.contains("temperature"));  // unset: left to the server (reasoning models)
}

TEST(OpenAiFormat, ParsesReplyAndUsage) {
  const auto parsed = openai_parse_reply(R"({"id":"x","object":"chat.completion","choices":[
      {"index":0,"message":{"role":"assistant","content":"done","reasoning":"hmm"},
       "finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46}})");
  ASSERT_TRUE(std::holds_alternative<ChatReply>(parsed));
  const auto& reply = std::get<ChatReply>(parsed);
  EXPECT_EQ(reply.text, "done");
  EXPECT_EQ(reply.stop_reason, "stop");
  EXPECT_FALSE(reply.truncated());
  EXPECT_EQ(reply.input_tokens, 12);
  EXPECT_EQ(reply.output_tokens, 34);
  EXPECT_EQ(reply.raw["id"], "x");
}

TEST(OpenAiFormat, LengthStopIsTruncatedAndNullContentIsEmpty) {
  const auto parsed = openai_parse_reply(
      R"({"choices":[{"message":{"role":"assistant","content":null},"finish_reason":"length"}]})");
  ASSERT_TRUE(std::holds_alternative<ChatReply>(parsed));
  EXPECT_TRUE(std::get<ChatReply>(parsed).truncated());
  EXPECT_EQ(std::get<ChatReply>(parsed).text, "");
  EXPECT_EQ(std::get<ChatReply>(parsed).input_tokens, 0);  // usage is optional
}

TEST(OpenAiFormat, ToolCallsNormalized) {
  const auto parsed = openai_parse_reply(
      R"({"choices":[{"message":{"content":"x"},"finish_reason":"tool_calls"}]})");
  EXPECT_EQ(std::get<ChatReply>(parsed).stop_reason, "tool");
}

TEST(OpenAiFormat, MalformedReplies) {
  for (const char* body : {"{not json", "[]", R"({"choices":[]})", R"({"choices":[{}]})",
                           R"({"choices":[{"message":{"content":7}}]})", ""}) {
    const auto parsed = openai_parse_reply(body);
    ASSERT_TRUE(std::holds_alternative<ChatError>(parsed)) << body;
    EXPECT_EQ(std::get<ChatError>(parsed).kind, ErrorKind::Malformed) << body;
  }
}

TEST(OpenAiFormat, ErrorShapes) {
  // OpenAI nested, string code.
  ChatError e = openai_parse_error(401, R"({"error":{"message":"Incorrect API key","type":
      "invalid_request_error","param":null,"code":"invalid_api_key"}})");
  EXPECT_EQ(e.kind, ErrorKind::Fatal);
  EXPECT_EQ(e.code, "invalid_api_key");
  EXPECT_NE(e.message.find("Incorrect API key"), std::string::npos);
  // vLLM current: nested, integer code equal to the status -> fall back to the type.
  e = openai_parse_error(503, R"({"error":{"message":"busy","type":"ServiceUnavailable","param":null,"code":503}})");
  EXPECT_EQ(e.kind, ErrorKind::Retryable);
  EXPECT_EQ(e.code, "ServiceUnavailable");
  // vLLM older: flat.
  e = openai_parse_error(404, R"({"object":"error","message":"model m9 does not exist","type":"NotFoundError","param":null,"code":404})");
  EXPECT_EQ(e.kind, ErrorKind::Fatal);
  EXPECT_NE(e.message.find("model m9 does not exist"), std::string::npos);
  // llama.cpp loading.
  e = openai_parse_error(503, R"({"error":{"code":503,"message":"Loading model","type":"unavailable_error"}})");
  EXPECT_EQ(e.kind, ErrorKind::Retryable);
  EXPECT_EQ(e.code, "unavailable_error");
  // Ollama: code null.
  e = openai_parse_error(400, R"({"error":{"message":"bad","type":"invalid_request_error","param":null,"code":null}})");
  EXPECT_EQ(e.kind, ErrorKind::Fatal);
  // Non-JSON body from a proxy.
  e = openai_parse_error(502, "<html>Bad Gateway</html>");
  EXPECT_EQ(e.kind, ErrorKind::Retryable);
  EXPECT_NE(e.message.find("Bad Gateway"), std::string::npos);
  EXPECT_EQ(openai_parse_error(408, "").kind, ErrorKind::Retryable);
  EXPECT_EQ(openai_parse_error(403, "").kind, ErrorKind::Fatal);
}

TEST(OpenAiFormat, RateLimitVersusQuota) {
  EXPECT_EQ(openai_parse_error(429, R"({"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}})").kind,
            ErrorKind::Retryable);
  const ChatError quota = openai_parse_error(429, R"({"error":{"message":"You exceeded your current quota",
      "type":"insufficient_quota","param":null,"code":"insufficient_quota"}})");
  EXPECT_EQ(quota.kind, ErrorKind::OutOfQuota);
}

TEST(OpenAiFormat, LongErrorBodiesAreClipped) {
  const ChatError e = openai_parse_error(500, std::string(100'000, 'x'));
  EXPECT_LT(e.message.size(), 2'200U);
}

TEST(AnthropicFormat, RequestJson) {
  ChatRequest request = sample_request();
  request.temperature = 0.0;
  const json body = anthropic_request_json(request);
  EXPECT_EQ(body["model"], "m1");
  EXPECT_EQ(body["max_tokens"], 256);
  EXPECT_EQ(body["system"], "be terse");  // top level, not a message role
  ASSERT_EQ(body["messages"].size(), 3U);
  EXPECT_EQ(body["messages"][0], (json{{"role", "user"}, {"content", "hi"}}));
  EXPECT_EQ(body["temperature"], 0.0);
  EXPECT_FALSE(anthropic_request_json(sample_request()).contains("temperature"));
}

TEST(AnthropicFormat, ParsesTextBlocksOnlyAndUsage) {
  const auto parsed = anthropic_parse_reply(R"({"id":"msg_1","type":"message","role":"assistant",
      "content":[{"type":"thinking","thinking":"```cuda decoy```"},{"type":"text","text":"a"},
                 {"type":"text","text":"b"}],
      "stop_reason":"end_turn","usage":{"input_tokens":7,"output_tokens":9}})");
  ASSERT_TRUE(std::holds_alternative<ChatReply>(parsed));
  const auto& reply = std::get<ChatReply>(parsed);
  EXPECT_EQ(reply.text, "ab");
  EXPECT_EQ(reply.stop_reason, "stop");
  EXPECT_EQ(reply.input_tokens, 7);
  EXPECT_EQ(reply.output_tokens, 9);
}

TEST(AnthropicFormat, MaxTokensStopIsTruncated) {
  const auto parsed = anthropic_parse_reply(
      R"({"type":"message","content":[{"type":"text","text":"partial"}],"stop_reason":"max_tokens"})");
  EXPECT_TRUE(std::get<ChatReply>(parsed).truncated());
}

TEST(AnthropicFormat, MalformedReplies) {
  for (const char* body : {"{", "null", R"({"content":"text"})", R"({"content":[{"type":"text"}]})"}) {
    const auto parsed = anthropic_parse_reply(body);
    ASSERT_TRUE(std::holds_alternative<ChatError>(parsed)) << body;
    EXPECT_EQ(std::get<ChatError>(parsed).kind, ErrorKind::Malformed) << body;
  }
}

TEST(AnthropicFormat, ErrorShapes) {
  ChatError e = anthropic_parse_error(529, R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"r"})");
  EXPECT_EQ(e.kind, ErrorKind::Retryable);
  EXPECT_EQ(e.code, "overloaded_error");
  e = anthropic_parse_error(401, R"({"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}})");
  EXPECT_EQ(e.kind, ErrorKind::Fatal);
  e = anthropic_parse_error(429, R"({"type":"error","error":{"type":"rate_limit_error","message":"slow down"}})");
  EXPECT_EQ(e.kind, ErrorKind::Retryable);
  e = anthropic_parse_error(400, R"({"type":"error","error":{"type":"invalid_request_error",
      "message":"Your credit balance is too low to access the Anthropic API."}})");
  EXPECT_EQ(e.kind, ErrorKind::OutOfQuota);
  e = anthropic_parse_error(429, R"({"type":"error","error":{"type":"rate_limit_error","message":"limit",
      "details":{"error_code":"enforced_spend_limit_reached"}}})");
  EXPECT_EQ(e.kind, ErrorKind::OutOfQuota);
  EXPECT_EQ(anthropic_parse_error(500, "oops").kind, ErrorKind::Retryable);
}

}  // namespace
}  // namespace ptxevo::agents
