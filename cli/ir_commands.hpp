// `ptxevo ir print|stats|verify`: each returns the process exit code.
#pragma once

#include <ostream>
#include <string>

namespace ptxevo::cli {

struct IrOptions {
  std::string file;
  bool json = false;
};

int run_ir_print(const IrOptions& o, std::ostream& out, std::ostream& err);
int run_ir_stats(const IrOptions& o, std::ostream& out, std::ostream& err);
int run_ir_verify(const IrOptions& o, std::ostream& out, std::ostream& err);

}  // namespace ptxevo::cli
