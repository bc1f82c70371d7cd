#include "evaluator/gpu_context.hpp"

#include "evaluator/tensor_map.hpp"

#include <algorithm>
#include <cstring>

namespace ptxevo::evaluator {
namespace {

constexpr std::uint8_t kCanaryByte = 0xC3;  // a byte no kernel's bulk output is likely to repeat

}  // namespace

bool GpuError::sticky() const {
  switch (code_) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_UNKNOWN:
      return true;
    default:
      return false;
  }
}

std::string DeviceInfo::arch() const {
  std::string a = "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
  if (cc_major >= 9) a += "a";
  return a;
}

namespace {
std::size_t round_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }
}  // namespace

DeviceBuffer::DeviceBuffer(const CudaDriver* d, std::size_t bytes, GuardSide side, std::size_t align)
    : d_(d), bytes_(bytes) {
  const std::size_t padded = round_up(std::max<std::size_t>(bytes, 1), std::max<std::size_t>(align, 16));
  const auto fail = [&](CUresult r, const std::string& what) {
    release();
    // Out of memory: say how much the device had, so the report shows whose allocations filled it.
    std::string mem;
    std::size_t free_b = 0, total_b = 0;
    if (r == CUDA_ERROR_OUT_OF_MEMORY && d_->cuMemGetInfo(&free_b, &total_b) == CUDA_SUCCESS)
      mem = " (" + std::to_string(free_b >> 20) + " MiB free of " + std::to_string(total_b >> 20) + " MiB)";
    throw GpuError(what + ": " + d_->error_text(r) + mem, r);
  };
  CUdevice dev = 0;
  int vmm = 0;
  if (side != GuardSide::None && d_->cuCtxGetDevice(&dev) == CUDA_SUCCESS &&
      d_->cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) == CUDA_SUCCESS &&
      vmm) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    std::size_t gran = 0;
    CUresult r = d_->cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS) fail(r, "cuMemGetAllocationGranularity");
    // One unmapped granule on each side of the mapping: the guard pages.
    map_bytes_ = round_up(padded + kGuardBytes, gran);
    base_bytes_ = map_bytes_ + 2 * gran;
    if ((r = d_->cuMemAddressReserve(&base_, base_bytes_, gran, 0, 0)) != CUDA_SUCCESS)
      fail(r, "cuMemAddressReserve(" + std::to_string(base_bytes_) + " bytes)");
    if ((r = d_->cuMemCreate(&handle_, map_bytes_, &prop, 0)) != CUDA_SUCCESS)
      fail(r, "cuMemCreate(" + std::to_string(map_bytes_) + " bytes)");
    map_ = base_ + gran;
    if ((r = d_->cuMemMap(map_, map_bytes_, 0, handle_, 0)) != CUDA_SUCCESS) {
      map_ = 0;
      fail(r, "cuMemMap");
    }
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if ((r = d_->cuMemSetAccess(map_, map_bytes_, &access, 1)) != CUDA_SUCCESS) fail(r, "cuMemSetAccess");
    front_ = map_;
    if (side == GuardSide::AfterEnd) {
      ptr_ = map_ + map_bytes_ - padded;
      back_bytes_ = padded - bytes;
    } else {
      ptr_ = map_;
      back_bytes_ = map_bytes_ - bytes;
    }
  } else {
    base_bytes_ = padded + 2 * kGuardBytes;
    CUresult r = d_->cuMemAlloc(&base_, base_bytes_);
    if (r != CUDA_SUCCESS) fail(r, "cuMemAlloc(" + std::to_string(base_bytes_) + " bytes)");
    front_ = base_;
    ptr_ = base_ + kGuardBytes;
    back_bytes_ = base_bytes_ - kGuardBytes - bytes;
  }
  fill_canaries();
}

void DeviceBuffer::release() noexcept {
  if (handle_) {
    if (map_) d_->cuMemUnmap(map_, map_bytes_);
    d_->cuMemRelease(handle_);
    if (base_) d_->cuMemAddressFree(base_, base_bytes_);
  } else if (base_) {
    d_->cuMemFree(base_);
  }
  base_ = map_ = ptr_ = front_ = 0;
  handle_ = 0;
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    release();
    d_ = o.d_;
    base_ = o.base_;
    base_bytes_ = o.base_bytes_;
    map_ = o.map_;
    map_bytes_ = o.map_bytes_;
    handle_ = o.handle_;
    ptr_ = o.ptr_;
    front_ = o.front_;
    back_bytes_ = o.back_bytes_;
    bytes_ = o.bytes_;
    o.base_ = o.map_ = o.ptr_ = o.front_ = 0;
    o.handle_ = 0;
  }
  return *this;
}

void DeviceBuffer::upload(const void* src, std::size_t n) {
  CUresult r = d_->cuMemcpyHtoD(ptr(), src, std::min(n, bytes_));
  if (r != CUDA_SUCCESS) throw GpuError("cuMemcpyHtoD: " + d_->error_text(r), r);
  // The DMA of a pageable copy may still be in flight when cuMemcpyHtoD returns.
  r = d_->cuCtxSynchronize();
  if (r != CUDA_SUCCESS) throw GpuError("cuCtxSynchronize: " + d_->error_text(r), r);
}

void DeviceBuffer::download(void* dst, std::size_t n) const {
  CUresult r = d_->cuMemcpyDtoH(dst, ptr(), std::min(n, bytes_));
  if (r != CUDA_SUCCESS) throw GpuError("cuMemcpyDtoH: " + d_->error_text(r), r);
}

namespace {
// The canary zones next to the payload: [from, from + bytes), at most kGuardBytes each.
struct Zone {
  CUdeviceptr from;
  std::size_t bytes;
};
}  // namespace

void DeviceBuffer::fill_canaries() {
  const std::size_t front = std::min(front_bytes(), kGuardBytes), back = std::min(back_bytes_, kGuardBytes);
  for (const Zone z : {Zone{ptr_ - front, front}, Zone{ptr_ + bytes_, back}}) {
    if (!z.bytes) continue;
    CUresult r = d_->cuMemsetD8(z.from, kCanaryByte, z.bytes);
    if (r != CUDA_SUCCESS) throw GpuError("cuMemsetD8: " + d_->error_text(r), r);
  }
  // Memsets are asynchronous to the host: finish them before anything reads or launches.
  CUresult r = d_->cuCtxSynchronize();
  if (r != CUDA_SUCCESS) throw GpuError("cuCtxSynchronize: " + d_->error_text(r), r);
}

bool DeviceBuffer::canaries_intact() const {
  const std::size_t front = std::min(front_bytes(), kGuardBytes), back = std::min(back_bytes_, kGuardBytes);
  std::vector<std::uint8_t> host(std::max(front, back));
  for (const Zone z : {Zone{ptr_ - front, front}, Zone{ptr_ + bytes_, back}}) {
    if (!z.bytes) continue;
    CUresult r = d_->cuMemcpyDtoH(host.data(), z.from, z.bytes);
    if (r != CUDA_SUCCESS) throw GpuError("cuMemcpyDtoH: " + d_->error_text(r), r);
    for (std::size_t i = 0; i < z.bytes; ++i)
      if (host[i] != kCanaryByte) return false;
  }
  return true;
}

GpuModule::GpuModule(const CudaDriver* d, const std::vector<std::uint8_t>& cubin) : d_(d) {
  CUresult r = d_->cuModuleLoadData(&mod_, cubin.data());
  if (r != CUDA_SUCCESS) throw GpuError("cuModuleLoadData: " + d_->error_text(r), r);
}

GpuModule::~GpuModule() {
  if (mod_) d_->cuModuleUnload(mod_);
}

CUfunction GpuModule::function(const std::string& entry) {
  auto it = fns_.find(entry);
  if (it != fns_.end()) return it->second;
  CUfunction f = nullptr;
  CUresult r = d_->cuModuleGetFunction(&f, mod_, entry.c_str());
  if (r != CUDA_SUCCESS) throw GpuError("kernel '" + entry + "' not in module: " + d_->error_text(r), r);
  fns_[entry] = f;
  return f;
}

GpuContext::GpuContext(std::shared_ptr<const CudaDriver> d, int ordinal) : d_(std::move(d)) {
  check(d_->cuInit(0), "cuInit");
  int count = 0;
  check(d_->cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (ordinal >= count)
    throw GpuError("GPU " + std::to_string(ordinal) + " requested, " + std::to_string(count) + " present",
                   CUDA_ERROR_INVALID_DEVICE);
  check(d_->cuDeviceGet(&dev_, ordinal), "cuDeviceGet");
  char name[256] = {};
  check(d_->cuDeviceGetName(name, sizeof name, dev_), "cuDeviceGetName");
  info_.name = name;
  info_.ordinal = ordinal;
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    check(d_->cuDeviceGetAttribute(&v, a, dev_), "cuDeviceGetAttribute");
    return v;
  };
  info_.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info_.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info_.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info_.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  info_.max_shared_per_block_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  std::size_t total = 0;
  check(d_->cuDeviceTotalMem(&total, dev_), "cuDeviceTotalMem");
  info_.total_mem = static_cast<std::int64_t>(total);
  check(d_->cuDriverGetVersion(&info_.driver_version), "cuDriverGetVersion");
  check(d_->cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
  check(d_->cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
  // Persisting-L2 carve-outs survive flushes (docs/loopholes.md 16): keep the limit at zero.
  d_->cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0);
  // A blocking stream: the synchronous copies and memsets (legacy stream) that poison and fill
  // buffers are ordered before the kernels. A non-blocking stream raced them on the H200: a late
  // poison upload overwrote a correct kernel's output.
  check(d_->cuStreamCreate(&stream_, CU_STREAM_DEFAULT), "cuStreamCreate");
  check(d_->cuEventCreate(&start_, CU_EVENT_DEFAULT), "cuEventCreate");
  check(d_->cuEventCreate(&stop_, CU_EVENT_DEFAULT), "cuEventCreate");
}

GpuContext::~GpuContext() {
  if (start_) d_->cuEventDestroy(start_);
  if (stop_) d_->cuEventDestroy(stop_);
  if (stream_) d_->cuStreamDestroy(stream_);
  if (ctx_) d_->cuDevicePrimaryCtxRelease(dev_);
}

void GpuContext::check(CUresult r, const char* what) const {
  if (r != CUDA_SUCCESS) throw GpuError(std::string(what) + ": " + d_->error_text(r), r);
}

void GpuContext::synchronize() const { check(d_->cuStreamSynchronize(stream_), "kernel execution"); }

void GpuContext::launch(GpuModule& m, const LaunchPlan& plan, const std::map<std::string, CUdeviceptr>& buffers,
                        const std::vector<TensorDesc>& descs, CUstream on) const {
  // Argument storage must outlive the launch call; one slot per argument, large and aligned
  // enough for a CUtensorMap (128 bytes, 64-byte aligned).
  struct alignas(64) Slot {
    std::byte bytes[128];
  };
  auto pointer_of = [&](const std::string& name) {
    auto it = buffers.find(name);
    if (it == buffers.end()) throw std::logic_error("launch plan names unknown tensor '" + name + "'");
    return it->second;
  };
  for (const auto& k : plan.kernels) {
    CUfunction f = m.function(k.entry);
    std::vector<Slot> storage(k.args.size());
    std::vector<void*> params(k.args.size());
    for (std::size_t i = 0; i < k.args.size(); ++i) {
      const KernelArg& a = k.args[i];
      void* slot = &storage[i];
      if (const auto* t = std::get_if<ArgTensor>(&a)) {
        const CUdeviceptr p = t->name.empty() ? 0 : pointer_of(t->name);
        std::memcpy(slot, &p, sizeof p);
      } else if (const auto* tm = std::get_if<ArgTensorMap>(&a)) {
        const TensorDesc* desc = nullptr;
        for (const auto& d : descs)
          if (d.name == tm->tensor) desc = &d;
        if (!desc) throw std::logic_error("tensor map over unknown tensor '" + tm->tensor + "'");
        std::int64_t numel = 1;
        for (auto dim : desc->shape) numel *= dim;
        const std::string bad = validate_tensor_map(*tm, desc->dtype, numel);
        if (!bad.empty()) throw std::invalid_argument(bad);
        std::vector<cuuint32_t> estrides(tm->dims.size(), 1);
        for (std::size_t e = 0; e < tm->element_strides.size(); ++e) estrides[e] = tm->element_strides[e];
        const auto swizzle = tm->swizzle_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                             : tm->swizzle_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                             : tm->swizzle_bytes == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                       : CU_TENSOR_MAP_SWIZZLE_NONE;
        const auto promo = tm->l2_promotion_bytes == 256   ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B
                           : tm->l2_promotion_bytes == 128 ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B
                           : tm->l2_promotion_bytes == 64  ? CU_TENSOR_MAP_L2_PROMOTION_L2_64B
                                                           : CU_TENSOR_MAP_L2_PROMOTION_NONE;
        CUtensorMap map;
        check(d_->cuTensorMapEncodeTiled(
                  &map, static_cast<CUtensorMapDataType>(tensor_map_data_type(desc->dtype)),
                  static_cast<cuuint32_t>(tm->dims.size()), reinterpret_cast<void*>(pointer_of(tm->tensor)),
                  reinterpret_cast<const cuuint64_t*>(tm->dims.data()),
                  reinterpret_cast<const cuuint64_t*>(tm->strides_bytes.data()), tm->box.data(), estrides.data(),
                  CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, promo,
                  tm->oob_nan ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
              "cuTensorMapEncodeTiled");
        static_assert(sizeof(map) <= sizeof(Slot));
        std::memcpy(slot, &map, sizeof map);
      } else if (const auto* i32 = std::get_if<std::int32_t>(&a)) {
        std::memcpy(slot, i32, sizeof *i32);
      } else if (const auto* i64 = std::get_if<std::int64_t>(&a)) {
        std::memcpy(slot, i64, sizeof *i64);
      } else if (const auto* f32 = std::get_if<float>(&a)) {
        std::memcpy(slot, f32, sizeof *f32);
      } else if (const auto* f64 = std::get_if<double>(&a)) {
        std::memcpy(slot, f64, sizeof *f64);
      }
      params[i] = slot;
    }
    if (k.shared_bytes > 48 * 1024)
      check(d_->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(k.shared_bytes)),
            "cuFuncSetAttribute(max dynamic shared memory)");
    CUlaunchConfig cfg{};
    cfg.gridDimX = k.grid.x;
    cfg.gridDimY = k.grid.y;
    cfg.gridDimZ = k.grid.z;
    cfg.blockDimX = k.block.x;
    cfg.blockDimY = k.block.y;
    cfg.blockDimZ = k.block.z;
    cfg.sharedMemBytes = k.shared_bytes;
    cfg.hStream = on ? on : stream_;
    CUlaunchAttribute attrs[2]{};
    cfg.attrs = attrs;
    if (k.programmatic) {
      CUlaunchAttribute& a = attrs[cfg.numAttrs++];
      a.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      a.value.programmaticStreamSerializationAllowed = 1;
    }
    if (k.cluster.x * k.cluster.y * k.cluster.z > 1) {
      CUlaunchAttribute& attr = attrs[cfg.numAttrs++];
      attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attr.value.clusterDim.x = k.cluster.x;
      attr.value.clusterDim.y = k.cluster.y;
      attr.value.clusterDim.z = k.cluster.z;
      if (k.cluster.x * k.cluster.y * k.cluster.z > 8)
        check(d_->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
              "cuFuncSetAttribute(non-portable cluster size)");
    }
    check(d_->cuLaunchKernelEx(&cfg, f, params.data(), nullptr), ("launch of " + k.entry).c_str());
  }
}

double GpuContext::measure_copy_bandwidth() {
  const std::size_t bytes = std::max<std::size_t>(std::size_t{1} << 30, static_cast<std::size_t>(info_.l2_bytes) * 8);
  CUdeviceptr a = 0, b = 0;
  check(d_->cuMemAlloc(&a, bytes), "cuMemAlloc");
  CUresult rb = d_->cuMemAlloc(&b, bytes);
  if (rb != CUDA_SUCCESS) {
    d_->cuMemFree(a);
    check(rb, "cuMemAlloc");
  }
  check(d_->cuMemsetD32(a, 0x3f800000u, bytes / 4), "cuMemsetD32");
  std::vector<double> rates;
  for (int i = 0; i < 12; ++i) {
    const double ms = time_ms([&] { check(d_->cuMemcpyDtoDAsync(b, a, bytes, stream_), "cuMemcpyDtoDAsync"); });
    if (i >= 2) rates.push_back(2.0 * static_cast<double>(bytes) / (ms * 1e-3));
  }
  d_->cuMemFree(a);
  d_->cuMemFree(b);
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace ptxevo::evaluator
