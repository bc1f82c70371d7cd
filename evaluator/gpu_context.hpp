// One GPU, driven through the dynamically loaded driver: context, stream, device facts,
// buffers with guard canaries, module loading, kernel launches and event timing. Every driver
// error becomes a GpuError carrying the CUDA error name, so a faulting candidate is reported,
// not fatal to the caller (the worker process then exits: a faulted context cannot be reused).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "evaluator/cuda_driver.hpp"
#include "evaluator/op.hpp"

namespace ptxevo::evaluator {

class GpuError : public std::runtime_error {
 public:
  GpuError(const std::string& what, CUresult code) : std::runtime_error(what), code_(code) {}
  CUresult code() const { return code_; }
  // Errors after which the context is unusable (the kernel faulted or trapped).
  bool sticky() const;

 private:
  CUresult code_;
};

struct DeviceInfo {
  std::string name;
  int ordinal = 0;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t total_mem = 0;
  int driver_version = 0;  // e.g. 13000
  int max_shared_per_block_optin = 0;
  std::string arch() const;  // "sm_90a" for 9.0 (the arch-specific target ptxevo builds for)
};

// Device allocation with guard pages and canaries. Through the driver's virtual memory
// management, a buffer gets a mapping of its own inside a reserved range whose pages before and
// after the mapping stay unmapped: the payload sits flush against one end of the mapping (by
// default its end, `GuardSide::AfterEnd`; `BeforeStart` puts its start against the mapping's
// start), so a read or write past that end faults (CUDA_ERROR_ILLEGAL_ADDRESS) instead of
// landing in other memory. The mapped slack on the other side (at least kGuardBytes; under 16
// bytes at the flush end, the payload padded to a 16-byte multiple) holds canaries, checked after
// a run: a write there is caught as out-of-bounds too. Where the driver lacks virtual memory
// management the buffer falls back to cuMemAlloc with readable canary zones on both sides.
enum class GuardSide { AfterEnd, BeforeStart, None };  // None: cuMemAlloc with readable canary zones

class DeviceBuffer {
 public:
  static constexpr std::size_t kGuardBytes = 64 * 1024;
  DeviceBuffer() = default;
  // `align`: the payload's start alignment (a power of two, 16 or more). The flush end's slack
  // is under `align` bytes: 256 (cuMemAlloc's) keeps timing representative, 16 (what vector
  // loads and TMA need) leaves the fewest bytes past the end that do not fault.
  DeviceBuffer(const CudaDriver* d, std::size_t bytes, GuardSide side = GuardSide::AfterEnd, std::size_t align = 256);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr ptr() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  // Whether unmapped pages guard the flush side (false: the cuMemAlloc fallback).
  bool guard_pages() const { return handle_ != 0; }
  void upload(const void* src, std::size_t n);
  void download(void* dst, std::size_t n) const;
  void fill_canaries();
  bool canaries_intact() const;

 private:
  void release() noexcept;
  // The canary zones: [front_, ptr_) and [ptr_ + bytes_, ptr_ + bytes_ + back_bytes_), each
  // checked over at most kGuardBytes next to the payload.
  std::size_t front_bytes() const { return ptr_ - front_; }
  const CudaDriver* d_ = nullptr;
  CUdeviceptr base_ = 0;  // the reservation (guard pages) or the cuMemAlloc block
  std::size_t base_bytes_ = 0;
  CUdeviceptr map_ = 0;   // the mapped range inside the reservation
  std::size_t map_bytes_ = 0;
  CUmemGenericAllocationHandle handle_ = 0;
  CUdeviceptr ptr_ = 0;
  CUdeviceptr front_ = 0;
  std::size_t back_bytes_ = 0;
  std::size_t bytes_ = 0;
};

class GpuModule {
 public:
  GpuModule(const CudaDriver* d, const std::vector<std::uint8_t>& cubin);
  ~GpuModule();
  GpuModule(const GpuModule&) = delete;
  GpuModule& operator=(const GpuModule&) = delete;
  CUfunction function(const std::string& entry);

 private:
  const CudaDriver* d_;
  CUmodule mod_ = nullptr;
  std::map<std::string, CUfunction> fns_;
};

class GpuContext {
 public:
  // Throws GpuError when no usable device exists.
  GpuContext(std::shared_ptr<const CudaDriver> d, int ordinal);
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  const CudaDriver& api() const { return *d_; }
  const DeviceInfo& info() const { return info_; }
  CUstream stream() const { return stream_; }
  void check(CUresult r, const char* what) const;
  void synchronize() const;

  // Launches every kernel of `plan`, resolving tensor names through `buffers`; tensor maps
  // (ArgTensorMap) also need the tensors' descriptions. On the context's stream unless `on` names
  // another.
  void launch(GpuModule& m, const LaunchPlan& plan, const std::map<std::string, CUdeviceptr>& buffers,
              const std::vector<TensorDesc>& descs = {}, CUstream on = nullptr) const;

  // Device-to-device copy bandwidth in bytes/s (read + written), median of several copies of
  // a buffer larger than L2.
  double measure_copy_bandwidth();

  // Event pair timing of `fn` on the stream, in milliseconds.
  template <class Fn>
  double time_ms(Fn&& fn) {
    check(d_->cuEventRecord(start_, stream_), "cuEventRecord");
    fn();
    check(d_->cuEventRecord(stop_, stream_), "cuEventRecord");
    check(d_->cuEventSynchronize(stop_), "cuEventSynchronize");
    float ms = 0;
    check(d_->cuEventElapsedTime(&ms, start_, stop_), "cuEventElapsedTime");
    return ms;
  }

 private:
  std::shared_ptr<const CudaDriver> d_;
  DeviceInfo info_;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  CUevent start_ = nullptr, stop_ = nullptr;
};

}  // namespace ptxevo::evaluator
