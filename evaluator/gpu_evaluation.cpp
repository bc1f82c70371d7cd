#include "evaluator/gpu_evaluation.hpp"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>

#include "evaluator/device_checks.hpp"
#include "evaluator/device_reference.hpp"
#include "evaluator/gate.hpp"

namespace ptxevo::evaluator {
namespace {

constexpr std::int64_t kChunk = std::int64_t{1} << 20;
// The copy bandwidth a memcpy reaches is not a hard ceiling for a kernel: allow 10% before a
// time below the floor is called a measurement error.
constexpr double kFloorHeadroom = 1.10;
// How long the occupying kernels of a perturbed determinism run hold their SMs: longer than a
// small shape's whole run, a small fraction of a large one's.
constexpr std::int64_t kOccupyNs = 20'000;

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Written by the kernel: each needs buffers of its own per run (scratch included).
bool is_output(Role r) { return r == Role::Out || r == Role::InOut || r == Role::Scratch; }
// Checked against the reference and between runs. Scratch is not: rows a kernel leaves unused
// keep their poison, which differs between the two poison runs by design.
bool is_checked_output(Role r) { return r == Role::Out || r == Role::InOut; }
bool is_input(Role r) { return r == Role::In || r == Role::InOut; }

const HostTensor* find_ref(const std::vector<HostTensor>& refs, const std::string& name) {
  for (const auto& r : refs)
    if (r.name == name) return &r;
  return nullptr;
}

// The spec's tolerance for an output where it sets one, else the op's.
Tolerance tolerance_for(const Op& op, const EvalRequest& req, const std::string& output) {
  auto it = req.tolerances.find(output);
  return it != req.tolerances.end() ? it->second : op.tolerance(output, req.config);
}

std::string with_shape(const std::string& reason, const ShapeCase& sc, Distribution d) {
  return reason + " [" + to_string(sc.cls) + " shape " + shape_to_string(sc.shape) + ", " + to_string(d) + " inputs]";
}

// Adds the wall time of its scope to one phase of a batch (EvalReport::phase_seconds).
class PhaseTimer {
 public:
  PhaseTimer(std::map<std::string, double>& m, const char* phase)
      : m_(m), phase_(phase), t0_(std::chrono::steady_clock::now()) {}
  ~PhaseTimer() { m_[phase_] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  std::map<std::string, double>& m_;
  const char* phase_;
  std::chrono::steady_clock::time_point t0_;
};

// Device buffers for one set of tensors.
struct DeviceSet {
  std::map<std::string, DeviceBuffer> buffers;
  std::map<std::string, CUdeviceptr> pointers;
};

std::int64_t numel_of(const TensorDesc& d) {
  std::int64_t n = 1;
  for (auto x : d.shape) n *= x;
  return n;
}
std::size_t bytes_of(const TensorDesc& d) { return static_cast<std::size_t>(numel_of(d)) * dtype_size(d.dtype); }

// Gate runs put each tensor flush against a guard page with 16-byte alignment (the side
// alternates between shapes: reads past the end are the common bug, before the start the rarer
// one); timing sets keep cuMemAlloc's 256-byte alignment, so the timing is what users see.
DeviceSet allocate(const CudaDriver* d, const std::vector<TensorDesc>& descs, GuardSide side = GuardSide::AfterEnd,
                   std::size_t align = 256) {
  DeviceSet s;
  for (std::size_t i = 0; i < descs.size(); ++i) {
    DeviceBuffer b(d, std::max<std::size_t>(bytes_of(descs[i]), 1), side, align);
    s.pointers[descs[i].name] = b.ptr();
    s.buffers.emplace(descs[i].name, std::move(b));
  }
  return s;
}

}  // namespace

void fill_inputs(const Op& op, const std::vector<TensorDesc>& descs, Distribution d, std::uint64_t seed,
                 std::vector<HostTensor>& tensors) {
  for (std::size_t i = 0; i < descs.size(); ++i) {
    const TensorDesc& desc = descs[i];
    HostTensor& t = tensors[i];
    if (!is_input(desc.role)) continue;
    const std::uint64_t tseed = tensor_seed(seed, desc.name);
    if (desc.fixed_distribution) {
      std::mt19937_64 rng(tseed);
      op.fill_fixed(desc, rng, t);
      continue;
    }
    const std::int64_t n = t.numel();
    const std::int64_t chunks = (n + kChunk - 1) / kChunk;
    const std::size_t esz = dtype_size(t.dtype);
    tbb::parallel_for(std::int64_t{0}, chunks, [&](std::int64_t c) {
      const std::int64_t begin = c * kChunk;
      const std::int64_t len = std::min(kChunk, n - begin);
      HostTensor part(desc.name, t.dtype, {len});
      std::mt19937_64 rng(mix(tseed + static_cast<std::uint64_t>(c)));
      fill_distribution(d, rng, part);
      std::memcpy(t.data.data() + static_cast<std::size_t>(begin) * esz, part.data.data(), part.bytes());
    });
    if (d == Distribution::DegenerateRows)
      overlay_degenerate_rows(t, desc.shape.empty() ? 1 : desc.shape.back(), desc.degenerate_rows, tseed);
  }
}

double GpuEvaluator::copy_bandwidth() {
  if (copy_bw_ <= 0) {
    GpuLock::Guard g(lock_);
    copy_bw_ = ctx_.measure_copy_bandwidth();
  }
  return copy_bw_;
}

EvalReport GpuEvaluator::evaluate(const Op& op, const EvalRequest& req) {
  BatchEvalRequest b;
  b.common = req;
  b.common.candidate_cubin.clear();
  b.knobs = {req.candidate_knobs};
  b.cubins = {req.candidate_cubin};
  return evaluate_batch(op, b).front();
}

DeviceReference* GpuEvaluator::device_reference(const Op& op, const EvalRequest& req, std::string* why) {
  std::string key = op.name();
  for (const auto& [k, v] : req.config) key += "|" + k + "=" + v;
  auto it = devrefs_.find(key);
  if (it != devrefs_.end()) {
    *why = devref_why_[key];
    return it->second.get();
  }
  std::unique_ptr<DeviceReference> ref;
  std::string reason;
  if (!op.has_host_reference()) {
    // The device reference is the only one: it must work, and is trusted once it writes every
    // element the same way twice.
    ref = DeviceReference::create(ctx_, op, req.config, &reason);
    if (ref) {
      std::vector<Shape> small;
      for (const auto& sc : req.shapes)
        if (sc.cls != ShapeClass::Benchmark) small.push_back(sc.shape);
      GpuLock::Guard g(lock_);
      reason = small.empty() ? "no correctness shapes to check the reference on"
                             : ref->self_check(small, mix(req.seed ^ 0xD5A61266F0C9392Cull));
    }
    if (!ref || !reason.empty())
      throw std::invalid_argument("reference: the fp64 reference of op " + op.name() + " cannot be used: " + reason);
    *why = "device (the op's only reference; wrote every element the same way twice on " +
           std::to_string(ref->verified_shapes()) + " shapes x " + std::to_string(all_distributions().size()) +
           " distributions)";
    devref_why_[key] = *why;
    return devrefs_.emplace(key, std::move(ref)).first->second.get();
  }
  if (checks_) {
    ref = DeviceReference::create(ctx_, op, req.config, &reason);
    if (ref) {
      // Trusted only after it agrees with the host's fp64 reference on the spec's small shapes.
      std::vector<Shape> small;
      for (const auto& sc : req.shapes)
        if (sc.cls != ShapeClass::Benchmark) small.push_back(sc.shape);
      GpuLock::Guard g(lock_);
      if (small.empty()) reason = "no correctness shapes to verify the device reference on";
      else reason = ref->verify(small, *checks_, mix(req.seed ^ 0xD5A61266F0C9392Cull));
      if (!reason.empty()) ref.reset();
    }
  } else {
    reason = "no device checks";
  }
  *why = ref ? "device (agrees with the host's fp64 reference on " + std::to_string(ref->verified_shapes()) +
                   " shapes x " + std::to_string(all_distributions().size()) + " distributions)"
             : "host (" + reason + ")";
  devref_why_[key] = *why;
  return devrefs_.emplace(key, std::move(ref)).first->second.get();
}

namespace {

// Per-candidate state of a batch.
struct Slot {
  std::optional<GpuModule> module;
  EvalReport report;
  bool stopped = false;  // failed a shape with stop_at_first_failure, or faulted
};

}  // namespace

std::vector<EvalReport> GpuEvaluator::evaluate_batch(const Op& op, const BatchEvalRequest& breq) {
  const auto t0 = std::chrono::steady_clock::now();
  const EvalRequest& req = breq.common;
  const CudaDriver& api = ctx_.api();
  const DeviceInfo& info = ctx_.info();
  const double bw = copy_bandwidth();
  if (!checks_tried_) {
    checks_tried_ = true;
    checks_ = DeviceChecks::create(ctx_, &checks_unavailable_);
  }
  std::string devref_status;
  DeviceReference* devref = device_reference(op, req, &devref_status);
  const std::size_t n = breq.cubins.size();
  std::vector<Slot> slots(n);
  for (std::size_t i = 0; i < n; ++i) {
    EvalReport& r = slots[i].report;
    r.copy_bandwidth = bw;
    r.environment = {{"gpu", info.name},
                     {"arch", info.arch()},
                     {"sm_count", std::to_string(info.sm_count)},
                     {"l2_bytes", std::to_string(info.l2_bytes)},
                     {"driver_version", std::to_string(info.driver_version)},
                     {"copy_bandwidth_GBps", std::to_string(bw / 1e9)},
                     {"gate_checks", checks_ ? "device" : "host (" + checks_unavailable_ + ")"},
                     {"benchmark_reference", devref_status}};
    try {
      slots[i].module.emplace(&api, breq.cubins[i]);
    } catch (const GpuError& e) {
      if (e.sticky()) throw;
      r.verdict = "fault";
      r.reasons.push_back(std::string("module-load: ") + e.what());
      slots[i].stopped = true;
    }
  }
  std::optional<GpuModule> base;
  if (!req.baseline_cubin.empty()) base.emplace(&api, req.baseline_cubin);
  // A candidate that faults without poisoning the context (a bad launch configuration, say)
  // stops alone; a sticky fault ends the batch and the runner re-runs it one by one.
  auto guarded = [&](Slot& slot, auto&& body) {
    try {
      body();
      return true;
    } catch (const GpuError& e) {
      if (e.sticky()) throw;
      slot.report.verdict = "fault";
      slot.report.reasons.push_back(std::string("launch-failed: ") + e.what());
      slot.stopped = true;
      return false;
    }
  };

  std::uint64_t stream_seed = mix(req.seed);
  double prep_s = 0;
  std::map<std::string, double> phases;
  const double held0 = lock_.held_seconds();
  std::size_t shape_index = 0;
  std::string where;  // the shape and guard layout in play, for a fault's reason
  try {
  for (const ShapeCase& sc : req.shapes) {
    const bool any_live = std::any_of(slots.begin(), slots.end(), [](const Slot& s) { return !s.stopped; });
    if (!any_live) break;
    const GuardSide side = !req.gate.guard_pages         ? GuardSide::None
                           : shape_index++ % 2 == 0 ? GuardSide::AfterEnd
                                                    : GuardSide::BeforeStart;
    where = "[" + std::string(to_string(sc.cls)) + " shape " + shape_to_string(sc.shape) + ", every tensor flush against an unmapped page " +
            (side == GuardSide::AfterEnd ? "after its end" : side == GuardSide::BeforeStart ? "before its start" : "(guard pages off)") + "]";
    // Scratch as large as this batch's builds need, not as any build could (the KDA backward's
    // largest workspace layout takes 16.8 GB at its largest shape, its seeds' defaults 10-11).
    std::vector<Knobs> batch_knobs = breq.knobs;
    if (base) batch_knobs.push_back(req.baseline_knobs);
    const std::vector<TensorDesc> descs = batch_tensors(op, sc.shape, req.config, batch_knobs);
    std::vector<ShapeReport> srs(n);
    std::vector<LaunchPlan> plans(n);
    std::vector<bool> in_play(n, false);  // evaluated on this shape
    LaunchPlan base_plan;
    bool base_ok = true;
    std::string base_error;
    try {
      if (base) base_plan = op.launch_plan(sc.shape, req.config, req.baseline_knobs);
    } catch (const std::invalid_argument& e) {
      base_ok = false;
      base_error = e.what();
    }
    auto fail = [&](std::size_t i, const std::string& reason) {
      srs[i].passed = false;
      srs[i].reasons.push_back(reason);
    };
    for (std::size_t i = 0; i < n; ++i) {
      if (slots[i].stopped) continue;
      in_play[i] = true;
      srs[i].shape = sc.shape;
      srs[i].cls = sc.cls;
      try {
        plans[i] = op.launch_plan(sc.shape, req.config, breq.knobs[i]);
      } catch (const std::invalid_argument& e) {
        fail(i, std::string("launch-plan: ") + e.what());
      }
      if (!base_ok) fail(i, "baseline-launch-plan: the baseline cannot run this shape: " + base_error);
    }
    auto live = [&](std::size_t i) { return in_play[i] && srs[i].passed && !slots[i].stopped; };
    bool use_dev = checks_ != nullptr;
    for (const auto& d : descs)
      if (is_checked_output(d.role) && !DeviceChecks::supports(d.dtype)) use_dev = false;

    // Benchmark shapes draw their inputs and compute the reference on the device (nothing of
    // their size crosses PCIe); the others use the host's fp64 reference directly.
    const bool dev_prep = use_dev && devref && sc.cls == ShapeClass::Benchmark && inputs_drawable_on_device(descs);
    std::vector<HostTensor> host;
    if (!dev_prep)
      for (const auto& d : descs) host.emplace_back(d.name, d.dtype, d.shape);
    std::optional<DeviceSet> dev_holder;
    {
      PhaseTimer pt(phases, "gate_alloc");
      dev_holder.emplace(allocate(&api, descs, side, 16));
      // Say in every report whether the guard pages were there (a driver without VMM falls back).
      if (!dev_holder->buffers.empty())
        for (auto& slot : slots)
          slot.report.environment["guard_pages"] =
              side == GuardSide::None ? "off" : dev_holder->buffers.begin()->second.guard_pages() ? "on" : "unavailable (cuMemAlloc)";
    }
    DeviceSet& dev = *dev_holder;
    std::uint64_t seed0 = 0;  // distribution 0's seed: the timing pool's set 0 is drawn again from it
    Distribution dist0 = Distribution::Normal;
    // Plus degenerate rows on every shape class when an input declares them.
    bool degenerate = false;
    for (const auto& d : descs)
      degenerate |= req.gate.degenerate_rows && is_input(d.role) && !d.fixed_distribution && !d.degenerate_rows.empty();
    const int ndist = (sc.cls == ShapeClass::Benchmark ? req.gate.distributions_benchmark : req.gate.distributions_correctness) +
                      (degenerate ? 1 : 0);
    std::vector<HostTensor> verified_inputs;                    // distribution 0, for the timing pool
    std::vector<std::vector<std::uint64_t>> verified_fp(n);     // fingerprints of each candidate's verified outputs
    for (int di = 0; di < ndist; ++di) {
      bool any = false;
      for (std::size_t i = 0; i < n; ++i) any |= live(i);
      if (!any) break;
      const Distribution dist = degenerate && di == ndist - 1
                                    ? Distribution::DegenerateRows
                                    : all_distributions()[static_cast<std::size_t>(di) % all_distributions().size()];
      stream_seed = mix(stream_seed);
      const std::uint64_t dist_seed = stream_seed;
      if (di == 0) {
        seed0 = dist_seed;
        dist0 = dist;
      }
      const auto p0 = std::chrono::steady_clock::now();
      // The reference runs first, into memory of its own, once for every candidate.
      std::vector<HostTensor> refs;
      if (!dev_prep) {
        fill_inputs(op, descs, dist, dist_seed, host);
        if (op.has_host_reference()) {
          op.reference(sc.shape, req.config, host, refs);
        } else {
          GpuLock::Guard g(lock_);
          refs = devref->compute_from_host(sc.shape, descs, host);
        }
      }
      prep_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
      // The GPU is ours from here to the end of this distribution's candidates.
      GpuLock::Guard gpu(lock_);
      std::uint64_t in_sum = 0;
      if (!dev_prep) {
        std::vector<HostTensor> inputs;
        for (std::size_t k = 0; k < descs.size(); ++k)
          if (descs[k].role == Role::In) inputs.push_back(host[k]);
        in_sum = checksum(inputs);
      }
      bool inputs_on_device = false;
      // Device checks: the reference goes up once per distribution and every candidate's
      // outputs are judged where they are.
      std::map<std::string, DeviceBuffer> ref_dev;
      std::uint64_t in_fp = 0;
      auto device_input_fp = [&] {
        std::uint64_t h = 0;
        for (std::size_t k = 0; k < descs.size(); ++k)
          if (descs[k].role == Role::In) h += mix(checks_->fingerprint(dev.pointers.at(descs[k].name), bytes_of(descs[k])) + k);
        return h;
      };
      if (dev_prep) {
        PhaseTimer pt(phases, "device_prep");
        ref_dev = devref->compute(sc.shape, [&] {
          draw_inputs_on_device(op, descs, dist, dist_seed, *checks_, ctx_, dev.pointers);
          return dev.pointers;
        }());
        in_fp = device_input_fp();
        inputs_on_device = true;
      } else if (use_dev) {
        for (const auto& r : refs) {
          DeviceBuffer b(&api, std::max<std::size_t>(r.bytes(), 1));
          b.upload(r.data.data(), r.bytes());
          ref_dev.emplace(r.name, std::move(b));
        }
      }
      std::optional<PhaseTimer> gate_timer;
      gate_timer.emplace(phases, "gate");
      for (std::size_t i = 0; i < n; ++i) {
        if (!live(i)) continue;
        std::vector<std::vector<HostTensor>> runs;
        std::vector<std::uint64_t> dev_fp0;  // device fingerprints of the pattern-0 outputs
        guarded(slots[i], [&] {
          const int gate_runs = std::max(1, req.gate.determinism_runs);
          for (int run = 0; run < gate_runs; ++run) {
            const int pattern = run % 2;  // the poison the outputs hold before this run
            // Inputs drawn on the device are drawn again (same seed, same data) after a candidate changed them.
            if (dev_prep && !inputs_on_device) draw_inputs_on_device(op, descs, dist, dist_seed, *checks_, ctx_, dev.pointers);
            for (std::size_t k = 0; k < descs.size(); ++k) {
              const TensorDesc& td = descs[k];
              const bool out = descs[k].role == Role::Out || descs[k].role == Role::Scratch;
              // Inputs go up once per distribution (again only after a candidate changed them);
              // outputs and in-outs before every run.
              if (!out && descs[k].role == Role::In && inputs_on_device) continue;
              if (out && use_dev) {
                checks_->fill(dev.pointers.at(descs[k].name), td.dtype, numel_of(td), poison_bits(td.dtype, pattern));
              } else if (dev_prep) {
                // an input already drawn on the device above
              } else {
                HostTensor& t = host[k];
                if (out) poison(t, pattern);
                dev.buffers.at(descs[k].name).upload(t.data.data(), t.bytes());
              }
              dev.buffers.at(descs[k].name).fill_canaries();
            }
            if (use_dev && !inputs_on_device) in_fp = device_input_fp();
            inputs_on_device = true;
            // Runs after the second start beside kernels that hold a growing share of the SMs for a
            // few microseconds: the candidate's CTAs are placed and finish in another order.
            const bool perturbed = run >= 2 && checks_;
            if (perturbed)
              checks_->occupy(info.sm_count * (run - 1) / run, kOccupyNs);
            ctx_.launch(*slots[i].module, plans[i], dev.pointers, descs);
            ctx_.synchronize();
            if (perturbed) checks_->wait_occupied();
            for (const auto& d : descs)
              if (!dev.buffers.at(d.name).canaries_intact()) {
                fail(i, with_shape("out-of-bounds-write: the kernel wrote outside tensor '" + d.name + "'", sc, dist));
                inputs_on_device = false;
              }
            if (use_dev) {
              if (device_input_fp() != in_fp) {
                fail(i, with_shape("input-mutated: a read-only input changed during the run", sc, dist));
                inputs_on_device = false;
              }
              std::vector<std::uint64_t> fps;
              for (std::size_t k = 0; k < descs.size(); ++k) {
                if (!is_checked_output(descs[k].role)) continue;
                const std::string& name = descs[k].name;
                const CUdeviceptr p = dev.pointers.at(name);
                fps.push_back(checks_->fingerprint(p, bytes_of(descs[k])));
                if (run == 0) {
                  auto rd = ref_dev.find(name);
                  if (rd == ref_dev.end()) continue;
                  const OutputStats st = checks_->stats(p, descs[k].dtype, rd->second.ptr(), numel_of(descs[k]),
                                                        poison_bits(descs[k].dtype, 0), nullptr);
                  const OutputCheck c = judge_output(name, descs[k].dtype, numel_of(descs[k]), st, tolerance_for(op, req, name));
                  srs[i].rel_l2[name] = std::max(srs[i].rel_l2[name], c.rel_l2);
                  srs[i].max_abs[name] = std::max(srs[i].max_abs[name], c.max_abs);
                  if (!c.passed) fail(i, with_shape(c.reason + " (output '" + name + "')", sc, dist));
                }
              }
              if (run == 0) {
                dev_fp0 = fps;
              } else {
                std::size_t j = 0;
                for (std::size_t k = 0; k < descs.size(); ++k) {
                  if (!is_checked_output(descs[k].role)) continue;
                  if (fps[j] != dev_fp0[j])
                    fail(i, with_shape("nondeterministic: output '" + descs[k].name +
                                           "' differs between run 1 and run " + std::to_string(run + 1) + " of " +
                                           std::to_string(gate_runs) + " (content fingerprints differ" +
                                           (perturbed ? "; this run started beside occupied SMs)" : ")"),
                                       sc, dist));
                  ++j;
                }
              }
              if (!srs[i].passed) break;
              continue;
            }
            std::vector<HostTensor> outs, after_inputs;
            for (std::size_t k = 0; k < descs.size(); ++k) {
              HostTensor t(descs[k].name, descs[k].dtype, descs[k].shape);
              dev.buffers.at(descs[k].name).download(t.data.data(), t.bytes());
              if (descs[k].role == Role::In) after_inputs.push_back(std::move(t));
              else if (is_checked_output(descs[k].role)) outs.push_back(std::move(t));
            }
            if (!after_inputs.empty() && checksum(after_inputs) != in_sum) {
              fail(i, with_shape("input-mutated: a read-only input changed during the run", sc, dist));
              inputs_on_device = false;
            }
            if (run == 0) {
              for (const auto& out : outs) {
                const HostTensor* ref = find_ref(refs, out.name);
                if (!ref) continue;
                OutputCheck c = check_output(out, *ref, tolerance_for(op, req, out.name), 0);
                srs[i].rel_l2[out.name] = std::max(srs[i].rel_l2[out.name], c.rel_l2);
                srs[i].max_abs[out.name] = std::max(srs[i].max_abs[out.name], c.max_abs);
                if (!c.passed) fail(i, with_shape(c.reason + " (output '" + out.name + "')", sc, dist));
              }
            } else {
              for (std::size_t k = 0; k < outs.size(); ++k) {
                const std::int64_t at = first_difference(outs[k], runs[0][k]);
                if (at >= 0)
                  fail(i, with_shape("nondeterministic: output '" + outs[k].name + "' differs between run 1 and run " +
                                         std::to_string(run + 1) + " of " + std::to_string(gate_runs) + " at byte " +
                                         std::to_string(at),
                                     sc, dist));
              }
            }
            runs.push_back(std::move(outs));
            if (!srs[i].passed) break;
          }
        });
        if (di == 0 && sc.cls == ShapeClass::Benchmark && live(i)) {
          if (use_dev) verified_fp[i] = dev_fp0;
          else if (!runs.empty())
            for (const auto& o : runs[0]) verified_fp[i].push_back(fingerprint(o));
        }
      }
      if (di == 0 && sc.cls == ShapeClass::Benchmark && !dev_prep) verified_inputs = host;
      gate_timer.reset();
      PhaseTimer pt(phases, "free");
      ref_dev.clear();
    }

    {
      // The gate's buffers are not needed for the timing: their memory goes back first (a set of
      // the KDA backward at H = 96 holds 14 GB).
      PhaseTimer pt(phases, "free");
      dev_holder.reset();
    }
    bool any_timed = false;
    for (std::size_t i = 0; i < n; ++i) any_timed |= live(i);
    if (any_timed && sc.cls == ShapeClass::Benchmark && sc.timed && req.time_benchmarks && base) {
      // ---- timing: one pool of input sets larger than L2 for the whole batch; each candidate
      // interleaved with the baseline ----
      std::size_t set_bytes = 0, pool_set_bytes = 0;  // a set's inputs; all a set allocates
      for (std::size_t k = 0; k < descs.size(); ++k) {
        if (is_input(descs[k].role)) set_bytes += bytes_of(descs[k]);
        // the candidate's set holds every tensor; the baseline's its own outputs and scratch
        pool_set_bytes += bytes_of(descs[k]) * (is_output(descs[k].role) ? 2 : 1);
      }
      set_bytes = std::max<std::size_t>(set_bytes, 1);
      std::size_t free_mem = 0, total_mem = 0;
      ctx_.check(api.cuMemGetInfo(&free_mem, &total_mem), "cuMemGetInfo");
      const double want = req.timing.pool_l2_multiple * static_cast<double>(info.l2_bytes) / static_cast<double>(set_bytes);
      const double cap = req.timing.pool_memory_fraction * static_cast<double>(free_mem) /
                         static_cast<double>(std::max<std::size_t>(pool_set_bytes, 1));
      int nsets = static_cast<int>(std::ceil(std::max(2.0, want)));
      nsets = std::max(1, std::min(nsets, static_cast<int>(cap)));
      std::vector<DeviceSet> cand_sets, base_sets;
      std::vector<std::vector<HostTensor>> set_inputs;
      // Host side first (the GPU lock is not held): the pool's input sets and the reference of
      // set 1; then the GPU part under the lock.
      const auto p1 = std::chrono::steady_clock::now();
      std::vector<std::uint64_t> set_seeds(static_cast<std::size_t>(nsets), seed0);
      for (int s = 1; s < nsets; ++s) set_seeds[static_cast<std::size_t>(s)] = stream_seed = mix(stream_seed);
      for (int s = 0; s < nsets && !dev_prep; ++s) {
        std::vector<HostTensor> h;
        if (s == 0) {
          h = verified_inputs;
        } else {
          for (const auto& d : descs) h.emplace_back(d.name, d.dtype, d.shape);
          fill_inputs(op, descs, Distribution::Normal, set_seeds[static_cast<std::size_t>(s)], h);
        }
        for (std::size_t k = 0; k < descs.size(); ++k)
          if (descs[k].role == Role::Out || descs[k].role == Role::Scratch) poison(h[k], 0);
        set_inputs.push_back(std::move(h));
      }
      std::vector<HostTensor> refs1;  // reference of input set 1, made once for the batch
      if (nsets >= 2 && !dev_prep) {
        if (op.has_host_reference()) {
          op.reference(sc.shape, req.config, set_inputs[1], refs1);
        } else {
          GpuLock::Guard g(lock_);
          refs1 = devref->compute_from_host(sc.shape, descs, set_inputs[1]);
        }
      }
      prep_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - p1).count();
      GpuLock::Guard gpu(lock_);
      for (int s = 0; s < nsets; ++s) {
        std::optional<PhaseTimer> pool_timer;
        pool_timer.emplace(phases, "pool_alloc");
        DeviceSet cs = allocate(&api, descs);
        DeviceSet bs;
        pool_timer.emplace(phases, "pool_fill");
        if (dev_prep)
          draw_inputs_on_device(op, descs, s == 0 ? dist0 : Distribution::Normal, set_seeds[static_cast<std::size_t>(s)],
                                *checks_, ctx_, cs.pointers);
        for (std::size_t k = 0; k < descs.size(); ++k) {
          const std::size_t nb = bytes_of(descs[k]);
          const HostTensor* h = dev_prep ? nullptr : &set_inputs[static_cast<std::size_t>(s)][k];
          if (h) cs.buffers.at(descs[k].name).upload(h->data.data(), nb);
          else if (is_output(descs[k].role))
            checks_->fill(cs.pointers.at(descs[k].name), descs[k].dtype, numel_of(descs[k]), poison_bits(descs[k].dtype, 0));
          // The baseline reads the candidate set's inputs; only its outputs are its own.
          if (is_output(descs[k].role)) {
            DeviceBuffer b(&api, std::max<std::size_t>(nb, 1));
            if (h) b.upload(h->data.data(), nb);
            else checks_->fill(b.ptr(), descs[k].dtype, numel_of(descs[k]), poison_bits(descs[k].dtype, 0));
            bs.pointers[descs[k].name] = b.ptr();
            bs.buffers.emplace(descs[k].name, std::move(b));
          } else {
            bs.pointers[descs[k].name] = cs.pointers[descs[k].name];
          }
        }
        cand_sets.push_back(std::move(cs));
        base_sets.push_back(std::move(bs));
      }
      std::map<std::string, DeviceBuffer> refs1_dev;
      std::optional<PhaseTimer> prep_timer;
      prep_timer.emplace(phases, "device_prep");
      if (dev_prep && nsets >= 2) refs1_dev = devref->compute(sc.shape, cand_sets[1].pointers);
      else if (use_dev)
        for (const auto& r : refs1) {
          DeviceBuffer b(&api, std::max<std::size_t>(r.bytes(), 1));
          b.upload(r.data.data(), r.bytes());
          refs1_dev.emplace(r.name, std::move(b));
        }
      prep_timer.reset();
      const double bytes = op.bytes(sc.shape, req.config);
      std::optional<PhaseTimer> timing_timer;
      timing_timer.emplace(phases, "timing");
      where = "[benchmark shape " + shape_to_string(sc.shape) + ", timing runs, every tensor flush against an unmapped page after its end]";
      for (std::size_t i = 0; i < n; ++i) {
        if (!live(i)) continue;
        ShapeReport& sr = srs[i];
        guarded(slots[i], [&] {
          GpuModule& cand = *slots[i].module;
          const LaunchPlan& plan = plans[i];
          // Every candidate starts from the same state: in-out tensors as generated, outputs
          // poisoned again (on the device when it can: re-uploading gigabytes per candidate
          // was most of a batch's time), so nothing the previous candidate wrote can pass as this one's.
          for (int s = 0; s < nsets; ++s)
            for (std::size_t k = 0; k < descs.size(); ++k) {
              if (!is_output(descs[k].role)) continue;
              DeviceBuffer& b = cand_sets[static_cast<std::size_t>(s)].buffers.at(descs[k].name);
              if (use_dev && descs[k].role != Role::InOut) {
                checks_->fill(b.ptr(), descs[k].dtype, numel_of(descs[k]), poison_bits(descs[k].dtype, 0));
              } else {
                const HostTensor& h = set_inputs[static_cast<std::size_t>(s)][k];
                b.upload(h.data.data(), h.bytes());
              }
            }
          std::size_t next_c = 0, next_b = 0;
          auto batch = [&](GpuModule& m, const LaunchPlan& p, std::vector<DeviceSet>& sets, std::size_t& next, int cnt) {
            for (int k = 0; k < cnt; ++k) {
              ctx_.launch(m, p, sets[next % sets.size()].pointers, descs);
              ++next;
            }
          };
          // Launches per batch from one warm launch of the candidate.
          batch(cand, plan, cand_sets, next_c, 1);
          ctx_.synchronize();
          const double one = ctx_.time_ms([&] { batch(cand, plan, cand_sets, next_c, 1); });
          const int per_batch =
              static_cast<int>(std::clamp(std::ceil(req.timing.target_batch_ms / std::max(one, 1e-4)), 1.0, 2000.0));
          for (int w = 0; w < req.timing.warmup_batches; ++w) {
            batch(*base, base_plan, base_sets, next_b, per_batch);
            batch(cand, plan, cand_sets, next_c, per_batch);
          }
          ctx_.synchronize();
          std::vector<double> tc, tb;
          for (int s = 0; !timing_done(tb, tc, req.timing.min_samples, req.timing.samples, req.timing.stop_rel_ci);
               ++s) {
            // Alternate which goes first so neither always runs on a warmer GPU.
            auto time_cand = [&] {
              tc.push_back(ctx_.time_ms([&] { batch(cand, plan, cand_sets, next_c, per_batch); }) / per_batch);
            };
            auto time_base = [&] {
              tb.push_back(ctx_.time_ms([&] { batch(*base, base_plan, base_sets, next_b, per_batch); }) / per_batch);
            };
            if (s % 2 == 0) {
              time_base();
              time_cand();
            } else {
              time_cand();
              time_base();
            }
          }
          ctx_.synchronize();
          // Writes into the slack around the timing sets' tensors are caught after timing too;
          // a broken canary is restored so the next candidate is judged on its own writes.
          for (auto& set : cand_sets)
            for (auto& [name, buf] : set.buffers)
              if (!buf.canaries_intact()) {
                fail(i, "out-of-bounds-write: a timed run wrote outside tensor '" + name + "' [benchmark shape " +
                            shape_to_string(sc.shape) + "]");
                buf.fill_canaries();
              }
          sr.candidate_ms = summarize(tc);
          sr.baseline_ms = summarize(tb);
          sr.speedup = paired_ratio(tb, tc);
          sr.pool_sets = nsets;
          sr.launches_per_batch = per_batch;
          const FloorCheck fc = check_floor(sr.candidate_ms->median, bytes, 0, bw * kFloorHeadroom, 0);
          sr.floor_ms = bytes / bw * 1e3;
          sr.fraction_of_floor = sr.floor_ms / sr.candidate_ms->median;
          if (!fc.plausible) fail(i, fc.reason + " [benchmark shape " + shape_to_string(sc.shape) + "]");
          // ---- the timed runs' outputs: set 0 must match the verified run bit for bit; set 1
          // is checked against its own reference ----
          if (use_dev) {
            std::size_t j = 0;
            for (std::size_t k = 0; k < descs.size(); ++k) {
              if (!is_checked_output(descs[k].role)) continue;
              const std::string& name = descs[k].name;
              const std::int64_t numel = numel_of(descs[k]);
              const std::size_t nbytes = bytes_of(descs[k]);
              if (j < verified_fp[i].size() &&
                  checks_->fingerprint(cand_sets[0].pointers.at(name), nbytes) != verified_fp[i][j])
                fail(i, "timed-output-mismatch: output '" + name +
                            "' of the timed runs differs from the verified run on the same inputs [benchmark shape " +
                            shape_to_string(sc.shape) + "]");
              ++j;
              auto rd = refs1_dev.find(name);
              if (nsets < 2 || rd == refs1_dev.end()) continue;
              const OutputStats st =
                  checks_->stats(cand_sets[1].pointers.at(name), descs[k].dtype, rd->second.ptr(), numel,
                                 poison_bits(descs[k].dtype, 0), nullptr);
              const OutputCheck c = judge_output(name, descs[k].dtype, numel, st, tolerance_for(op, req, name));
              if (!c.passed)
                fail(i, "timed-output-mismatch: timed run on input set 1 fails the gate: " + c.reason +
                            " [benchmark shape " + shape_to_string(sc.shape) + "]");
            }
            return;
          }
          for (int s = 0; s < std::min(nsets, 2); ++s) {
            std::vector<HostTensor> outs;
            for (std::size_t k = 0; k < descs.size(); ++k) {
              if (!is_checked_output(descs[k].role)) continue;
              HostTensor t(descs[k].name, descs[k].dtype, descs[k].shape);
              cand_sets[static_cast<std::size_t>(s)].buffers.at(descs[k].name).download(t.data.data(), t.bytes());
              outs.push_back(std::move(t));
            }
            if (s == 0) {
              for (std::size_t k = 0; k < outs.size() && k < verified_fp[i].size(); ++k)
                if (fingerprint(outs[k]) != verified_fp[i][k])
                  fail(i, "timed-output-mismatch: output '" + outs[k].name +
                              "' of the timed runs differs from the verified run on the same inputs [benchmark shape " +
                              shape_to_string(sc.shape) + "]");
            } else {
              for (const auto& out : outs) {
                const HostTensor* ref = find_ref(refs1, out.name);
                if (!ref) continue;
                OutputCheck c = check_output(out, *ref, tolerance_for(op, req, out.name), 0);
                if (!c.passed)
                  fail(i, "timed-output-mismatch: timed run on input set 1 fails the gate: " + c.reason +
                              " [benchmark shape " + shape_to_string(sc.shape) + "]");
              }
            }
          }
        });
      }
      timing_timer.reset();
      PhaseTimer pt(phases, "free");
      refs1_dev.clear();
      cand_sets.clear();
      base_sets.clear();
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (!in_play[i]) continue;
      if (!srs[i].passed && req.gate.stop_at_first_failure) slots[i].stopped = true;
      slots[i].report.shapes.push_back(std::move(srs[i]));
    }
  }

  } catch (const GpuError& e) {
    // An illegal address with every tensor against a guard page: the kernel read or wrote outside them.
    if (e.code() == CUDA_ERROR_ILLEGAL_ADDRESS)
      throw GpuError(std::string("out-of-bounds: an access outside the tensors hit a guard page (") + e.what() + ") " + where,
                     e.code());
    throw;
  }

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<EvalReport> out;
  for (auto& slot : slots) {
    EvalReport& report = slot.report;
    bool all_pass = report.verdict != "fault";
    double log_sum = 0;
    int nbench = 0;
    for (const auto& s : report.shapes) {
      all_pass &= s.passed;
      for (const auto& r : s.reasons) report.reasons.push_back(r);
      if (s.speedup) {
        log_sum += std::log(s.speedup->ratio);
        ++nbench;
      }
    }
    if (report.verdict != "fault") report.verdict = all_pass ? "pass" : "fail";
    if (all_pass && nbench > 0) report.fitness = std::exp(log_sum / nbench);
    // The batch's wall time is shared; each report carries its share.
    report.seconds = seconds / static_cast<double>(std::max<std::size_t>(n, 1));
    report.prep_seconds = prep_s / static_cast<double>(std::max<std::size_t>(n, 1));
    report.gpu_seconds = (lock_.held_seconds() - held0) / static_cast<double>(std::max<std::size_t>(n, 1));
    for (const auto& [phase, sec] : phases)
      report.phase_seconds[phase] = sec / static_cast<double>(std::max<std::size_t>(n, 1));
    out.push_back(std::move(report));
  }
  return out;
}

}  // namespace ptxevo::evaluator
