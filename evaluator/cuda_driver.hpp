// The CUDA driver API, loaded at run time (dlopen libcuda.so.1), so one binary runs on machines
// with and without a GPU. Without a driver, `load()` says why and GPU work reports "no GPU".
#pragma once

#include <cuda.h>

#include <memory>
#include <string>

namespace ptxevo::evaluator {

struct CudaDriver {
#define PTXEVO_CU_FN(name) decltype(&::name) name = nullptr
  PTXEVO_CU_FN(cuInit);
  PTXEVO_CU_FN(cuDriverGetVersion);
  PTXEVO_CU_FN(cuGetErrorString);
  PTXEVO_CU_FN(cuGetErrorName);
  PTXEVO_CU_FN(cuDeviceGetCount);
  PTXEVO_CU_FN(cuDeviceGet);
  PTXEVO_CU_FN(cuDeviceGetName);
  PTXEVO_CU_FN(cuDeviceGetAttribute);
  PTXEVO_CU_FN(cuDeviceTotalMem);
  PTXEVO_CU_FN(cuDevicePrimaryCtxRetain);
  PTXEVO_CU_FN(cuDevicePrimaryCtxRelease);
  PTXEVO_CU_FN(cuCtxSetCurrent);
  PTXEVO_CU_FN(cuCtxSynchronize);
  PTXEVO_CU_FN(cuCtxSetLimit);
  PTXEVO_CU_FN(cuModuleLoadData);
  PTXEVO_CU_FN(cuModuleUnload);
  PTXEVO_CU_FN(cuModuleGetFunction);
  PTXEVO_CU_FN(cuModuleGetGlobal);
  PTXEVO_CU_FN(cuFuncGetAttribute);
  PTXEVO_CU_FN(cuFuncSetAttribute);
  PTXEVO_CU_FN(cuLaunchKernel);
  PTXEVO_CU_FN(cuLaunchKernelEx);
  PTXEVO_CU_FN(cuCtxGetDevice);
  PTXEVO_CU_FN(cuMemAddressReserve);
  PTXEVO_CU_FN(cuMemAddressFree);
  PTXEVO_CU_FN(cuMemCreate);
  PTXEVO_CU_FN(cuMemRelease);
  PTXEVO_CU_FN(cuMemMap);
  PTXEVO_CU_FN(cuMemUnmap);
  PTXEVO_CU_FN(cuMemSetAccess);
  PTXEVO_CU_FN(cuMemGetAllocationGranularity);
  PTXEVO_CU_FN(cuMemAlloc);
  PTXEVO_CU_FN(cuMemFree);
  PTXEVO_CU_FN(cuMemGetInfo);
  PTXEVO_CU_FN(cuMemcpyHtoD);
  PTXEVO_CU_FN(cuMemcpyDtoH);
  PTXEVO_CU_FN(cuMemcpyDtoD);
  PTXEVO_CU_FN(cuMemcpyDtoDAsync);
  PTXEVO_CU_FN(cuMemsetD8);
  PTXEVO_CU_FN(cuMemsetD32);
  PTXEVO_CU_FN(cuMemsetD32Async);
  PTXEVO_CU_FN(cuStreamCreate);
  PTXEVO_CU_FN(cuStreamDestroy);
  PTXEVO_CU_FN(cuStreamSynchronize);
  PTXEVO_CU_FN(cuEventCreate);
  PTXEVO_CU_FN(cuEventDestroy);
  PTXEVO_CU_FN(cuEventRecord);
  PTXEVO_CU_FN(cuEventSynchronize);
  PTXEVO_CU_FN(cuEventElapsedTime);
  PTXEVO_CU_FN(cuTensorMapEncodeTiled);
#undef PTXEVO_CU_FN

  // "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"
  std::string error_text(CUresult r) const;
};

struct DriverLoad {
  std::shared_ptr<const CudaDriver> driver;  // null when unavailable
  std::string reason;                         // why it is unavailable
};

// Loads libcuda.so.1 (or $PTXEVO_LIBCUDA) and resolves every entry point for CUDA 13's ABI.
// Never throws; the handle stays open for the life of the returned driver.
DriverLoad load_cuda_driver();

}  // namespace ptxevo::evaluator
