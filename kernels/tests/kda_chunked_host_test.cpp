// kda_fwd_chunked.cu itself, run on the CPU: the kernel's source is compiled here as host C++ with
// KDA_HOST_EMULATION, which swaps its PTX primitives (ex2, rsqrt, cvt, ld/st, cp.async, shfl,
// mma.sync, %dynamic_smem_size, trap) for the CPU versions below. Everything else is the
// kernel's own code: the shared-memory layout, the fragment loads, the per-warp tile assignment,
// the barriers, the masking of partial chunks, the indexing of q/k/v/g/beta/out and the V-first
// states. Each CUDA thread of a CTA is a ucontext coroutine on one OS thread; __syncthreads and
// the warp-collective primitives switch between them, so a missing barrier, a warp-divergent
// shuffle or mma (deadlock), an out-of-bounds shared-memory layout (guard bytes), a misaligned
// cp.async or vector access, and an unwritten output element (NaN poison) all fail here.
// The mma emulation decodes the fragments by the PTX ISA's m16n8k16 tables (row.col, bf16 in,
// fp32 accumulate), independently of the kernel's load_a / load_b.
//
// Configurations cover both gates, every state combination, CHUNK 16/32/64, BV 16/32/64/128,
// WARPS 4/8, STAGE 0/1, LMTC 0/1 and the largest staged layout; shapes cover a single token,
// partial chunks, batched rows, packed sequences around every chunk boundary and H = 1 and 4.
// Results are checked against the op's fp64 recurrent reference with the gate's rel_l2 and the
// 5e-3 the CPU model meets.
#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "evaluator/gpu_evaluation.hpp"
#include "evaluator/tensor.hpp"
#include "kernels/kda/kda_fwd_op.hpp"

namespace kda_host {

constexpr int kMaxThreads = 256;
constexpr std::size_t kStackBytes = 256 * 1024;

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

struct Thread {
  ucontext_t ctx{};
  std::vector<char> stack;
  Dim3 tid;
  bool done = false;
  bool waiting = false;
};

// One CTA at a time: its threads, the barrier counts and the warps' exchange areas.
struct Cta {
  int nthreads = 0;
  Dim3 bid;
  std::vector<Thread> threads = std::vector<Thread>(kMaxThreads);
  ucontext_t scheduler{};
  int current = 0;
  int cta_arrived = 0;
  int warp_arrived[kMaxThreads / 32] = {};
  float xchg[kMaxThreads / 32][32] = {};
  unsigned int frag[kMaxThreads / 32][32][6] = {};  // a0..a3, b0, b1 of each lane
  unsigned int dyn_smem = 0;
  std::string fault;  // first misuse seen (trap, misalignment, deadlock)
  std::function<void()> body;
};
inline Cta g_cta;

inline Thread& self() { return g_cta.threads[static_cast<std::size_t>(g_cta.current)]; }
inline void fault(const std::string& why) {
  if (g_cta.fault.empty()) g_cta.fault = why;
}

// Blocks the calling coroutine until every thread of `group` (the CTA, or warp w) has arrived.
inline void arrive(int& count, int size, int first, int stride_end) {
  if (++count == size) {
    count = 0;
    for (int t = first; t < stride_end; ++t) g_cta.threads[static_cast<std::size_t>(t)].waiting = false;
    return;
  }
  self().waiting = true;
  swapcontext(&self().ctx, &g_cta.scheduler);
}
inline void syncthreads() { arrive(g_cta.cta_arrived, g_cta.nthreads, 0, g_cta.nthreads); }
inline void syncwarp() {
  const int w = g_cta.current / 32;
  arrive(g_cta.warp_arrived[w], 32, w * 32, w * 32 + 32);
}

inline void trampoline() {
  g_cta.body();
  self().done = true;
}

// Runs body() once per thread of a CTA of `nthreads` threads with block index `bid`.
inline void run_cta(int nthreads, Dim3 bid, unsigned int dyn_smem, std::function<void()> body) {
  g_cta.nthreads = nthreads;
  g_cta.bid = bid;
  g_cta.dyn_smem = dyn_smem;
  g_cta.body = std::move(body);
  g_cta.cta_arrived = 0;
  for (int& c : g_cta.warp_arrived) c = 0;
  for (int t = 0; t < nthreads; ++t) {
    Thread& th = g_cta.threads[static_cast<std::size_t>(t)];
    th.stack.resize(kStackBytes);
    th.tid = {static_cast<unsigned>(t), 0, 0};
    th.done = false;
    th.waiting = false;
    getcontext(&th.ctx);
    th.ctx.uc_stack.ss_sp = th.stack.data();
    th.ctx.uc_stack.ss_size = th.stack.size();
    th.ctx.uc_link = &g_cta.scheduler;
    makecontext(&th.ctx, trampoline, 0);
  }
  // Each pass visits the threads in a fresh random order (fixed seed), so that a missing barrier
  // shows whichever warp the kernel wrongly assumes to be ahead.
  std::mt19937 rng(bid.x * 7919u + bid.y * 131u + bid.z);
  std::vector<int> order(static_cast<std::size_t>(nthreads));
  for (int t = 0; t < nthreads; ++t) order[static_cast<std::size_t>(t)] = t;
  for (;;) {
    bool ran = false, all_done = true;
    std::shuffle(order.begin(), order.end(), rng);
    for (int t : order) {
      Thread& th = g_cta.threads[static_cast<std::size_t>(t)];
      if (th.done) continue;
      all_done = false;
      if (th.waiting) continue;
      g_cta.current = t;
      swapcontext(&g_cta.scheduler, &th.ctx);
      ran = true;
    }
    if (all_done) return;
    if (!ran) {
      fault("deadlock: every live thread waits at a barrier or warp collective that not all reach");
      return;
    }
  }
}

inline float uint_as_float(unsigned int u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned int float_as_uint(float f) {
  unsigned int u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline bool aligned(const void* p, std::uintptr_t n) { return reinterpret_cast<std::uintptr_t>(p) % n == 0; }

// The PTX primitives the kernel leaves to its host (see kda_fwd_chunked.cu).
inline float ex2(float x) { return std::exp2(x); }
inline float lg2(float x) { return std::log2(x); }
inline float rcp(float x) { return 1.f / x; }
inline float rsqrt(float x) { return 1.f / std::sqrt(x); }
inline float shfl_bfly(float v, int lane_mask) {
  const int w = g_cta.current / 32, lane = g_cta.current % 32;
  g_cta.xchg[w][lane] = v;
  syncwarp();
  const float r = g_cta.xchg[w][lane ^ lane_mask];
  syncwarp();
  return r;
}
inline unsigned short bf16_bits(float x) {  // cvt.rn.bf16.f32
  const unsigned int u = float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<unsigned short>((u >> 16) | 0x40);
  return static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline void load_bf16x4(const __nv_bfloat16* p, float* f) {
  if (!aligned(p, 8)) fault("ld.global.nc.v2.u32 from an address not 8-byte aligned");
  unsigned short h[4];
  std::memcpy(h, p, 8);
  for (int e = 0; e < 4; ++e) f[e] = uint_as_float(static_cast<unsigned int>(h[e]) << 16);
}
inline float load_bf16(const __nv_bfloat16* p) {
  unsigned short h;
  std::memcpy(&h, p, 2);
  return uint_as_float(static_cast<unsigned int>(h) << 16);
}
inline void store_bf16x2(__nv_bfloat16* p, float lo, float hi) {
  if (!aligned(p, 4)) fault("st.global.u32 to an address not 4-byte aligned");
  const unsigned short h[2] = {bf16_bits(lo), bf16_bits(hi)};
  std::memcpy(p, h, 4);
}
inline void cp_async16(void* dst, const void* src) {
  if (!aligned(dst, 16) || !aligned(src, 16)) fault("cp.async of 16 bytes between addresses not 16-byte aligned");
  std::memcpy(dst, src, 16);
}
inline void cp_async_commit() {}
inline void cp_async_wait_all() {}
inline unsigned int dynamic_smem_bytes() { return g_cta.dyn_smem; }
inline void trap_now() { fault("trap: the launch's dynamic shared memory is smaller than the kernel's layout"); }

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, decoded by the PTX ISA's fragment tables:
// lane l = 4 g + t; A: a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..);
// B: b0 (k = 2t..2t+1, n = g), b1 (k = 2t+8.., n = g); C/D: (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1);
// the lower k of a pair sits in the low 16 bits.
inline void mma_bf16(float* d, const unsigned int* a, const unsigned int* b) {
  const int w = g_cta.current / 32, lane = g_cta.current % 32;
  for (int i = 0; i < 4; ++i) g_cta.frag[w][lane][i] = a[i];
  g_cta.frag[w][lane][4] = b[0];
  g_cta.frag[w][lane][5] = b[1];
  syncwarp();
  auto half = [](unsigned int r, int k) { return uint_as_float(((k & 1) ? (r >> 16) : (r & 0xffffu)) << 16); };
  auto A = [&](int r, int k) {
    return half(g_cta.frag[w][(r % 8) * 4 + (k % 8) / 2][(r / 8) + 2 * (k / 8)], k);
  };
  auto B = [&](int k, int n) { return half(g_cta.frag[w][n * 4 + (k % 8) / 2][4 + k / 8], k); };
  const int g = lane / 4, t = lane % 4;
  float out[4];
  for (int e = 0; e < 4; ++e) {
    const int r = g + (e >> 1) * 8, n = 2 * t + (e & 1);
    float acc = 0.f;
    for (int k = 0; k < 16; ++k) acc += A(r, k) * B(k, n);
    out[e] = d[e] + acc;
  }
  syncwarp();
  for (int e = 0; e < 4; ++e) d[e] = out[e];
}

}  // namespace kda_host

// What nvcc / NVRTC provide, for host compilation of the kernel's source (cuda_bf16.h's host
// definitions of some of these are replaced).
#undef __device__
#undef __global__
#undef __forceinline__
#undef __shared__
#undef __align__
#undef __launch_bounds__
#define __device__
#define __global__
#define __forceinline__ inline
#define __shared__
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __syncthreads() ::kda_host::syncthreads()
#define __uint_as_float(u) ::kda_host::uint_as_float(u)
#define threadIdx (::kda_host::self().tid)
#define blockIdx (::kda_host::g_cta.bid)
#define KDA_HOST_EMULATION 1

// The largest layout the op admits (227 KB) plus guard bytes that must stay untouched.
constexpr std::size_t kSmemCap = 232448, kGuard = 4096;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-variable"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wpedantic"

// Configuration 0: the main spec's defaults (lower-bound gate, both states, CHUNK 16, BV 32,
// WARPS 4, STAGE 1, LMTC 1).
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 16
#define BV 32
#define WARPS 4
#define STAGE 1
#define LMTC 1
namespace cfg0 {
namespace kda_chunked {
using namespace ::kda_host;
alignas(16) unsigned char smem[kSmemCap + kGuard];
}  // namespace kda_chunked
#include "kernels/kda/kda_fwd_chunked.cu"
}  // namespace cfg0
#undef KDA_GATE_SOFTPLUS
#undef HAS_INITIAL_STATE
#undef HAS_FINAL_STATE
#undef CHUNK
#undef BV
#undef WARPS
#undef STAGE
#undef LMTC

// Configuration 1: softplus gate (direct L and M), both states, CHUNK 32, BV 16, WARPS 4, STAGE 1.
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 16
#define WARPS 4
#define STAGE 1
#define LMTC 0
namespace cfg1 {
namespace kda_chunked {
using namespace ::kda_host;
alignas(16) unsigned char smem[kSmemCap + kGuard];
}  // namespace kda_chunked
#include "kernels/kda/kda_fwd_chunked.cu"
}  // namespace cfg1
#undef KDA_GATE_SOFTPLUS
#undef HAS_INITIAL_STATE
#undef HAS_FINAL_STATE
#undef CHUNK
#undef BV
#undef WARPS
#undef STAGE
#undef LMTC

// Configuration 2: lower-bound gate, initial state only, CHUNK 64, BV 32, WARPS 8, STAGE 0.
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 0
#define CHUNK 64
#define BV 32
#define WARPS 8
#define STAGE 0
#define LMTC 0
namespace cfg2 {
namespace kda_chunked {
using namespace ::kda_host;
alignas(16) unsigned char smem[kSmemCap + kGuard];
}  // namespace kda_chunked
#include "kernels/kda/kda_fwd_chunked.cu"
}  // namespace cfg2
#undef KDA_GATE_SOFTPLUS
#undef HAS_INITIAL_STATE
#undef HAS_FINAL_STATE
#undef CHUNK
#undef BV
#undef WARPS
#undef STAGE
#undef LMTC

// Configuration 3: softplus gate, final state only, CHUNK 16, BV 128, WARPS 8, STAGE 0.
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 0
#define HAS_FINAL_STATE 1
#define CHUNK 16
#define BV 128
#define WARPS 8
#define STAGE 0
#define LMTC 1
namespace cfg3 {
namespace kda_chunked {
using namespace ::kda_host;
alignas(16) unsigned char smem[kSmemCap + kGuard];
}  // namespace kda_chunked
#include "kernels/kda/kda_fwd_chunked.cu"
}  // namespace cfg3
#undef KDA_GATE_SOFTPLUS
#undef HAS_INITIAL_STATE
#undef HAS_FINAL_STATE
#undef CHUNK
#undef BV
#undef WARPS
#undef STAGE
#undef LMTC

// Configuration 4: lower-bound gate, no states, CHUNK 16, BV 64, WARPS 8, STAGE 1, LMTC 1.
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 0
#define HAS_FINAL_STATE 0
#define CHUNK 16
#define BV 64
#define WARPS 8
#define STAGE 1
#define LMTC 1
namespace cfg4 {
namespace kda_chunked {
using namespace ::kda_host;
alignas(16) unsigned char smem[kSmemCap + kGuard];
}  // namespace kda_chunked
#include "kernels/kda/kda_fwd_chunked.cu"
}  // namespace cfg4
#undef KDA_GATE_SOFTPLUS
#undef HAS_INITIAL_STATE
#undef HAS_FINAL_STATE
#undef CHUNK
#undef BV
#undef WARPS
#undef STAGE
#undef LMTC

// Configuration 5: the largest layout the spec admits with staging (CHUNK 32, BV 128, WARPS 8,
// STAGE 1: 201 KB), lower-bound gate without LMTC, both states.
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 128
#define WARPS 8
#define STAGE 1
#define LMTC 0
namespace cfg5 {
namespace kda_chunked {
using namespace ::kda_host;
alignas(16) unsigned char smem[kSmemCap + kGuard];
}  // namespace kda_chunked
#include "kernels/kda/kda_fwd_chunked.cu"
}  // namespace cfg5
#undef KDA_GATE_SOFTPLUS
#undef HAS_INITIAL_STATE
#undef HAS_FINAL_STATE
#undef CHUNK
#undef BV
#undef WARPS
#undef STAGE
#undef LMTC

#pragma GCC diagnostic pop
#undef __syncthreads
#undef threadIdx
#undef blockIdx

namespace {

using ptxevo::evaluator::Distribution;
using ptxevo::evaluator::HostTensor;
using ptxevo::evaluator::OpConfig;
using ptxevo::evaluator::Shape;
using ptxevo::kernels::KdaFwdOp;
using I = std::int64_t;

// One compiled configuration: its body, layout size, knobs and the options it was built for.
template <typename Args>
struct Config {
  const char* name;
  OpConfig options;
  ptxevo::evaluator::Knobs knobs;
  int threads, bv, smem_bytes;
  unsigned char* smem;
  void (*body)(const Args&);
};

#define KDA_CONFIG(NS, OPTIONS, KNOBS)                                                                       \
  Config<NS::kda_chunked::Args> {                                                                            \
#NS, OPTIONS, KNOBS, NS::kda_chunked::kThreads, NS::kda_chunked::kBv, NS::kda_chunked::kSmemBytes,       \
        NS::kda_chunked::smem, [](const NS::kda_chunked::Args& a) { NS::kda_chunked::kda_chunked_body(a); } \
  }

struct Outcome {
  std::string fault;
  double out = 0, state = 0;
};

template <typename Args>
Outcome run(const Config<Args>& c, const Shape& s, Distribution dist, std::uint64_t seed) {
  const KdaFwdOp op;
  const auto descs = op.tensors(s, c.options);
  std::vector<HostTensor> ts;
  for (const auto& d : descs) ts.emplace_back(d.name, d.dtype, d.shape);
  ptxevo::evaluator::fill_inputs(op, descs, dist, seed, ts);
  std::vector<HostTensor> ref;
  op.reference(s, c.options, ts, ref);
  const auto plan = op.launch_plan(s, c.options, c.knobs).kernels.at(0);
  Outcome o;
  if (plan.block.x != static_cast<unsigned>(c.threads) || plan.grid.z != static_cast<unsigned>(128 / c.bv) ||
      plan.shared_bytes != static_cast<unsigned>(c.smem_bytes)) {
    o.fault = "the op's plan (block " + std::to_string(plan.block.x) + ", " + std::to_string(plan.shared_bytes) +
              " B) disagrees with the kernel (" + std::to_string(c.threads) + ", " + std::to_string(c.smem_bytes) + " B)";
    return o;
  }
  auto find = [&](const std::string& name) -> HostTensor* {
    for (auto& t : ts)
      if (t.name == name) return &t;
    return nullptr;
  };
  auto bf = [&](const char* name) { return reinterpret_cast<const __nv_bfloat16*>(find(name)->data.data()); };
  auto f32 = [&](const char* name) {
    HostTensor* t = find(name);
    return t ? reinterpret_cast<const float*>(t->data.data()) : nullptr;
  };
  // Outputs poisoned with NaN: an element the kernel does not write fails the comparison.
  HostTensor* out = find("out");
  HostTensor* fin = find("final_state");
  std::memset(out->data.data(), 0xff, out->data.size());
  if (fin) std::memset(fin->data.data(), 0xff, fin->data.size());
  const HostTensor* cu = find("cu_seqlens");
  const Args a{bf("q"),
               bf("k"),
               bf("v"),
               bf("g"),
               bf("beta"),
               f32("A_log"),
               f32("dt_bias"),
               cu ? reinterpret_cast<const long long*>(cu->data.data()) : nullptr,
               f32("initial_state"),
               reinterpret_cast<__nv_bfloat16*>(out->data.data()),
               fin ? reinterpret_cast<float*>(fin->data.data()) : nullptr,
               std::get<I>(plan.args.at(11)),
               std::get<std::int32_t>(plan.args.at(12)),
               std::get<float>(plan.args.at(13)),
               std::get<float>(plan.args.at(14))};
  std::memset(c.smem + c.smem_bytes, 0xa5, kSmemCap + kGuard - static_cast<std::size_t>(c.smem_bytes));
  for (unsigned x = 0; x < plan.grid.x && o.fault.empty(); ++x)
    for (unsigned y = 0; y < plan.grid.y && o.fault.empty(); ++y)
      for (unsigned z = 0; z < plan.grid.z && o.fault.empty(); ++z) {
        // Shared memory starts as garbage on a GPU: the kernel must not read what it did not write.
        std::memset(c.smem, 0x7f, static_cast<std::size_t>(c.smem_bytes));
        kda_host::run_cta(c.threads, {x, y, z}, plan.shared_bytes, [&] { c.body(a); });
        o.fault = kda_host::g_cta.fault;
        kda_host::g_cta.fault.clear();
      }
  for (std::size_t i = static_cast<std::size_t>(c.smem_bytes); i < kSmemCap + kGuard; ++i)
    if (c.smem[i] != 0xa5 && o.fault.empty()) o.fault = "write past the shared-memory layout at byte " + std::to_string(i);
  auto rel = [](const HostTensor& x, const HostTensor& r) {
    double d = 0, n = 0;
    for (I i = 0; i < r.numel(); ++i) {
      const double v = x.get(i), w = r.get(i);
      if (!std::isfinite(v)) return std::numeric_limits<double>::infinity();
      d += (v - w) * (v - w);
      n += w * w;
    }
    return n > 0 ? std::sqrt(d / n) : std::sqrt(d);
  };
  o.out = rel(*out, ref.at(0));
  if (fin) o.state = rel(*fin, ref.at(1));
  return o;
}

Shape shape(I b, I t, I h, I n) { return {{"B", b}, {"T", t}, {"H", h}, {"N", n}}; }

template <typename Args>
void check(const Config<Args>& c, const std::vector<Shape>& extra = {}) {
  std::vector<Shape> shapes = {shape(1, 1, 1, 1),  shape(1, 17, 4, 1), shape(1, 65, 1, 1), shape(3, 17, 1, 3),
                               shape(1, 2, 4, 2),  shape(1, 40, 1, 4), shape(1, 115, 2, 3), shape(1, 241, 4, 7)};
  shapes.insert(shapes.end(), extra.begin(), extra.end());
  const auto& dists = ptxevo::evaluator::all_distributions();
  double worst_out = 0, worst_state = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Distribution dist = dists[i % dists.size()];
    const Outcome o = run(c, shapes[i], dist, 1000 + i);
    SCOPED_TRACE(std::string(c.name) + " " + ptxevo::evaluator::shape_to_string(shapes[i]) + " " + to_string(dist));
    ASSERT_EQ(o.fault, "");
    EXPECT_LT(o.out, 5e-3);
    EXPECT_LT(o.state, 5e-3);
    worst_out = std::max(worst_out, o.out);
    worst_state = std::max(worst_state, o.state);
  }
  std::printf("%s (kda_fwd_chunked.cu on the CPU) vs fp64 recurrence, worst rel_l2: out %.3g, final_state %.3g\n",
              c.name, worst_out, worst_state);
}

using ptxevo::evaluator::Knobs;

TEST(KdaChunkedOnHost, MainSpecDefaults) {
  // Plus the held-out batched rows of 333 tokens (20 full chunks and a partial one per row).
  check(KDA_CONFIG(cfg0, OpConfig{}, KdaFwdOp::chunked_knob_defaults()), {shape(4, 333, 3, 4)});
}

TEST(KdaChunkedOnHost, SoftplusChunk32Bv16Staged) {
  check(KDA_CONFIG(cfg1, (OpConfig{{"gate", "softplus"}}),
                   (Knobs{{"CHUNK", I{32}}, {"BV", I{16}}, {"WARPS", I{4}}, {"STAGE", I{1}}, {"LMTC", I{0}}})));
}

TEST(KdaChunkedOnHost, InitialStateOnlyChunk64EightWarps) {
  check(KDA_CONFIG(cfg2, (OpConfig{{"final_state", "false"}, {"lower_bound", "-2.5"}, {"scale", "0.125"}}),
                   (Knobs{{"CHUNK", I{64}}, {"BV", I{32}}, {"WARPS", I{8}}, {"STAGE", I{0}}, {"LMTC", I{0}}})));
}

TEST(KdaChunkedOnHost, SoftplusFinalStateOnlyBv128) {
  // LMTC = 1 with the softplus gate: the kernel takes the direct path.
  check(KDA_CONFIG(cfg3, (OpConfig{{"gate", "softplus"}, {"initial_state", "false"}}),
                   (Knobs{{"CHUNK", I{16}}, {"BV", I{128}}, {"WARPS", I{8}}, {"STAGE", I{0}}, {"LMTC", I{1}}})));
}

TEST(KdaChunkedOnHost, LargestStagedLayoutChunk32Bv128) {
  check(KDA_CONFIG(cfg5, OpConfig{},
                   (Knobs{{"CHUNK", I{32}}, {"BV", I{128}}, {"WARPS", I{8}}, {"STAGE", I{1}}, {"LMTC", I{0}}})));
}

TEST(KdaChunkedOnHost, NoStatesBv64EightWarps) {
  check(KDA_CONFIG(cfg4, (OpConfig{{"initial_state", "false"}, {"final_state", "false"}}),
                   (Knobs{{"CHUNK", I{16}}, {"BV", I{64}}, {"WARPS", I{8}}, {"STAGE", I{1}}, {"LMTC", I{1}}})));
}

}  // namespace
