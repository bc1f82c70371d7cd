// Runs an external tool (ptxas) and captures its output, without a shell.
#pragma once

#include <string>
#include <vector>

namespace ptxevo::evaluator {

struct ProcessResult {
  int exit_code = -1;   // -1 when the process could not be started or was killed by a signal
  std::string output;   // stdout and stderr, interleaved
};

// argv[0] is the program path. Never throws for a failing program; throws std::runtime_error
// only when the process cannot be created at all (no pipe, no fork).
ProcessResult run_process(const std::vector<std::string>& argv);

}  // namespace ptxevo::evaluator
