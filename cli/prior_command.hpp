// `ptxevo prior [--db FILE]`: what the learned prior believes, from a trace database: the
// campaigns that feed it per op family, the operator posterior (mean hit rate and evidence per
// operator, as the next campaign will start from it), and the cost model's held-out rank
// correlation within each shape (forward chaining) beside the analytic roofline guess's.
#pragma once

#include <ostream>
#include <string>

namespace ptxevo::cli {

struct PriorOptions {
  std::string db;  // required
  int top = 12;    // operators listed per key
};

// 0 on success, 2 when the database is missing, 1 when it cannot be read.
int run_prior(const PriorOptions& o, std::ostream& out, std::ostream& err);

}  // namespace ptxevo::cli
