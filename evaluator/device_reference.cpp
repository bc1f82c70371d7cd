#include "evaluator/device_reference.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <set>
#include <stdexcept>

#include "evaluator/builder.hpp"
#include "evaluator/gpu_evaluation.hpp"

namespace ptxevo::evaluator {
namespace {

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::int64_t numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

const TensorDesc* find_desc(const std::vector<TensorDesc>& descs, const std::string& name) {
  for (const auto& d : descs)
    if (d.name == name) return &d;
  return nullptr;
}

}  // namespace

std::uint64_t tensor_seed(std::uint64_t seed, const std::string& name) {
  return mix(seed ^ std::hash<std::string>{}(name));
}

bool inputs_drawable_on_device(const std::vector<TensorDesc>& descs) {
  for (const auto& d : descs) {
    if (d.role == Role::InOut) return false;
    if (d.role == Role::In && !d.fixed_distribution && !DeviceChecks::can_random_fill(d.dtype)) return false;
  }
  return true;
}

void draw_inputs_on_device(const Op& op, const std::vector<TensorDesc>& descs, Distribution d, std::uint64_t seed,
                           DeviceChecks& checks, GpuContext& ctx,
                           const std::map<std::string, CUdeviceptr>& ptrs) {
  for (const auto& desc : descs) {
    if (desc.role != Role::In) continue;
    const CUdeviceptr p = ptrs.at(desc.name);
    const std::uint64_t tseed = tensor_seed(seed, desc.name);
    if (desc.fixed_distribution) {
      HostTensor t(desc.name, desc.dtype, desc.shape);
      std::mt19937_64 rng(tseed);
      op.fill_fixed(desc, rng, t);
      if (t.bytes() > 0) {
        ctx.synchronize();  // the launch stream may still be reading the buffer
        ctx.check(ctx.api().cuMemcpyHtoD(p, t.data.data(), t.bytes()), "cuMemcpyHtoD (device inputs)");
      }
      continue;
    }
    checks.random_fill(p, desc.dtype, numel(desc.shape), d, tseed);
    if (d == Distribution::DegenerateRows)
      checks.degenerate_rows(p, desc.dtype, numel(desc.shape), desc.shape.empty() ? 1 : desc.shape.back(),
                             desc.degenerate_rows, tseed);
  }
}

std::unique_ptr<DeviceReference> DeviceReference::create(GpuContext& ctx, const Op& op, const OpConfig& cfg,
                                                         std::string* why) {
  const std::string source = op.device_reference_source(cfg);
  if (source.empty()) {
    *why = "op " + op.name() + " has no device reference";
    return nullptr;
  }
  Builder builder(nullptr);
  BuildRequest req;
  req.name = "ptxevo_reference_" + op.name();
  req.source = source;
  req.source_path = req.name + ".cu";
  req.arch = ctx.info().arch();
  const BuildResult b = builder.build(req);
  if (!b.ok) {
    *why = "the device reference of " + op.name() + " did not build (" + b.stage + "): " + b.error;
    return nullptr;
  }
  try {
    return std::make_unique<DeviceReference>(ctx, op, cfg, std::make_unique<GpuModule>(&ctx.api(), b.cubin));
  } catch (const std::exception& e) {
    *why = "the device reference of " + op.name() + " did not load: " + e.what();
    return nullptr;
  }
}

DeviceReference::DeviceReference(GpuContext& ctx, const Op& op, OpConfig cfg, std::unique_ptr<GpuModule> m)
    : ctx_(ctx), op_(op), cfg_(std::move(cfg)), module_(std::move(m)) {}

std::map<std::string, DeviceBuffer> DeviceReference::compute(const Shape& s,
                                                             const std::map<std::string, CUdeviceptr>& ptrs) {
  const std::vector<TensorDesc> descs = op_.tensors(s, cfg_);
  const DeviceReferencePlan plan = op_.device_reference_plan(s, cfg_);
  std::map<std::string, DeviceBuffer> refs, scratch;
  std::map<std::string, CUdeviceptr> all = ptrs;
  for (const auto& name : plan.outputs) {
    const TensorDesc* d = find_desc(descs, name);
    if (!d) throw std::logic_error("device reference of " + op_.name() + " names an unknown output '" + name + "'");
    const std::size_t nb = static_cast<std::size_t>(numel(d->shape)) * sizeof(double);
    DeviceBuffer b(&ctx_.api(), std::max<std::size_t>(nb, 1));
    // All-ones bits: a NaN no arithmetic produces, so an element left so was never written.
    ctx_.check(ctx_.api().cuMemsetD8(b.ptr(), 0xFF, nb), "cuMemsetD8 (reference outputs)");
    all["ref:" + name] = b.ptr();
    refs.emplace(name, std::move(b));
  }
  for (const auto& sd : plan.scratch) {
    DeviceBuffer b(&ctx_.api(),
                   std::max<std::size_t>(static_cast<std::size_t>(numel(sd.shape)) * dtype_size(sd.dtype), 1));
    all[sd.name] = b.ptr();
    scratch.emplace(sd.name, std::move(b));
  }
  ctx_.launch(*module_, plan.plan, all, descs);
  ctx_.synchronize();
  return refs;
}

std::string DeviceReference::verify(const std::vector<Shape>& shapes, DeviceChecks& checks, std::uint64_t seed,
                                     double rel) {
  const CudaDriver& api = ctx_.api();
  verified_shapes_ = 0;
  for (const Shape& s : shapes) {
    const std::vector<TensorDesc> descs = op_.tensors(s, cfg_);
    if (!inputs_drawable_on_device(descs)) return "inputs of shape " + shape_to_string(s) + " cannot be drawn on the device";
    for (Distribution dist : all_distributions()) {
      seed = mix(seed);
      std::map<std::string, DeviceBuffer> bufs;
      std::map<std::string, CUdeviceptr> ptrs;
      std::vector<HostTensor> host;
      for (const auto& d : descs) {
        DeviceBuffer b(&api, std::max<std::size_t>(static_cast<std::size_t>(numel(d.shape)) * dtype_size(d.dtype), 1));
        ptrs[d.name] = b.ptr();
        bufs.emplace(d.name, std::move(b));
        host.emplace_back(d.name, d.dtype, d.shape);
      }
      draw_inputs_on_device(op_, descs, dist, seed, checks, ctx_, ptrs);
      ctx_.synchronize();
      for (std::size_t k = 0; k < descs.size(); ++k)
        if (descs[k].role == Role::In) bufs.at(descs[k].name).download(host[k].data.data(), host[k].bytes());
      std::vector<HostTensor> want;
      op_.reference(s, cfg_, host, want);
      std::map<std::string, DeviceBuffer> got = compute(s, ptrs);
      const std::string where = " (shape " + shape_to_string(s) + ", " + to_string(dist) + " inputs)";
      std::set<std::string> names;
      for (const auto& w : want) names.insert(w.name);
      for (const auto& [name, b] : got)
        if (!names.count(name)) return "the device reference computes '" + name + "', the host reference does not" + where;
      for (const auto& w : want) {
        auto it = got.find(w.name);
        if (it == got.end()) return "the device reference lacks output '" + w.name + "'" + where;
        const std::int64_t n = w.numel();
        std::vector<double> d(static_cast<std::size_t>(n));
        it->second.download(d.data(), d.size() * sizeof(double));
        double scale = 0;
        for (std::int64_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(w.get(i)));
        scale = scale > 0 ? scale : 1;
        for (std::int64_t i = 0; i < n; ++i) {
          const double h = w.get(i), g = d[static_cast<std::size_t>(i)];
          if (std::isnan(h) && std::isnan(g)) continue;
          if (!(std::fabs(h - g) <= rel * scale))
            return "output '" + w.name + "' element " + std::to_string(i) + ": device " + std::to_string(g) +
                   ", host " + std::to_string(h) + where;
        }
      }
    }
    ++verified_shapes_;
  }
  return {};
}

std::vector<HostTensor> DeviceReference::compute_from_host(const Shape& s, const std::vector<TensorDesc>& descs,
                                                           const std::vector<HostTensor>& tensors) {
  std::map<std::string, DeviceBuffer> bufs;
  std::map<std::string, CUdeviceptr> ptrs;
  for (std::size_t k = 0; k < descs.size(); ++k) {
    if (descs[k].role != Role::In && descs[k].role != Role::InOut) continue;
    DeviceBuffer b(&ctx_.api(), std::max<std::size_t>(tensors[k].bytes(), 1));
    b.upload(tensors[k].data.data(), tensors[k].bytes());
    ptrs[descs[k].name] = b.ptr();
    bufs.emplace(descs[k].name, std::move(b));
  }
  std::map<std::string, DeviceBuffer> got = compute(s, ptrs);
  std::vector<HostTensor> out;
  for (const auto& d : descs) {
    auto it = got.find(d.name);
    if (it == got.end()) continue;
    HostTensor t(d.name, DType::F64, d.shape);
    it->second.download(t.data.data(), t.bytes());
    out.push_back(std::move(t));
  }
  return out;
}

std::string DeviceReference::self_check(const std::vector<Shape>& shapes, std::uint64_t seed) {
  verified_shapes_ = 0;
  for (const Shape& s : shapes) {
    const std::vector<TensorDesc> descs = op_.tensors(s, cfg_);
    for (Distribution dist : all_distributions()) {
      seed = mix(seed);
      std::vector<HostTensor> host;
      for (const auto& d : descs) host.emplace_back(d.name, d.dtype, d.shape);
      fill_inputs(op_, descs, dist, seed, host);
      const std::vector<HostTensor> a = compute_from_host(s, descs, host), b = compute_from_host(s, descs, host);
      const std::string where = " (shape " + shape_to_string(s) + ", " + to_string(dist) + " inputs)";
      for (std::size_t k = 0; k < a.size(); ++k) {
        const auto* bits = reinterpret_cast<const std::uint64_t*>(a[k].data.data());
        std::int64_t unwritten = 0;
        for (std::int64_t i = 0; i < a[k].numel(); ++i) unwritten += bits[i] == ~std::uint64_t{0};
        if (unwritten > 0)
          return "the reference writes nothing to " + std::to_string(unwritten) + " of " + std::to_string(a[k].numel()) +
                 " elements of 'ref:" + a[k].name + "'" + where;
        if (a[k].data != b[k].data)
          return "the reference of '" + a[k].name + "' differs between two runs on the same inputs" + where;
      }
    }
    ++verified_shapes_;
  }
  return {};
}

}  // namespace ptxevo::evaluator
