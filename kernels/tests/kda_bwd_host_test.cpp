// kda_bwd.cu run on the CPU through the emulation of kda_host_emulation.hpp: the op's plan
// (kda_bwd_recurrent, kda_bwd_finish, kda_bwd_reduce) CTA by CTA, each thread a coroutine, outputs
// and workspace poisoned with NaN, against the op's fp64 backward (kda_backward_reference.hpp) on
// fresh inputs of every distribution: both gates, every state combination, every BV and CKPT and
// SUB values at both ends, shapes with one token, batched rows, packed sequences and lengths
// across the checkpoint boundaries.

#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "kernels/tests/kda_host_emulation.hpp"
#include "evaluator/gate.hpp"
#include "evaluator/gpu_evaluation.hpp"
#include "kernels/kda/kda_bwd_op.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wshadow"

// Each configuration: the template under its #defines in a namespace of its own, with the
// emulation's primitives.
// Configuration B0: the seed's defaults, lower-bound gate, both states.
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define BV 16
#define CKPT 64
#define SUB 8
namespace bwd0 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd.cu"
}  // namespace bwd0
#undef PREP
#undef KDA_BWD_ENTRY
#undef KDA_GATE_SOFTPLUS
#undef HAS_INITIAL_STATE
#undef HAS_FINAL_STATE
#undef BV
#undef CKPT
#undef SUB

// B1: the smallest slices and checkpoints, the deepest replays, the saved pre-processing; softplus
// gate, no states.
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 0
#define HAS_FINAL_STATE 0
#define BV 16
#define CKPT 32
#define SUB 16
#define PREP 1
namespace bwd1 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd.cu"
}  // namespace bwd1
#undef KDA_BWD_ENTRY
#undef PREP
#undef KDA_GATE_SOFTPLUS
#undef HAS_INITIAL_STATE
#undef HAS_FINAL_STATE
#undef BV
#undef CKPT
#undef SUB

// B2: the widest slices, the longest checkpoint segments and the largest replay buffer (SUB x BV
// = 256 floats a thread); initial state only.
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 0
#define BV 32
#define CKPT 128
#define SUB 8
namespace bwd2 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd.cu"
}  // namespace bwd2
#undef PREP
#undef KDA_BWD_ENTRY
#undef KDA_GATE_SOFTPLUS
#undef HAS_INITIAL_STATE
#undef HAS_FINAL_STATE
#undef BV
#undef CKPT
#undef SUB

// B3: softplus gate, final-state gradient only, BV 32 with CKPT 32, the saved pre-processing.
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 0
#define HAS_FINAL_STATE 1
#define BV 32
#define CKPT 32
#define SUB 8
#define PREP 1
namespace bwd3 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd.cu"
}  // namespace bwd3
#undef KDA_BWD_ENTRY
#undef PREP
#undef KDA_GATE_SOFTPLUS
#undef HAS_INITIAL_STATE
#undef HAS_FINAL_STATE
#undef BV
#undef CKPT
#undef SUB

// R: the fp64 device reference (KDA_BWD_REFERENCE) at its knobs (KdaBwdOp::reference_geometry),
// both states. Its warp shuffles of doubles go through the emulation's 32-bit exchange, a half at
// a time.
#define KDA_BWD_REFERENCE 1
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define BV 64
#define CKPT 32
#define SUB 4
namespace bwdref {
using namespace ::kda_host;
inline double __shfl_xor_sync(unsigned, double v, int lane_mask) {
  std::uint64_t u = 0;
  std::memcpy(&u, &v, sizeof u);
  const unsigned lo = float_as_uint(shfl_bfly(uint_as_float(static_cast<unsigned>(u)), lane_mask));
  const unsigned hi = float_as_uint(shfl_bfly(uint_as_float(static_cast<unsigned>(u >> 32)), lane_mask));
  u = (static_cast<std::uint64_t>(hi) << 32) | lo;
  double r = 0;
  std::memcpy(&r, &u, sizeof r);
  return r;
}
#include "kernels/kda/kda_bwd.cu"
}  // namespace bwdref
#undef PREP
#undef KDA_BWD_REFERENCE
#undef KDA_BWD_ENTRY
#undef KDA_GATE_SOFTPLUS
#undef HAS_INITIAL_STATE
#undef HAS_FINAL_STATE
#undef BV
#undef CKPT
#undef SUB

#pragma GCC diagnostic pop

namespace {

using ptxevo::evaluator::Distribution;
using ptxevo::evaluator::HostTensor;
using ptxevo::evaluator::KernelLaunch;
using ptxevo::evaluator::Knobs;
using ptxevo::evaluator::OpConfig;
using ptxevo::evaluator::Shape;
using ptxevo::kernels::KdaBwdOp;
using I = std::int64_t;

// One compiled configuration: the four bodies behind one Args type.
template <typename Args>
struct Config {
  const char* name;
  OpConfig options;
  Knobs knobs;
  void (*prepare)(const Args&, float*);
  void (*recurrent)(const Args&, int, float*);
  void (*finish)(const Args&, float*);
  void (*reduce)(const Args&, int);
};

#define KDA_BWD_CONFIG(NS, OPTIONS, KNOBS)                                                                     \
  Config<NS::kda_bwd::Args> {                                                                                  \
#NS, OPTIONS, KNOBS,                                                                                       \
        [](const NS::kda_bwd::Args& a, float* red) { NS::kda_bwd::prepare_body(a, red); },                    \
        [](const NS::kda_bwd::Args& a, int nseq, float* red) { NS::kda_bwd::recurrent_body(a, nseq, red); }, \
        [](const NS::kda_bwd::Args& a, float* red) { NS::kda_bwd::finish_body(a, red); },                     \
        [](const NS::kda_bwd::Args& a, int chunks) { NS::kda_bwd::reduce_body(a, chunks); }                   \
  }

Shape shape(I b, I t, I h, I n) { return {{"B", b}, {"T", t}, {"H", h}, {"N", n}}; }

// Runs every CTA of a launch, in grid order or reversed; "" or the first fault the emulation saw.
std::string run_grid(const KernelLaunch& l, const std::function<void()>& body, bool reversed = false) {
  kda_host::g_cta.grid = {l.grid.x, l.grid.y, l.grid.z};
  auto at = [&](unsigned i, unsigned n) { return reversed ? n - 1 - i : i; };
  for (unsigned x = 0; x < l.grid.x; ++x)
    for (unsigned y = 0; y < l.grid.y; ++y)
      for (unsigned z = 0; z < l.grid.z; ++z) {
        kda_host::run_cta(static_cast<int>(l.block.x), {at(x, l.grid.x), at(y, l.grid.y), at(z, l.grid.z)}, 0, body);
        std::string fault = kda_host::g_cta.fault;
        kda_host::g_cta.fault.clear();
        if (!fault.empty()) return fault;
      }
  return "";
}

// rel_l2 of each output against the reference (infinite where an element is not finite); with
// `outputs`, the output tensors too.
template <typename Args>
std::map<std::string, ptxevo::evaluator::OutputCheck> run(const Config<Args>& c, const Shape& s, Distribution dist,
                                                          std::uint64_t seed, std::string* fault, bool reversed = false,
                                                          std::vector<HostTensor>* outputs = nullptr) {
  const KdaBwdOp op;
  const auto descs = op.tensors(s, c.options);
  std::vector<HostTensor> ts;
  for (const auto& d : descs) ts.emplace_back(d.name, d.dtype, d.shape);
  ptxevo::evaluator::fill_inputs(op, descs, dist, seed, ts);
  std::vector<HostTensor> ref;
  op.reference(s, c.options, ts, ref);
  const auto plan = op.launch_plan(s, c.options, c.knobs);
  const bool prep = std::get<I>(c.knobs.at("PREP")) == 1;
  EXPECT_EQ(plan.kernels.size(), prep ? 4u : 3u);
  auto find = [&](const std::string& name) -> HostTensor* {
    for (auto& t : ts)
      if (t.name == name) return &t;
    return nullptr;
  };
  auto bf = [&](const char* name) { return reinterpret_cast<const __nv_bfloat16*>(find(name)->data.data()); };
  auto in32 = [&](const char* name) {
    HostTensor* t = find(name);
    return t ? reinterpret_cast<const float*>(t->data.data()) : nullptr;
  };
  // Outputs and workspace poisoned with NaN: an element the kernels neither zero nor write, or a
  // workspace word read before it was written, fails the comparison.
  auto out32 = [&](const char* name) -> float* {
    HostTensor* t = find(name);
    if (!t) return nullptr;
    ptxevo::evaluator::poison(*t, 0);
    return reinterpret_cast<float*>(t->data.data());
  };
  const HostTensor* cu = find("cu_seqlens");
  const std::size_t first = prep ? 1 : 0;  // kda_bwd_prepare comes first with PREP
  const auto& rec = plan.kernels.at(first);
  const auto& fin = plan.kernels.at(first + 1);
  const auto& red_k = plan.kernels.at(first + 2);
  Args a{bf("q"),
         bf("k"),
         bf("v"),
         bf("g"),
         bf("beta"),
         in32("A_log"),
         in32("dt_bias"),
         cu ? reinterpret_cast<const long long*>(cu->data.data()) : nullptr,
         in32("initial_state"),
         bf("d_out"),
         in32("d_final_state"),
         out32("dq"),
         out32("dk"),
         out32("dv"),
         out32("dg"),
         out32("dbeta"),
         out32("dA_log"),
         out32("ddt_bias"),
         out32("d_initial_state"),
         out32("workspace"),
         std::get<I>(rec.args.at(14)),
         std::get<std::int32_t>(rec.args.at(15)),
         std::get<float>(rec.args.at(17)),
         std::get<float>(rec.args.at(18)),
         std::get<I>(rec.args.at(19)),
         std::get<I>(fin.args.at(15)),
         prep ? std::get<I>(rec.args.at(20)) : 0};
  const int nseq = std::get<std::int32_t>(rec.args.at(16));
  alignas(16) static float red[4 * 2 * 32];
  // kda_bwd_prepare and kda_bwd_finish read T_total where the recurrence reads the tokens per row.
  Args f = a;
  f.T = std::get<I>(fin.args.at(11));
  if (prep) *fault = run_grid(plan.kernels.at(0), [&] { c.prepare(f, red); }, reversed);
  if (fault->empty()) *fault = run_grid(rec, [&] { c.recurrent(a, nseq, red); }, reversed);
  if (fault->empty()) *fault = run_grid(fin, [&] { c.finish(f, red); }, reversed);
  if (fault->empty()) *fault = run_grid(red_k, [&] { c.reduce(f, std::get<std::int32_t>(red_k.args.at(4))); }, reversed);
  if (outputs)
    for (const auto& r : ref) outputs->push_back(*find(r.name));
  // The gate's own judgement of each output (evaluator/gate.hpp), with the op's tolerances.
  std::map<std::string, ptxevo::evaluator::OutputCheck> errors;
  for (const auto& r : ref) errors[r.name] = ptxevo::evaluator::check_output(*find(r.name), r, op.tolerance(r.name, c.options), 0);
  return errors;
}

// One token, two heads of 17, 70 tokens (three CKPT 32 segments, two of CKPT 64), batched rows
// across a CKPT 32 boundary, packed sets [1, 1] and [16, 4, 8, 12]. The emulation switches
// between 128 coroutines at every barrier (four a token, and the replays walk a segment's tokens
// again for each SUB of it): these take 4-7 s a configuration in the release build.
const std::vector<Shape> kShapes = {shape(1, 1, 1, 1), shape(1, 17, 2, 1), shape(1, 70, 1, 1),
                                    shape(2, 33, 1, 2), shape(1, 2, 2, 2),  shape(1, 40, 1, 4)};

template <typename Args>
void check(const Config<Args>& c, const std::vector<Shape>& shapes = kShapes) {
  const auto& dists = ptxevo::evaluator::all_distributions();
  std::map<std::string, double> worst;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Distribution dist = dists[i % dists.size()];
    SCOPED_TRACE(std::string(c.name) + " " + ptxevo::evaluator::shape_to_string(shapes[i]) + " " + to_string(dist));
    std::string fault;
    const auto errors = run(c, shapes[i], dist, 2000 + i, &fault);
    ASSERT_EQ(fault, "");
    for (const auto& [name, e] : errors) {
      EXPECT_TRUE(e.passed) << name << ": " << e.reason;
      // Well inside the gate's 1e-2, except where every value lies below fp32's range (the
      // gate passes zeros there).
      if (e.ref_rms > 1e-30) {
        EXPECT_LT(e.rel_l2, 2e-3) << name;
      }
      worst[name] = std::max(worst[name], e.ref_rms > 1e-30 ? e.rel_l2 : 0.0);
    }
  }
  std::printf("%s (kda_bwd.cu on the CPU) vs the fp64 backward, worst rel_l2:", c.name);
  for (const auto& [name, e] : worst) std::printf(" %s %.2g", name.c_str(), e);
  std::printf("\n");
}

OpConfig options(const char* gate, bool initial, bool final) {
  return {{"gate", gate}, {"initial_state", initial ? "true" : "false"}, {"final_state", final ? "true" : "false"}};
}
Knobs knobs(I bv, I ckpt, I sub, I prep = 0) { return {{"BV", bv}, {"CKPT", ckpt}, {"SUB", sub}, {"PREP", prep}}; }

TEST(KdaBwdOnHost, SeedDefaultsLowerBoundGateBothStates) {
  check(KDA_BWD_CONFIG(bwd0, options("lower_bound", true, true), knobs(16, 64, 8)));
}
// The sanitized build's share (scripts/test.sh runs the others in the release build only).
TEST(KdaBwdOnHost, SeedDefaultsOnOneTokenAndShortPackedSequences) {
  check(KDA_BWD_CONFIG(bwd0, options("lower_bound", true, true), knobs(16, 64, 8)),
        {shape(1, 1, 1, 1), shape(1, 2, 2, 2), shape(1, 9, 1, 1)});
}
// No output depends on the order the CTAs run in (the gate requires the same bits from every
// run): the slices' shares and the chunk sums are added in a fixed order, with no atomics.
TEST(KdaBwdOnHost, OutputsDoNotDependOnTheOrderOfTheCtas) {
  const auto c = KDA_BWD_CONFIG(bwd0, options("lower_bound", true, true), knobs(16, 64, 8));
  std::vector<HostTensor> in_order, reversed;
  std::string fault;
  run(c, shape(1, 40, 1, 4), Distribution::Normal, 7, &fault, false, &in_order);
  ASSERT_EQ(fault, "");
  run(c, shape(1, 40, 1, 4), Distribution::Normal, 7, &fault, true, &reversed);
  ASSERT_EQ(fault, "");
  ASSERT_EQ(in_order.size(), reversed.size());
  for (std::size_t i = 0; i < in_order.size(); ++i) {
    EXPECT_EQ(in_order[i].name, reversed[i].name);
    EXPECT_TRUE(in_order[i].data == reversed[i].data) << in_order[i].name << " differs";
  }
}
// The device reference's plan (KdaBwdOp::device_reference_plan) run on the emulated machine with
// its fp64 arithmetic, against the host's fp64 backward: the same values to rounding.
TEST(KdaBwdOnHost, DeviceReferenceAgreesWithTheHostsBackward) {
  const KdaBwdOp op;
  const OpConfig cfg = options("lower_bound", true, true);
  for (const Shape& s : {shape(1, 40, 1, 4), shape(2, 9, 1, 2)}) {
    SCOPED_TRACE(ptxevo::evaluator::shape_to_string(s));
    const auto descs = op.tensors(s, cfg);
    std::vector<HostTensor> ts;
    for (const auto& d : descs) ts.emplace_back(d.name, d.dtype, d.name == "workspace" ? std::vector<I>{1} : d.shape);
    ptxevo::evaluator::fill_inputs(op, descs, Distribution::Normal, 11, ts);
    std::vector<HostTensor> ref;
    op.reference(s, cfg, ts, ref);
    const auto plan = op.device_reference_plan(s, cfg);
    auto in = [&](const char* name) -> const void* {
      for (const auto& t : ts)
        if (t.name == name) return t.data.data();
      return nullptr;
    };
    std::map<std::string, std::vector<double>> out;
    for (const auto& r : ref) out[r.name].assign(static_cast<std::size_t>(r.numel()), std::nan(""));
    std::vector<double> ws(static_cast<std::size_t>(plan.scratch.at(0).shape.at(0)), std::nan(""));
    using Args = bwdref::kda_bwd::Args;
    const auto& rec = plan.plan.kernels.at(0);
    const auto& fin = plan.plan.kernels.at(1);
    const auto& red_k = plan.plan.kernels.at(2);
    auto bf = [&](const char* n) { return static_cast<const unsigned short*>(in(n)); };
    auto f32 = [&](const char* n) { return static_cast<const float*>(in(n)); };
    Args a{bf("q"), bf("k"), bf("v"), bf("g"), bf("beta"), f32("A_log"), f32("dt_bias"),
           static_cast<const long long*>(in("cu_seqlens")), f32("initial_state"), bf("d_out"), f32("d_final_state"),
           out["dq"].data(), out["dk"].data(), out["dv"].data(), out["dg"].data(), out["dbeta"].data(),
           out["dA_log"].data(), out["ddt_bias"].data(), out["d_initial_state"].data(), ws.data(),
           std::get<I>(rec.args.at(14)), std::get<std::int32_t>(rec.args.at(15)), std::get<double>(rec.args.at(17)),
           std::get<double>(rec.args.at(18)), std::get<I>(rec.args.at(19)), std::get<I>(fin.args.at(15)), 0};
    alignas(16) static double red[4 * 2 * 64];
    std::string fault = run_grid(rec, [&] { bwdref::kda_bwd::recurrent_body(a, std::get<std::int32_t>(rec.args.at(16)), red); });
    ASSERT_EQ(fault, "");
    Args f = a;
    f.T = std::get<I>(fin.args.at(11));
    fault = run_grid(fin, [&] { bwdref::kda_bwd::finish_body(f, red); });
    ASSERT_EQ(fault, "");
    fault = run_grid(red_k, [&] { bwdref::kda_bwd::reduce_body(f, std::get<std::int32_t>(red_k.args.at(4))); });
    ASSERT_EQ(fault, "");
    for (const auto& r : ref) {
      double d2 = 0, r2 = 0;
      for (I i = 0; i < r.numel(); ++i) {
        const double x = out[r.name][static_cast<std::size_t>(i)], y = r.get(i);
        ASSERT_TRUE(std::isfinite(x)) << r.name << "[" << i << "]";
        d2 += (x - y) * (x - y);
        r2 += y * y;
      }
      EXPECT_LT(std::sqrt(d2 / std::max(r2, 1e-300)), 1e-12) << r.name;
    }
  }
}

TEST(KdaBwdOnHost, SmallestSlicesSoftplusGateNoStates) {
  check(KDA_BWD_CONFIG(bwd1, options("softplus", false, false), knobs(16, 32, 16, 1)));
}
TEST(KdaBwdOnHost, WidestSlicesLongSegmentsInitialStateOnly) {
  check(KDA_BWD_CONFIG(bwd2, options("lower_bound", true, false), knobs(32, 128, 8)));
}
TEST(KdaBwdOnHost, SoftplusGateFinalStateGradientOnly) {
  check(KDA_BWD_CONFIG(bwd3, options("softplus", false, true), knobs(32, 32, 8, 1)));
}

}  // namespace
