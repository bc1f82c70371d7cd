#include "evaluator/toolkit.hpp"

#include <cstdlib>

namespace ptxevo::evaluator {

std::string cuda_home() {
  if (const char* e = std::getenv("CUDA_HOME"); e && *e) return e;
  return PTXEVO_CUDA_HOME;
}
std::string ptxas_path() { return cuda_home() + "/bin/ptxas"; }
std::string cuda_include_dir() { return cuda_home() + "/include"; }

}  // namespace ptxevo::evaluator
