#include "search/cost_features.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <stdexcept>

namespace ptxevo::search {
namespace {

// Generic columns, in order.
const std::vector<std::string> kGeneric = {
    "log2_bytes",        "log2_threads",     "log2_grid",          "cluster",          "dynamic_shared_kb",
    "registers",         "spill_stores",     "spill_loads",        "stack_frame",      "static_shared_kb",
    "occupancy",         "waves",            "tail_efficiency",    "blocks_per_sm",    "kernels",
    "edits",             "log2_bytes_per_thread",
    // From the main kernel's PTX (search/ptx_profile.hpp); all 0 with ptx_profiled 0 for rows
    // recorded without a profile. mix_*: shares of the static instruction count.
    "ptx_profiled",      "ptx_log2_instructions", "mix_global_load", "mix_global_store", "mix_shared",
    "mix_async_copy",    "mix_sync",           "mix_tensor_core",  "mix_warp",         "mix_fp32",
    "mix_fp16",          "mix_special",        "mix_integer",      "mix_select_convert_move",
    "mix_control",       "mix_local",          "global_load_width", "global_store_width", "cache_hinted_share",
    "loop_share",        "max_loop_depth",     "log2_bytes_in_flight_ratio"};

// Memory latency the loads in flight must cover (H200 DRAM, loaded: about 700 ns), for the
// bytes-in-flight column: resident threads x static global load bytes a thread issues, against
// bandwidth x latency (Little's law).
constexpr double kMemoryLatencyS = 700e-9;

// The IR columns of one kernel, in kGeneric's order from "ptx_profiled".
void push_ptx_columns(std::vector<double>& x, const PtxProfile* p, double resident_threads, const GpuLimits& gpu) {
  if (!p || p->instructions <= 0) {
    x.insert(x.end(), 22, 0.0);
    return;
  }
  using C = ir::InstrCategory;
  const double n = p->instructions;
  auto share = [&](std::initializer_list<C> cs) {
    double v = 0;
    for (C c : cs) v += p->category(c);
    return v / n;
  };
  const double in_flight = p->global_load_bytes * resident_threads;
  const double need = gpu.bandwidth_bytes_per_s * kMemoryLatencyS;
  x.insert(x.end(),
           {1.0,
            std::log2(n),
            share({C::GlobalLoad}),
            share({C::GlobalStore}),
            share({C::SharedLoad, C::SharedStore}),
            share({C::AsyncCopy}),
            share({C::BarrierFence, C::Mbarrier}),
            share({C::TensorCore}),
            share({C::Warp}),
            share({C::Fp32}),
            share({C::Fp16}),
            share({C::SpecialFunction}),
            share({C::IntArith, C::Logic}),
            share({C::CompareSelect, C::Conversion, C::Move}),
            share({C::Control}),
            share({C::Local}),
            // Bytes an access moves, /16 (a 128-bit access is 1): vector width is what the
            // mutators change.
            p->global_loads > 0 ? p->global_load_bytes / p->global_loads / 16.0 : 0.0,
            p->global_stores > 0 ? p->global_store_bytes / p->global_stores / 16.0 : 0.0,
            p->global_loads + p->global_stores > 0 ? p->cache_hinted / (p->global_loads + p->global_stores) : 0.0,
            p->in_loops / n,
            static_cast<double>(p->max_loop_depth),
            std::clamp(std::log2(std::max(in_flight / need, 1.0 / 1024)), -10.0, 10.0)});
}

double log2_or_zero(double v) { return v > 0 ? std::log2(v) : 0.0; }

}  // namespace

std::vector<std::string> FeatureLayout::names() const {
  std::vector<std::string> n = kGeneric;
  for (const auto& k : knobs) n.push_back("knob:" + k);
  for (const auto& p : passes) n.push_back("pass:" + p);
  return n;
}

std::pair<std::size_t, std::size_t> ptx_feature_columns() {
  const auto first = static_cast<std::size_t>(std::find(kGeneric.begin(), kGeneric.end(), "ptx_profiled") - kGeneric.begin());
  return {first, kGeneric.size()};
}

std::size_t FeatureLayout::size() const { return kGeneric.size() + knobs.size() + passes.size(); }

int blocks_per_sm(int threads, int registers, int shared_bytes, const GpuLimits& gpu) {
  if (threads <= 0) return 0;
  const int warps = (threads + 31) / 32;
  int by_threads = gpu.max_threads_per_sm / (warps * 32);
  int by_regs = gpu.max_blocks_per_sm;
  if (registers > 0) {
    const int per_warp = ((registers * 32 + gpu.register_granularity - 1) / gpu.register_granularity) *
                         gpu.register_granularity;
    by_regs = gpu.registers_per_sm / (per_warp * warps);
  }
  const int by_smem = shared_bytes > 0 ? gpu.shared_bytes_per_sm / shared_bytes : gpu.max_blocks_per_sm;
  return std::max(0, std::min({by_threads, by_regs, by_smem, gpu.max_blocks_per_sm}));
}

FeatureRow cost_features(const FeatureLayout& layout, const evaluator::Op& op, const evaluator::OpConfig& cfg,
                         const evaluator::Shape& shape, const Genome& genome,
                         const std::vector<evaluator::FunctionResources>& resources,
                         const std::vector<PtxProfile>& ptx, const GpuLimits& gpu) {
  const evaluator::LaunchPlan plan = op.launch_plan(shape, cfg, genome.knobs);
  if (plan.kernels.empty()) throw std::invalid_argument("cost_features: the launch plan has no kernel");
  // The main kernel: the launch with the most threads in flight decides the time of a
  // bandwidth-bound op; the others count through `kernels`.
  const evaluator::KernelLaunch* main = &plan.kernels.front();
  auto threads_of = [](const evaluator::KernelLaunch& k) {
    return static_cast<double>(k.block.x) * k.block.y * k.block.z * k.grid.x * k.grid.y * k.grid.z;
  };
  for (const auto& k : plan.kernels)
    if (threads_of(k) > threads_of(*main)) main = &k;
  const evaluator::FunctionResources* res = nullptr;
  for (const auto& f : resources)
    if (f.name == main->entry) res = &f;
  const int threads = static_cast<int>(main->block.x * main->block.y * main->block.z);
  const double grid = static_cast<double>(main->grid.x) * main->grid.y * main->grid.z;
  const int cluster = static_cast<int>(main->cluster.x * main->cluster.y * main->cluster.z);
  const int registers = res && res->registers > 0 ? res->registers : 32;
  const int static_shared = res ? res->shared_bytes : 0;
  const int blocks = blocks_per_sm(threads, registers, static_shared + static_cast<int>(main->shared_bytes), gpu);
  const double occupancy = static_cast<double>(blocks * threads) / gpu.max_threads_per_sm;
  const double waves = blocks > 0 ? grid / (static_cast<double>(blocks) * gpu.sm_count) : 0.0;
  const double tail = waves > 0 ? waves / std::ceil(waves) : 0.0;
  const double bytes = op.bytes(shape, cfg);

  FeatureRow row;
  row.occupancy = occupancy;
  row.tail_efficiency = tail;
  row.roofline_ms = bytes / gpu.bandwidth_bytes_per_s * 1e3;
  int edits = static_cast<int>(genome.edits.size());
  row.x = {log2_or_zero(bytes),
           log2_or_zero(threads),
           log2_or_zero(grid),
           static_cast<double>(cluster),
           main->shared_bytes / 1024.0,
           static_cast<double>(registers),
           res ? static_cast<double>(res->spill_stores) : 0.0,
           res ? static_cast<double>(res->spill_loads) : 0.0,
           res ? static_cast<double>(res->stack_frame) : 0.0,
           static_shared / 1024.0,
           occupancy,
           waves,
           tail,
           static_cast<double>(blocks),
           static_cast<double>(plan.kernels.size()),
           static_cast<double>(edits),
           log2_or_zero(bytes / std::max(1.0, grid * threads))};
  const PtxProfile* prof = nullptr;
  for (const auto& p : ptx)
    if (p.function == main->entry) prof = &p;
  // Threads resident on the whole GPU at once (a grid smaller than one wave: all of it).
  const double resident = std::min(grid, static_cast<double>(blocks) * gpu.sm_count) * threads;
  push_ptx_columns(row.x, prof, resident, gpu);
  for (const auto& k : layout.knobs) {
    double v = 0;
    if (auto it = genome.knobs.find(k); it != genome.knobs.end())
      if (const auto* i = std::get_if<std::int64_t>(&it->second)) v = *i > 0 ? std::log2(static_cast<double>(*i)) + 1 : 0;
    row.x.push_back(v);
  }
  for (const auto& p : layout.passes)
    row.x.push_back(static_cast<double>(
        std::count_if(genome.edits.begin(), genome.edits.end(), [&](const PtxEdit& e) { return e.pass == p; })));
  // The cold-start guess: the roofline stretched by too few resident threads to cover memory
  // latency (half the SM's threads hide it for a streaming kernel) and by the idle SMs of the
  // last wave.
  const double latency_cover = std::clamp(occupancy / 0.5, 0.05, 1.0);
  row.analytic_log_time = -std::log(latency_cover) - std::log(std::max(tail, 0.05));
  return row;
}

std::vector<evaluator::FunctionResources> resources_from_json(const std::string& text) {
  std::vector<evaluator::FunctionResources> out;
  if (text.empty()) return out;
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_array()) return out;
  for (const auto& f : j) {
    evaluator::FunctionResources r;
    r.name = f.value("function", std::string());
    r.is_entry = true;
    r.registers = f.value("registers", -1);
    r.spill_stores = f.value("spill_stores", 0);
    r.spill_loads = f.value("spill_loads", 0);
    r.stack_frame = f.value("stack_frame", 0);
    r.shared_bytes = f.value("shared_bytes", 0);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace ptxevo::search
