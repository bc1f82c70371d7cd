// Wires `--agents llm` to a concrete endpoint: the chat client, its circuit breaker, the
// campaign budget, the trace-database call recorder and the planner/coder/fixer agent.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

#include "agents/llm_agent.hpp"
#include "cli/campaign_command.hpp"
#include "search/llm_proposer.hpp"
#include "tracedb/trace_db.hpp"

namespace ptxevo::cli {

struct LlmSetup {
  std::shared_ptr<agents::CircuitBreaker> breaker;
  std::unique_ptr<agents::ChatClient> client;
  std::unique_ptr<agents::Budget> budget;
  std::unique_ptr<search::TraceCallRecorder> recorder;
  std::unique_ptr<agents::LlmAgent> agent;
  double share = 0;
  search::LlmAgents handles() const { return {agent.get(), budget.get(), recorder.get(), share}; }
};

// What is wrong with the LLM options, for the user to fix ("" when nothing, or no --agents llm).
std::string llm_options_error(const LlmCliOptions& o);

// Checks the options first; returns null with `error` set to what the user must fix. The key
// variable must be set (its value is never read here, only checked for presence).
std::unique_ptr<LlmSetup> make_llm_setup(const LlmCliOptions& o, tracedb::TraceDb& db, std::ostream& log,
                                         std::uint64_t seed, std::string& error);

// One line for reports: "openai http://127.0.0.1:8000/v1 model qwen (key from $VAR)".
std::string describe_endpoint(const LlmCliOptions& o);

}  // namespace ptxevo::cli
