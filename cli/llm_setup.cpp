#include "cli/llm_setup.hpp"

#include <cstdlib>
#include <sstream>

namespace ptxevo::cli {

std::string describe_endpoint(const LlmCliOptions& o) {
  return o.api + " " + o.url + " model " + o.model +
         (o.key_env.empty() ? std::string(" (no key)") : " (key from $" + o.key_env + ")");
}

std::string llm_options_error(const LlmCliOptions& o) {
  std::string error;
  if (o.agents != "llm") return error;
  if (o.url.empty() || o.model.empty()) {
    error = "--agents llm needs --llm-url and --llm-model (see docs/agents.md for vLLM, llama.cpp and Ollama)";
    return error;
  }
  if (o.url.rfind("http://", 0) != 0 && o.url.rfind("https://", 0) != 0) {
    error = "--llm-url " + o.url + " must start with http:// or https://";
    return error;
  }
  if (!o.insecure_endpoint && o.url.rfind("http://", 0) == 0 && !agents::is_loopback_url(o.url)) {
    error = "--llm-url " + o.url + " is plain http to a non-loopback host; use https, a loopback address, or "
            "--insecure-endpoint";
    return error;
  }
  if (!o.key_env.empty()) {
    const char* value = std::getenv(o.key_env.c_str());
    if (value == nullptr || *value == '\0') {
      error = "--llm-key-env " + o.key_env + ": that environment variable is not set (export it; keys are never "
              "taken from the command line or a file)";
      return error;
    }
  }
  if (!o.price.empty()) {
    agents::Price p;
    char comma = 0;
    std::istringstream in(o.price);
    if (!(in >> p.usd_per_million_input >> comma >> p.usd_per_million_output) || comma != ',' ||
        p.usd_per_million_input < 0 || p.usd_per_million_output < 0) {
      error = "--llm-price " + o.price + ": expected IN,OUT in USD per million tokens, e.g. 3,15";
      return error;
    }
  }
  if (o.max_usd > 0 && o.price.empty()) {
    error = "--llm-max-usd needs --llm-price: a model without a known price is not counted as free";
    return error;
  }

  return error;
}

std::unique_ptr<LlmSetup> make_llm_setup(const LlmCliOptions& o, tracedb::TraceDb& db, std::ostream& log,
                                         std::uint64_t seed, std::string& error) {
  error = llm_options_error(o);
  if (!error.empty()) return nullptr;
  std::optional<agents::Price> price;
  if (!o.price.empty()) {
    agents::Price p;
    char comma = 0;
    std::istringstream in(o.price);
    in >> p.usd_per_million_input >> comma >> p.usd_per_million_output;
    price = p;
  }
  auto s = std::make_unique<LlmSetup>();
  s->share = o.share;
  s->breaker = std::make_shared<agents::CircuitBreaker>();
  agents::EndpointConfig endpoint;
  endpoint.kind = o.api == "anthropic" ? agents::ApiKind::Anthropic : agents::ApiKind::OpenAI;
  endpoint.base_url = o.url;
  endpoint.model = o.model;
  endpoint.key_env = o.key_env;
  endpoint.max_tokens_field = o.max_tokens_field == "max_completion_tokens" ? agents::MaxTokensField::MaxCompletionTokens
                                                                           : agents::MaxTokensField::MaxTokens;
  endpoint.allow_plain_http_remote = o.insecure_endpoint;
  agents::RetryConfig retry;
  retry.deadline = agents::Millis(static_cast<std::int64_t>(o.deadline_s * 1000));
  retry.attempt_timeout = agents::Millis(static_cast<std::int64_t>(o.attempt_timeout_s * 1000));
  auto log_line = [&log](std::string_view line) { log << line << std::endl; };
  s->client = std::make_unique<agents::ChatClient>(endpoint, std::make_shared<agents::CurlTransport>(),
                                                   agents::RetryPolicy(retry, agents::RetryClock::real(seed)), s->breaker,
                                                   log_line);
  agents::BudgetCaps caps;
  if (o.max_calls > 0) caps.max_calls = o.max_calls;
  if (o.max_input_tokens > 0) caps.max_input_tokens = o.max_input_tokens;
  if (o.max_output_tokens > 0) caps.max_output_tokens = o.max_output_tokens;
  if (o.max_usd > 0) caps.max_usd = o.max_usd;
  s->budget = std::make_unique<agents::Budget>(caps, price, o.model);
  s->recorder = std::make_unique<search::TraceCallRecorder>(db);
  agents::AgentOptions ao;
  ao.max_tokens = o.max_tokens;
  ao.max_tokens_cap = o.max_tokens_cap > 0 ? o.max_tokens_cap : 2 * o.max_tokens;
  ao.planner_max_tokens = o.planner_max_tokens;
  ao.use_planner = !o.no_planner;
  ao.max_fix_turns = o.fix_turns;
  ao.temperature = o.temperature;
  s->agent = std::make_unique<agents::LlmAgent>(*s->client, s->breaker, *s->budget, *s->recorder, ao, log_line);
  if (!price) log << "note: no --llm-price for " << o.model << ": its cost is recorded as unknown, never as $0" << std::endl;
  return s;
}

}  // namespace ptxevo::cli
