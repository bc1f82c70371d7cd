// Where the CUDA toolkit lives. Defaults come from the build; CUDA_HOME overrides at run time.
#pragma once

#include <string>

namespace ptxevo::evaluator {

std::string cuda_home();
std::string ptxas_path();
std::string cuda_include_dir();

}  // namespace ptxevo::evaluator
