#include "agents/tests/transcript.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace ptxevo::agents::test {

using nlohmann::json;

std::string openai_body(const std::string& content, const std::string& finish_reason, int input_tokens,
                        int output_tokens) {
  return json{{"id", "chatcmpl-replay"},
              {"object", "chat.completion"},
              {"model", "replayed"},
              {"choices", json::array({{{"index", 0},
                                        {"message", {{"role", "assistant"}, {"content", content}}},
                                        {"finish_reason", finish_reason}}})},
              {"usage",
               {{"prompt_tokens", input_tokens},
                {"completion_tokens", output_tokens},
                {"total_tokens", input_tokens + output_tokens}}}}
      .dump();
}

std::vector<ScriptedResponse> parse_transcript(const std::string& jsonl) {
  std::vector<ScriptedResponse> out;
  std::istringstream in(jsonl);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    const json j = json::parse(line, nullptr, false);
    if (!j.is_object()) throw std::runtime_error("transcript line " + std::to_string(number) + " is not a JSON object");
    ScriptedResponse r;
    r.stall = j.value("stall", false);
    r.when = j.value("when", std::string());
    if (j.contains("reply")) {
      const auto usage = j.value("usage", json::array({100, 50}));
      r.body = openai_body(j["reply"].get<std::string>(), j.value("finish_reason", std::string("stop")),
                           usage.at(0).get<int>(), usage.at(1).get<int>());
    } else if (j.contains("body")) {
      r.body = j["body"].dump();
    } else {
      r.body = j.value("body_text", std::string());
    }
    r.status = j.value("status", 200);
    const json headers = j.value("headers", json::object());
    for (const auto& [name, value] : headers.items()) r.headers.emplace_back(name, value.get<std::string>());
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<ScriptedResponse> load_transcript(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read transcript " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_transcript(ss.str());
}

}  // namespace ptxevo::agents::test
