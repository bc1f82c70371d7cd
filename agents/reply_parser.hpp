// The strict reply envelope of the coder and fixer roles (docs/agents.md, "Reply format").
//
//   <NAME>short_snake_case_name</NAME>
//   <RATIONALE>one paragraph</RATIONALE>
//   then exactly one of
//   <BODY> one fenced code block: the whole kernel source </BODY>
//   <EDITS> SEARCH/REPLACE blocks, each matching the parent source exactly once </EDITS>
//   <KNOBS> one flat JSON object of knob -> value </KNOBS>
//
// Tags are read in any letter case. Without a section, one fence tagged cuda reads as <BODY> and
// bare SEARCH/REPLACE blocks as <EDITS>. A SEARCH that does not occur verbatim may still match
// exactly one place with each line's indentation ignored (models re-indent what they copy).
// Beyond that the parser never guesses: no falling back to "the whole reply is code", no partial
// edits, no reading code out of reasoning text. Anything else is a ReplyError with a stable code
// that the trace database records and the fixer is shown.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ptxevo::agents {

enum class PatchKind { Source, Edits, Knobs };
[[nodiscard]] std::string_view to_string(PatchKind kind);

struct SearchReplace {
  std::string search;
  std::string replace;
};

struct ParsedReply {
  PatchKind kind = PatchKind::Source;
  std::string name;
  std::string rationale;
  std::string source;                         // Source: the code; Edits: the parent with edits applied
  std::vector<SearchReplace> edits;           // Edits
  std::map<std::string, std::string> knobs;   // Knobs
};

struct ReplyError {
  // E_NO_ENVELOPE, E_AMBIGUOUS, E_NO_CODE, E_EDIT_NO_MATCH, E_EDIT_MULTI_MATCH, E_EDIT_SYNTAX,
  // E_KNOB_INVALID, E_TOO_LARGE, E_NUL, E_EMPTY
  std::string code;
  std::string detail;
};

struct ReplyLimits {
  std::size_t max_reply_bytes = 256 * 1024;
  std::size_t max_source_bytes = 96 * 1024;
  std::size_t max_source_lines = 3000;
  std::size_t max_edits = 16;
};

// Allowed values per declared knob (as text); a knob reply must stay inside them.
using KnobDomains = std::map<std::string, std::vector<std::string>>;

// `parent_source` is what SEARCH blocks are matched against.
[[nodiscard]] std::variant<ParsedReply, ReplyError> parse_reply(std::string_view text, std::string_view parent_source,
                                                                const KnobDomains& knobs,
                                                                const ReplyLimits& limits = {});

// CRLF -> LF, a leading BOM dropped, <think>...</think> spans removed.
[[nodiscard]] std::string normalize_reply(std::string_view text);

// Applies the blocks in order, each to the result of the previous; every SEARCH must occur
// exactly once, verbatim or else with leading and trailing whitespace of each line ignored. On
// failure nothing is applied.
[[nodiscard]] std::variant<std::string, ReplyError> apply_edits(std::string_view source,
                                                                const std::vector<SearchReplace>& edits);

// The planner's answer: the first JSON object in the reply with a non-empty "strategy".
struct Plan {
  std::string strategy;
  std::string hypothesis;
};
[[nodiscard]] std::variant<Plan, ReplyError> parse_plan(std::string_view text);

}  // namespace ptxevo::agents
