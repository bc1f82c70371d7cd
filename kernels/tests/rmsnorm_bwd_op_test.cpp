// RmsNormBwdOp: options, tensors, the per-shape dispatch (first-template paths, the shared-memory
// ring, the ring over a cluster), launch plans, the fp64 reference, a host model of the ring
// kernel's indexing and stage protocol (every element loaded, read and written exactly once; the
// mbarrier parities match the refills), the spec's constraints against the plan, and NVRTC +
// ptxas builds of a sample of the knob space (sm_90a; sm_100a compiled only, never run here).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <tuple>

#include "evaluator/builder.hpp"
#include "evaluator/elf_sections.hpp"
#include "evaluator/evaluation.hpp"
#include "evaluator/knob_constraints.hpp"
#include "evaluator/nvrtc_compiler.hpp"
#include "evaluator/ptxas.hpp"
#include "evaluator/spec.hpp"
#include "evaluator/template_source.hpp"
#include "kernels/builtin_ops.hpp"
#include "kernels/rmsnorm/rmsnorm_bwd_op.hpp"

namespace ptxevo::kernels {
namespace {

using namespace evaluator;
using I = std::int64_t;

const OpConfig kBf16 = {{"x_dtype", "bf16"}, {"w_dtype", "fp32"}};
const std::string kBwdSpec = PTXEVO_SOURCE_DIR "/kernels/rmsnorm/rmsnorm_bwd.spec";

HostTensor filled(const std::string& name, DType t, std::vector<std::int64_t> shape, const std::vector<double>& v) {
  HostTensor h(name, t, std::move(shape));
  for (std::size_t i = 0; i < v.size(); ++i) h.set(static_cast<std::int64_t>(i), v[i]);
  return h;
}

Shape shape(I m, I n) { return {{"M", m}, {"N", n}}; }

Knobs with(const Knobs& over) {
  Knobs k = RmsNormBwdOp::knob_defaults();
  for (const auto& [n, v] : over) k[n] = v;
  return k;
}

std::string knobs_text(const Knobs& k) {
  std::string s;
  for (const auto& [n, v] : k) s += (s.empty() ? "" : ",") + n + "=" + std::to_string(std::get<I>(v));
  return s;
}

Spec load_bwd_spec() {
  static const auto registry = builtin_ops();
  auto r = load_spec(kBwdSpec, registry);
  if (!r.spec) throw std::runtime_error(r.error ? r.error->format() : "load_spec failed");
  return *r.spec;
}

bool admitted(const SeedTemplate& seed, const Knobs& k) {
  for (const auto& c : seed.constraints)
    if (!constraint_holds(c, k)) return false;
  return true;
}

// Every assignment of the knobs in `vary` (the others at their defaults), in odometer order.
template <class F>
void for_each_assignment(const SeedTemplate& seed, const std::set<std::string>& vary, F&& f) {
  std::vector<std::size_t> idx(seed.knobs.size(), 0), size(seed.knobs.size());
  for (std::size_t i = 0; i < seed.knobs.size(); ++i) size[i] = vary.count(seed.knobs[i].name) ? seed.knobs[i].values.size() : 1;
  while (true) {
    Knobs k;
    for (std::size_t i = 0; i < idx.size(); ++i)
      k[seed.knobs[i].name] = size[i] == 1 ? seed.knobs[i].default_value : seed.knobs[i].values[idx[i]];
    f(k);
    std::size_t i = 0;
    for (; i < idx.size(); ++i) {
      if (++idx[i] < size[i]) break;
      idx[i] = 0;
    }
    if (i == idx.size()) return;
  }
}

// ---------------------------------------------------------------------------------------------
// Options, tensors, reference

TEST(RmsNormBwd, ReferenceMatchesAHandComputation) {
  RmsNormBwdOp op;
  const Shape s = {{"M", 2}, {"N", 2}};
  const OpConfig cfg = {{"x_dtype", "fp32"}};
  std::vector<HostTensor> in = {filled("x", DType::F32, {2, 2}, {1, 2, 3, -1}),
                                filled("w", DType::F32, {2}, {2, 0.5}),
                                filled("dout", DType::F32, {2, 2}, {1, -1, 0.5, 2}),
                                filled("rstd", DType::F32, {2}, {0.5, 0.25})};
  std::vector<HostTensor> ref;
  op.reference(s, cfg, in, ref);
  ASSERT_EQ(ref.size(), 2u);
  // Row 0: x_hat = (0.5, 1), wdy = (2, -0.5), c1 = (1 - 0.5) / 2 = 0.25,
  // dx = ((2 - 0.125) * 0.5, (-0.5 - 0.25) * 0.5) = (0.9375, -0.375).
  EXPECT_DOUBLE_EQ(ref[0].get(0), 0.9375);
  EXPECT_DOUBLE_EQ(ref[0].get(1), -0.375);
  // Row 1: x_hat = (0.75, -0.25), wdy = (1, 1), c1 = (0.75 - 0.25) / 2 = 0.25,
  // dx = ((1 - 0.1875) * 0.25, (1 + 0.0625) * 0.25).
  EXPECT_DOUBLE_EQ(ref[0].get(2), 0.203125);
  EXPECT_DOUBLE_EQ(ref[0].get(3), 0.265625);
  // dw = sum over rows of dout * x_hat: (0.5 + 0.375, -1 - 0.5).
  EXPECT_EQ(ref[1].name, "dw");
  EXPECT_DOUBLE_EQ(ref[1].get(0), 0.875);
  EXPECT_DOUBLE_EQ(ref[1].get(1), -1.5);
}

TEST(RmsNormBwd, TensorsAndTwoKernelPlan) {
  RmsNormBwdOp op;
  const Shape s = {{"M", 100}, {"N", 4096}};
  auto ts = op.tensors(s, kBf16);
  ASSERT_EQ(ts.size(), 7u);
  EXPECT_EQ(ts.back().name, "dw_partial");
  EXPECT_EQ(ts.back().role, Role::Scratch);
  EXPECT_EQ(ts.back().shape, (std::vector<I>{RmsNormBwdOp::kMaxPartialRows, 4096}));
  LaunchPlan p = op.launch_plan(s, kBf16, {{"THREADS", I{128}}, {"BLOCKS", I{264}}});
  ASSERT_EQ(p.kernels.size(), 2u);
  EXPECT_EQ(p.kernels[0].entry, "rmsnorm_bwd_ring");
  EXPECT_EQ(p.kernels[0].grid.x, 100u) << "never more groups than rows";
  EXPECT_EQ(p.kernels[0].block.x, 128u);
  EXPECT_EQ(p.kernels[1].entry, "rmsnorm_bwd_dw_reduce");
  EXPECT_EQ(p.kernels[1].grid.x, 4096u / 32);
  EXPECT_EQ(p.kernels[1].block.x, 256u);
  EXPECT_EQ(std::get<I>(p.kernels[1].args[2]), 100);
  EXPECT_EQ(std::get<I>(p.kernels[1].args[3]), 4096);
  const OpConfig no_w = {{"x_dtype", "bf16"}, {"has_weight", "false"}};
  EXPECT_EQ(op.tensors(s, no_w).size(), 4u);
  const LaunchPlan pn = op.launch_plan(s, no_w, {});
  ASSERT_EQ(pn.kernels.size(), 1u);
  EXPECT_EQ(std::get<ArgTensor>(pn.kernels[0].args[1]).name, "");
  EXPECT_EQ(std::get<ArgTensor>(pn.kernels[0].args[5]).name, "");
}

TEST(RmsNormBwd, ValidatesOptionsAndCountsBytes) {
  RmsNormBwdOp op;
  EXPECT_EQ(op.validate(kBf16), "");
  EXPECT_NE(op.validate({{"x_dtype", "int8"}}), "");
  EXPECT_NE(op.validate({{"residual", "true"}}), "");
  EXPECT_DOUBLE_EQ(op.bytes({{"M", 32768}, {"N", 16384}}, kBf16), 3.0 * 32768 * 16384 * 2 + 4.0 * 32768 + 4.0 * 16384);
  EXPECT_DOUBLE_EQ(op.tolerance("dw", kBf16).rel_l2, 1e-4);
}

TEST(RmsNormBwd, BadKnobsAndShapesThrowClearly) {
  RmsNormBwdOp op;
  const Shape s = shape(100, 4096);
  auto message = [&](const Knobs& k, const Shape& sh) {
    try {
      op.launch_plan(sh, kBf16, k);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message({{"BLOCKS", I{5000}}}, s).find("BLOCKS=5000"), std::string::npos);
  EXPECT_NE(message({{"CBLOCKS", I{0}}}, s).find("CBLOCKS=0"), std::string::npos);
  EXPECT_NE(message({{"THREADS", I{48}}}, s).find("THREADS=48"), std::string::npos);
  EXPECT_NE(message({{"STAGES", I{1}}}, s).find("STAGES=1"), std::string::npos);
  EXPECT_NE(message({{"CLUSTER", I{32}}}, s).find("CLUSTER=32"), std::string::npos);
  EXPECT_NE(message({{"SMEM_KB", I{227}}}, s).find("SMEM_KB=227"), std::string::npos);
  EXPECT_NE(message({{"WREG", I{2}}}, s).find("WREG=2"), std::string::npos);
  EXPECT_NE(message({{"MIN_BLOCKS", I{5}}}, s).find("MIN_BLOCKS=5"), std::string::npos);  // 5 * 512 > 2048
  EXPECT_NE(message({{"RTHREADS", I{100}}}, s).find("RTHREADS=100"), std::string::npos);
  EXPECT_NE(message({{"ITEMS", I{0}}}, s).find("ITEMS=0"), std::string::npos);
  EXPECT_NE(message({{"VEC", I{8}}}, s).find("unknown knob 'VEC'"), std::string::npos);
  EXPECT_NE(message({}, shape(0, 4)).find("M >= 1"), std::string::npos);
  EXPECT_NE(message({}, shape(1 << 21, 1 << 20)).find("2^40"), std::string::npos);
  EXPECT_EQ(message({}, shape(1 << 20, 1 << 20)), "") << "M*N = 2^40 is allowed";
}

// ---------------------------------------------------------------------------------------------
// Dispatch

TEST(RmsNormBwd, DefaultsPutEveryBenchmarkRowOnTheRing) {
  struct Row {
    I m, n;
    const char* entry;
    I cluster, groups;
  };
  // A CTA holds 512 threads * 4 vectors * 8 = 16384 elements; three 64 KB stages.
  for (const Row& r : {Row{32768, 16384, "rmsnorm_bwd_ring", 1, 132},
                       Row{32768, 65536, "rmsnorm_bwd_ring_cluster", 4, 30},
                       Row{16384, 131072, "rmsnorm_bwd_ring_cluster", 8, 15},
                       Row{8192, 262144, "rmsnorm_bwd_ring_cluster", 16, 7}}) {
    SCOPED_TRACE(r.n);
    const auto d = RmsNormBwdOp::dispatch(kBf16, {}, r.m, r.n);
    EXPECT_EQ(d.entry, r.entry);
    EXPECT_EQ(d.cluster, r.cluster);
    EXPECT_EQ(d.groups, r.groups);
    EXPECT_EQ(d.slice, 2048);
    EXPECT_EQ(d.stages, 3);
    EXPECT_EQ(d.shared_bytes, 3 * 2048 * 32);
    const LaunchPlan p = RmsNormBwdOp().launch_plan(shape(r.m, r.n), kBf16, {});
    EXPECT_EQ(p.kernels[0].grid.x, static_cast<std::uint32_t>(r.groups * r.cluster));
    EXPECT_EQ(p.kernels[0].cluster.x, static_cast<std::uint32_t>(r.cluster));
    EXPECT_EQ(p.kernels[0].shared_bytes, 3u * 2048 * 32);
    EXPECT_EQ(std::get<I>(p.kernels[1].args[2]), r.groups) << "one dw partial row per group";
  }
}

TEST(RmsNormBwd, DispatchFollowsTheKnobs) {
  auto d = [](const Knobs& k, I m, I n, const OpConfig& cfg = kBf16) {
    return RmsNormBwdOp::dispatch(cfg, with(k), m, n);
  };
  // N % VEC != 0 and STAGES = 0: the first template's kernel, BLOCKS CTAs (at most M).
  EXPECT_EQ(d({}, 7, 4097).entry, "rmsnorm_bwd");
  EXPECT_EQ(d({}, 7, 4097).groups, 7);
  EXPECT_EQ(d({}, 1000, 4097).groups, 132);
  EXPECT_EQ(d({{"STAGES", I{0}}, {"BLOCKS", I{264}}}, 32768, 16384).entry, "rmsnorm_bwd");
  EXPECT_EQ(d({{"STAGES", I{0}}, {"BLOCKS", I{264}}}, 32768, 16384).groups, 264);
  EXPECT_EQ(d({{"STAGES", I{0}}}, 32768, 16384).shared_bytes, 0);
  // A smaller stage budget takes a larger cluster: 96 KB holds three stages of 8K-element slices.
  auto a = d({{"SMEM_KB", I{96}}}, 32768, 16384);
  EXPECT_EQ(a.cluster, 2);
  EXPECT_EQ(a.slice, 1024);
  EXPECT_EQ(a.stages, 3);
  EXPECT_EQ(a.groups, 60);
  EXPECT_EQ(d({{"SMEM_KB", I{96}}, {"CBLOCKS", I{256}}}, 32768, 16384).groups, 128);
  // STAGES caps the stages; SMEM_KB too (224 KB holds three 64 KB stages, not four).
  EXPECT_EQ(d({{"STAGES", I{2}}}, 32768, 16384).stages, 2);
  EXPECT_EQ(d({{"STAGES", I{4}}, {"SMEM_KB", I{224}}}, 32768, 16384).stages, 3);
  EXPECT_EQ(d({{"STAGES", I{4}}}, 32768, 4096).stages, 4);
  // The split cluster barrier needs three stages: the cluster doubles until they fit, and with
  // STAGES 2 a row that needs a cluster leaves the ring.
  EXPECT_EQ(d({{"OVERLAP_SUM", I{1}}, {"SMEM_KB", I{144}}}, 100, 65536).cluster, 8);
  EXPECT_EQ(d({{"SMEM_KB", I{144}}}, 100, 65536).cluster, 4);
  EXPECT_EQ(d({{"OVERLAP_SUM", I{1}}, {"STAGES", I{2}}}, 100, 65536).entry, "rmsnorm_bwd");
  EXPECT_EQ(d({{"OVERLAP_SUM", I{1}}, {"STAGES", I{2}}}, 100, 16384).entry, "rmsnorm_bwd_ring");
  // CLUSTER caps the cluster; a row the largest cluster cannot hold runs the first template.
  EXPECT_EQ(d({{"CLUSTER", I{8}}}, 8192, 262144).entry, "rmsnorm_bwd");
  EXPECT_EQ(d({{"CLUSTER", I{8}}}, 16384, 131072).cluster, 8);
  EXPECT_EQ(d({{"CLUSTER", I{1}}}, 32768, 65536).entry, "rmsnorm_bwd");
  // Fewer vectors per CTA need more CTAs per row.
  EXPECT_EQ(d({{"THREADS", I{256}}}, 32768, 16384).cluster, 2);
  EXPECT_EQ(d({{"THREADS", I{256}}, {"ITEMS", I{8}}}, 32768, 16384).cluster, 1);
  // fp32 x: 4-element vectors, the same 16-byte units.
  const auto f = d({}, 100, 16384, {{"x_dtype", "fp32"}});
  EXPECT_EQ(f.cluster, 2);
  EXPECT_EQ(f.slice, 2048);
  // Uneven slices: 8191 vectors over 4 CTAs of 2048.
  const auto u = d({}, 150, 65528);
  EXPECT_EQ(u.cluster, 4);
  EXPECT_EQ(u.slice, 2048);
  // Small rows and M: a cluster never has more groups than rows, and at least one.
  EXPECT_EQ(d({}, 3, 40000).groups, 3);
  EXPECT_EQ(d({{"CBLOCKS", I{64}}}, 20, 262144).groups, 4);
  EXPECT_EQ(d({{"CBLOCKS", I{8}}}, 20, 262144).groups, 1);
}

// REGS_CLUSTER 1: rows whose slices a cluster of at most CLUSTER CTAs holds in registers take
// rmsnorm_bwd_regs (no shared memory, CBLOCKS / c groups); longer rows and N % VEC != 0 keep the
// ring and the first template.
TEST(RmsNormBwd, RegsClusterTakesRowsItsClusterHolds) {
  auto d = [](const Knobs& k, I m, I n) { return RmsNormBwdOp::dispatch(kBf16, with(k), m, n); };
  const Knobs r128 = {{"REGS_CLUSTER", I{1}}, {"THREADS", I{128}}, {"ITEMS", I{4}}, {"CBLOCKS", I{384}}};
  // 128 threads * 4 vectors * 8 = 4096 elements a CTA.
  for (const auto& [n, cl] : std::vector<std::pair<I, I>>{{4096, 1}, {16384, 4}, {65536, 16}}) {
    SCOPED_TRACE(n);
    const auto r = d(r128, 32768, n);
    EXPECT_EQ(r.entry, "rmsnorm_bwd_regs");
    EXPECT_EQ(r.cluster, cl);
    EXPECT_EQ(r.groups, 384 / cl);
    EXPECT_EQ(r.slice, n / 8 / cl);
    EXPECT_EQ(r.shared_bytes, 0);
  }
  EXPECT_EQ(d(r128, 16384, 131072).entry, "rmsnorm_bwd") << "32 CTAs: neither regs nor the ring hold it";
  EXPECT_EQ(d(r128, 100, 4097).entry, "rmsnorm_bwd");
  EXPECT_EQ(d(r128, 3, 65536).groups, 3);
  // With the defaults' CTAs (512 x 4) the ring's rows move to registers; with CLUSTER 8 neither
  // holds 256K (16 CTAs): the first template.
  EXPECT_EQ(d({{"REGS_CLUSTER", I{1}}}, 8192, 262144).entry, "rmsnorm_bwd_regs");
  EXPECT_EQ(d({{"REGS_CLUSTER", I{1}}}, 8192, 262144).groups, 7);
  EXPECT_EQ(d({{"REGS_CLUSTER", I{1}}, {"CLUSTER", I{8}}}, 8192, 262144).entry, "rmsnorm_bwd");
  const LaunchPlan p = RmsNormBwdOp().launch_plan(shape(32768, 65536), kBf16, with(r128));
  EXPECT_EQ(p.kernels[0].entry, "rmsnorm_bwd_regs");
  EXPECT_EQ(p.kernels[0].grid.x, 384u);
  EXPECT_EQ(p.kernels[0].block.x, 128u);
  EXPECT_EQ(p.kernels[0].cluster.x, 16u);
  EXPECT_EQ(p.kernels[0].shared_bytes, 0u);
  EXPECT_EQ(std::get<I>(p.kernels[1].args[2]), 24) << "one dw partial row per group";
  EXPECT_THROW(RmsNormBwdOp::dispatch(kBf16, with({{"REGS_CLUSTER", I{2}}}), 8, 4096), std::invalid_argument);
}

// LONG_THREADS > 0: rows of at least LONG_MIN_N elements take rmsnorm_bwd_ring_cluster_long on
// their own tile, stage budget and CTA count; shorter rows, and long rows the long tile cannot
// hold within CLUSTER CTAs, keep the main tile's plan.
TEST(RmsNormBwd, LongRowsTakeTheirOwnTile) {
  auto d = [](const Knobs& k, I m, I n) { return RmsNormBwdOp::dispatch(kBf16, with(k), m, n); };
  // The expert kernel's shape at N = 64K: 256 threads x 2 vectors (4K-element slices), 16-CTA
  // clusters, 48 KB of stages, four CTAs an SM.
  const Knobs l256 = {{"LONG_THREADS", I{256}}, {"LONG_ITEMS", I{2}}, {"LONG_MIN_BLOCKS", I{4}},
                      {"LONG_SMEM_KB", I{96}},  {"LONG_CBLOCKS", I{512}}};
  const auto a = d(l256, 32768, 65536);
  EXPECT_EQ(a.entry, "rmsnorm_bwd_ring_cluster_long");
  EXPECT_EQ(a.cluster, 16);
  EXPECT_EQ(a.slice, 512);
  EXPECT_EQ(a.stages, 3);
  EXPECT_EQ(a.shared_bytes, 3 * 512 * 32);
  EXPECT_EQ(a.groups, 32);
  EXPECT_EQ(a.threads, 256);
  EXPECT_EQ(a.items, 2);
  // Below LONG_MIN_N: the main tile, as without the knobs.
  const auto s = d(l256, 32768, 16384);
  EXPECT_EQ(s.entry, "rmsnorm_bwd_ring");
  EXPECT_EQ(s.threads, 512);
  EXPECT_EQ(s.items, 4);
  EXPECT_EQ(d({}, 32768, 16384).slice, s.slice);
  // 128K needs 32 such CTAs: past CLUSTER 16, so the main tile's ring (8 CTAs of 16K elements).
  const auto f = d(l256, 16384, 131072);
  EXPECT_EQ(f.entry, "rmsnorm_bwd_ring_cluster");
  EXPECT_EQ(f.cluster, 8);
  EXPECT_EQ(f.threads, 512);
  // LONG_MIN_N moves the boundary; a tile holding the whole row still runs a cluster of two.
  EXPECT_EQ(d(with({{"LONG_THREADS", I{256}}, {"LONG_ITEMS", I{2}}, {"LONG_MIN_N", I{262144}}}), 32768, 65536).entry,
            "rmsnorm_bwd_ring_cluster");
  const auto big = d({{"LONG_THREADS", I{512}}, {"LONG_ITEMS", I{4}}, {"LONG_MIN_N", I{4096}}}, 100, 8192);
  EXPECT_EQ(big.entry, "rmsnorm_bwd_ring_cluster_long");
  EXPECT_EQ(big.cluster, 2);
  EXPECT_EQ(big.slice, 512);
  // Groups in waves, as the expert's 264 clusters of 16 at N = 64K; at most 1024 (the dw partials).
  Knobs waves = l256;
  waves["LONG_CBLOCKS"] = I{4224};
  EXPECT_EQ(d(waves, 32768, 65536).groups, 264);
  waves["LONG_MIN_N"] = I{8192};
  EXPECT_EQ(d(waves, 32768, 8192).cluster, 2);
  EXPECT_EQ(d(waves, 32768, 8192).groups, RmsNormBwdOp::kMaxPartialRows);
  // Off (LONG_THREADS 0), STAGES 0, or N % VEC != 0: never the long entry.
  EXPECT_EQ(d({{"LONG_ITEMS", I{8}}}, 32768, 65536).entry, "rmsnorm_bwd_ring_cluster");
  EXPECT_EQ(d({{"LONG_THREADS", I{256}}, {"STAGES", I{0}}}, 32768, 65536).entry, "rmsnorm_bwd");
  EXPECT_EQ(d(l256, 100, 65537).entry, "rmsnorm_bwd");
  // The launch: the long tile's threads, shared memory and groups; the reduce sums its groups.
  const LaunchPlan p = RmsNormBwdOp().launch_plan(shape(32768, 65536), kBf16, with(l256));
  EXPECT_EQ(p.kernels[0].entry, "rmsnorm_bwd_ring_cluster_long");
  EXPECT_EQ(p.kernels[0].grid.x, 512u);
  EXPECT_EQ(p.kernels[0].block.x, 256u);
  EXPECT_EQ(p.kernels[0].cluster.x, 16u);
  EXPECT_EQ(p.kernels[0].shared_bytes, 3u * 512 * 32);
  EXPECT_EQ(std::get<I>(p.kernels[1].args[2]), 32) << "one dw partial row per group";
  for (const auto& [knob, value] : std::vector<std::pair<const char*, I>>{{"LONG_THREADS", 100},
                                                                           {"LONG_ITEMS", 0},
                                                                           {"LONG_MIN_BLOCKS", 9},
                                                                           {"LONG_CBLOCKS", 0},
                                                                           {"LONG_CBLOCKS", 16385},
                                                                           {"LONG_SMEM_KB", 300},
                                                                           {"LONG_MIN_N", 0}}) {
    Knobs k = l256;
    k[knob] = value;
    EXPECT_THROW(RmsNormBwdOp::dispatch(kBf16, with(k), 8, 65536), std::invalid_argument) << knob;
  }
}

TEST(RmsNormBwd, EntriesListWhatDispatchCanReturn) {
  EXPECT_EQ(RmsNormBwdOp::entries(with({})),
            (std::vector<std::string>{"rmsnorm_bwd", "rmsnorm_bwd_ring", "rmsnorm_bwd_ring_cluster"}));
  EXPECT_EQ(RmsNormBwdOp::entries(with({{"REGS_CLUSTER", I{1}}, {"STAGES", I{0}}})),
            (std::vector<std::string>{"rmsnorm_bwd", "rmsnorm_bwd_regs"}));
  EXPECT_EQ(RmsNormBwdOp::entries(with({{"CLUSTER", I{1}}})), (std::vector<std::string>{"rmsnorm_bwd", "rmsnorm_bwd_ring"}));
  EXPECT_EQ(RmsNormBwdOp::entries(with({{"STAGES", I{0}}})), (std::vector<std::string>{"rmsnorm_bwd"}));
  EXPECT_EQ(RmsNormBwdOp::entries(with({{"LONG_THREADS", I{256}}})),
            (std::vector<std::string>{"rmsnorm_bwd", "rmsnorm_bwd_ring", "rmsnorm_bwd_ring_cluster",
                                      "rmsnorm_bwd_ring_cluster_long"}));
  EXPECT_EQ(RmsNormBwdOp::entries(with({{"LONG_THREADS", I{256}}, {"CLUSTER", I{1}}})),
            (std::vector<std::string>{"rmsnorm_bwd", "rmsnorm_bwd_ring"}));
}

// ---------------------------------------------------------------------------------------------
// A host model of the kernels' indexing: the ring kernel's slices, thread ownership, stage ring
// and mbarrier parities, written as the kernel computes them; and the first template's groups.

struct Coverage {
  I m = 0, nu = 0;
  std::vector<std::uint8_t> loaded, read1, read2, written;  // per (row, unit)
  std::vector<std::uint8_t> partial;                        // per (group, unit)
  Coverage(I m_, I nu_, I groups)
      : m(m_), nu(nu_), loaded(m_ * nu_), read1(m_ * nu_), read2(m_ * nu_), written(m_ * nu_), partial(groups * nu_) {}
};

// Returns "" or what went wrong first.
std::string model_ring(const RmsNormBwdOp::Dispatch& d, const Knobs& k, I M, I N, I vec, Coverage& cov) {
  const I threads = d.threads, items = d.items, kstages = std::get<I>(k.at("STAGES"));
  const I c = d.cluster, G = d.groups;
  int shift = 0;
  while ((I{1} << shift) < c) ++shift;
  if ((I{1} << shift) != c) return "cluster not a power of two";
  const I nu = N / vec;
  for (I g = 0; g < G; ++g) {
    for (I rank = 0; rank < c; ++rank) {
      const I s = (nu + c - 1) >> shift;
      const I u0 = std::min(nu, rank * s);
      const I len = std::min(nu - u0, s);
      if (s != d.slice) return "slice differs from the plan's";
      const I stage_bytes = s * 32;
      const I stages = std::min(kstages, d.shared_bytes / stage_bytes);
      if (stages != d.stages || stages < 2) return "stage count differs or < 2";
      if (s > threads * items) return "slice exceeds the register tile";
      const I rows = g < M ? (M - g + G - 1) / G : 0;
      std::vector<I> stage_row(static_cast<std::size_t>(stages), -1), issues(static_cast<std::size_t>(stages), 0);
      auto issue = [&](I i, I st) {
        const I row = g + i * G;
        if (row >= M) return false;
        stage_row[static_cast<std::size_t>(st)] = row;
        ++issues[static_cast<std::size_t>(st)];
        for (I u = 0; u < len; ++u) ++cov.loaded[static_cast<std::size_t>(row * nu + u0 + u)];
        return true;
      };
      for (I i = 0; i < std::min(rows, stages); ++i)
        if (!issue(i, i)) return "prologue loads a row past M";
      // Pass 1 of row index i from stage sti, whose mbarrier is waited on with parity par.
      auto pass1 = [&](I i, I sti, I par) -> std::string {
        const I row = g + i * G;
        // try_wait.parity(par) passes once the stage's phase of that parity completed: exactly
        // i / stages + 1 fills so far (one more would be a refill before this row was read).
        if (issues[static_cast<std::size_t>(sti)] != i / stages + 1) return "stage filled too often or too rarely";
        if (((issues[static_cast<std::size_t>(sti)] - 1) & 1) != par) return "parity does not match the phase";
        if (stage_row[static_cast<std::size_t>(sti)] != row) return "stage holds another row";
        for (I t = 0; t < threads; ++t)
          for (I j = 0; j < items; ++j) {
            const I kk = t + j * threads;
            if (kk < len) ++cov.read1[static_cast<std::size_t>(row * nu + u0 + kk)];
          }
        return "";
      };
      auto pass2 = [&](I i, I sti) -> std::string {
        const I row = g + i * G;
        if (stage_row[static_cast<std::size_t>(sti)] != row) return "stage refilled before pass 2";
        for (I t = 0; t < threads; ++t)
          for (I j = 0; j < items; ++j) {
            const I kk = t + j * threads;
            if (kk < len) {
              ++cov.read2[static_cast<std::size_t>(row * nu + u0 + kk)];
              ++cov.written[static_cast<std::size_t>(row * nu + u0 + kk)];
            }
          }
        return "";
      };
      // After the barrier that follows row `done`'s pass 2, its stage takes row done + stages.
      auto refill = [&](I done, I prev, std::initializer_list<I> in_use) -> std::string {
        if (done < 0 || done + stages >= rows) return "";
        if (prev != done % stages) return "refill of a stage other than the previous row's";
        for (I u : in_use)
          if (prev == u) return "refill of the stage in use";
        if (!issue(done + stages, prev)) return "refill past M";
        return "";
      };
      I st = 0, prev = stages - 1, parity = 0;
      const bool overlap = c > 1 && k.count("OVERLAP_SUM") && std::get<I>(k.at("OVERLAP_SUM")) == 1 && stages >= 3;
      if (overlap && rows > 0)
        if (auto e = pass1(0, 0, 0); !e.empty()) return e;
      for (I it = 0; it < rows; ++it) {
        const I nst = st + 1 == stages ? 0 : st + 1;
        if (overlap) {
          // The kernel's split cluster barrier: row it + 1's pass 1 and the refill of row
          // it - 1's stage come before row it's pass 2.
          if (it + 1 < rows) {
            if (auto e = pass1(it + 1, nst, nst == 0 ? parity ^ 1 : parity); !e.empty()) return e;
            if (auto e = refill(it - 1, prev, {st, nst}); !e.empty()) return e;
          }
        } else {
          if (auto e = pass1(it, st, parity); !e.empty()) return e;
          if (auto e = refill(it - 1, prev, {st}); !e.empty()) return e;
        }
        if (auto e = pass2(it, st); !e.empty()) return e;
        prev = st;
        st = nst;
        if (st == 0) parity ^= 1;
      }
      for (I t = 0; t < threads; ++t)
        for (I j = 0; j < items; ++j) {
          const I kk = t + j * threads;
          if (kk < len) ++cov.partial[static_cast<std::size_t>(g * nu + u0 + kk)];
        }
    }
  }
  return "";
}

std::string check_once(const std::vector<std::uint8_t>& v, const char* what) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] != 1) return std::string(what) + " count " + std::to_string(v[i]) + " at " + std::to_string(i);
  return "";
}

TEST(RmsNormBwdModel, TheRingCoversEveryElementOnceWithMatchingParities) {
  struct Case {
    I m, n;
    Knobs k;
  };
  const std::vector<Case> cases = {
      {300, 256, {}},                                     // one CTA per group, many rows: the stages wrap
      {2000, 2048, {{"STAGES", I{2}}}},                   // two stages
      {33, 16384, {}},                                    // one row per group
      {1500, 12288, {{"STAGES", I{4}}}},                  // four stages
      {3, 40000, {}},                                     // cluster of 4, one row per group
      {150, 65528, {}},                                   // cluster of 4, uneven last slice, wraps
      {20, 262144, {}},                                   // cluster of 16
      {40, 100000, {{"SMEM_KB", I{96}}}},                 // the stage budget doubles the cluster
      {70, 16384, {{"THREADS", I{128}}, {"ITEMS", I{2}}, {"CBLOCKS", I{64}}}},  // 8 CTAs of 2048 elements
      {5, 1000, {{"THREADS", I{1024}}, {"ITEMS", I{1}}}},  // fewer units than threads
      {1, 8, {}},
      // The split cluster barrier: a stage is refilled one row later.
      {150, 65528, {{"OVERLAP_SUM", I{1}}}},                    // cluster of 4, wraps
      {20, 262144, {{"OVERLAP_SUM", I{1}}}},                    // cluster of 16
      {2, 65536, {{"OVERLAP_SUM", I{1}}}},                      // two rows per group
      {97, 65536, {{"OVERLAP_SUM", I{1}}, {"STAGES", I{4}}}},  // four stages
      {45, 65536, {{"OVERLAP_SUM", I{1}}, {"SMEM_KB", I{144}}}},  // the cluster doubles for three stages
      // The long rows' tile: 16 CTAs of 256 x 2 (many groups), and 256 x 8 with two stages.
      {70, 65536, {{"LONG_THREADS", I{256}}, {"LONG_ITEMS", I{2}}, {"LONG_SMEM_KB", I{96}}, {"LONG_CBLOCKS", I{512}}}},
      {20, 262144, {{"LONG_THREADS", I{256}}, {"LONG_ITEMS", I{8}}, {"LONG_SMEM_KB", I{144}}}},
      {33, 65528, {{"LONG_THREADS", I{512}}, {"LONG_ITEMS", I{2}}, {"LONG_MIN_N", I{32768}}, {"OVERLAP_SUM", I{1}}}},
      {600, 65536, {{"LONG_THREADS", I{256}}, {"LONG_ITEMS", I{2}}, {"LONG_SMEM_KB", I{96}}, {"LONG_CBLOCKS", I{4224}}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.n) + " " + knobs_text(c.k));
    const Knobs k = with(c.k);
    const auto d = RmsNormBwdOp::dispatch(kBf16, k, c.m, c.n);
    ASSERT_NE(d.entry, "rmsnorm_bwd");
    if (std::get<I>(k.at("LONG_THREADS")) != 0) {
      EXPECT_EQ(d.entry, "rmsnorm_bwd_ring_cluster_long");
    }
    Coverage cov(c.m, c.n / 8, d.groups);
    ASSERT_EQ(model_ring(d, k, c.m, c.n, 8, cov), "");
    EXPECT_EQ(check_once(cov.loaded, "load"), "");
    EXPECT_EQ(check_once(cov.read1, "pass 1 read"), "");
    EXPECT_EQ(check_once(cov.read2, "pass 2 read"), "");
    EXPECT_EQ(check_once(cov.written, "dx write"), "");
    EXPECT_EQ(check_once(cov.partial, "dw partial write"), "") << "the reduce sums every group's full row";
  }
}

// dw_reduce: 32 columns per CTA in a grid-stride loop: every column once.
TEST(RmsNormBwdModel, TheReduceCoversEveryColumnOnce) {
  for (I n : {I{1}, I{7}, I{31}, I{33}, I{4097}, I{65536}}) {
    const LaunchPlan p = RmsNormBwdOp().launch_plan(shape(3, n), kBf16, {});
    const auto& r = p.kernels.at(1);
    std::vector<int> seen(static_cast<std::size_t>(n), 0);
    for (I b = 0; b < r.grid.x; ++b)
      for (I j0 = b * 32; j0 < n; j0 += I{r.grid.x} * 32)
        for (I lane = 0; lane < 32; ++lane)
          if (j0 + lane < n) ++seen[static_cast<std::size_t>(j0 + lane)];
    for (I j = 0; j < n; ++j) ASSERT_EQ(seen[static_cast<std::size_t>(j)], 1) << n << " column " << j;
  }
}

// The ring's arithmetic in fp32 as the kernel orders it (per-thread fmaf, per-CTA then per-cluster
// sums), against the fp64 reference, within the op's tolerances; c1 off by 5% fails.
TEST(RmsNormBwdModel, TheRingArithmeticPassesTheTolerance) {
  RmsNormBwdOp op;
  // The defaults, and the long rows' tile (256 x 2: 4K-element slices, 16 CTAs at 64K).
  const Knobs long_tile = {{"LONG_THREADS", I{256}}, {"LONG_ITEMS", I{2}}, {"LONG_MIN_N", I{32768}}};
  for (const auto& [m, n, knobs] : std::vector<std::tuple<I, I, Knobs>>{
           {6, 4096, {}}, {5, 65528, {}}, {3, 131072, {}}, {5, 65528, long_tile}, {4, 65536, long_tile}}) {
    SCOPED_TRACE(std::to_string(n) + " " + knobs_text(knobs));
    const Shape s = shape(m, n);
    std::mt19937_64 rng(7);
    std::normal_distribution<double> nd(0.0, 1.0);
    std::vector<HostTensor> in;
    for (const auto& t : op.tensors(s, kBf16)) {
      if (t.role != Role::In) continue;
      HostTensor h(t.name, t.dtype, t.shape);
      if (t.fixed_distribution) op.fill_fixed(t, rng, h);
      else if (t.name == "dout")  // correlated with x, so that c1 is O(1) and an error in it shows
        for (I i = 0; i < h.numel(); ++i) h.set(i, 0.8 * in[0].get(i) + 0.6 * nd(rng));
      else
        for (I i = 0; i < h.numel(); ++i) h.set(i, nd(rng));
      in.push_back(std::move(h));
    }
    std::vector<HostTensor> ref;
    op.reference(s, kBf16, in, ref);
    const auto& x = in[0];
    const auto& w = in[1];
    const auto& dout = in[2];
    const auto& rstd = in[3];
    const Knobs k = with(knobs);
    const auto d = RmsNormBwdOp::dispatch(kBf16, k, m, n);
    EXPECT_EQ(d.entry == "rmsnorm_bwd_ring_cluster_long", !knobs.empty());
    const I nu = n / 8, T = d.threads, items = d.items, c = d.cluster, G = d.groups, sl = d.slice;
    auto run = [&](float scale) {
      HostTensor dx("dx", DType::BF16, {m, n});
      std::vector<float> dw(static_cast<std::size_t>(n), 0.f);
      for (I g = 0; g < G; ++g) {
        std::vector<float> part(static_cast<std::size_t>(n), 0.f);
        for (I row = g; row < m; row += G) {
          const float rs = static_cast<float>(rstd.get(row));
          float total = 0.f;
          for (I rank = 0; rank < c; ++rank) {
            const I u0 = std::min(nu, rank * sl), len = std::min(nu - u0, sl);
            float cta = 0.f;
            for (I t = 0; t < T; ++t) {
              float cc = 0.f;
              for (I j = 0; j < items; ++j)
                if (t + j * T < len)
                  for (I e = 0; e < 8; ++e) {
                    const I col = (u0 + t + j * T) * 8 + e;
                    cc = std::fma(static_cast<float>(x.get(row * n + col)) * static_cast<float>(dout.get(row * n + col)),
                                  static_cast<float>(w.get(col)), cc);
                  }
              cta += cc;
            }
            total += cta;
          }
          const float c1 = total * rs * (scale / static_cast<float>(n));
          for (I col = 0; col < n; ++col) {
            const float xh = static_cast<float>(x.get(row * n + col)) * rs;
            const float dy = static_cast<float>(dout.get(row * n + col));
            dx.set(row * n + col, (dy * static_cast<float>(w.get(col)) - xh * c1) * rs);
            part[static_cast<std::size_t>(col)] = std::fma(dy, xh, part[static_cast<std::size_t>(col)]);
          }
        }
        for (I col = 0; col < n; ++col) dw[static_cast<std::size_t>(col)] += part[static_cast<std::size_t>(col)];
      }
      double e2 = 0, r2 = 0, w2 = 0, wr2 = 0;
      for (I i = 0; i < m * n; ++i) {
        e2 += std::pow(dx.get(i) - ref[0].get(i), 2);
        r2 += std::pow(ref[0].get(i), 2);
      }
      for (I j = 0; j < n; ++j) {
        w2 += std::pow(dw[static_cast<std::size_t>(j)] - ref[1].get(j), 2);
        wr2 += std::pow(ref[1].get(j), 2);
      }
      return std::make_pair(std::sqrt(e2 / r2), std::sqrt(w2 / wr2));
    };
    const auto [dx_err, dw_err] = run(1.f);
    EXPECT_LT(dx_err, op.tolerance("dx", kBf16).rel_l2);
    EXPECT_LT(dw_err, op.tolerance("dw", kBf16).rel_l2);
    EXPECT_GT(run(1.05f).first, op.tolerance("dx", kBf16).rel_l2) << "c1 off by 5% must fail";
  }
}

// ---------------------------------------------------------------------------------------------
// Spec

TEST(RmsNormBwdSpec, LoadsWithTheTargetShapesAndTheOpsDefaults) {
  const Spec spec = load_bwd_spec();
  EXPECT_EQ(spec.op, "rmsnorm_bwd");
  ASSERT_EQ(spec.benchmark_shapes.size(), 4u);
  EXPECT_EQ(spec.benchmark_shapes[0], shape(32768, 16384));
  EXPECT_EQ(spec.benchmark_shapes[3], shape(8192, 262144));
  ASSERT_EQ(spec.seeds.size(), 1u);
  EXPECT_EQ(default_knobs(spec.seeds[0]), RmsNormBwdOp::knob_defaults());
  // Correctness shapes reach every entry with the defaults.
  std::set<std::string> entries;
  std::set<I> clusters;
  for (const auto& s : spec.correctness_shapes) {
    const auto d = RmsNormBwdOp::dispatch(spec.config, {}, s.at("M"), s.at("N"));
    entries.insert(d.entry);
    clusters.insert(d.cluster);
  }
  EXPECT_EQ(entries, (std::set<std::string>{"rmsnorm_bwd", "rmsnorm_bwd_ring", "rmsnorm_bwd_ring_cluster"}));
  EXPECT_TRUE(clusters.count(16)) << "a 16-CTA cluster (non-portable size) among the correctness shapes";
}

// Every admitted assignment is a plan the op accepts on every shape, within the kernel's limits:
// a slice fits the register tile, at least two stages (three for a cluster with OVERLAP_SUM),
// shared memory a CTA may have, at most 1024 groups. Knobs that only enter the plan through a
// lookup (BLOCKS, CBLOCKS, RTHREADS, WREG) vary on their own, the rest jointly.
TEST(RmsNormBwdSpec, ConstraintsImplyAValidPlan) {
  const Spec spec = load_bwd_spec();
  const auto& seed = spec.seeds.at(0);
  std::vector<Shape> shapes = spec.benchmark_shapes;
  shapes.insert(shapes.end(), spec.correctness_shapes.begin(), spec.correctness_shapes.end());
  shapes.insert(shapes.end(), spec.heldout_shapes.begin(), spec.heldout_shapes.end());
  RmsNormBwdOp op;
  I admits = 0, total = 0;
  auto check = [&](const Knobs& k) {
    ++total;
    if (!admitted(seed, k)) return;
    ++admits;
    for (const auto& s : shapes) {
      try {
        const LaunchPlan p = op.launch_plan(s, spec.config, k);
        const auto d = RmsNormBwdOp::dispatch(spec.config, k, s.at("M"), s.at("N"));
        const auto& l = p.kernels.at(0);
        ASSERT_LE(l.shared_bytes, 226u * 1024) << knobs_text(k);
        ASSERT_LE(d.groups, RmsNormBwdOp::kMaxPartialRows);
        ASSERT_LE(l.cluster.x, 16u);
        ASSERT_EQ(l.grid.x % l.cluster.x, 0u);
        ASSERT_EQ(l.block.x, static_cast<std::uint32_t>(d.threads));
        if (d.entry == "rmsnorm_bwd_ring_cluster_long") {
          ASSERT_EQ(d.threads, std::get<I>(k.at("LONG_THREADS")));
          ASSERT_GE(d.cluster, 2);
        }
        if (d.entry == "rmsnorm_bwd_regs") {
          ASSERT_EQ(l.shared_bytes, 0u) << knobs_text(k);
          ASSERT_LE(d.slice, std::get<I>(k.at("THREADS")) * std::get<I>(k.at("ITEMS")));
        } else if (d.entry != "rmsnorm_bwd") {
          ASSERT_GE(d.stages, d.cluster > 1 && std::get<I>(k.at("OVERLAP_SUM")) == 1 ? 3 : 2) << knobs_text(k);
          ASSERT_LE(d.slice, d.threads * d.items);
        }
      } catch (const std::invalid_argument& e) {
        ADD_FAILURE() << "constraints admit a plan the op rejects (" << knobs_text(k) << "): " << e.what();
        return;
      }
    }
  };
  for_each_assignment(seed, {"THREADS", "ITEMS", "STAGES", "CLUSTER", "SMEM_KB", "MIN_BLOCKS", "OVERLAP_SUM"}, check);
  EXPECT_GT(admits, 500);
  EXPECT_LT(admits, total);
  for (const char* knob : {"BLOCKS", "CBLOCKS", "RTHREADS", "WREG"}) for_each_assignment(seed, {knob}, check);
  for_each_assignment(seed, {"REGS_CLUSTER", "THREADS", "ITEMS", "CLUSTER", "MIN_BLOCKS"}, check);
  for_each_assignment(seed, {"LONG_THREADS", "LONG_ITEMS", "LONG_MIN_BLOCKS", "LONG_MIN_N", "LONG_SMEM_KB", "OVERLAP_SUM"},
                      check);
  for_each_assignment(seed, {"LONG_CBLOCKS"}, check);
}

// ---------------------------------------------------------------------------------------------
// Builds

std::vector<std::string> nvrtc_options(const OpConfig& cfg, const Knobs& knobs) {
  std::vector<std::string> opts;
  for (const auto& [k, v] : RmsNormBwdOp().template_defines(cfg)) opts.push_back("-D" + k + "=" + v);
  for (const auto& [k, v] : with(knobs)) opts.push_back("-D" + k + "=" + std::to_string(std::get<I>(v)));
  return opts;
}

// Builds with NVRTC and ptxas; checks every entry the knobs call for is there and no device
// global is declared (the gate's persistent-global rule).
PtxasResult build(const std::string& arch, const OpConfig& cfg, const Knobs& knobs) {
  // As ptxevo reads the template: its parts (kernels/common/) expanded into it.
  std::string why;
  const auto expanded = ptxevo::evaluator::read_template(PTXEVO_SOURCE_DIR "/kernels/rmsnorm/rmsnorm_bwd.cu", &why);
  EXPECT_TRUE(expanded) << why;
  if (!expanded) return {};
  const std::string& source = expanded->text;
  const std::string what = arch + " " + knobs_text(with(knobs));
  NvrtcResult r = compile_to_ptx(source, "rmsnorm_bwd.cu", arch, nvrtc_options(cfg, knobs));
  EXPECT_TRUE(r.ok) << what << ": " << r.log;
  if (!r.ok) return {};
  EXPECT_EQ(r.ptx.find("\n.global "), std::string::npos) << what;
  PtxasResult a = run_ptxas(r.ptx, arch);
  EXPECT_TRUE(a.ok) << what << ": " << a.log;
  std::vector<std::string> want = RmsNormBwdOp::entries(with(knobs));
  want.push_back("rmsnorm_bwd_dw_reduce");
  for (const auto& e : want)
    EXPECT_NE(r.ptx.find(".entry " + e + "("), std::string::npos) << what << " lacks " << e;
  return a;
}

TEST(RmsNormBwdBuild, DefaultsBuildForHopperWithoutSpillsAndForBlackwell) {
  for (const OpConfig& cfg : {kBf16, OpConfig{{"x_dtype", "fp32"}}, OpConfig{{"x_dtype", "fp16"}, {"has_weight", "false"}},
                              OpConfig{{"x_dtype", "fp16"}, {"w_dtype", "same"}}}) {
    const PtxasResult a = build("sm_90a", cfg, {});
    for (const auto& f : a.functions) {
      if (!f.is_entry) continue;
      EXPECT_EQ(f.spill_stores, 0) << f.name;
      EXPECT_LE(f.registers, 128) << f.name << ": one 512-thread CTA per SM";
    }
  }
  // Blackwell: compiled and assembled only; not run here or on the H200.
  build("sm_100a", kBf16, {});
}

// An evenly spread sample of the admitted assignments of the knobs that change the code
// (THREADS, ITEMS, STAGES, CLUSTER (1 or not), WREG, MIN_BLOCKS), about a dozen builds; the
// launch-only knobs (SMEM_KB, BLOCKS, CBLOCKS, RTHREADS) are not defines the code depends on
// beyond the plan.
TEST(RmsNormBwdBuild, ASampleOfTheAdmittedKnobSpaceBuilds) {
  const Spec spec = load_bwd_spec();
  const auto& seed = spec.seeds.at(0);
  std::vector<Knobs> all;
  for_each_assignment(seed, {"THREADS", "ITEMS", "STAGES", "CLUSTER", "WREG", "MIN_BLOCKS"}, [&](const Knobs& k) {
    const I cl = std::get<I>(k.at("CLUSTER"));
    if (admitted(seed, k) && (cl == 1 || cl == 16)) all.push_back(k);
  });
  EXPECT_GE(all.size(), 100u);
  constexpr std::size_t kStride = 71;  // prime: does not alias the knob lists' periods
  std::size_t built = 0;
  for (std::size_t i = 0; i < all.size(); i += kStride, ++built) {
    const PtxasResult a = build(spec.arch, spec.config, all[i]);
    for (const auto& f : a.functions)
      if (f.is_entry && std::get<I>(all[i].at("MIN_BLOCKS")) <= 1) {
        EXPECT_EQ(f.spill_stores, 0) << knobs_text(all[i]) << " " << f.name;
      }
  }
  std::printf("built %zu of %zu admitted code variants\n", built, all.size());
}

// The registers-cluster entry: small CTAs, several an SM, without spills (fp32 weights in registers
// or re-read).
TEST(RmsNormBwdBuild, RegsClusterBuildsWithoutSpills) {
  for (const Knobs& k : {Knobs{{"REGS_CLUSTER", I{1}}, {"THREADS", I{128}}, {"ITEMS", I{4}}, {"MIN_BLOCKS", I{3}}},
                         Knobs{{"REGS_CLUSTER", I{1}}, {"THREADS", I{256}}, {"ITEMS", I{4}}, {"MIN_BLOCKS", I{2}}},
                         Knobs{{"REGS_CLUSTER", I{1}}, {"THREADS", I{128}}, {"ITEMS", I{4}}, {"MIN_BLOCKS", I{4}},
                               {"WREG", I{0}}, {"STAGES", I{0}}}}) {
    const PtxasResult a = build("sm_90a", kBf16, k);
    bool seen = false;
    for (const auto& f : a.functions) {
      if (f.name != "rmsnorm_bwd_regs") continue;
      seen = true;
      EXPECT_EQ(f.spill_stores, 0) << knobs_text(with(k));
    }
    EXPECT_TRUE(seen) << knobs_text(with(k));
  }
  build("sm_100a", kBf16, {{"REGS_CLUSTER", I{1}}});  // compiled and assembled only
}

// The long rows' entry at the expert kernel's three CTA shapes, without spills; the main tile's
// entries keep their code (the same registers as without the long tile).
TEST(RmsNormBwdBuild, LongTileBuildsWithoutSpills) {
  std::map<std::string, int> main_registers;
  for (const auto& f : build("sm_90a", kBf16, {}).functions)
    if (f.is_entry) main_registers[f.name] = f.registers;
  for (const Knobs& k : {Knobs{{"LONG_THREADS", I{256}}, {"LONG_ITEMS", I{2}}, {"LONG_MIN_BLOCKS", I{4}}},
                         Knobs{{"LONG_THREADS", I{512}}, {"LONG_ITEMS", I{2}}, {"LONG_MIN_BLOCKS", I{2}}},
                         Knobs{{"LONG_THREADS", I{256}}, {"LONG_ITEMS", I{8}}}}) {
    const PtxasResult a = build("sm_90a", kBf16, k);
    bool seen = false;
    for (const auto& f : a.functions) {
      if (!f.is_entry) continue;
      EXPECT_EQ(f.spill_stores, 0) << knobs_text(with(k)) << " " << f.name;
      if (f.name == "rmsnorm_bwd_ring_cluster_long") {
        seen = true;
        EXPECT_LE(f.registers * std::get<I>(k.at("LONG_THREADS")), 65536) << knobs_text(with(k));
      } else {
        EXPECT_EQ(f.registers, main_registers[f.name]) << f.name;
      }
    }
    EXPECT_TRUE(seen) << knobs_text(with(k));
  }
  build("sm_100a", kBf16, {{"LONG_THREADS", I{256}}});  // compiled and assembled only
}

// The engine's path: prepare_evaluation builds the seed with the Builder (NVRTC, the PTX IR,
// nvJitLink) and runs the gate's static checks (launch resources, cluster directives, missing
// entries) on the plan of every shape of the spec.
TEST(RmsNormBwdBuild, TheEnginePreparesTheSpecWithoutStaticFindings) {
  const Spec spec = load_bwd_spec();
  const auto registry = builtin_ops();
  Builder builder(nullptr);
  // The defaults, and the long rows' tile at the expert's N = 64K shape in waves from N = 32K (the
  // spec's 40000, 65528 and 262144 correctness rows and three benchmark rows take it).
  for (const Knobs& k : {Knobs{}, Knobs{{"LONG_THREADS", I{256}}, {"LONG_ITEMS", I{2}}, {"LONG_MIN_BLOCKS", I{4}},
                                        {"LONG_SMEM_KB", I{96}}, {"LONG_CBLOCKS", I{4224}}, {"LONG_MIN_N", I{32768}}}}) {
    SCOPED_TRACE(knobs_text(k));
    CandidateInput input;
    input.knob_overrides = k;
    const auto p = prepare_evaluation(spec, *registry.find(spec.op), builder, input, {}, 1);
    ASSERT_TRUE(p.reasons.empty()) << p.reasons.front();
    ASSERT_TRUE(p.candidate.ok);
    std::set<std::string> sections;
    for (const auto& s : read_elf_sections(p.candidate.cubin)) sections.insert(s.name);
    for (const auto& e : RmsNormBwdOp::entries(p.candidate_knobs)) EXPECT_TRUE(sections.count(".text." + e)) << e;
    EXPECT_EQ(sections.count(".text.rmsnorm_bwd_ring_cluster_long"), k.empty() ? 0u : 1u);
    for (const auto& f : p.candidate.resources)
      if (f.is_entry) {
        EXPECT_EQ(f.spill_stores, 0) << f.name;
        EXPECT_LE(f.registers, 128) << f.name;
        std::printf("%s: %d registers (nvJitLink)\n", f.name.c_str(), f.registers);
      }
  }
}

}  // namespace
}  // namespace ptxevo::kernels

namespace ptxevo::kernels {
namespace {

// Every spec shipped for RMSNorm (bf16, fp16, fp32 forward; backward) loads and validates.
TEST(RmsNormSpecs, AllShippedSpecsLoad) {
  const evaluator::OpRegistry reg = builtin_ops();
  int n = 0;
  for (const char* name : {"rmsnorm_fwd", "rmsnorm_fwd_fp16", "rmsnorm_fwd_fp32", "rmsnorm_bwd"}) {
    evaluator::SpecResult sr =
        evaluator::load_spec(std::string(PTXEVO_SOURCE_DIR "/kernels/rmsnorm/") + name + ".spec", reg);
    EXPECT_TRUE(sr.spec.has_value()) << name << ": " << (sr.error ? sr.error->format() : "");
    n += sr.spec.has_value();
  }
  EXPECT_EQ(n, 4);
}

}  // namespace
}  // namespace ptxevo::kernels
