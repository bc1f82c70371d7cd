// Pure functions for the Anthropic messages API: POST {base}/v1/messages with "x-api-key" and
// "anthropic-version: 2023-06-01". No I/O here.
#pragma once

#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "agents/chat_types.hpp"

namespace ptxevo::agents {

inline constexpr std::string_view kAnthropicVersion = "2023-06-01";

[[nodiscard]] nlohmann::json anthropic_request_json(const ChatRequest& request);

// Concatenates the "text" content blocks only (thinking / tool blocks are skipped: their order
// and count are not guaranteed). Malformed error when the body is not a message.
[[nodiscard]] std::variant<ChatReply, ChatError> anthropic_parse_reply(std::string_view body);

// {"type":"error","error":{"type","message"}} and non-JSON bodies.
[[nodiscard]] ChatError anthropic_parse_error(int http_status, std::string_view body);

}  // namespace ptxevo::agents
