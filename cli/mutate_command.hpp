// `ptxevo mutate`: list the mutator passes, or apply one pass to a PTX file and print the result.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ptxevo::cli {

// One pass name per line, sorted.
int run_mutate_list(std::ostream& out);

// Parses FILE, verifies it (unless `verify` is false), applies PASS with PARAMS ("key=value"
// each) and prints the resulting PTX to `out`. Exit codes: 0 applied; 1 refused (the reason on
// `err`), parse or verifier error (FILE:LINE:COL), unreadable file; 2 unknown pass (the known
// ones listed on `err`) or malformed parameters.
int run_mutate(const std::string& file, const std::string& pass, const std::vector<std::string>& params, bool verify,
               std::ostream& out, std::ostream& err);

}  // namespace ptxevo::cli
