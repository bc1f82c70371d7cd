#include "kernels/rmsnorm/rmsnorm_bwd_op.hpp"
#include "kernels/rmsnorm/rmsnorm_device_reference.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ptxevo::kernels {

using namespace evaluator;

namespace {

struct Config {
  DType x = DType::BF16;
  DType w = DType::F32;
  bool has_weight = true;
};

Config parse(const OpConfig& cfg) {
  Config c;
  for (const auto& [k, v] : cfg) {
    if (k == "x_dtype") {
      if (!parse_dtype(v, &c.x) || (c.x != DType::BF16 && c.x != DType::F16 && c.x != DType::F32))
        throw std::invalid_argument("rmsnorm_bwd: x_dtype must be bf16, fp16 or fp32, got '" + v + "'");
    } else if (k == "w_dtype") {
      if (v != "fp32" && v != "same") throw std::invalid_argument("rmsnorm_bwd: w_dtype must be fp32 or same");
    } else if (k == "has_weight") {
      if (v != "true" && v != "false") throw std::invalid_argument("rmsnorm_bwd: has_weight must be true or false");
      c.has_weight = v == "true";
    } else if (k == "eps") {
      // Accepted for symmetry with the forward spec; the backward does not use eps
      // (kernels/rmsnorm/README.md, "INT21's differences").
    } else {
      throw std::invalid_argument("rmsnorm_bwd: unknown option '" + k + "' (x_dtype, w_dtype, has_weight, eps)");
    }
  }
  auto it = cfg.find("w_dtype");
  c.w = it != cfg.end() && it->second == "same" ? c.x : DType::F32;
  return c;
}

std::pair<std::int64_t, std::int64_t> dims(const Shape& s) {
  auto get = [&](const char* k) {
    auto it = s.find(k);
    if (it == s.end() || it->second < 1)
      throw std::invalid_argument(std::string("rmsnorm_bwd: shape needs ") + k + " >= 1");
    return it->second;
  };
  if (s.size() != 2) throw std::invalid_argument("rmsnorm_bwd: the shape's dimensions are M and N");
  const std::int64_t m = get("M"), n = get("N");
  std::int64_t numel = 0;
  if (__builtin_mul_overflow(m, n, &numel) || numel > (std::int64_t{1} << 40))
    throw std::invalid_argument("rmsnorm_bwd: M*N = " + std::to_string(m) + "*" + std::to_string(n) +
                                " is too large (at most 2^40 elements)");
  return {m, n};
}

const char* c_type(DType t) {
  return t == DType::BF16 ? "__nv_bfloat16" : t == DType::F16 ? "__half" : "float";
}

const HostTensor& named(const std::vector<HostTensor>& ts, const std::string& n) {
  for (const auto& t : ts)
    if (t.name == n) return t;
  throw std::invalid_argument("rmsnorm_bwd reference: no tensor '" + n + "'");
}

}  // namespace

std::string RmsNormBwdOp::validate(const OpConfig& cfg) const {
  try {
    parse(cfg);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

std::vector<TensorDesc> RmsNormBwdOp::tensors(const Shape& s, const OpConfig& cfg) const {
  const Config c = parse(cfg);
  const auto [m, n] = dims(s);
  // Zero, constant, 1e-30 and denormal rows of x and dout (not the largest finite values: with
  // the drawn rstd, dx of such rows overflows every 16-bit dtype).
  const std::vector<DegenerateRow> degenerate = {DegenerateRow::Zero, DegenerateRow::Constant, DegenerateRow::Tiny,
                                                 DegenerateRow::Denormal};
  std::vector<TensorDesc> t = {{"x", c.x, {m, n}, Role::In, false, degenerate}};
  if (c.has_weight) t.push_back({"w", c.w, {n}, Role::In, true});
  t.push_back({"dout", c.x, {m, n}, Role::In, false, degenerate});
  // rstd is an input of the backward: any positive value defines the function, so it is drawn
  // from a positive range rather than from the gate's signed distributions.
  t.push_back({"rstd", DType::F32, {m}, Role::In, true});
  t.push_back({"dx", c.x, {m, n}, Role::Out, false});
  if (c.has_weight) {
    t.push_back({"dw", DType::F32, {n}, Role::Out, false});
    t.push_back({"dw_partial", DType::F32, {kMaxPartialRows, n}, Role::Scratch, false});
  }
  return t;
}

std::map<std::string, std::string> RmsNormBwdOp::template_defines(const OpConfig& cfg) const {
  const Config c = parse(cfg);
  return {{"XT", c_type(c.x)}, {"WT", c_type(c.w)}, {"HAS_WEIGHT", c.has_weight ? "1" : "0"}};
}

namespace {

const char* const kKnobNames[] = {"THREADS",      "ITEMS",        "STAGES",     "CLUSTER",         "SMEM_KB",
                                  "WREG",         "MIN_BLOCKS",   "BLOCKS",     "CBLOCKS",         "RTHREADS",
                                  "OVERLAP_SUM",  "ASYNC_SUM",    "REGS_CLUSTER", "LONG_MIN_N",    "LONG_THREADS",
                                  "LONG_ITEMS",   "LONG_MIN_BLOCKS", "LONG_CBLOCKS", "LONG_SMEM_KB"};

std::int64_t next_pow2(std::int64_t v) {
  std::int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

Knobs RmsNormBwdOp::knob_defaults() {
  // Reasoned for the H200 (kernels/rmsnorm/README.md, backward): 512 threads hold a 16K-element
  // slice (4 vectors each); three 64 KB stages per CTA (one CTA per SM) keep two rows' loads in
  // flight; clusters of up to 16 for the longest rows; 132 single CTAs, or 120 clustered CTAs:
  // on the H200 30 clusters of 4, 15 of 8 and 7 of 16 such CTAs are resident at once (measured),
  // and a group that does not fit would run its fixed rows alone after the others (CBLOCKS 128:
  // 1.6x slower; 120 against 112: 1.06x at N = 64K and 128K). The long rows' tile is off
  // (LONG_THREADS 0) until a measurement picks one.
  return {{"THREADS", std::int64_t{512}},      {"ITEMS", std::int64_t{4}},       {"STAGES", std::int64_t{3}},
          {"CLUSTER", std::int64_t{16}},       {"SMEM_KB", std::int64_t{200}},   {"WREG", std::int64_t{1}},
          {"MIN_BLOCKS", std::int64_t{1}},     {"BLOCKS", std::int64_t{132}},    {"CBLOCKS", std::int64_t{120}},
          {"RTHREADS", std::int64_t{256}},     {"OVERLAP_SUM", std::int64_t{0}}, {"ASYNC_SUM", std::int64_t{0}},
          {"REGS_CLUSTER", std::int64_t{0}},   {"LONG_MIN_N", std::int64_t{65536}}, {"LONG_THREADS", std::int64_t{0}},
          {"LONG_ITEMS", std::int64_t{2}},     {"LONG_MIN_BLOCKS", std::int64_t{1}}, {"LONG_CBLOCKS", std::int64_t{120}},
          {"LONG_SMEM_KB", std::int64_t{200}}};
}

namespace {

struct Geometry {
  std::int64_t threads, items, stages, cluster, smem_kb, wreg, min_blocks, blocks, cblocks, rthreads, overlap_sum, async_sum,
      regs_cluster;
  // Rows of at least long_min_n elements: the clustered ring on a tile of long_threads x
  // long_items (0 threads: off), long_cblocks CTAs, long_smem_kb of stages.
  std::int64_t long_min_n, long_threads, long_items, long_min_blocks, long_cblocks, long_smem_kb;
};

Geometry geometry(const Knobs& k) {
  for (const auto& [name, v] : k) {
    bool known = false;
    for (const char* n : kKnobNames) known = known || name == n;
    if (!known)
      throw std::invalid_argument("rmsnorm_bwd: unknown knob '" + name +
                                  "' (knobs: THREADS, ITEMS, STAGES, CLUSTER, SMEM_KB, WREG, MIN_BLOCKS, BLOCKS, "
                                  "CBLOCKS, RTHREADS, OVERLAP_SUM, ASYNC_SUM, REGS_CLUSTER, LONG_MIN_N, LONG_THREADS, "
                                  "LONG_ITEMS, LONG_MIN_BLOCKS, LONG_CBLOCKS, LONG_SMEM_KB)");
  }
  const Knobs d = RmsNormBwdOp::knob_defaults();
  auto get = [&](const char* n) { return knob_int(k, n, std::get<std::int64_t>(d.at(n))); };
  Geometry g{get("THREADS"), get("ITEMS"),      get("STAGES"), get("CLUSTER"), get("SMEM_KB"),
             get("WREG"),    get("MIN_BLOCKS"), get("BLOCKS"), get("CBLOCKS"), get("RTHREADS"),
             get("OVERLAP_SUM"), get("ASYNC_SUM"), get("REGS_CLUSTER"), get("LONG_MIN_N"), get("LONG_THREADS"),
             get("LONG_ITEMS"), get("LONG_MIN_BLOCKS"), get("LONG_CBLOCKS"), get("LONG_SMEM_KB")};
  auto fail = [](const std::string& m) { throw std::invalid_argument("rmsnorm_bwd: " + m); };
  const std::string max_rows = std::to_string(RmsNormBwdOp::kMaxPartialRows);
  if (g.threads < 32 || g.threads > 1024 || g.threads % 32 != 0)
    fail("THREADS=" + std::to_string(g.threads) + " must be a multiple of 32 in 32..1024");
  if (g.items < 1 || g.items > 16) fail("ITEMS=" + std::to_string(g.items) + " must be 1..16");
  if (g.stages != 0 && (g.stages < 2 || g.stages > 8))
    fail("STAGES=" + std::to_string(g.stages) + " must be 0 (no shared-memory ring) or 2..8");
  if (g.cluster != 1 && g.cluster != 2 && g.cluster != 4 && g.cluster != 8 && g.cluster != 16)
    fail("CLUSTER=" + std::to_string(g.cluster) + " must be 1, 2, 4, 8 or 16 (the largest cluster a row may use)");
  for (const auto& [name, kb] : {std::pair{"SMEM_KB", g.smem_kb}, std::pair{"LONG_SMEM_KB", g.long_smem_kb}})
    if (kb < 1 || kb > 226)
      fail(std::string(name) + "=" + std::to_string(kb) +
           " must be 1..226: a CTA may have 227 KB of shared memory on sm_90a and sm_100a, and the kernel keeps "
           "under 1 KB for its own");
  if (g.wreg != 0 && g.wreg != 1) fail("WREG=" + std::to_string(g.wreg) + " must be 0 or 1");
  if (g.overlap_sum != 0 && g.overlap_sum != 1)
    fail("OVERLAP_SUM=" + std::to_string(g.overlap_sum) + " must be 0 or 1");
  if (g.async_sum != 0 && g.async_sum != 1) fail("ASYNC_SUM=" + std::to_string(g.async_sum) + " must be 0 or 1");
  if (g.regs_cluster != 0 && g.regs_cluster != 1)
    fail("REGS_CLUSTER=" + std::to_string(g.regs_cluster) + " must be 0 or 1");
  if (g.min_blocks < 0 || g.min_blocks > 32 || g.threads * g.min_blocks > 2048)
    fail("MIN_BLOCKS=" + std::to_string(g.min_blocks) + " must be in 0..32 with THREADS * MIN_BLOCKS <= 2048");
  if (g.blocks < 1 || g.blocks > RmsNormBwdOp::kMaxPartialRows)
    fail("BLOCKS=" + std::to_string(g.blocks) + " must be 1.." + max_rows);
  if (g.cblocks < 1 || g.cblocks > RmsNormBwdOp::kMaxPartialRows)
    fail("CBLOCKS=" + std::to_string(g.cblocks) + " must be 1.." + max_rows);
  if (g.rthreads < 32 || g.rthreads > 1024 || g.rthreads % 32 != 0)
    fail("RTHREADS=" + std::to_string(g.rthreads) + " must be a multiple of 32 in 32..1024");
  if (g.long_min_n < 1) fail("LONG_MIN_N=" + std::to_string(g.long_min_n) + " must be at least 1");
  if (g.long_threads != 0 && (g.long_threads < 32 || g.long_threads > 1024 || g.long_threads % 32 != 0))
    fail("LONG_THREADS=" + std::to_string(g.long_threads) + " must be 0 (no long-row tile) or a multiple of 32 in 32..1024");
  if (g.long_items < 1 || g.long_items > 16) fail("LONG_ITEMS=" + std::to_string(g.long_items) + " must be 1..16");
  if (g.long_min_blocks < 0 || g.long_min_blocks > 32 || g.long_threads * g.long_min_blocks > 2048)
    fail("LONG_MIN_BLOCKS=" + std::to_string(g.long_min_blocks) +
         " must be in 0..32 with LONG_THREADS * LONG_MIN_BLOCKS <= 2048");
  // CTAs, not groups: with clusters of 16 up to 16 * kMaxPartialRows (the groups are capped there).
  if (g.long_cblocks < 1 || g.long_cblocks > 16 * RmsNormBwdOp::kMaxPartialRows)
    fail("LONG_CBLOCKS=" + std::to_string(g.long_cblocks) + " must be 1.." +
         std::to_string(16 * RmsNormBwdOp::kMaxPartialRows));
  return g;
}

}  // namespace

namespace {

// The ring for rows of nu 16-byte units on CTAs of threads x items units: the smallest
// power-of-two cluster (at least min_cluster) whose CTAs hold a slice, doubled until at least two
// stages of it fit smem_kb (three for a cluster with OVERLAP_SUM, whose split barrier needs them),
// at most CLUSTER. False when none fits.
bool ring_dispatch(const Geometry& g, std::int64_t m, std::int64_t nu, std::int64_t threads, std::int64_t items,
                   std::int64_t smem_kb, std::int64_t cblocks, std::int64_t min_cluster, RmsNormBwdOp::Dispatch* d) {
  for (std::int64_t cl = std::max(min_cluster, next_pow2(ceil_div(nu, threads * items))); cl <= g.cluster; cl *= 2) {
    const std::int64_t slice = ceil_div(nu, cl);
    const std::int64_t stages = std::min(g.stages, smem_kb * 1024 / (slice * 32));
    if (stages < (cl > 1 && g.overlap_sum ? 3 : 2)) continue;
    d->entry = cl > 1 ? "rmsnorm_bwd_ring_cluster" : "rmsnorm_bwd_ring";
    d->cluster = cl;
    // Groups past those resident at once run in later waves; at most kMaxPartialRows (dw partials).
    d->groups = std::min({m, RmsNormBwdOp::kMaxPartialRows, cl > 1 ? std::max<std::int64_t>(1, cblocks / cl) : g.blocks});
    d->slice = slice;
    d->stages = stages;
    d->shared_bytes = stages * slice * 32;
    d->threads = threads;
    d->items = items;
    return true;
  }
  return false;
}

}  // namespace

// The ring when STAGES > 0 and N is a whole number of 16-byte units (ring_dispatch, on the
// THREADS x ITEMS tile with SMEM_KB and CBLOCKS). Anything else (and STAGES = 0) runs the first
// template's paths. REGS_CLUSTER 1: before the ring, a row whose slices a cluster of at most
// CLUSTER CTAs holds in THREADS * ITEMS units takes rmsnorm_bwd_regs (the smallest such
// power-of-two cluster, no shared-memory ring). LONG_THREADS > 0: before both, a row of at least
// LONG_MIN_N elements takes rmsnorm_bwd_ring_cluster_long if the ring fits it on the long tile
// (LONG_THREADS x LONG_ITEMS, LONG_SMEM_KB, LONG_CBLOCKS; clusters of at least 2: that entry is
// the clustered ring only); otherwise it goes on as any other row.
RmsNormBwdOp::Dispatch RmsNormBwdOp::dispatch(const OpConfig& cfg, const Knobs& k, std::int64_t m, std::int64_t n) {
  const Config c = parse(cfg);
  const Geometry g = geometry(k);
  const std::int64_t vec = 16 / static_cast<std::int64_t>(dtype_size(c.x));
  Dispatch d;
  d.threads = g.threads;
  d.items = g.items;
  if (g.long_threads > 0 && g.stages > 0 && n >= g.long_min_n && n % vec == 0 &&
      ring_dispatch(g, m, n / vec, g.long_threads, g.long_items, g.long_smem_kb, g.long_cblocks, 2, &d)) {
    d.entry = "rmsnorm_bwd_ring_cluster_long";
    return d;
  }
  if (g.regs_cluster && n % vec == 0) {
    const std::int64_t nu = n / vec;
    const std::int64_t cl = next_pow2(ceil_div(nu, g.threads * g.items));
    if (cl <= g.cluster) {
      d.entry = "rmsnorm_bwd_regs";
      d.cluster = cl;
      d.groups = std::min(m, std::max<std::int64_t>(1, g.cblocks / cl));
      d.slice = ceil_div(nu, cl);
      return d;
    }
  }
  if (g.stages > 0 && n % vec == 0 && ring_dispatch(g, m, n / vec, g.threads, g.items, g.smem_kb, g.cblocks, 1, &d))
    return d;
  d.entry = "rmsnorm_bwd";
  d.groups = std::min(m, g.blocks);
  return d;
}

std::vector<std::string> RmsNormBwdOp::entries(const Knobs& k) {
  const Geometry g = geometry(k);
  std::vector<std::string> e = {"rmsnorm_bwd"};
  if (g.stages > 0) e.push_back("rmsnorm_bwd_ring");
  if (g.stages > 0 && g.cluster > 1) e.push_back("rmsnorm_bwd_ring_cluster");
  if (g.regs_cluster) e.push_back("rmsnorm_bwd_regs");
  if (g.long_threads > 0 && g.stages > 0 && g.cluster > 1) e.push_back("rmsnorm_bwd_ring_cluster_long");
  return e;
}

LaunchPlan RmsNormBwdOp::launch_plan(const Shape& s, const OpConfig& cfg, const Knobs& k) const {
  const Config c = parse(cfg);
  const auto [m, n] = dims(s);
  const Geometry g = geometry(k);
  const Dispatch d = dispatch(cfg, k, m, n);
  KernelLaunch main;
  main.entry = d.entry;
  main.grid = {static_cast<std::uint32_t>(d.groups * d.cluster), 1, 1};
  main.block = {static_cast<std::uint32_t>(d.threads), 1, 1};
  main.cluster = {static_cast<std::uint32_t>(d.cluster), 1, 1};
  main.shared_bytes = static_cast<std::uint32_t>(d.shared_bytes);
  main.args = {ArgTensor{"x"},  ArgTensor{c.has_weight ? "w" : ""}, ArgTensor{"dout"}, ArgTensor{"rstd"},
               ArgTensor{"dx"}, ArgTensor{c.has_weight ? "dw_partial" : ""}, m, n};
  LaunchPlan plan{{main}};
  if (c.has_weight) {
    KernelLaunch red;
    red.entry = "rmsnorm_bwd_dw_reduce";
    // 32 columns per CTA; the kernel loops over column blocks past the grid.
    red.grid = {static_cast<std::uint32_t>(std::min<std::int64_t>(ceil_div(n, 32), std::int64_t{1} << 30)), 1, 1};
    red.block = {static_cast<std::uint32_t>(g.rthreads), 1, 1};
    red.args = {ArgTensor{"dw_partial"}, ArgTensor{"dw"}, d.groups, n};
    plan.kernels.push_back(red);
  }
  return plan;
}

void RmsNormBwdOp::reference(const Shape& s, const OpConfig& cfg, const std::vector<HostTensor>& ts,
                             std::vector<HostTensor>& ref) const {
  const Config c = parse(cfg);
  const auto [m, n] = dims(s);
  const HostTensor& x = named(ts, "x");
  const HostTensor& dout = named(ts, "dout");
  const HostTensor& rstd = named(ts, "rstd");
  const HostTensor* w = c.has_weight ? &named(ts, "w") : nullptr;
  HostTensor dx("dx", DType::F64, {m, n});
  std::vector<double> wv(static_cast<std::size_t>(n), 1.0);
  if (w)
    for (std::int64_t j = 0; j < n; ++j) wv[static_cast<std::size_t>(j)] = w->get(j);
  auto* dxp = reinterpret_cast<double*>(dx.data.data());
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, m), [&](const tbb::blocked_range<std::int64_t>& rows) {
    for (std::int64_t r = rows.begin(); r < rows.end(); ++r) {
      const double rs = rstd.get(r);
      double c1 = 0;
      for (std::int64_t j = 0; j < n; ++j) c1 += x.get(r * n + j) * rs * dout.get(r * n + j) * wv[static_cast<std::size_t>(j)];
      c1 /= static_cast<double>(n);
      for (std::int64_t j = 0; j < n; ++j) {
        const double xh = x.get(r * n + j) * rs;
        dxp[r * n + j] = (dout.get(r * n + j) * wv[static_cast<std::size_t>(j)] - xh * c1) * rs;
      }
    }
  });
  ref.push_back(std::move(dx));
  if (c.has_weight) {
    // dw[j] = sum over rows of dout * x_hat, reduced over row blocks.
    using Acc = std::vector<double>;
    Acc dw = tbb::parallel_reduce(
        tbb::blocked_range<std::int64_t>(0, m), Acc(static_cast<std::size_t>(n), 0.0),
        [&](const tbb::blocked_range<std::int64_t>& rows, Acc acc) {
          for (std::int64_t r = rows.begin(); r < rows.end(); ++r) {
            const double rs = rstd.get(r);
            for (std::int64_t j = 0; j < n; ++j)
              acc[static_cast<std::size_t>(j)] += dout.get(r * n + j) * x.get(r * n + j) * rs;
          }
          return acc;
        },
        [](Acc a, const Acc& b) {
          for (std::size_t j = 0; j < a.size(); ++j) a[j] += b[j];
          return a;
        });
    HostTensor t("dw", DType::F64, {n});
    for (std::int64_t j = 0; j < n; ++j) t.set(j, dw[static_cast<std::size_t>(j)]);
    ref.push_back(std::move(t));
  }
}

std::string RmsNormBwdOp::device_reference_source(const OpConfig& cfg) const {
  const Config c = parse(cfg);
  return rmsnorm_bwd_device_reference_source(c.x, c.w, c.has_weight);
}

evaluator::DeviceReferencePlan RmsNormBwdOp::device_reference_plan(const Shape& s, const OpConfig& cfg) const {
  const Config c = parse(cfg);
  const auto [m, n] = dims(s);
  return rmsnorm_bwd_device_reference_plan(c.has_weight, m, n);
}

double RmsNormBwdOp::bytes(const Shape& s, const OpConfig& cfg) const {
  const Config c = parse(cfg);
  const auto [m, n] = dims(s);
  const double e = static_cast<double>(dtype_size(c.x));
  // docs/targets.md's convention: x and dout read, dx written, rstd read, dw written.
  return 3.0 * static_cast<double>(m) * static_cast<double>(n) * e + 4.0 * static_cast<double>(m) +
         4.0 * static_cast<double>(n);
}

double RmsNormBwdOp::flops(const Shape& s, const OpConfig&) const {
  const auto [m, n] = dims(s);
  return 8.0 * static_cast<double>(m) * static_cast<double>(n);
}

Tolerance RmsNormBwdOp::tolerance(const std::string& output, const OpConfig& cfg) const {
  const Config c = parse(cfg);
  // dx: one rounding to x's dtype after fp32 arithmetic, as in the forward. dw: an fp32 sum over
  // M rows in a kernel-chosen order; its error grows with M but stays far below 1e-4 relative.
  if (output == "dw") return {1e-4, 1e-3};
  if (c.x == DType::BF16) return {5e-3, 1e-2};
  if (c.x == DType::F16) return {2e-3, 4e-3};
  return {1e-5, 1e-4};
}

void RmsNormBwdOp::fill_fixed(const TensorDesc& d, std::mt19937_64& rng, HostTensor& t) const {
  if (d.name == "w") {
    std::normal_distribution<double> nd(0.0, 1.0);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, 1.0 + 0.5 * nd(rng));
  } else if (d.name == "rstd") {
    std::uniform_real_distribution<double> u(0.5, 2.0);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, u(rng));
  } else {
    Op::fill_fixed(d, rng, t);
  }
}

}  // namespace ptxevo::kernels
