// PTX text -> Module. Never throws for bad input: the error comes back with line and column.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ir/diagnostic.hpp"
#include "ir/module.hpp"

namespace ptxevo::ir {

struct ParseResult {
  std::optional<Module> module;
  std::optional<Diagnostic> error;
  bool ok() const { return module.has_value(); }
};

ParseResult parse_ptx(std::string_view text);

// True for %tid.x, %clock64, %envreg3, ... (names ptxas predefines).
bool is_special_register(std::string_view name);

}  // namespace ptxevo::ir
