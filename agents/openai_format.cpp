#include "agents/openai_format.hpp"

namespace ptxevo::agents {
namespace {

using nlohmann::json;

std::string normalize_finish_reason(const std::string& reason) {
  if (reason == "stop") return "stop";
  if (reason == "length") return "length";
  if (reason == "tool_calls" || reason == "function_call") return "tool";
  if (reason == "content_filter") return "filtered";
  return reason.empty() ? "unknown" : reason;
}

std::string string_or_number(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_integer()) return std::to_string(value.get<long long>());
  return {};
}

ChatError malformed(std::string why) {
  ChatError error;
  error.kind = ErrorKind::Malformed;
  error.http_status = 200;
  error.message = "malformed chat.completion reply: " + std::move(why);
  return error;
}

}  // namespace

json openai_request_json(const ChatRequest& request, MaxTokensField field) {
  json messages = json::array();
  if (!request.system.empty()) {
    messages.push_back({{"role", "system"}, {"content", request.system}});
  }
  for (const ChatMessage& message : request.messages) {
    messages.push_back({{"role", message.role}, {"content", message.content}});
  }
  json body = {{"model", request.model}, {"messages", std::move(messages)}, {"stream", false}};
  body[field == MaxTokensField::MaxTokens ? "max_tokens" : "max_completion_tokens"] =
      request.max_tokens;
  if (request.temperature) body["temperature"] = *request.temperature;
  return body;
}

std::variant<ChatReply, ChatError> openai_parse_reply(std::string_view body) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return malformed("not JSON");
  if (!parsed.is_object()) return malformed("not a JSON object");
  auto choices = parsed.find("choices");
  if (choices == parsed.end() || !choices->is_array() || choices->empty()) {
    return malformed("no choices");
  }
  const json& choice = choices->front();
  if (!choice.is_object() || !choice.contains("message") || !choice["message"].is_object()) {
    return malformed("choice without message");
  }
  const json& message = choice["message"];
  ChatReply reply;
  // content may be null (tool calls, refusals, or everything spent on reasoning).
  if (auto content = message.find("content"); content != message.end()) {
    if (content->is_string()) {
      reply.text = content->get<std::string>();
    } else if (!content->is_null()) {
      return malformed("content is neither string nor null");
    }
  }
  const auto finish = choice.find("finish_reason");
  reply.stop_reason = normalize_finish_reason(
      finish != choice.end() && finish->is_string() ? finish->get<std::string>() : "");
  if (auto usage = parsed.find("usage"); usage != parsed.end() && usage->is_object()) {
    reply.input_tokens = usage->value("prompt_tokens", std::int64_t{0});
    reply.output_tokens = usage->value("completion_tokens", std::int64_t{0});
  }
  reply.raw = std::move(parsed);
  return reply;
}

ChatError openai_parse_error(int http_status, std::string_view body) {
  ChatError error;
  error.http_status = http_status;
  error.kind = classify_status(http_status);
  std::string detail;
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) {
    // Nested (OpenAI, current vLLM, llama.cpp, Ollama) or flat (older vLLM-derived servers).
    const json* err = &parsed;
    if (auto nested = parsed.find("error"); nested != parsed.end()) {
      if (nested->is_object()) {
        err = &*nested;
      } else if (nested->is_string()) {
        detail = nested->get<std::string>();  // some proxies: {"error": "text"}
      }
    }
    if (detail.empty()) detail = err->value("message", std::string{});
    error.code = string_or_number(err->value("code", json()));
    const std::string type = err->value("type", std::string{});
    if (error.code.empty() || error.code == std::to_string(http_status)) {
      error.code = type.empty() ? error.code : type;
    }
    if (mentions_out_of_quota(error.code) || mentions_out_of_quota(type) ||
        mentions_out_of_quota(detail)) {
      error.kind = ErrorKind::OutOfQuota;
    }
  } else {
    detail = std::string(body);  // HTML from a proxy, plain text, or empty
  }
  error.message = "HTTP " + std::to_string(http_status);
  if (!error.code.empty()) error.message += " (" + error.code + ")";
  if (!detail.empty()) error.message += ": " + clip(detail);
  return error;
}

}  // namespace ptxevo::agents
