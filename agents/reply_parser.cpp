#include "agents/reply_parser.hpp"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

namespace ptxevo::agents {
namespace {

ReplyError err(std::string code, std::string detail) { return ReplyError{std::move(code), std::move(detail)}; }

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\n");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\n");
  return std::string(s.substr(b, e - b + 1));
}

std::size_t count_occurrences(std::string_view text, std::string_view needle) {
  std::size_t n = 0;
  for (auto pos = text.find(needle); pos != std::string_view::npos; pos = text.find(needle, pos + 1)) ++n;
  return n;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The text between <TAG> and </TAG>, in any letter case (models write <name> as often as
// <NAME>); nullopt when the tag is absent. Twice is ambiguous.
std::variant<std::optional<std::string>, ReplyError> section(std::string_view text, std::string_view tag) {
  const std::string folded = lower(text);  // same length: positions carry over
  const std::string open = "<" + lower(tag) + ">";
  const std::string close = "</" + lower(tag) + ">";
  const std::string shown = "<" + std::string(tag) + ">";
  const std::size_t opens = count_occurrences(folded, open);
  if (opens == 0) return std::optional<std::string>();
  if (opens > 1) return err("E_AMBIGUOUS", shown + " appears " + std::to_string(opens) + " times");
  const auto b = folded.find(open) + open.size();
  const auto e = folded.find(close, b);
  if (e == std::string::npos) return err("E_NO_ENVELOPE", shown + " is never closed by </" + std::string(tag) + ">");
  return std::optional<std::string>(std::string(text.substr(b, e - b)));
}

struct Fence {
  std::string info;
  std::string code;
};

// Every ``` fenced block in `text`.
std::vector<Fence> fences(std::string_view text) {
  std::vector<Fence> out;
  std::size_t pos = 0;
  while (true) {
    const auto open = text.find("```", pos);
    if (open == std::string_view::npos) break;
    const auto line_end = text.find('\n', open);
    if (line_end == std::string_view::npos) break;
    const auto close = text.find("\n```", line_end);
    if (close == std::string_view::npos) {
      out.push_back({trim(text.substr(open + 3, line_end - open - 3)), "\x01unterminated"});
      break;
    }
    out.push_back({trim(text.substr(open + 3, line_end - open - 3)),
                   std::string(text.substr(line_end + 1, close - line_end))});
    const auto after = text.find('\n', close + 4);
    pos = after == std::string_view::npos ? text.size() : after;
  }
  return out;
}

bool code_info(const std::string& info) {
  return info.empty() || info == "cuda" || info == "cu" || info == "cuh" || info == "cpp" || info == "c++";
}

std::variant<std::string, ReplyError> one_fence(std::string_view text, bool lenient) {
  const auto fs = fences(text);
  if (fs.empty()) return err("E_NO_CODE", "no fenced code block");
  if (fs.size() > 1) return err("E_AMBIGUOUS", std::to_string(fs.size()) + " fenced code blocks; exactly one is allowed");
  if (fs.front().code == "\x01unterminated") return err("E_NO_CODE", "the code block is never closed");
  if (!code_info(fs.front().info) || (lenient && fs.front().info != "cuda" && fs.front().info != "cu")) {
    return err("E_NO_CODE", "the code block is tagged '" + fs.front().info + "', not cuda");
  }
  return fs.front().code;
}

std::variant<std::vector<SearchReplace>, ReplyError> parse_edit_blocks(std::string_view text) {
  static constexpr std::string_view kSearch = "<<<<<<< SEARCH\n";
  static constexpr std::string_view kSplit = "\n=======\n";
  static constexpr std::string_view kReplace = "\n>>>>>>> REPLACE";
  std::vector<SearchReplace> out;
  std::size_t pos = 0;
  while (true) {
    const auto s = text.find(kSearch, pos);
    if (s == std::string_view::npos) break;
    const auto body = s + kSearch.size();
    auto split = text.find(kSplit, body);
    // An empty REPLACE section: the divider follows the search text directly.
    const auto end = text.find(kReplace, body);
    if (split == std::string_view::npos || end == std::string_view::npos || split > end) {
      return err("E_EDIT_SYNTAX", "edit block " + std::to_string(out.size() + 1) +
                                      " lacks its ======= divider or >>>>>>> REPLACE line");
    }
    SearchReplace e;
    e.search = std::string(text.substr(body, split - body)) + "\n";
    const auto rbegin = split + kSplit.size();
    e.replace = rbegin > end ? std::string() : std::string(text.substr(rbegin, end - rbegin)) + "\n";
    if (rbegin == end + 1) e.replace.clear();
    if (trim(e.search).empty()) return err("E_EDIT_SYNTAX", "edit block " + std::to_string(out.size() + 1) + " has an empty SEARCH");
    out.push_back(std::move(e));
    pos = end + kReplace.size();
  }
  if (out.empty()) return err("E_EDIT_SYNTAX", "<EDITS> holds no <<<<<<< SEARCH block");
  return out;
}

std::variant<std::map<std::string, std::string>, ReplyError> parse_knobs(std::string_view text, const KnobDomains& domains) {
  std::string json_text = trim(text);
  if (json_text.rfind("```", 0) == 0) {  // a fenced JSON object is still one object
    const auto fs = fences(json_text);
    if (fs.size() != 1) return err("E_KNOB_INVALID", "<KNOBS> must hold one JSON object");
    json_text = fs.front().code;
  }
  const auto parsed = nlohmann::json::parse(json_text, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object() || parsed.empty()) {
    return err("E_KNOB_INVALID", "<KNOBS> is not one non-empty flat JSON object");
  }
  std::map<std::string, std::string> knobs;
  for (const auto& [name, value] : parsed.items()) {
    std::string text_value;
    if (value.is_string()) text_value = value.get<std::string>();
    else if (value.is_number_integer() || value.is_boolean()) text_value = value.dump();
    else return err("E_KNOB_INVALID", "knob " + name + " must be a string or an integer");
    const auto domain = domains.find(name);
    if (domain == domains.end()) return err("E_KNOB_INVALID", "knob " + name + " is not declared by the seed");
    if (std::find(domain->second.begin(), domain->second.end(), text_value) == domain->second.end()) {
      return err("E_KNOB_INVALID", "knob " + name + " = " + text_value + " is outside its declared values");
    }
    knobs[name] = text_value;
  }
  return knobs;
}

}  // namespace

std::string_view to_string(PatchKind kind) {
  switch (kind) {
    case PatchKind::Source: return "source";
    case PatchKind::Edits: return "edits";
    case PatchKind::Knobs: return "knobs";
  }
  return "unknown";
}

std::string normalize_reply(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.remove_prefix(3);
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
    out += text[i];
  }
  // Reasoning text is never read for code, even a decoy fence inside it.
  while (true) {
    const auto b = out.find("<think>");
    if (b == std::string::npos) break;
    const auto e = out.find("</think>", b);
    out.erase(b, e == std::string::npos ? std::string::npos : e + 8 - b);
  }
  return out;
}

namespace {

// Lines of `text`, each with the byte offset where it starts (the last without a newline too).
std::vector<std::pair<std::size_t, std::string>> lines_of(std::string_view text) {
  std::vector<std::pair<std::size_t, std::string>> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto nl = text.find('\n', pos);
    const auto end = nl == std::string_view::npos ? text.size() : nl;
    out.emplace_back(pos, std::string(text.substr(pos, end - pos)));
    pos = end + 1;
  }
  return out;
}

// Where `search` matches `text` line for line with leading and trailing whitespace ignored
// (models re-indent what they copy): the byte ranges of every match.
std::vector<std::pair<std::size_t, std::size_t>> loose_matches(std::string_view text, std::string_view search) {
  const auto t = lines_of(text), s = lines_of(search);
  std::vector<std::pair<std::size_t, std::size_t>> out;
  if (s.empty()) return out;
  for (std::size_t i = 0; i + s.size() <= t.size(); ++i) {
    bool same = true;
    for (std::size_t j = 0; same && j < s.size(); ++j) same = trim(t[i + j].second) == trim(s[j].second);
    if (!same) continue;
    const auto& last = t[i + s.size() - 1];
    const std::size_t end = std::min(text.size(), last.first + last.second.size() + 1);
    out.emplace_back(t[i].first, end);
  }
  return out;
}

}  // namespace

std::variant<std::string, ReplyError> apply_edits(std::string_view source, const std::vector<SearchReplace>& edits) {
  std::string current(source);
  for (std::size_t i = 0; i < edits.size(); ++i) {
    const auto& e = edits[i];
    const std::size_t n = count_occurrences(current, e.search);
    const std::string first_line = e.search.substr(0, e.search.find('\n'));
    if (n == 0) {
      // Not verbatim: a unique match with indentation ignored is as safe (C++ does not read it).
      const auto loose = loose_matches(current, e.search);
      if (loose.size() == 1) {
        current.replace(loose[0].first, loose[0].second - loose[0].first, e.replace);
        continue;
      }
      if (loose.size() > 1) {
        return err("E_EDIT_MULTI_MATCH", "edit " + std::to_string(i + 1) + ": SEARCH text starting '" + first_line +
                                             "' occurs " + std::to_string(loose.size()) +
                                             " times (indentation ignored); include more lines to make it unique");
      }
      return err("E_EDIT_NO_MATCH", "edit " + std::to_string(i + 1) + ": SEARCH text starting '" + first_line +
                                        "' does not occur in the parent source, even with indentation ignored (copy it exactly)");
    }
    if (n > 1) {
      return err("E_EDIT_MULTI_MATCH", "edit " + std::to_string(i + 1) + ": SEARCH text starting '" + first_line +
                                           "' occurs " + std::to_string(n) + " times; include more lines to make it unique");
    }
    current.replace(current.find(e.search), e.search.size(), e.replace);
  }
  return current;
}

std::variant<ParsedReply, ReplyError> parse_reply(std::string_view raw, std::string_view parent_source,
                                                  const KnobDomains& knobs, const ReplyLimits& limits) {
  if (raw.size() > limits.max_reply_bytes) {
    return err("E_TOO_LARGE", "reply of " + std::to_string(raw.size()) + " bytes exceeds " +
                                  std::to_string(limits.max_reply_bytes));
  }
  if (raw.find('\0') != std::string_view::npos) return err("E_NUL", "reply contains a NUL byte");
  const std::string text = normalize_reply(raw);
  if (trim(text).empty()) return err("E_EMPTY", "the reply has no text outside reasoning");

  ParsedReply reply;
  std::optional<std::string> body, edits, knob_text;
  for (auto [tag, slot] : {std::pair{"BODY", &body}, std::pair{"EDITS", &edits}, std::pair{"KNOBS", &knob_text}}) {
    auto s = section(text, tag);
    if (auto* e = std::get_if<ReplyError>(&s)) return *e;
    *slot = std::get<std::optional<std::string>>(std::move(s));
  }
  for (auto [tag, slot] : {std::pair{"NAME", &reply.name}, std::pair{"RATIONALE", &reply.rationale}}) {
    auto s = section(text, tag);
    if (auto* e = std::get_if<ReplyError>(&s)) return *e;
    if (auto v = std::get<std::optional<std::string>>(std::move(s))) *slot = trim(*v);
  }
  if (reply.rationale.size() > 1024) reply.rationale.resize(1024);
  if (reply.name.size() > 64) reply.name.resize(64);
  const int given = (body ? 1 : 0) + (edits ? 1 : 0) + (knob_text ? 1 : 0);
  if (given > 1) return err("E_AMBIGUOUS", "more than one of <BODY>, <EDITS>, <KNOBS>");
  if (given == 0 && text.find("<<<<<<< SEARCH\n") != std::string::npos) {
    edits = text;  // bare SEARCH/REPLACE blocks read as <EDITS>, as a bare cuda fence reads as <BODY>
  } else if (given == 0) {
    // Lenient only for exactly one fence tagged cuda/cu and nothing else that looks like code.
    auto code = one_fence(text, /*lenient=*/true);
    if (auto* e = std::get_if<ReplyError>(&code)) {
      return err(e->code == "E_AMBIGUOUS" ? e->code : "E_NO_ENVELOPE",
                 "no <BODY>, <EDITS> or <KNOBS> section, no SEARCH/REPLACE block and no single ```cuda fence (" +
                     e->detail + ")");
    }
    body = "```cuda\n" + std::get<std::string>(code) + "```\n";
  }
  if (body) {
    auto code = one_fence(*body, false);
    if (auto* e = std::get_if<ReplyError>(&code)) return *e;
    reply.kind = PatchKind::Source;
    reply.source = std::get<std::string>(std::move(code));
  } else if (edits) {
    auto blocks = parse_edit_blocks(*edits);
    if (auto* e = std::get_if<ReplyError>(&blocks)) return *e;
    reply.edits = std::get<std::vector<SearchReplace>>(std::move(blocks));
    if (reply.edits.size() > limits.max_edits) {
      return err("E_TOO_LARGE", std::to_string(reply.edits.size()) + " edit blocks exceed " + std::to_string(limits.max_edits));
    }
    auto applied = apply_edits(parent_source, reply.edits);
    if (auto* e = std::get_if<ReplyError>(&applied)) return *e;
    reply.kind = PatchKind::Edits;
    reply.source = std::get<std::string>(std::move(applied));
  } else {
    auto parsed = parse_knobs(*knob_text, knobs);
    if (auto* e = std::get_if<ReplyError>(&parsed)) return *e;
    reply.kind = PatchKind::Knobs;
    reply.knobs = std::get<std::map<std::string, std::string>>(std::move(parsed));
    return reply;
  }
  if (trim(reply.source).empty()) return err("E_NO_CODE", "the code block is empty");
  const auto lines = static_cast<std::size_t>(std::count(reply.source.begin(), reply.source.end(), '\n'));
  if (reply.source.size() > limits.max_source_bytes || lines > limits.max_source_lines) {
    return err("E_TOO_LARGE", "source of " + std::to_string(reply.source.size()) + " bytes / " + std::to_string(lines) +
                                  " lines exceeds the cap of " + std::to_string(limits.max_source_bytes) + " / " +
                                  std::to_string(limits.max_source_lines));
  }
  return reply;
}

std::variant<Plan, ReplyError> parse_plan(std::string_view raw) {
  const std::string text = normalize_reply(raw);
  // The first balanced {...} that parses as an object with a strategy.
  for (std::size_t b = text.find('{'); b != std::string::npos; b = text.find('{', b + 1)) {
    int depth = 0;
    bool in_string = false;
    for (std::size_t i = b; i < text.size(); ++i) {
      const char c = text[i];
      if (in_string) {
        if (c == '\\') ++i;
        else if (c == '"') in_string = false;
        continue;
      }
      if (c == '"') in_string = true;
      if (c == '{') ++depth;
      if (c == '}' && --depth == 0) {
        const auto j = nlohmann::json::parse(text.substr(b, i - b + 1), nullptr, false);
        if (j.is_object() && j.contains("strategy") && j["strategy"].is_string() &&
            !trim(j["strategy"].get<std::string>()).empty()) {
          Plan plan;
          plan.strategy = trim(j["strategy"].get<std::string>()).substr(0, 1024);
          if (j.contains("hypothesis") && j["hypothesis"].is_string()) {
            plan.hypothesis = j["hypothesis"].get<std::string>().substr(0, 1024);
          }
          return plan;
        }
        break;
      }
    }
  }
  return err("E_PLAN_INVALID", "no JSON object with a non-empty \"strategy\" in the planner's reply");
}

}  // namespace ptxevo::agents
