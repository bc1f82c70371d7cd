// Renders the planner, coder and fixer prompts from a PromptContext. Pure and byte-stable: the
// same context gives the same bytes (tests pin the section order). Sections, in the issue's
// order: the spec and ABI, the parent source, its per-shape speedups and fraction of the
// roofline, its PTX resource summary, recent gate and build failures, past attempts with their
// outcomes, lessons from the trace database; then the task. Evidence that came from a compiler,
// the gate or an earlier model reply is fenced and labelled as data, ANSI escapes stripped and
// length-capped, so instructions inside it stay inert.
#pragma once

#include <string>
#include <string_view>

#include "agents/chat_types.hpp"
#include "agents/prompt_context.hpp"

namespace ptxevo::agents {

enum class Role { Planner, Coder, Fixer };
[[nodiscard]] std::string_view to_string(Role role);

// The shared system text: role, rules and the reply format.
[[nodiscard]] std::string system_prompt(Role role, const PromptContext& context);

// The evidence sections 1-7 in order, as one user message.
[[nodiscard]] std::string evidence_sections(const PromptContext& context);

// A planner request: name one optimisation to try, answered as JSON.
[[nodiscard]] ChatRequest planner_request(const PromptContext& context, int max_tokens);

// A coder request: implement `strategy` (the planner's, or a rule-made focus line).
// `planned`: the strategy is a planner's optimisation to implement; otherwise a goal, and the
// coder chooses the optimisation.
[[nodiscard]] ChatRequest coder_request(const PromptContext& context, std::string_view strategy, int max_tokens,
                                        bool planned = true);

// The fixer's turn appended to the coder conversation: the exact error, quoted as data.
[[nodiscard]] ChatMessage fixer_turn(std::string_view error);

// Text from outside (logs, earlier replies) made safe to quote: ANSI escapes and NULs removed,
// fences broken up, and cut at `max_bytes`.
[[nodiscard]] std::string quote_as_data(std::string_view text, std::size_t max_bytes);

}  // namespace ptxevo::agents
