#include "agents/anthropic_format.hpp"

#include <string>

namespace ptxevo::agents {
namespace {

using nlohmann::json;

std::string normalize_stop_reason(const std::string& reason) {
  if (reason == "end_turn" || reason == "stop_sequence") return "stop";
  // Both mean the text was cut off by a token limit.
  if (reason == "max_tokens" || reason == "model_context_window_exceeded") return "length";
  if (reason == "tool_use") return "tool";
  if (reason == "refusal") return "refused";
  return reason.empty() ? "unknown" : reason;
}

ChatError malformed(std::string why) {
  ChatError error;
  error.kind = ErrorKind::Malformed;
  error.http_status = 200;
  error.message = "malformed messages reply: " + std::move(why);
  return error;
}

}  // namespace

json anthropic_request_json(const ChatRequest& request) {
  json messages = json::array();
  for (const ChatMessage& message : request.messages) {
    messages.push_back({{"role", message.role}, {"content", message.content}});
  }
  // max_tokens is required by this API; system is a top-level field, not a role.
  json body = {{"model", request.model},
               {"max_tokens", request.max_tokens},
               {"messages", std::move(messages)}};
  if (!request.system.empty()) body["system"] = request.system;
  if (request.temperature) body["temperature"] = *request.temperature;
  return body;
}

std::variant<ChatReply, ChatError> anthropic_parse_reply(std::string_view body) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return malformed("not JSON");
  if (!parsed.is_object()) return malformed("not a JSON object");
  auto content = parsed.find("content");
  if (content == parsed.end() || !content->is_array()) return malformed("no content array");
  ChatReply reply;
  for (const json& block : *content) {
    if (block.is_object() && block.value("type", std::string{}) == "text") {
      const auto text = block.find("text");
      if (text == block.end() || !text->is_string()) return malformed("text block without text");
      reply.text += text->get<std::string>();
    }
  }
  const auto stop = parsed.find("stop_reason");
  reply.stop_reason =
      normalize_stop_reason(stop != parsed.end() && stop->is_string() ? stop->get<std::string>()
                                                                        : "");
  if (auto usage = parsed.find("usage"); usage != parsed.end() && usage->is_object()) {
    reply.input_tokens = usage->value("input_tokens", std::int64_t{0});
    reply.output_tokens = usage->value("output_tokens", std::int64_t{0});
  }
  reply.raw = std::move(parsed);
  return reply;
}

ChatError anthropic_parse_error(int http_status, std::string_view body) {
  ChatError error;
  error.http_status = http_status;
  error.kind = classify_status(http_status);
  std::string detail;
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object() && parsed.contains("error") && parsed["error"].is_object()) {
    const json& err = parsed["error"];
    error.code = err.value("type", std::string{});
    detail = err.value("message", std::string{});
    // The spend-limit code sits in error.details.error_code (secondary source); scan the whole
    // error object so either placement is caught.
    if (mentions_out_of_quota(error.code) || mentions_out_of_quota(detail) ||
        mentions_out_of_quota(err.dump())) {
      error.kind = ErrorKind::OutOfQuota;
    }
  } else {
    detail = std::string(body);
  }
  error.message = "HTTP " + std::to_string(http_status);
  if (!error.code.empty()) error.message += " (" + error.code + ")";
  if (!detail.empty()) error.message += ": " + clip(detail);
  return error;
}

}  // namespace ptxevo::agents
