// An op's fp64 reference run on the GPU (Op::device_reference_source / _plan), and gate inputs
// drawn on the GPU. On the benchmark shapes (up to 2^31 elements) drawing inputs and computing
// the reference on the host, then uploading 8 bytes per output element, took most of a
// campaign's time; here both stay on the device. Trust comes from the host: before first use
// in a process, the device reference is compared with Op::reference on the spec's small shapes
// over several input distributions, and a disagreement disables it (the host path is used).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "evaluator/device_checks.hpp"
#include "evaluator/gpu_context.hpp"
#include "evaluator/op.hpp"

namespace ptxevo::evaluator {

// The seed of one tensor's data from an evaluation's seed: the host's fill_inputs and the
// device's draw_inputs_on_device both use it, so a fixed-distribution input is the same data on
// either path.
std::uint64_t tensor_seed(std::uint64_t seed, const std::string& name);

// Draws the inputs (Role::In) of `descs` into the buffers at `ptrs`: fixed-distribution inputs
// on the host through the op (they are small, e.g. a weight of N elements) and uploaded, the
// others on the device from `d`. The data depends only on (seed, d, descs).
void draw_inputs_on_device(const Op& op, const std::vector<TensorDesc>& descs, Distribution d, std::uint64_t seed,
                           DeviceChecks& checks, GpuContext& ctx,
                           const std::map<std::string, CUdeviceptr>& ptrs);

// Whether every input of `descs` can be drawn on the device (no in-out tensors, float dtypes
// or fixed distributions).
bool inputs_drawable_on_device(const std::vector<TensorDesc>& descs);

class DeviceReference {
 public:
  // Builds the op's reference kernels for `cfg`; nullptr and *why when the op has none or they
  // do not build.
  static std::unique_ptr<DeviceReference> create(GpuContext& ctx, const Op& op, const OpConfig& cfg,
                                                 std::string* why);

  // The reference of shape `s` from the op's tensors at `ptrs` (device pointers by name; only
  // the inputs are read), as F64 device buffers by output name.
  std::map<std::string, DeviceBuffer> compute(const Shape& s, const std::map<std::string, CUdeviceptr>& ptrs);

  // Compares with Op::reference on each shape (small ones: the host computes it too) for every
  // gate distribution; "" when every element agrees to `rel` of the output's largest magnitude,
  // else what differed. Records how many shapes it checked.
  std::string verify(const std::vector<Shape>& shapes, DeviceChecks& checks, std::uint64_t seed, double rel = 1e-9);
  // For an op without a host reference: on each shape and gate distribution (inputs drawn on
  // the host), the reference must write every element of every output and write the same bits
  // twice. "" or what failed. Records how many shapes it checked.
  std::string self_check(const std::vector<Shape>& shapes, std::uint64_t seed);
  // The reference of host inputs (`tensors` as Op::tensors lists them), as F64 host tensors.
  std::vector<HostTensor> compute_from_host(const Shape& s, const std::vector<TensorDesc>& descs,
                                            const std::vector<HostTensor>& tensors);
  int verified_shapes() const { return verified_shapes_; }

  DeviceReference(GpuContext& ctx, const Op& op, OpConfig cfg, std::unique_ptr<GpuModule> m);

 private:
  GpuContext& ctx_;
  const Op& op_;
  OpConfig cfg_;
  std::unique_ptr<GpuModule> module_;
  int verified_shapes_ = 0;
};

}  // namespace ptxevo::evaluator
