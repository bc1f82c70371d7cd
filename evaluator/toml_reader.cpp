#include "evaluator/toml_reader.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ptxevo::evaluator {

std::string SpecError::format() const {
  return file + ":" + std::to_string(line) + ":" + std::to_string(col) + ": error: " + message;
}

std::string join(const std::vector<std::string>& xs) {
  std::string out;
  for (const auto& x : xs) out += (out.empty() ? "" : ", ") + x;
  return out;
}

const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a floating-point number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

bool is_identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

namespace {
bool before(const toml::source_position& a, const toml::source_position& b) {
  return a.line != b.line ? a.line < b.line : a.column < b.column;
}
}  // namespace

std::string position(const toml::node& n) {
  return "line " + std::to_string(n.source().begin.line) + ", column " + std::to_string(n.source().begin.column);
}

std::string number_to_string(double v) {
  std::array<char, 64> buf{};
  auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return std::string(buf.data(), end);
}

std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(const toml::table& t) {
  std::vector<std::pair<const toml::key*, const toml::node*>> out;
  for (const auto& [k, v] : t) out.emplace_back(&k, &v);
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return before(a.first->source().begin, b.first->source().begin); });
  return out;
}

bool read_text_file(const std::string& path, std::string* text, std::string* why) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    *why = "no such file";
    return false;
  }
  if (std::filesystem::is_directory(path, ec)) {
    *why = "it is a directory";
    return false;
  }
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *why = errno ? std::strerror(errno) : "cannot open it";
    return false;
  }
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) {
    *why = "read error";
    return false;
  }
  *text = s.str();
  return true;
}

void TomlReader::fail(const toml::source_position& at, std::string message) const {
  throw TomlFailure{SpecError{path_, at.line, at.column, std::move(message)}};
}

void TomlReader::fail(const toml::node& n, std::string message) const { fail(n.source().begin, std::move(message)); }

void TomlReader::check_keys(const toml::table& t, std::initializer_list<std::string_view> allowed,
                            const std::string& where) const {
  for (const auto& [k, v] : in_file_order(t)) {
    if (std::find(allowed.begin(), allowed.end(), k->str()) != allowed.end()) continue;
    std::vector<std::string> names(allowed.begin(), allowed.end());
    fail(k->source().begin, "unknown key '" + std::string(k->str()) + "' in " + where + "; expected one of: " + join(names));
  }
}

const toml::node& TomlReader::required(const toml::table& t, std::string_view key, const std::string& where) const {
  if (const toml::node* n = t.get(key)) return *n;
  fail(t, "missing required key '" + std::string(key) + "' in " + where);
}

const toml::table& TomlReader::table_of(const toml::node& n, const std::string& what) const {
  if (const auto* t = n.as_table()) return *t;
  fail(n, what + " must be a table, got " + type_name(n));
}

const toml::array& TomlReader::array_of(const toml::node& n, const std::string& what) const {
  if (const auto* a = n.as_array()) return *a;
  fail(n, what + " must be an array, got " + type_name(n));
}

std::string TomlReader::string_of(const toml::node& n, const std::string& what) const {
  if (const auto* s = n.as_string()) return s->get();
  fail(n, what + " must be a string, got " + type_name(n));
}

std::string TomlReader::nonempty_string_of(const toml::node& n, const std::string& what) const {
  std::string s = string_of(n, what);
  if (s.empty()) fail(n, what + " must not be empty");
  return s;
}

std::string TomlReader::identifier_of(const toml::node& n, const std::string& what) const {
  std::string s = string_of(n, what);
  if (!is_identifier(s)) fail(n, what + " must be a C identifier (letters, digits and '_'), got '" + s + "'");
  return s;
}

bool TomlReader::bool_of(const toml::node& n, const std::string& what) const {
  if (const auto* b = n.as_boolean()) return b->get();
  fail(n, what + " must be true or false, got " + type_name(n));
}

std::int64_t TomlReader::int_of(const toml::node& n, const std::string& what) const {
  if (const auto* i = n.as_integer()) return i->get();
  fail(n, what + " must be an integer, got " + type_name(n));
}

std::int64_t TomlReader::positive_int_of(const toml::node& n, const std::string& what) const {
  const auto* i = n.as_integer();
  if (!i) fail(n, what + " must be a positive integer, got " + type_name(n));
  if (i->get() <= 0) fail(n, what + " must be a positive integer, got " + std::to_string(i->get()));
  return i->get();
}

double TomlReader::number_of(const toml::node& n, const std::string& what) const {
  double v = 0;
  if (const auto* f = n.as_floating_point()) v = f->get();
  else if (const auto* i = n.as_integer()) v = static_cast<double>(i->get());
  else fail(n, what + " must be a number, got " + type_name(n));
  if (!std::isfinite(v)) fail(n, what + " must be finite, got " + number_to_string(v));
  return v;
}

double TomlReader::positive_number_of(const toml::node& n, const std::string& what) const {
  double v = 0;
  if (const auto* f = n.as_floating_point()) v = f->get();
  else if (const auto* i = n.as_integer()) v = static_cast<double>(i->get());
  else fail(n, what + " must be a positive number, got " + type_name(n));
  if (!(v > 0) || !std::isfinite(v)) fail(n, what + " must be a positive finite number, got " + number_to_string(v));
  return v;
}

}  // namespace ptxevo::evaluator
