// An error in a file the user wrote (a spec, an op declaration): where and what.
#pragma once

#include <cstdint>
#include <string>

namespace ptxevo::evaluator {

struct SpecError {
  std::string file;
  std::uint32_t line = 0, col = 0;
  std::string message;
  std::string format() const;  // FILE:LINE:COL: error: MESSAGE
};

}  // namespace ptxevo::evaluator
