// Pure functions for the OpenAI-compatible chat-completions API (OpenAI, vLLM, llama.cpp
// server, Ollama): POST {base}/chat/completions with "Authorization: Bearer <key>".
// No I/O here, so every shape in docs/agents.md is unit-tested without a server.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "agents/chat_types.hpp"

namespace ptxevo::agents {

// OpenAI proper wants max_completion_tokens; local servers (Ollama in particular) only know
// max_tokens. Chosen per endpoint in config, never guessed from the model name.
enum class MaxTokensField { MaxTokens, MaxCompletionTokens };

[[nodiscard]] nlohmann::json openai_request_json(const ChatRequest& request,
                                                 MaxTokensField field = MaxTokensField::MaxTokens);

// Parses a 2xx body. Returns a ChatReply (possibly truncated(): the caller decides) or a
// Malformed error when the body is not a chat.completion.
[[nodiscard]] std::variant<ChatReply, ChatError> openai_parse_reply(std::string_view body);

// Classifies a non-2xx response. Accepts nested {"error":{...}} and flat {"object":"error",...}
// shapes, with "code" a string, an integer or null, and non-JSON bodies.
[[nodiscard]] ChatError openai_parse_error(int http_status, std::string_view body);

}  // namespace ptxevo::agents
