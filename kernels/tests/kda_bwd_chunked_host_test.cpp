// kda_bwd_chunked.cu run on the CPU through the emulation of kda_host_emulation.hpp: the op's
// chunked plan (prepare, states, dstates, slices, finish, reduce) CTA by CTA, each thread a
// coroutine, outputs and workspace poisoned with NaN, against the op's fp64 backward
// (kda_backward_reference.hpp) on fresh inputs of every distribution: both gates, every state
// combination, every CHUNK and BV, CUDA and tensor cores, one token, partial last chunks, batched
// rows and packed sets.

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

// C0: CHUNK 64, BV 32 on CUDA cores (the defaults until the H100 timed CHUNK 32 on tensor cores
// twice as fast), lower-bound gate, both states.
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 64
#define BV 32
namespace chunk0 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk0
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C1: CHUNK 32, BV 32; softplus gate, no states.
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 0
#define HAS_FINAL_STATE 0
#define CHUNK 32
#define BV 32
namespace chunk1 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk1
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C2: CHUNK 32, BV 64 (two slices); lower-bound gate, initial state only.
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 0
#define CHUNK 32
#define BV 64
namespace chunk2 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk2
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C3: CHUNK 64, BV 32; softplus gate, final-state gradient only.
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 0
#define HAS_FINAL_STATE 1
#define CHUNK 64
#define BV 32
namespace chunk3 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk3
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C4: the defaults on tensor cores (MMA 1), lower-bound gate, both states.
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 64
#define BV 32
#define MMA 1
namespace chunk4 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk4
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C5: CHUNK 32, BV 64 on tensor cores; softplus gate, final-state gradient only.
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 0
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 64
#define MMA 1
namespace chunk5 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk5
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C6: CHUNK 64, BV 16 (eight slices) on CUDA cores; lower-bound gate, final-state gradient only.
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 0
#define HAS_FINAL_STATE 1
#define CHUNK 64
#define BV 16
namespace chunk6 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk6
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C7: the chunked seed's defaults with SLICE_LOOP 0 (CHUNK 32, BV 32, MMA 1), lower-bound gate,
// both states.
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 32
#define MMA 1
namespace chunk7 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk7
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C8: the defaults with one bf16 term per tensor-core product (MMA_TERMS 1, FLA's precision).
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 32
#define MMA 1
#define MMA_TERMS 1
namespace chunk8 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk8
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C9: SLICE_LOOP (CHUNK 32, BV 32, MMA 1, SLICE_LOOP 1: a slices CTA per chunk and
// head over the four value slices) without the later knobs, lower-bound gate, both states.
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 32
#define MMA 1
#define SLICE_LOOP 1
namespace chunk9 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk9
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C10: SLICE_LOOP 1 over eight slices of 16 columns; softplus gate, final-state gradient only.
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 0
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 16
#define MMA 1
#define SLICE_LOOP 1
namespace chunk10 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk10
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C11: the defaults with CHAIN_PREFETCH 1 (the chunk-serial kernels' next record words in
// registers); softplus gate, both states.
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 32
#define MMA 1
#define SLICE_LOOP 1
#define CHAIN_PREFETCH 1
namespace chunk11 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk11
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C12: C11 without the prefetch.
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 32
#define MMA 1
#define SLICE_LOOP 1
namespace chunk12 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk12
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C13: C9 (SLICE_LOOP) with FINISH_IN_SLICES 1 (the finish in the slices CTAs, no finish
// kernel) and PREPARE_PAIRS 1 (the prepare's sums over the lower triangle only).
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 32
#define MMA 1
#define SLICE_LOOP 1
#define FINISH_IN_SLICES 1
#define PREPARE_PAIRS 1
namespace chunk13 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk13
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C14: C0 (CHUNK 64 on CUDA cores) with PREPARE_PAIRS 1: 2080 pairs over the lanes.
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 64
#define BV 32
#define PREPARE_PAIRS 1
namespace chunk14 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk14
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C15: C9 (SLICE_LOOP) with MMA_BLOCK 1 (fragments built once for a block of tiles).
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 32
#define MMA 1
#define SLICE_LOOP 1
#define MMA_BLOCK 1
namespace chunk15 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk15
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C16: C7 (SLICE_LOOP 0: chunk_mm3's share products) with MMA_BLOCK 1.
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 32
#define MMA 1
#define MMA_BLOCK 1
namespace chunk16 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk16
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C17: C9 (SLICE_LOOP) with FINISH_REGISTERS 1 and MMA_BLOCK 1, softplus gate.
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 32
#define MMA 1
#define SLICE_LOOP 1
#define MMA_BLOCK 1
#define FINISH_REGISTERS 1
namespace chunk17 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk17
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C18: C9 (SLICE_LOOP) with CHAIN_THREADS 256 (eight warps a chunk-serial CTA) and MMA_BLOCK 1.
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 32
#define MMA 1
#define SLICE_LOOP 1
#define MMA_BLOCK 1
#define CHAIN_THREADS 256
namespace chunk18 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk18
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C19: the spec's defaults, C9 with CHAIN_PREFETCH 1, MMA_BLOCK 1 and PREPARE_PAIRS 1.
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 32
#define MMA 1
#define SLICE_LOOP 1
#define CHAIN_PREFETCH 1
#define MMA_BLOCK 1
#define PREPARE_PAIRS 1
namespace chunk19 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk19
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C20: the spec's defaults, C19 with CHAIN_PREFETCH 2 and FINISH_ROWS 4.
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 32
#define MMA 1
#define SLICE_LOOP 1
#define CHAIN_PREFETCH 2
#define MMA_BLOCK 1
#define PREPARE_PAIRS 1
#define FINISH_ROWS 4
namespace chunk20 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk20
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C21: C12 (softplus gate, SLICE_LOOP) with FINISH_ROWS 2.
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 32
#define MMA 1
#define SLICE_LOOP 1
#define FINISH_ROWS 2
namespace chunk21 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk21
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C22: the spec's defaults (C20) with FINISH_LEAN 1 (no q, no P in the finish's shared memory).
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 32
#define MMA 1
#define SLICE_LOOP 1
#define CHAIN_PREFETCH 2
#define MMA_BLOCK 1
#define PREPARE_PAIRS 1
#define FINISH_ROWS 4
#define FINISH_LEAN 1
namespace chunk22 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk22
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C23: C12 (softplus gate, SLICE_LOOP, the walk a row at a time) with FINISH_LEAN 1.
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 32
#define MMA 1
#define SLICE_LOOP 1
#define FINISH_LEAN 1
namespace chunk23 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk23
#include "kernels/tests/kda_bwd_chunked_undef.inc"

// C24: C17 (FINISH_REGISTERS 1, MMA_BLOCK 1, softplus gate) with FINISH_LEAN 1.
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 32
#define MMA 1
#define SLICE_LOOP 1
#define MMA_BLOCK 1
#define FINISH_REGISTERS 1
#define FINISH_LEAN 1
namespace chunk24 {
using namespace ::kda_host;
#include "kernels/kda/kda_bwd_chunked.cu"
}  // namespace chunk24
#include "kernels/tests/kda_bwd_chunked_undef.inc"

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

// One compiled configuration: the chunked bodies behind its ChunkArgs by entry name, kda_bwd.cu's
// reduction behind its Args, and each entry's shared memory in floats as the kernel counts it.
template <typename ChunkArgs, typename Args>
struct Config {
  const char* name;
  OpConfig options;
  Knobs knobs;
  std::map<std::string, void (*)(const ChunkArgs&, float*)> bodies;
  void (*reduce)(const Args&, int);
  std::map<std::string, int> smem_floats;
};

#define KDA_BWD_CHUNKED_CONFIG(NS, OPTIONS, KNOBS)                                                               \
  Config<NS::kda_bwd::ChunkArgs, NS::kda_bwd::Args> {                                                           \
#NS, OPTIONS, KNOBS,                                                                                         \
        {{KdaBwdOp::kChunkPrepareEntry,                                                                          \
          [](const NS::kda_bwd::ChunkArgs& a, float* s) { NS::kda_bwd::chunk_prepare_body(a, s); }},            \
         {KdaBwdOp::kChunkStatesEntry,                                                                           \
          [](const NS::kda_bwd::ChunkArgs& a, float* s) { NS::kda_bwd::chunk_states_body(a, s); }},             \
         {KdaBwdOp::kChunkDstatesEntry,                                                                          \
          [](const NS::kda_bwd::ChunkArgs& a, float* s) { NS::kda_bwd::chunk_dstates_body(a, s); }},            \
         {KdaBwdOp::kChunkSlicesEntry,                                                                           \
          [](const NS::kda_bwd::ChunkArgs& a, float* s) { NS::kda_bwd::chunk_slices_body(a, s); }},             \
         {KdaBwdOp::kChunkFinishEntry,                                                                           \
          [](const NS::kda_bwd::ChunkArgs& a, float* s) { NS::kda_bwd::chunk_finish_body(a, s); }}},            \
        [](const NS::kda_bwd::Args& a, int chunks) { NS::kda_bwd::reduce_body(a, chunks); },                   \
        {{KdaBwdOp::kChunkPrepareEntry, NS::kda_bwd::kPrepareSmem},                                              \
         {KdaBwdOp::kChunkStatesEntry, NS::kda_bwd::kStatesSmem},                                                \
         {KdaBwdOp::kChunkDstatesEntry, NS::kda_bwd::kDstatesSmem},                                              \
         {KdaBwdOp::kChunkSlicesEntry, NS::kda_bwd::kSlicesSmem},                                                \
         {KdaBwdOp::kChunkFinishEntry, NS::kda_bwd::kFinishSmem}},                                               \
  }

Shape shape(I b, I t, I h, I n) { return {{"B", b}, {"T", t}, {"H", h}, {"N", n}}; }

std::string run_grid(const KernelLaunch& l, const std::function<void()>& body, bool reversed) {
  kda_host::g_cta.grid = {l.grid.x, l.grid.y, l.grid.z};
  auto at = [&](unsigned i, unsigned n) { return reversed ? n - 1 - i : i; };
  for (unsigned x = 0; x < l.grid.x; ++x)
    for (unsigned y = 0; y < l.grid.y; ++y)
      for (unsigned z = 0; z < l.grid.z; ++z) {
        kda_host::run_cta(static_cast<int>(l.block.x), {at(x, l.grid.x), at(y, l.grid.y), at(z, l.grid.z)},
                          l.shared_bytes, body);
        std::string fault = kda_host::g_cta.fault;
        kda_host::g_cta.fault.clear();
        if (!fault.empty()) return fault;
      }
  return "";
}

// Each output's check by the gate (evaluator/gate.hpp) with the op's tolerances; with `outputs`,
// the output tensors too.
template <typename ChunkArgs, typename Args>
std::map<std::string, ptxevo::evaluator::OutputCheck> run(const Config<ChunkArgs, Args>& c, const Shape& s,
                                                          Distribution dist, std::uint64_t seed, std::string* fault,
                                                          bool reversed = false,
                                                          std::vector<HostTensor>* outputs = nullptr) {
  const KdaBwdOp op;
  const auto descs = op.tensors(s, c.options);
  std::vector<HostTensor> ts;
  for (const auto& d : descs) ts.emplace_back(d.name, d.dtype, d.shape);
  ptxevo::evaluator::fill_inputs(op, descs, dist, seed, ts);
  std::vector<HostTensor> ref;
  op.reference(s, c.options, ts, ref);
  const auto plan = op.launch_plan(s, c.options, c.knobs);
  EXPECT_GE(plan.kernels.size(), 5u);
  EXPECT_EQ(plan.kernels.back().entry, KdaBwdOp::kReduceEntry);
  for (std::size_t i = 0; i + 1 < plan.kernels.size(); ++i)
    EXPECT_EQ(plan.kernels[i].shared_bytes, 4u * static_cast<unsigned>(c.smem_floats.at(plan.kernels[i].entry)))
        << plan.kernels[i].entry;
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
  auto out32 = [&](const char* name) -> float* {
    HostTensor* t = find(name);
    if (!t) return nullptr;
    ptxevo::evaluator::poison(*t, 0);
    return reinterpret_cast<float*>(t->data.data());
  };
  const HostTensor* cu = find("cu_seqlens");
  const auto& args = plan.kernels.at(0).args;
  ChunkArgs a{bf("q"),
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
              out32("d_initial_state"),
              out32("workspace"),
              std::get<I>(args.at(18)),
              std::get<std::int32_t>(args.at(19)),
              std::get<std::int32_t>(args.at(20)),
              std::get<I>(args.at(21)),
              std::get<float>(args.at(22)),
              std::get<float>(args.at(23)),
              std::get<I>(args.at(24)),
              std::get<I>(args.at(25)),
              std::get<I>(args.at(26)),
              std::get<I>(args.at(27)),
              std::get<I>(args.at(28)),
              std::get<I>(args.at(29))};
  out32("dA_log");
  out32("ddt_bias");
  alignas(16) static float sm[227 * 1024 / 4];
  for (std::size_t k = 0; k + 1 < plan.kernels.size() && fault->empty(); ++k) {
    std::fill(std::begin(sm), std::end(sm), std::nanf(""));  // shared memory read before written fails too
    const auto body = c.bodies.at(plan.kernels[k].entry);
    *fault = run_grid(plan.kernels.at(k), [&] { body(a, sm); }, reversed);
  }
  const auto& red_k = plan.kernels.back();
  Args r{};
  r.ws = a.ws;
  r.da_log = find("dA_log") ? reinterpret_cast<float*>(find("dA_log")->data.data()) : nullptr;
  r.ddt_bias = reinterpret_cast<float*>(find("ddt_bias")->data.data());
  r.H = std::get<std::int32_t>(red_k.args.at(5));
  r.sums_off = std::get<I>(red_k.args.at(3));
  if (fault->empty())
    *fault = run_grid(red_k, [&] { c.reduce(r, std::get<std::int32_t>(red_k.args.at(4))); }, reversed);
  if (outputs)
    for (const auto& o : ref) outputs->push_back(*find(o.name));
  std::map<std::string, ptxevo::evaluator::OutputCheck> errors;
  for (const auto& o : ref)
    errors[o.name] = ptxevo::evaluator::check_output(*find(o.name), o, op.tolerance(o.name, c.options), 0);
  return errors;
}

// One token; 70 tokens (a partial second chunk of 64, three chunks of 32); batched rows across a
// 32-token boundary; packed sets [1, 1], [16, 4, 8, 12] and the spec's seven sequences of 241
// tokens (slots between sequences); 130 tokens (three chunks of 64).
const std::vector<Shape> kShapes = {shape(1, 1, 1, 1),  shape(1, 70, 2, 1),  shape(2, 33, 1, 2), shape(1, 2, 2, 2),
                                    shape(1, 40, 1, 4), shape(1, 130, 1, 1), shape(1, 241, 1, 7)};

template <typename ChunkArgs, typename Args>
void check(const Config<ChunkArgs, Args>& c, const std::vector<Shape>& shapes = kShapes, double max_rel_l2 = 2e-3) {
  const auto& dists = ptxevo::evaluator::all_distributions();
  std::map<std::string, double> worst;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Distribution dist = dists[i % dists.size()];
    SCOPED_TRACE(std::string(c.name) + " " + ptxevo::evaluator::shape_to_string(shapes[i]) + " " + to_string(dist));
    std::string fault;
    const auto errors = run(c, shapes[i], dist, 3000 + i, &fault);
    ASSERT_EQ(fault, "");
    for (const auto& [name, e] : errors) {
      EXPECT_TRUE(e.passed) << name << ": " << e.reason;
      if (e.ref_rms > 1e-30) {
        EXPECT_LT(e.rel_l2, max_rel_l2) << name;
      }
      worst[name] = std::max(worst[name], e.ref_rms > 1e-30 ? e.rel_l2 : 0.0);
    }
  }
  std::printf("%s (kda_bwd_chunked.cu on the CPU) vs the fp64 backward, worst rel_l2:", c.name);
  for (const auto& [name, e] : worst) std::printf(" %s %.2g", name.c_str(), e);
  std::printf("\n");
}

OpConfig options(const char* gate, bool initial, bool final) {
  return {{"gate", gate}, {"initial_state", initial ? "true" : "false"}, {"final_state", final ? "true" : "false"}};
}
Knobs knobs(I chunk, I bv, I mma = 0, I terms = 3) {
  return {{"CHUNK", chunk}, {"BV", bv}, {"MMA", mma}, {"MMA_TERMS", terms}, {"SLICE_LOOP", I{0}}};
}
Knobs slice_loop(I bv) {
  return {{"CHUNK", I{32}}, {"BV", bv},           {"MMA", I{1}},
          {"MMA_TERMS", I{3}}, {"SLICE_LOOP", I{1}}, {"CHAIN_PREFETCH", I{0}}, {"FINISH_IN_SLICES", I{0}},
          {"PREPARE_PAIRS", I{0}}, {"MMA_BLOCK", I{0}}, {"FINISH_REGISTERS", I{0}}, {"FINISH_ROWS", I{1}},
          {"FINISH_LEAN", I{0}},   {"CHAIN_THREADS", I{128}}};
}

// Runs `with` and `base` on the same inputs of each shape: `with` within the gate's tolerances, and
// every output the same bit for bit as `base`'s.
template <typename With, typename Base>
void expect_same_bits(const With& with, const Base& base, std::initializer_list<Shape> shapes, Distribution dist,
                      std::uint64_t seed) {
  for (const auto& sh : shapes) {
    std::vector<HostTensor> a, b;
    std::string fault;
    const auto errors = run(with, sh, dist, seed, &fault, false, &a);
    ASSERT_EQ(fault, "");
    for (const auto& [name, e] : errors)
      EXPECT_TRUE(e.passed) << name << " " << ptxevo::evaluator::to_string(dist) << ": " << e.reason;
    run(base, sh, dist, seed, &fault, false, &b);
    ASSERT_EQ(fault, "");
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i)
      EXPECT_TRUE(a[i].data == b[i].data) << a[i].name << " differs, " << ptxevo::evaluator::to_string(dist);
  }
}

// expect_same_bits on chunk lengths of every residue mod 4 (the finish's row groups), packed and
// batched shapes under normal inputs (seed), and the gate's short shapes under every input
// distribution (seed + 1).
template <typename With, typename Base>
void expect_same_bits_over_chunk_lengths(const With& with, const Base& base, std::uint64_t seed) {
  expect_same_bits(with, base, {shape(1, 70, 2, 1), shape(1, 241, 1, 7), shape(2, 33, 1, 2), shape(1, 40, 1, 4)},
                   Distribution::Normal, seed);
  for (const auto dist : ptxevo::evaluator::all_distributions())
    expect_same_bits(with, base, {shape(1, 1, 1, 1), shape(1, 34, 1, 1), shape(1, 17, 4, 1), shape(1, 115, 4, 3)}, dist,
                     seed + 1);
}

TEST(KdaBwdChunkedOnHost, SliceLoop0LowerBoundGateBothStates) {
  check(KDA_BWD_CHUNKED_CONFIG(chunk7, options("lower_bound", true, true), knobs(32, 32, 1)));
}
// One bf16 term per product: within the gate's tolerance (rel_l2 1e-2) on every output; the
// printed errors are what MMA_TERMS 1 costs (FLA's backward on an H100: 1.4e-3 to 4.3e-3).
TEST(KdaBwdChunkedOnHost, OneBf16TermPerProductStaysWithinTheGatesTolerance) {
  check(KDA_BWD_CHUNKED_CONFIG(chunk8, options("lower_bound", true, true), knobs(32, 32, 1, 1)), kShapes, 1e-2);
}
// SLICE_LOOP 1: the slices kernel sums the value slices' shares in registers, one share a token.
TEST(KdaBwdChunkedOnHost, SliceLoopLowerBoundGateBothStates) {
  check(KDA_BWD_CHUNKED_CONFIG(chunk9, options("lower_bound", true, true), slice_loop(32)));
}
// The spec's defaults: C20 (SLICE_LOOP with CHAIN_PREFETCH 2, MMA_BLOCK, PREPARE_PAIRS and
// FINISH_ROWS 4).
TEST(KdaBwdChunkedOnHost, DefaultsLowerBoundGateBothStates) {
  Knobs defaults = slice_loop(32);
  defaults["CHAIN_PREFETCH"] = I{2};
  defaults["MMA_BLOCK"] = I{1};
  defaults["PREPARE_PAIRS"] = I{1};
  defaults["FINISH_ROWS"] = I{4};
  EXPECT_EQ(defaults, KdaBwdOp::chunked_knob_defaults());
  check(KDA_BWD_CHUNKED_CONFIG(chunk20, options("lower_bound", true, true), defaults));
}
TEST(KdaBwdChunkedOnHost, SliceLoopEightSlicesSoftplusFinalStateOnly) {
  check(KDA_BWD_CHUNKED_CONFIG(chunk10, options("softplus", false, true), slice_loop(16)));
}
// CHAIN_PREFETCH 1 stages the same values as 0 into shared memory: within the gate's tolerances,
// and every output the same bit for bit as without it (partial chunks, packed sequences).
TEST(KdaBwdChunkedOnHost, ChainPrefetchGivesTheSameBits) {
  Knobs prefetch = slice_loop(32);
  prefetch["CHAIN_PREFETCH"] = I{1};
  const auto with = KDA_BWD_CHUNKED_CONFIG(chunk11, options("softplus", true, true), prefetch);
  const auto without = KDA_BWD_CHUNKED_CONFIG(chunk12, options("softplus", true, true), slice_loop(32));
  check(with);
  expect_same_bits(with, without, {shape(1, 70, 2, 1), shape(1, 241, 1, 7)}, Distribution::Normal, 11);
}
// FINISH_IN_SLICES 1 runs the same finish on the same share, PREPARE_PAIRS 1 the same sums on
// other lanes: a plan without kda_bwd_chunk_finish, and every output the same bit for bit as the
// defaults' (slots without a chunk included).
TEST(KdaBwdChunkedOnHost, FinishInSlicesAndPreparePairsGiveTheSameBits) {
  Knobs fused = slice_loop(32);
  fused["FINISH_IN_SLICES"] = I{1};
  fused["PREPARE_PAIRS"] = I{1};
  const auto with = KDA_BWD_CHUNKED_CONFIG(chunk13, options("lower_bound", true, true), fused);
  const auto without = KDA_BWD_CHUNKED_CONFIG(chunk9, options("lower_bound", true, true), slice_loop(32));
  const auto plan = KdaBwdOp().launch_plan(shape(1, 241, 1, 7), with.options, fused);
  ASSERT_EQ(plan.kernels.size(), 5u);
  for (const auto& k : plan.kernels) EXPECT_NE(k.entry, KdaBwdOp::kChunkFinishEntry);
  expect_same_bits(with, without, {shape(1, 70, 2, 1), shape(1, 241, 1, 7), shape(2, 33, 1, 2)}, Distribution::Normal, 13);
}
TEST(KdaBwdChunkedOnHost, PreparePairsAtChunk64GivesTheSameBits) {
  Knobs pairs = knobs(64, 32);
  pairs["PREPARE_PAIRS"] = I{1};
  const auto with = KDA_BWD_CHUNKED_CONFIG(chunk14, options("lower_bound", true, true), pairs);
  const auto without = KDA_BWD_CHUNKED_CONFIG(chunk0, options("lower_bound", true, true), knobs(64, 32));
  expect_same_bits(with, without, {shape(1, 130, 1, 1), shape(1, 241, 1, 7)}, Distribution::Normal, 14);
}
// MMA_BLOCK 1 gives every output element the same products in the same order as 0: every output
// the same bit for bit, with the SLICE_LOOP share products (chunk_acc3) and without (chunk_mm).
TEST(KdaBwdChunkedOnHost, MmaBlockGivesTheSameBits) {
  Knobs blocked = slice_loop(32);
  blocked["MMA_BLOCK"] = I{1};
  Knobs blocked0 = knobs(32, 32, 1);
  blocked0["MMA_BLOCK"] = I{1};
  const auto with = KDA_BWD_CHUNKED_CONFIG(chunk15, options("lower_bound", true, true), blocked);
  const auto without = KDA_BWD_CHUNKED_CONFIG(chunk9, options("lower_bound", true, true), slice_loop(32));
  const auto with0 = KDA_BWD_CHUNKED_CONFIG(chunk16, options("lower_bound", true, true), blocked0);
  const auto without0 = KDA_BWD_CHUNKED_CONFIG(chunk7, options("lower_bound", true, true), knobs(32, 32, 1));
  expect_same_bits(with, without, {shape(1, 70, 2, 1), shape(1, 241, 1, 7)}, Distribution::Normal, 15);
  expect_same_bits(with0, without0, {shape(1, 70, 2, 1), shape(1, 241, 1, 7)}, Distribution::Normal, 15);
}
// FINISH_REGISTERS 1 walks the same pairs with the same operations in the same order as 0: every
// output the same bit for bit as C12 (softplus gate, partial chunks, packed sequences).
TEST(KdaBwdChunkedOnHost, FinishRegistersGivesTheSameBits) {
  Knobs regs = slice_loop(32);
  regs["MMA_BLOCK"] = I{1};
  regs["FINISH_REGISTERS"] = I{1};
  const auto with = KDA_BWD_CHUNKED_CONFIG(chunk17, options("softplus", true, true), regs);
  const auto without = KDA_BWD_CHUNKED_CONFIG(chunk12, options("softplus", true, true), slice_loop(32));
  expect_same_bits(with, without, {shape(1, 70, 2, 1), shape(1, 241, 1, 7), shape(2, 33, 1, 2)}, Distribution::Normal, 17);
}
// CHAIN_THREADS 256 gives each chunk-serial warp fewer tiles and staging rows, every element the
// same operations: a plan with 256-thread chain CTAs and every output the same bit for bit.
TEST(KdaBwdChunkedOnHost, ChainThreadsGivesTheSameBits) {
  Knobs wide = slice_loop(32);
  wide["MMA_BLOCK"] = I{1};
  wide["CHAIN_THREADS"] = I{256};
  const auto with = KDA_BWD_CHUNKED_CONFIG(chunk18, options("lower_bound", true, true), wide);
  const auto without = KDA_BWD_CHUNKED_CONFIG(chunk9, options("lower_bound", true, true), slice_loop(32));
  const auto plan = KdaBwdOp().launch_plan(shape(1, 241, 1, 7), with.options, wide);
  for (const auto& k : plan.kernels) {
    const bool chain = k.entry == KdaBwdOp::kChunkStatesEntry || k.entry == KdaBwdOp::kChunkDstatesEntry;
    EXPECT_EQ(k.block.x, chain ? 256u : 128u) << k.entry;
  }
  expect_same_bits(with, without, {shape(1, 70, 2, 1), shape(1, 241, 1, 7), shape(2, 33, 1, 2)}, Distribution::Normal, 18);
}
// The gate's short shapes under every input distribution: CHAIN_PREFETCH with MMA_BLOCK and
// PREPARE_PAIRS gives the defaults' bits.
TEST(KdaBwdChunkedOnHost, ChainPrefetchMmaBlockPairsOnShortShapesGiveTheSameBits) {
  Knobs knobs19 = slice_loop(32);
  knobs19["CHAIN_PREFETCH"] = I{1};
  knobs19["MMA_BLOCK"] = I{1};
  knobs19["PREPARE_PAIRS"] = I{1};
  const auto with = KDA_BWD_CHUNKED_CONFIG(chunk19, options("lower_bound", true, true), knobs19);
  const auto without = KDA_BWD_CHUNKED_CONFIG(chunk9, options("lower_bound", true, true), slice_loop(32));
  for (const auto dist : ptxevo::evaluator::all_distributions())
    expect_same_bits(with, without, {shape(1, 33, 1, 1), shape(1, 17, 4, 1)}, dist, 3);
}
// CHAIN_PREFETCH 2 loads dstates' next words later and blocks its last product; FINISH_ROWS 4
// walks four rows at a time, the first count % 4 one at a time: every output the same bit for bit
// as C19's, the previous defaults (chunk lengths of every residue mod 4, packed sequences, every
// input distribution on the gate's short shapes).
TEST(KdaBwdChunkedOnHost, LatePrefetchAndFinishFourRowsGiveTheSameBits) {
  Knobs knobs19 = KdaBwdOp::chunked_knob_defaults();
  knobs19["CHAIN_PREFETCH"] = I{1};
  knobs19["FINISH_ROWS"] = I{1};
  const auto with =
      KDA_BWD_CHUNKED_CONFIG(chunk20, options("lower_bound", true, true), KdaBwdOp::chunked_knob_defaults());
  const auto base = KDA_BWD_CHUNKED_CONFIG(chunk19, options("lower_bound", true, true), knobs19);
  expect_same_bits_over_chunk_lengths(with, base, 20);
}
// FINISH_ROWS 2 under the softplus gate: the same bits as one row at a time (odd and even chunk
// lengths, packed sequences, every input distribution on the gate's short shapes).
TEST(KdaBwdChunkedOnHost, FinishTwoRowsGivesTheSameBits) {
  Knobs rows2 = slice_loop(32);
  rows2["FINISH_ROWS"] = I{2};
  const auto with = KDA_BWD_CHUNKED_CONFIG(chunk21, options("softplus", true, true), rows2);
  const auto base = KDA_BWD_CHUNKED_CONFIG(chunk12, options("softplus", true, true), slice_loop(32));
  expect_same_bits_over_chunk_lengths(with, base, 22);
}
// FINISH_LEAN 1 reads each token's q from its record, keeps dq where k was and reads P from the
// workspace: the same values in the same order, so every output is the same bit for bit as
// without it, on each of the finish's three walks (four rows at a time: C20's defaults over chunk
// lengths of every residue mod 4 and every input distribution; a row at a time; in registers).
TEST(KdaBwdChunkedOnHost, FinishLeanGivesTheSameBits) {
  Knobs lean = KdaBwdOp::chunked_knob_defaults();
  lean["FINISH_LEAN"] = I{1};
  const auto with = KDA_BWD_CHUNKED_CONFIG(chunk22, options("lower_bound", true, true), lean);
  const auto base =
      KDA_BWD_CHUNKED_CONFIG(chunk20, options("lower_bound", true, true), KdaBwdOp::chunked_knob_defaults());
  EXPECT_EQ(with.smem_floats.at(KdaBwdOp::kChunkFinishEntry) * 4, 74816);  // three CTAs an SM
  EXPECT_EQ(base.smem_floats.at(KdaBwdOp::kChunkFinishEntry) * 4, 95552);
  expect_same_bits_over_chunk_lengths(with, base, 24);
}
TEST(KdaBwdChunkedOnHost, FinishLeanOneRowAndInRegistersGiveTheSameBits) {
  Knobs row = slice_loop(32);
  row["FINISH_LEAN"] = I{1};
  expect_same_bits(KDA_BWD_CHUNKED_CONFIG(chunk23, options("softplus", true, true), row),
                   KDA_BWD_CHUNKED_CONFIG(chunk12, options("softplus", true, true), slice_loop(32)),
                   {shape(1, 70, 2, 1), shape(1, 241, 1, 7), shape(2, 33, 1, 2)}, Distribution::Normal, 25);
  Knobs regs = slice_loop(32);
  regs["MMA_BLOCK"] = I{1};
  regs["FINISH_REGISTERS"] = I{1};
  Knobs regs_lean = regs;
  regs_lean["FINISH_LEAN"] = I{1};
  expect_same_bits(KDA_BWD_CHUNKED_CONFIG(chunk24, options("softplus", true, true), regs_lean),
                   KDA_BWD_CHUNKED_CONFIG(chunk17, options("softplus", true, true), regs),
                   {shape(1, 70, 2, 1), shape(1, 241, 1, 7), shape(2, 33, 1, 2)}, Distribution::Normal, 26);
}
TEST(KdaBwdChunkedOnHost, Chunk64LowerBoundGateBothStates) {
  check(KDA_BWD_CHUNKED_CONFIG(chunk0, options("lower_bound", true, true), knobs(64, 32)));
}
// The spec's longest correctness shape (five packed sequences, 2000 tokens) and its held-out ones
// (nine packed sequences; four batched rows of 333): what the gate runs first on a GPU (at CHUNK 64
// on CUDA cores: the tensor cores' emulation would take minutes here).
TEST(KdaBwdChunkedOnHost, Chunk64OnTheSpecsLongestAndHeldOutShapes) {
  check(KDA_BWD_CHUNKED_CONFIG(chunk0, options("lower_bound", true, true), knobs(64, 32)),
        {shape(1, 2000, 4, 5), shape(1, 1289, 4, 9), shape(4, 333, 3, 4)});
}
TEST(KdaBwdChunkedOnHost, Chunk32SoftplusGateNoStates) {
  check(KDA_BWD_CHUNKED_CONFIG(chunk1, options("softplus", false, false), knobs(32, 32)));
}
TEST(KdaBwdChunkedOnHost, TwoSlicesInitialStateOnly) {
  check(KDA_BWD_CHUNKED_CONFIG(chunk2, options("lower_bound", true, false), knobs(32, 64)));
}
TEST(KdaBwdChunkedOnHost, SoftplusGateFinalStateGradientOnly) {
  check(KDA_BWD_CHUNKED_CONFIG(chunk3, options("softplus", false, true), knobs(64, 32)));
}
TEST(KdaBwdChunkedOnHost, EightSlicesFinalStateGradientOnly) {
  check(KDA_BWD_CHUNKED_CONFIG(chunk6, options("lower_bound", false, true), knobs(64, 16)));
}
TEST(KdaBwdChunkedOnHost, TensorCoresLowerBoundGateBothStates) {
  check(KDA_BWD_CHUNKED_CONFIG(chunk4, options("lower_bound", true, true), knobs(64, 32, 1)));
}
TEST(KdaBwdChunkedOnHost, TensorCoresTwoSlicesSoftplusFinalStateOnly) {
  check(KDA_BWD_CHUNKED_CONFIG(chunk5, options("softplus", false, true), knobs(32, 64, 1)));
}
// The gate's input that failed the seed on an H100: one head whose gate saturates (g = 8, so
// a = -5 a token and dg ~ 1e-25) and spikes of 100 in v and the final-state gradient. The
// log-decays' gradient was a reverse cumulative sum in which the Kr terms were added at the last
// token and taken away at each token: the cancellation left dg 4% off, dA_log 50%.
TEST(KdaBwdChunkedOnHost, SaturatedGateWithSpikesKeepsItsSmallGradients) {
  const auto expect_close = [](const auto& c, double bound = 1e-3) {
    std::string fault;
    const auto errors = run(c, shape(1, 33, 1, 1), Distribution::SparseSpikes, 224, &fault);
    ASSERT_EQ(fault, "");
    for (const char* name : {"dg", "ddt_bias", "dA_log"}) {
      EXPECT_TRUE(errors.at(name).passed) << c.name << " " << name << ": " << errors.at(name).reason;
      EXPECT_LT(errors.at(name).rel_l2, bound) << c.name << " " << name;
    }
  };
  expect_close(KDA_BWD_CHUNKED_CONFIG(chunk0, options("lower_bound", true, true), knobs(64, 32)));
  expect_close(KDA_BWD_CHUNKED_CONFIG(chunk4, options("lower_bound", true, true), knobs(64, 32, 1)));
  expect_close(KDA_BWD_CHUNKED_CONFIG(chunk7, options("lower_bound", true, true), knobs(32, 32, 1)));
  expect_close(KDA_BWD_CHUNKED_CONFIG(chunk9, options("lower_bound", true, true), slice_loop(32)));
  // One bf16 term (FLA's precision): dg and ddt_bias 2.8e-3, dA_log 8.1e-3, inside the gate's 1e-2.
  expect_close(KDA_BWD_CHUNKED_CONFIG(chunk8, options("lower_bound", true, true), knobs(32, 32, 1, 1)), 1e-2);
}

// The same bits whatever order the CTAs run in: shares and chunk sums are added in a fixed order.
TEST(KdaBwdChunkedOnHost, OutputsDoNotDependOnTheOrderOfTheCtas) {
  const auto c = KDA_BWD_CHUNKED_CONFIG(chunk1, options("softplus", false, false), knobs(32, 32));
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

}  // namespace
