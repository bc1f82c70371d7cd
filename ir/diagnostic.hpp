// Errors with a source position, formatted the way compilers print them.
#pragma once

#include <stdexcept>
#include <string>

#include "ir/module.hpp"

namespace ptxevo::ir {

class ParseError : public std::runtime_error {
 public:
  ParseError(SourceLoc loc, const std::string& message)
      : std::runtime_error(message), loc_(loc) {}
  SourceLoc loc() const { return loc_; }

 private:
  SourceLoc loc_;
};

struct Diagnostic {
  SourceLoc loc;
  std::string message;
  // FILE:LINE:COL: error: MESSAGE
  std::string format(const std::string& file) const {
    return file + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.col) + ": error: " + message;
  }
};

}  // namespace ptxevo::ir
