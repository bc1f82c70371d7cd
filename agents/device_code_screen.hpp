// The lexical screen every LLM-written kernel source passes before it reaches NVRTC
// (docs/agents.md, "Device code only"). NVRTC already refuses host functions in JIT mode; this
// screen also refuses what would compile but break the evaluator's contract: state kept between
// launches (file-scope __device__/__managed__ variables), clock and timer reads (a kernel that
// can tell it is being timed), printf/malloc, includes outside the CUDA device headers, PTX
// function definitions smuggled in through asm, and trap/exit. The same IR checks that every
// candidate passes run afterwards on the PTX; this screen is the cheap first line and gives the
// fixer a precise reason.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ptxevo::agents {

struct ScreenViolation {
  std::string rule;    // a stable code, e.g. "host-function", "clock-read"
  std::string detail;  // what and where (line number), for the database and the fixer
};

// Comments replaced by spaces, string and character literals by empty quotes; newlines kept so
// line numbers still match. Exposed for tests.
[[nodiscard]] std::string strip_comments_and_literals(std::string_view source);

// Every violation found (empty: accepted).
[[nodiscard]] std::vector<ScreenViolation> screen_device_code(std::string_view source);

// The headers a candidate may include (those NVRTC resolves from the CUDA include directory and
// that hold device code only), as "a, b, c" for prompts and messages.
[[nodiscard]] std::string allowed_includes_text();
[[nodiscard]] std::vector<std::string_view> allowed_includes();

// "rule: detail; rule: detail" for logs and rejection rows.
[[nodiscard]] std::string describe(const std::vector<ScreenViolation>& violations);

}  // namespace ptxevo::agents
