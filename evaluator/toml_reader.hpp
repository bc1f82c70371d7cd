// Reading TOML files with the spec's error discipline, shared by the spec and the op
// declarations: every value is validated as it is converted, and a problem throws TomlFailure
// carrying FILE:LINE:COL and what was expected. The readers turn it into their result type, so
// their callers never see a throw.
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "evaluator/spec_error.hpp"

namespace ptxevo::evaluator {

struct TomlFailure {
  SpecError error;
};

std::string join(const std::vector<std::string>& xs);  // "a, b, c"
const char* type_name(const toml::node& n);           // "a table", "an integer", ...
bool is_identifier(std::string_view s);                // a C identifier
std::string position(const toml::node& n);             // "line L, column C"
std::string number_to_string(double v);                // shortest round-trip form
// Table entries in the order the file lists them (toml++ orders tables by key).
std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(const toml::table& t);

// The whole file as text; false and *why when it cannot be read.
bool read_text_file(const std::string& path, std::string* text, std::string* why);

// Typed access that fails with the node's position.
class TomlReader {
 public:
  explicit TomlReader(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void fail(const toml::source_position& at, std::string message) const;
  [[noreturn]] void fail(const toml::node& n, std::string message) const;
  // Rejects keys outside `allowed`, naming the first one in the file (a typo must not be ignored).
  void check_keys(const toml::table& t, std::initializer_list<std::string_view> allowed, const std::string& where) const;
  const toml::node& required(const toml::table& t, std::string_view key, const std::string& where) const;
  const toml::table& table_of(const toml::node& n, const std::string& what) const;
  const toml::array& array_of(const toml::node& n, const std::string& what) const;
  std::string string_of(const toml::node& n, const std::string& what) const;
  std::string nonempty_string_of(const toml::node& n, const std::string& what) const;
  std::string identifier_of(const toml::node& n, const std::string& what) const;
  bool bool_of(const toml::node& n, const std::string& what) const;
  std::int64_t int_of(const toml::node& n, const std::string& what) const;
  std::int64_t positive_int_of(const toml::node& n, const std::string& what) const;
  double number_of(const toml::node& n, const std::string& what) const;  // finite; integers accepted
  double positive_number_of(const toml::node& n, const std::string& what) const;
  const std::string& path() const { return path_; }

 protected:
  std::string path_;
};

}  // namespace ptxevo::evaluator
