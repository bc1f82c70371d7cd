// The main command's LLM options. Kept apart from main.cpp so the campaign owns its flags.
#include <CLI/CLI.hpp>

#include "cli/campaign_command.hpp"

namespace ptxevo::cli {

void add_agent_options(CLI::App& app, CampaignCliOptions& o) {
  LlmCliOptions& l = o.llm;
  app.add_option("--agents", l.agents, "Who proposes: rules, or llm (LLM agents beside the rule agents)")
      ->check(CLI::IsMember({"rules", "llm"}))
      ->capture_default_str();
  app.add_option("--llm-api", l.api, "Chat API of the endpoint: openai (chat completions: vLLM, llama.cpp, Ollama, "
                                     "hosted) or anthropic (messages)")
      ->check(CLI::IsMember({"openai", "anthropic"}))
      ->capture_default_str();
  app.add_option("--llm-url", l.url, "Endpoint base URL, e.g. http://127.0.0.1:8000/v1 (openai) or https://api.anthropic.com");
  app.add_option("--llm-model", l.model, "Model name the endpoint knows");
  app.add_option("--llm-key-env", l.key_env, "Name of the environment variable holding the API key (empty: no key)");
  app.add_option("--llm-max-tokens-field", l.max_tokens_field,
                 "openai API only: max_tokens (local servers) or max_completion_tokens (api.openai.com)")
      ->check(CLI::IsMember({"max_tokens", "max_completion_tokens"}))
      ->capture_default_str();
  app.add_option("--llm-max-tokens", l.max_tokens, "Output tokens per coder/fixer call")->capture_default_str();
  app.add_option("--llm-max-tokens-cap", l.max_tokens_cap,
                 "After a reply cut off at the limit, later calls get 1.5x the tokens up to this (0: twice --llm-max-tokens)");
  app.add_option("--llm-planner-max-tokens", l.planner_max_tokens, "Output tokens per planner call")->capture_default_str();
  app.add_flag("--llm-no-planner", l.no_planner, "Skip the planner; the coder gets a rule-made focus line");
  app.add_option("--llm-fix-turns", l.fix_turns, "Fixer turns per lineage (0-2)")->check(CLI::Range(0, 2))->capture_default_str();
  app.add_option("--llm-share", l.share, "Minimum fraction of child slots offered to the LLM (the posterior decides the rest)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--llm-deadline", l.deadline_s, "Seconds per logical call, all retries and waits included")->capture_default_str();
  app.add_option("--llm-attempt-timeout", l.attempt_timeout_s, "Seconds per HTTP attempt")->capture_default_str();
  app.add_option("--llm-max-calls", l.max_calls, "Cap on LLM calls for the campaign (0: none)");
  app.add_option("--llm-max-input-tokens", l.max_input_tokens, "Cap on input tokens for the campaign (0: none)");
  app.add_option("--llm-max-output-tokens", l.max_output_tokens, "Cap on output tokens for the campaign (0: none)");
  app.add_option("--llm-max-usd", l.max_usd, "Cap on dollars for the campaign (needs --llm-price; 0: none)");
  app.add_option("--llm-price", l.price, "USD per million input and output tokens, IN,OUT (unset: unpriced, never free)");
  app.add_option("--llm-temperature", l.temperature, "Sampling temperature (unset: omitted, as reasoning models require)");
  app.add_flag("--insecure-endpoint", l.insecure_endpoint, "Allow plain http:// to a non-loopback host (the key travels in clear)");
}

}  // namespace ptxevo::cli
