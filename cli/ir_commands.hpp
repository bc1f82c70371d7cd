// `ptxevo ir print|stats|verify`: each returns the process exit code.
#pragma once

#include <ostream>
#include <string>

namespace ptxevo::cli {

struct IrOptions {
  std::string file;
  bool json = false;
  bool no_verify = false;  // print: skip ir::verify (on by default, as LLVM's tools verify what they read)
};

int run_ir_print(const IrOptions& o, std::ostream& out, std::ostream& err);
int run_ir_stats(const IrOptions& o, std::ostream& out, std::ostream& err);
int run_ir_verify(const IrOptions& o, std::ostream& out, std::ostream& err);

}  // namespace ptxevo::cli
