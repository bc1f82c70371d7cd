// Recorded chat exchanges as JSONL, replayed by the loopback server. One exchange per line:
//   {"status": 200, "headers": {...}, "body": {...}}      a raw response (body JSON or "body_text")
//   {"reply": "text", "finish_reason": "stop", "usage": [in, out]}   shorthand for an OpenAI
//                                                                     chat.completion
//   {"stall": true}                                        read the request, never answer
// Any line may add "when": "text": it is served to the first request whose last message
// contains the text (a fixer's turn quoting its error), wherever that request comes.
// Lines starting with '#' are comments. Files carry no keys: the scrubber in the tests checks.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "agents/tests/loopback_server.hpp"

namespace ptxevo::agents::test {

std::vector<ScriptedResponse> load_transcript(const std::filesystem::path& path);
std::vector<ScriptedResponse> parse_transcript(const std::string& jsonl);

// An OpenAI chat.completion body with this content, finish reason and usage.
std::string openai_body(const std::string& content, const std::string& finish_reason = "stop", int input_tokens = 100,
                        int output_tokens = 50);

}  // namespace ptxevo::agents::test
