#include "agents/device_code_screen.hpp"

#include <algorithm>
#include <array>
#include <cctype>

namespace ptxevo::agents {
namespace {

// Headers NVRTC resolves from the CUDA include directory and that hold device code only.
constexpr std::array<std::string_view, 12> kAllowedIncludes = {
    "cuda_fp16.h",  "cuda_bf16.h",      "cuda_fp8.h",   "mma.h",
    "cuda_pipeline.h", "cooperative_groups.h", "cooperative_groups/reduce.h",
    "cooperative_groups/memcpy_async.h", "cuda/barrier", "cuda/pipeline", "cuda/ptx", "cuda/std/cstdint"};

struct DeniedIdentifier {
  std::string_view name;
  std::string_view rule;
  std::string_view why;
};
constexpr std::array<DeniedIdentifier, 11> kDenied = {{
    {"main", "host-function", "main is host code"},
    {"printf", "io", "printf is not allowed in a candidate"},
    {"malloc", "allocation", "device-side allocation is not allowed"},
    {"free", "allocation", "device-side allocation is not allowed"},
    {"new", "allocation", "device-side allocation is not allowed"},
    {"delete", "allocation", "device-side allocation is not allowed"},
    {"clock", "clock-read", "clock reads let a kernel tell it is being timed"},
    {"clock64", "clock-read", "clock reads let a kernel tell it is being timed"},
    {"__nanosleep", "clock-read", "sleeping is not allowed in a candidate"},
    {"__managed__", "persistent-global", "managed memory is host-visible state"},
    {"__globaltimer", "clock-read", "timer reads let a kernel tell it is being timed"},
}};

// PTX fragments refused inside any string literal (in practice: inline asm templates).
constexpr std::array<DeniedIdentifier, 6> kDeniedAsm = {{
    {"%globaltimer", "clock-read", "reads %globaltimer"},
    {"%clock", "clock-read", "reads %clock"},
    {".entry", "asm-definition", "defines a PTX entry inside asm"},
    {".func", "asm-definition", "defines a PTX function inside asm"},
    {"trap", "asm-trap", "traps inside asm"},
    {"exit", "asm-trap", "exits inside asm"},
}};

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

int line_of(std::string_view text, std::size_t pos) {
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(pos), '\n'));
}

std::string at_line(std::string_view text, std::size_t pos) { return " (line " + std::to_string(line_of(text, pos)) + ")"; }

// keep_literals: comments only. Otherwise literal contents are dropped too.
std::string strip(std::string_view s, bool keep_literals) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    if (s.compare(i, 2, "//") == 0) {
      while (i < s.size() && s[i] != '\n') ++i;
      continue;
    }
    if (s.compare(i, 2, "/*") == 0) {
      i += 2;
      while (i < s.size() && s.compare(i, 2, "*/") != 0) {
        out += s[i] == '\n' ? '\n' : ' ';
        ++i;
      }
      i = std::min(s.size(), i + 2);
      out += ' ';
      continue;
    }
    if (s[i] == '"' || s[i] == '\'') {
      const char quote = s[i];
      out += quote;
      ++i;
      while (i < s.size() && s[i] != quote && s[i] != '\n') {
        if (s[i] == '\\' && i + 1 < s.size()) {
          if (keep_literals) out += s.substr(i, 2);
          i += 2;
          continue;
        }
        if (keep_literals) out += s[i];
        ++i;
      }
      if (i < s.size() && s[i] == quote) {
        out += quote;
        ++i;
      }
      continue;
    }
    out += s[i++];
  }
  return out;
}

// Finds whole-word occurrences of `word` in `text`.
std::vector<std::size_t> find_words(std::string_view text, std::string_view word) {
  std::vector<std::size_t> hits;
  for (std::size_t pos = text.find(word); pos != std::string_view::npos; pos = text.find(word, pos + 1)) {
    const bool left = pos == 0 || !ident_char(text[pos - 1]);
    const bool right = pos + word.size() >= text.size() || !ident_char(text[pos + word.size()]);
    if (left && right) hits.push_back(pos);
  }
  return hits;
}

std::string_view next_token(std::string_view text, std::size_t pos) {
  while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos])) != 0) ++pos;
  std::size_t end = pos;
  if (end < text.size() && text[end] == '"') {
    end = text.find('"', end + 1);
    end = end == std::string_view::npos ? text.size() : end + 1;
  } else {
    while (end < text.size() && ident_char(text[end])) ++end;
  }
  return text.substr(pos, end - pos);
}

std::string_view previous_word(std::string_view text, std::size_t pos) {
  while (pos > 0 && std::isspace(static_cast<unsigned char>(text[pos - 1])) != 0) --pos;
  std::size_t begin = pos;
  while (begin > 0 && ident_char(text[begin - 1])) --begin;
  return text.substr(begin, pos - begin);
}

void check_preprocessor(std::string_view text, std::vector<ScreenViolation>& out) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    const auto first = line.find_first_not_of(" \t");
    if (first != std::string_view::npos && line[first] == '#') {
      std::string_view rest = line.substr(first + 1);
      rest.remove_prefix(std::min(rest.size(), rest.find_first_not_of(" \t")));
      if (rest.rfind("include", 0) == 0) {
        const auto open = rest.find_first_of("<\"");
        const auto close = open == std::string_view::npos ? open : rest.find_first_of(">\"", open + 1);
        const std::string_view header =
            close == std::string_view::npos ? std::string_view() : rest.substr(open + 1, close - open - 1);
        if (std::find(kAllowedIncludes.begin(), kAllowedIncludes.end(), header) == kAllowedIncludes.end()) {
          // NVRTC has no C++ standard library: <cstdint> fails there; the CUDA one is the substitute.
          const std::string hint = header == "cstdint" || header == "stdint.h" ? " (use <cuda/std/cstdint>)" : "";
          out.push_back({"include", "#include of '" + std::string(header) + "' is outside the CUDA device headers" +
                                        hint + at_line(text, start) + "; allowed: " + allowed_includes_text()});
        }
      } else if (rest.rfind("pragma", 0) == 0) {
        const std::string_view what = next_token(rest, 6);
        if (what != "unroll" && what != "nounroll") {
          out.push_back({"pragma", "#pragma " + std::string(what) + " is not allowed (only unroll)" +
                                       at_line(text, start)});
        }
      }
    }
    start = end + 1;
  }
}

// File-scope variables in device memory keep state from one launch to the next: the route by
// which a kernel could cache its output. __constant__ tables are fine when fully initialized.
void check_file_scope_variables(std::string_view code, std::vector<ScreenViolation>& out) {
  int depth = 0;
  bool line_start = true;
  for (std::size_t i = 0; i < code.size(); ++i) {
    const char c = code[i];
    if (line_start && c == '#') {  // skip preprocessor lines: macros are checked on expansion by the PTX checks
      while (i < code.size() && code[i] != '\n') ++i;
      line_start = true;
      continue;
    }
    if (c == '\n') line_start = true;
    else if (std::isspace(static_cast<unsigned char>(c)) == 0) line_start = false;
    if (c == '{') ++depth;
    if (c == '}') depth = std::max(0, depth - 1);
    if (depth != 0 || !ident_char(c) || (i > 0 && ident_char(code[i - 1]))) continue;
    for (std::string_view space : {std::string_view("__device__"), std::string_view("__constant__")}) {
      if (code.compare(i, space.size(), space) != 0 ||
          (i + space.size() < code.size() && ident_char(code[i + space.size()]))) {
        continue;
      }
      const auto stop = code.find_first_of("(;=", i);
      if (stop == std::string_view::npos || code[stop] == '(') continue;  // a function
      if (space == "__constant__" && code[stop] == '=') continue;         // an initialized table
      out.push_back({"persistent-global", "file-scope " + std::string(space) +
                                              " variable keeps state between launches" + at_line(code, i)});
    }
  }
}

}  // namespace

std::string strip_comments_and_literals(std::string_view source) { return strip(source, false); }

std::vector<ScreenViolation> screen_device_code(std::string_view source) {
  std::vector<ScreenViolation> out;
  if (source.find('\0') != std::string_view::npos) {
    out.push_back({"nul-byte", "the source contains a NUL byte"});
    return out;
  }
  const std::string with_literals = strip(source, true);
  const std::string code = strip(source, false);
  check_preprocessor(with_literals, out);
  for (const auto& d : kDenied) {
    for (std::size_t pos : find_words(code, d.name)) {
      out.push_back({std::string(d.rule), std::string(d.why) + at_line(code, pos)});
    }
  }
  // __host__ alone makes a host function; __host__ __device__ is device code too.
  for (std::size_t pos : find_words(code, "__host__")) {
    if (next_token(code, pos + 8) != "__device__" && previous_word(code, pos) != "__device__") {
      out.push_back({"host-function", "__host__ without __device__ is host code" + at_line(code, pos)});
    }
  }
  for (std::size_t pos : find_words(with_literals, "extern")) {
    const std::string_view next = next_token(with_literals, pos + 6);
    if (next != "\"C\"" && next != "__shared__") {
      out.push_back({"extern", "extern is allowed only as extern \"C\" or extern __shared__" + at_line(with_literals, pos)});
    }
  }
  // String literals: in device code these are inline PTX templates.
  for (std::size_t i = 0; i < with_literals.size(); ++i) {
    if (with_literals[i] != '"') continue;
    const std::size_t end = with_literals.find('"', i + 1);
    if (end == std::string::npos) break;
    const std::string_view literal(with_literals.data() + i + 1, end - i - 1);
    for (const auto& d : kDeniedAsm) {
      const bool word = d.name.front() != '%' && d.name.front() != '.';
      const bool hit = word ? !find_words(literal, d.name).empty() : literal.find(d.name) != std::string_view::npos;
      if (hit) out.push_back({std::string(d.rule), std::string(d.why) + at_line(with_literals, i)});
    }
    i = end;
  }
  check_file_scope_variables(code, out);
  return out;
}

std::string allowed_includes_text() {
  std::string out;
  for (const auto h : kAllowedIncludes) out += (out.empty() ? "" : ", ") + std::string(h);
  return out;
}

std::vector<std::string_view> allowed_includes() { return {kAllowedIncludes.begin(), kAllowedIncludes.end()}; }

std::string describe(const std::vector<ScreenViolation>& violations) {
  std::string text;
  for (const auto& v : violations) {
    if (!text.empty()) text += "; ";
    text += v.rule + ": " + v.detail;
  }
  return text;
}

}  // namespace ptxevo::agents
