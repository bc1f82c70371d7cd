#include "evaluator/nvrtc_compiler.hpp"

#include <nvrtc.h>

#include <filesystem>

#include "evaluator/toolkit.hpp"

namespace ptxevo::evaluator {

NvrtcResult compile_to_ptx(const std::string& source, const std::string& name, const std::string& arch,
                           const std::vector<std::string>& options) {
  NvrtcResult r;
  nvrtcProgram prog = nullptr;
  nvrtcResult rc = nvrtcCreateProgram(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (rc != NVRTC_SUCCESS) {
    r.log = std::string("nvrtcCreateProgram failed: ") + nvrtcGetErrorString(rc);
    return r;
  }
  std::vector<std::string> opts = {"--gpu-architecture=" + arch, "--std=c++17", "-I" + cuda_include_dir()};
  // CUDA 13 keeps libcu++ (<cuda/std/...>, <cuda/barrier>) under include/cccl; nvcc adds it
  // itself, NVRTC does not.
  if (const std::string cccl = cuda_include_dir() + "/cccl"; std::filesystem::is_directory(cccl)) opts.push_back("-I" + cccl);
  opts.insert(opts.end(), options.begin(), options.end());
  std::vector<const char*> copts;
  for (const auto& o : opts) copts.push_back(o.c_str());
  rc = nvrtcCompileProgram(prog, static_cast<int>(copts.size()), copts.data());
  std::size_t log_size = 0;
  if (nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    r.log.resize(log_size);
    nvrtcGetProgramLog(prog, r.log.data());
    r.log.resize(log_size - 1);
  }
  if (rc == NVRTC_SUCCESS) {
    std::size_t ptx_size = 0;
    nvrtcGetPTXSize(prog, &ptx_size);
    r.ptx.resize(ptx_size);
    nvrtcGetPTX(prog, r.ptx.data());
    if (!r.ptx.empty() && r.ptx.back() == '\0') r.ptx.pop_back();
    r.ok = true;
  } else if (r.log.empty()) {
    r.log = nvrtcGetErrorString(rc);
  }
  nvrtcDestroyProgram(&prog);
  return r;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

}  // namespace ptxevo::evaluator
