// CUDA C++ -> PTX through NVRTC (device code only: NVRTC has no host compiler).
#pragma once

#include <string>
#include <vector>

namespace ptxevo::evaluator {

struct NvrtcResult {
  bool ok = false;
  std::string ptx;
  std::string log;  // compiler messages, also on success (warnings)
};

// `arch` like "sm_90a"; `options` are passed through (e.g. "-lineinfo", "-G"). The CUDA include
// directory and --std=c++17 are added. Thread-safe: one NVRTC program per call.
NvrtcResult compile_to_ptx(const std::string& source, const std::string& name, const std::string& arch,
                           const std::vector<std::string>& options);

std::string nvrtc_version();

}  // namespace ptxevo::evaluator
