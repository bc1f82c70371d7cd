#include "evaluator/template_source.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace ptxevo::evaluator {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxDepth = 16;

std::optional<std::string> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Expander {
  std::vector<std::string> parts;
  std::vector<fs::path> stack;  // the files being expanded, outermost first
  std::string why;

  bool expand(const fs::path& file, const std::string& text, std::string& out) {
    // Only a whole-line directive counts: `#  include "x"` with nothing but a comment after it.
    static const std::regex directive(R"re(^[ \t]*#[ \t]*include[ \t]*"([^"]+)"[ \t]*(//.*)?\r?$)re");
    std::size_t pos = 0;
    int line_no = 0;
    while (pos < text.size()) {
      const std::size_t end = text.find('\n', pos);
      const std::size_t stop = end == std::string::npos ? text.size() : end + 1;
      const std::string line = text.substr(pos, (end == std::string::npos ? text.size() : end) - pos);
      ++line_no;
      std::smatch m;
      fs::path part;
      if (line.find("include") != std::string::npos && std::regex_match(line, m, directive))
        part = (file.parent_path() / m[1].str()).lexically_normal();
      std::error_code ec;
      if (part.empty() || !fs::is_regular_file(part, ec)) {
        out.append(text, pos, stop - pos);
        pos = stop;
        continue;
      }
      const std::string where = file.string() + ":" + std::to_string(line_no) + ": ";
      if (std::find(stack.begin(), stack.end(), part) != stack.end()) {
        why = where + "include cycle: ";
        for (const auto& f : stack) why += f.filename().string() + " -> ";
        why += part.filename().string();
        return false;
      }
      if (static_cast<int>(stack.size()) >= kMaxDepth) {
        why = where + "includes nest deeper than " + std::to_string(kMaxDepth) + " files";
        return false;
      }
      const auto body = read_file(part);
      if (!body) {
        why = where + "cannot read " + part.string();
        return false;
      }
      if (std::find(parts.begin(), parts.end(), part.string()) == parts.end()) parts.push_back(part.string());
      stack.push_back(part);
      if (!expand(part, *body, out)) return false;
      stack.pop_back();
      // A part whose last line has no newline still ends the directive's line.
      if (!body->empty() && body->back() != '\n' && end != std::string::npos) out += '\n';
      pos = stop;
    }
    return true;
  }
};

}  // namespace

std::optional<TemplateSource> read_template(const std::string& path, std::string* why) {
  const fs::path top = fs::path(path).lexically_normal();
  const auto text = read_file(top);
  if (!text) {
    if (why) *why = "cannot read " + path;
    return std::nullopt;
  }
  Expander e;
  e.stack.push_back(top);
  TemplateSource r;
  r.text.reserve(text->size());
  if (!e.expand(top, *text, r.text)) {
    if (why) *why = e.why;
    return std::nullopt;
  }
  r.parts = std::move(e.parts);
  return r;
}

}  // namespace ptxevo::evaluator
