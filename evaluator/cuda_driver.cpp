#include "evaluator/cuda_driver.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <string_view>

namespace ptxevo::evaluator {

std::string CudaDriver::error_text(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName) cuGetErrorName(r, &name);
  if (cuGetErrorString) cuGetErrorString(r, &text);
  std::string s = name ? name : "CUDA error " + std::to_string(static_cast<int>(r));
  if (text) s += std::string(": ") + text;
  return s;
}

namespace {

struct Holder {
  CudaDriver api;
  void* handle = nullptr;
  ~Holder() {
    if (handle) dlclose(handle);
  }
};

}  // namespace

DriverLoad load_cuda_driver() {
  DriverLoad out;
  const char* env = std::getenv("PTXEVO_LIBCUDA");
  const char* lib = env && *env ? env : "libcuda.so.1";
  auto h = std::make_shared<Holder>();
  h->handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h->handle) {
    out.reason = std::string("no CUDA driver (") + lib + " not loadable: " + dlerror() + ")";
    return out;
  }
  using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get_proc = reinterpret_cast<GetProc>(dlsym(h->handle, "cuGetProcAddress_v2"));
  if (!get_proc) {
    out.reason = std::string(lib) + " has no cuGetProcAddress_v2: the driver is older than CUDA 12";
    return out;
  }
  std::string missing;
  // cuGetProcAddress hands out the entry point matching the ABI this code was compiled for.
  // Some entry points changed signature while cuda.h kept the old declaration: CUDA 13's
  // cuCtxSynchronize and cuCtxGetDevice take a context, the header's do not. Ask for the version matching
  // the declaration this code calls through.
  auto version_for = [](const char* name) {
    const std::string_view n(name);
    return n == "cuCtxSynchronize" || n == "cuCtxGetDevice" ? 2000 : CUDA_VERSION;
  };
  auto resolve = [&](const char* name, auto& fn) {
    void* p = nullptr;
    CUdriverProcAddressQueryResult status{};
    if (get_proc(name, &p, version_for(name), CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS || !p) {
      missing += std::string(missing.empty() ? "" : ", ") + name;
      return;
    }
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  CudaDriver& d = h->api;
#define PTXEVO_RESOLVE(name) resolve(#name, d.name)
  PTXEVO_RESOLVE(cuInit);
  PTXEVO_RESOLVE(cuDriverGetVersion);
  PTXEVO_RESOLVE(cuGetErrorString);
  PTXEVO_RESOLVE(cuGetErrorName);
  PTXEVO_RESOLVE(cuDeviceGetCount);
  PTXEVO_RESOLVE(cuDeviceGet);
  PTXEVO_RESOLVE(cuDeviceGetName);
  PTXEVO_RESOLVE(cuDeviceGetAttribute);
  PTXEVO_RESOLVE(cuDeviceTotalMem);
  PTXEVO_RESOLVE(cuDevicePrimaryCtxRetain);
  PTXEVO_RESOLVE(cuDevicePrimaryCtxRelease);
  PTXEVO_RESOLVE(cuCtxSetCurrent);
  PTXEVO_RESOLVE(cuCtxSynchronize);
  PTXEVO_RESOLVE(cuCtxSetLimit);
  PTXEVO_RESOLVE(cuModuleLoadData);
  PTXEVO_RESOLVE(cuModuleUnload);
  PTXEVO_RESOLVE(cuModuleGetFunction);
  PTXEVO_RESOLVE(cuModuleGetGlobal);
  PTXEVO_RESOLVE(cuFuncGetAttribute);
  PTXEVO_RESOLVE(cuFuncSetAttribute);
  PTXEVO_RESOLVE(cuLaunchKernel);
  PTXEVO_RESOLVE(cuLaunchKernelEx);
  PTXEVO_RESOLVE(cuCtxGetDevice);
  PTXEVO_RESOLVE(cuMemAddressReserve);
  PTXEVO_RESOLVE(cuMemAddressFree);
  PTXEVO_RESOLVE(cuMemCreate);
  PTXEVO_RESOLVE(cuMemRelease);
  PTXEVO_RESOLVE(cuMemMap);
  PTXEVO_RESOLVE(cuMemUnmap);
  PTXEVO_RESOLVE(cuMemSetAccess);
  PTXEVO_RESOLVE(cuMemGetAllocationGranularity);
  PTXEVO_RESOLVE(cuMemAlloc);
  PTXEVO_RESOLVE(cuMemFree);
  PTXEVO_RESOLVE(cuMemGetInfo);
  PTXEVO_RESOLVE(cuMemcpyHtoD);
  PTXEVO_RESOLVE(cuMemcpyDtoH);
  PTXEVO_RESOLVE(cuMemcpyDtoD);
  PTXEVO_RESOLVE(cuMemcpyDtoDAsync);
  PTXEVO_RESOLVE(cuMemsetD8);
  PTXEVO_RESOLVE(cuMemsetD32);
  PTXEVO_RESOLVE(cuMemsetD32Async);
  PTXEVO_RESOLVE(cuStreamCreate);
  PTXEVO_RESOLVE(cuStreamDestroy);
  PTXEVO_RESOLVE(cuStreamSynchronize);
  PTXEVO_RESOLVE(cuEventCreate);
  PTXEVO_RESOLVE(cuEventDestroy);
  PTXEVO_RESOLVE(cuEventRecord);
  PTXEVO_RESOLVE(cuEventSynchronize);
  PTXEVO_RESOLVE(cuEventElapsedTime);
  PTXEVO_RESOLVE(cuTensorMapEncodeTiled);
#undef PTXEVO_RESOLVE
  if (!missing.empty()) {
    out.reason = std::string(lib) + " lacks driver entry points: " + missing;
    return out;
  }
  // The aliasing constructor keeps the library open as long as any copy of the API lives.
  out.driver = std::shared_ptr<const CudaDriver>(h, &h->api);
  return out;
}

}  // namespace ptxevo::evaluator
