// The CUDA machine on the CPU for the KDA kernel-on-host tests (kda_chunked_host_test.cpp,
// kda_split_host_test.cpp): a test includes this, then, per configuration, its #defines and
// kda_host_instance.inc (kernels/kda/kda_fwd_chunked.cu in a namespace of its own).
//
// kda_fwd_chunked.cu itself, run on the CPU: the kernel's source is compiled here as host C++ with
// KDA_HOST_EMULATION, which swaps its PTX primitives (ex2, rsqrt, cvt, ld/st, cp.async, shfl,
// mma.sync, %dynamic_smem_size, trap) for the CPU versions below. Everything else is the
// kernel's own code: the shared-memory layout, the fragment loads, the per-warp tile assignment,
// the barriers, the masking of partial chunks, the indexing of q/k/v/g/beta/out and the V-first
// states. Each CUDA thread of a CTA is a coroutine on one OS thread (a Boost.Context fiber;
// ucontext under AddressSanitizer, which follows stack switches only through the swapcontext it
// intercepts: glibc's swapcontext makes a system call per switch, which took 80% of these tests'
// time); __syncthreads and the warp-collective primitives switch between them, so a missing
// barrier, a warp-divergent shuffle or mma (deadlock), an out-of-bounds shared-memory layout (guard
// bytes), a misaligned cp.async or vector access, and an unwritten output element (NaN poison) all
// fail here.
// cp.async lands late (at the issuing thread's next barrier or at its wait, at random) and each
// pass of the scheduler stalls random warps, so a buffer refilled before every warp is done with
// it, or read before its copies are waited for, fails too (checked by hand: moving the
// recurrence's prefetch above its barrier fails KdaSplitOnHost.MainSpecDefaults at rel_l2 0.05).
// The prepare + recurrence pair (FUSED = 0) runs the same way, both kernels in order, through a
// NaN-poisoned workspace (KdaSplitOnHost).
// The mma emulation decodes the fragments by the PTX ISA's m16n8k16 tables (row.col, bf16 in,
// fp32 accumulate), independently of the kernel's load_a / load_b. MMA = wgmma runs as a
// warpgroup collective at the wgmma.wait_group that covers it (so a result read, or an operand
// register reused, before that wait is wrong), B decoded from the descriptor's core-matrix layout;
// BULK = 1's cp.async.bulk lands at once or only at the mbarrier wait, at random, and a waiter
// yields until its phase completes. bench/kda/wgmma_layout_check.cu checks the wgmma conventions
// themselves on the GPU.
//
// Configurations cover both gates, every state combination, CHUNK 16/32/64, BV 16/32/64/128,
// WARPS 4/8, STAGE 0-3, LM_TENSOR_CORES 0/1, MMA sync / wgmma, BULK 0/1 and the largest staged
// layout; shapes cover a single token, partial chunks, batched rows, packed sequences around every
// chunk boundary and H = 1 and 4. Results are checked against the op's fp64 recurrent reference
// with the gate's rel_l2 and the 5e-3 the CPU model meets.
#pragma once

#include <gtest/gtest.h>

#include <cuda_bf16.h>

#if defined(__SANITIZE_ADDRESS__)
#define KDA_HOST_UCONTEXT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KDA_HOST_UCONTEXT 1
#endif
#endif
#if KDA_HOST_UCONTEXT
#include <ucontext.h>
#else
#include <boost/context/fiber.hpp>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
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

// A cp.async in flight: its source is read at issue (global memory does not change during a
// kernel), its destination written later (see cp_async16).
struct PendingCopy {
  void* dst = nullptr;
  unsigned char data[16] = {};
  bool early = false;  // lands at the thread's next barrier or warp collective, else at its wait
  int group = 0;       // the cp.async group it belongs to (the issuing thread's commit count at issue)
};

// A wgmma issued and not yet waited for (MMA = wgmma): it runs at the wg_wait that covers its
// group, reading its A registers and writing D then, as the hardware may, so that a register
// reused or read before its wait gives a wrong result.
struct WgOp {
  float* d = nullptr;
  const unsigned int* a = nullptr;
  const unsigned char* b = nullptr;
  int sbo = 0, n = 0, group = 0;
};

struct Thread {
#if KDA_HOST_UCONTEXT
  ucontext_t ctx{};
#else
  boost::context::fiber fiber;      // this thread, suspended while the scheduler runs
  boost::context::fiber scheduler;  // the scheduler, suspended while this thread runs
#endif
  std::vector<WgOp> wg_pending;
  int wg_committed = 0;
  std::vector<char> stack;
  Dim3 tid;
  bool done = false;
  bool waiting = false;
  std::vector<PendingCopy> pending;
  int committed = 0;  // cp.async.commit_group calls so far
};

// An mbarrier of a bulk copy (BULK = 1): its phase, the bytes it expects and has seen, and the
// copies still in flight (their source read at issue; written at a random time, see bulk_copy).
struct Mbar {
  unsigned phase = 0;
  bool armed = false;
  unsigned expected = 0, landed = 0;
  std::vector<std::pair<unsigned char*, std::vector<unsigned char>>> pending;
};

// One CTA at a time: its threads, the barrier counts and the warps' exchange areas.
struct Cta {
  int nthreads = 0;
  Dim3 bid, grid;
  std::vector<Thread> threads = std::vector<Thread>(kMaxThreads);
#if KDA_HOST_UCONTEXT
  ucontext_t scheduler{};
#endif
  int current = 0;
  int cta_arrived = 0;
  int warp_arrived[kMaxThreads / 32] = {};
  float xchg[kMaxThreads / 32][32] = {};
  unsigned int frag[kMaxThreads / 32][32][6] = {};  // a0..a3, b0, b1 of each lane
  unsigned char* rows[kMaxThreads / 32][32] = {};    // stmatrix's row addresses of each lane
  int group_arrived[kMaxThreads / 128] = {};         // warpgroups (wgmma)
  unsigned int wgfrag[kMaxThreads][4] = {};          // each thread's A registers of one wgmma
  unsigned int dyn_smem = 0;
  std::string fault;  // first misuse seen (trap, misalignment, deadlock)
  std::function<void()> body;
  std::mt19937 copy_rng;  // when each cp.async lands
  std::map<const unsigned char*, Mbar> mbars;
};
inline Cta g_cta;

inline Thread& self() { return g_cta.threads[static_cast<std::size_t>(g_cta.current)]; }

// Suspends the calling thread; returns when the scheduler runs it again.
inline void yield_to_scheduler() {
#if KDA_HOST_UCONTEXT
  swapcontext(&self().ctx, &g_cta.scheduler);
#else
  Thread& th = self();
  th.scheduler = std::move(th.scheduler).resume();
#endif
}
inline void fault(const std::string& why) {
  if (g_cta.fault.empty()) g_cta.fault = why;
}

// Writes the calling thread's copies in flight: all of them, or only those that land early.
inline void land_copies(bool all) {
  auto& p = self().pending;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (all || p[i].early) std::memcpy(p[i].dst, p[i].data, 16);
    else p[kept++] = p[i];
  }
  p.resize(kept);
}

// Blocks the calling coroutine until every thread of `group` (the CTA, or warp w) has arrived.
inline void arrive(int& count, int size, int first, int stride_end) {
  land_copies(false);
  if (++count == size) {
    count = 0;
    for (int t = first; t < stride_end; ++t) g_cta.threads[static_cast<std::size_t>(t)].waiting = false;
    return;
  }
  self().waiting = true;
  yield_to_scheduler();
}
inline void syncthreads() { arrive(g_cta.cta_arrived, g_cta.nthreads, 0, g_cta.nthreads); }
inline void syncwarp() {
  const int w = g_cta.current / 32;
  arrive(g_cta.warp_arrived[w], 32, w * 32, w * 32 + 32);
}

inline void trampoline() {
  g_cta.body();
  if (!self().wg_pending.empty()) fault("a wgmma the thread never waited for");
  land_copies(true);
  self().done = true;
}

#if !KDA_HOST_UCONTEXT
// A fiber's stack is its Thread's `stack`, which outlives it: nothing to allocate or free.
struct BorrowedStack {
  boost::context::stack_context allocate() { throw std::logic_error("BorrowedStack allocates nothing"); }
  void deallocate(boost::context::stack_context&) noexcept {}
};
#endif

// Makes `th` start at trampoline() when the scheduler first runs it.
inline void start_thread(Thread& th) {
#if !KDA_HOST_UCONTEXT
  th.fiber = {};  // a thread a deadlocked CTA left waiting unwinds on its stack before the stack is reused
#endif
  th.stack.resize(kStackBytes);
#if KDA_HOST_UCONTEXT
  getcontext(&th.ctx);
  th.ctx.uc_stack.ss_sp = th.stack.data();
  th.ctx.uc_stack.ss_size = th.stack.size();
  th.ctx.uc_link = &g_cta.scheduler;
  makecontext(&th.ctx, trampoline, 0);
#else
  boost::context::stack_context sc;
  sc.size = th.stack.size();
  sc.sp = th.stack.data() + th.stack.size();
  th.fiber = boost::context::fiber(std::allocator_arg, boost::context::preallocated(sc.sp, sc.size, sc), BorrowedStack{},
                                   [&th](boost::context::fiber&& scheduler) {
                                     th.scheduler = std::move(scheduler);
                                     trampoline();
                                     return std::move(th.scheduler);
                                   });
#endif
}

// Runs `th` until it waits or ends.
inline void run_thread(Thread& th) {
#if KDA_HOST_UCONTEXT
  swapcontext(&g_cta.scheduler, &th.ctx);
#else
  th.fiber = std::move(th.fiber).resume();
#endif
}

// Runs body() once per thread of a CTA of `nthreads` threads with block index `bid`.
inline void run_cta(int nthreads, Dim3 bid, unsigned int dyn_smem, std::function<void()> body) {
  g_cta.nthreads = nthreads;
  g_cta.bid = bid;
  g_cta.dyn_smem = dyn_smem;
  g_cta.body = std::move(body);
  g_cta.cta_arrived = 0;
  for (int& c : g_cta.warp_arrived) c = 0;
  for (int& c : g_cta.group_arrived) c = 0;
  g_cta.mbars.clear();
  for (int t = 0; t < nthreads; ++t) {
    Thread& th = g_cta.threads[static_cast<std::size_t>(t)];
    th.tid = {static_cast<unsigned>(t), 0, 0};
    th.done = false;
    th.pending.clear();
    th.committed = 0;
    th.wg_pending.clear();
    th.wg_committed = 0;
    th.waiting = false;
    start_thread(th);
  }
  // Each pass visits the threads in a fresh random order (fixed seed), so that a missing barrier
  // shows whichever warp the kernel wrongly assumes to be ahead.
  std::mt19937 rng(bid.x * 7919u + bid.y * 131u + bid.z);
  g_cta.copy_rng.seed(bid.x * 104729u + bid.y * 31u + bid.z + 17u);
  std::vector<int> order(static_cast<std::size_t>(nthreads));
  for (int t = 0; t < nthreads; ++t) order[static_cast<std::size_t>(t)] = t;
  // Each pass also stalls a random quarter of the warps, so that warps drift apart between
  // barriers (in lockstep, a warp would never read a buffer another warp has begun to refill).
  for (;;) {
    bool ran = false, stalled = false, all_done = true;
    std::shuffle(order.begin(), order.end(), rng);
    bool stall[kMaxThreads / 32] = {};
    for (int w = 0; w < (nthreads + 31) / 32; ++w) stall[w] = rng() % 4 == 0;
    for (int t : order) {
      Thread& th = g_cta.threads[static_cast<std::size_t>(t)];
      if (th.done) continue;
      all_done = false;
      if (th.waiting) continue;
      if (stall[t / 32]) {
        stalled = true;
        continue;
      }
      g_cta.current = t;
      run_thread(th);
      ran = true;
    }
    if (all_done) return;
    if (!ran && !stalled) {
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
// shfl.sync: every lane publishes v, then reads the one of lane src(lane).
template <class Src>
inline float shfl_from(float v, Src src) {
  const int w = g_cta.current / 32, lane = g_cta.current % 32;
  g_cta.xchg[w][lane] = v;
  syncwarp();
  const float r = g_cta.xchg[w][src(lane) & 31];
  syncwarp();
  return r;
}
inline float shfl_bfly(float v, int lane_mask) {
  return shfl_from(v, [&](int lane) { return lane ^ lane_mask; });
}
inline float shfl_idx(float v, int src_lane) {
  return shfl_from(v, [&](int) { return src_lane; });
}
inline unsigned short bf16_bits(float x) {  // cvt.rn.bf16.f32
  const unsigned int u = float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<unsigned short>((u >> 16) | 0x40);
  return static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline unsigned int pack_bf16x2(float lo, float hi) {  // cvt.rn.bf16x2.f32 (hi, lo)
  return static_cast<unsigned int>(bf16_bits(lo)) | (static_cast<unsigned int>(bf16_bits(hi)) << 16);
}
inline void load_bf16x4(const __nv_bfloat16* p, float* f) {
  if (!aligned(p, 8)) fault("ld.global.nc.v2.u32 from an address not 8-byte aligned");
  unsigned short h[4];
  std::memcpy(h, p, 8);
  for (int e = 0; e < 4; ++e) f[e] = uint_as_float(static_cast<unsigned int>(h[e]) << 16);
}
inline unsigned int load_bf16x2_raw(const __nv_bfloat16* p) {
  if (!aligned(p, 4)) fault("ld.global.nc.u32 from an address not 4-byte aligned");
  unsigned int w;
  std::memcpy(&w, p, 4);
  return w;
}
inline uint2 load_bf16x4_raw(const __nv_bfloat16* p) {
  if (!aligned(p, 8)) fault("ld.global.nc.v2.u32 from an address not 8-byte aligned");
  uint2 w;
  std::memcpy(&w, p, 8);
  return w;
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
// cp.async lands asynchronously: each copy is written either at the issuing thread's next
// barrier or warp collective (a copy issued before the barrier that frees its buffer then
// overwrites what other warps still read) or only at its cp.async.wait_all (a read before the
// wait then sees stale shared memory), at random; both kinds of mistake fail the comparison.
inline void cp_async16(void* dst, const void* src) {
  if (!aligned(dst, 16) || !aligned(src, 16)) fault("cp.async of 16 bytes between addresses not 16-byte aligned");
  PendingCopy c;
  c.dst = dst;
  std::memcpy(c.data, src, 16);
  c.early = (g_cta.copy_rng() & 1u) != 0;
  c.group = self().committed;
  self().pending.push_back(c);
}
// The kernel's converted shared-memory destinations (SmemAddr) are plain pointers here.
using SmemAddr = unsigned char*;
inline SmemAddr smem_at(void* p) { return static_cast<unsigned char*>(p); }
inline void cp_async16_at(SmemAddr dst, const void* src) { cp_async16(dst, src); }
// stmatrix.sync.aligned.m8n8.x4.trans.shared.b16, by the PTX ISA's fragment table of ldmatrix /
// stmatrix: lanes 8 m .. 8 m + 7 give the 16-byte rows of matrix m; register m of lane l holds
// (row 2 (l % 4), column l / 4) in its low half and (row 2 (l % 4) + 1, column l / 4) in its high
// half (.trans: the transpose of the non-transposed layout, row l / 4, columns 2 (l % 4) ..).
inline void stmatrix_x4_trans(SmemAddr row_addr, unsigned int r0, unsigned int r1, unsigned int r2, unsigned int r3) {
  const int w = g_cta.current / 32, lane = g_cta.current % 32;
  if (!aligned(row_addr, 16)) fault("stmatrix row address not 16-byte aligned");
  g_cta.rows[w][lane] = row_addr;
  syncwarp();
  const unsigned int r[4] = {r0, r1, r2, r3};
  for (int m = 0; m < 4; ++m) {
    const unsigned short lo = static_cast<unsigned short>(r[m] & 0xffffu), hi = static_cast<unsigned short>(r[m] >> 16);
    std::memcpy(g_cta.rows[w][8 * m + 2 * (lane % 4)] + 2 * (lane / 4), &lo, 2);
    std::memcpy(g_cta.rows[w][8 * m + 2 * (lane % 4) + 1] + 2 * (lane / 4), &hi, 2);
  }
  syncwarp();
}
// ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16: stmatrix_x4_trans's inverse (same table).
inline void ldmatrix_x4_trans(unsigned int (&r)[4], SmemAddr row_addr) {
  const int w = g_cta.current / 32, lane = g_cta.current % 32;
  if (!aligned(row_addr, 16)) fault("ldmatrix row address not 16-byte aligned");
  g_cta.rows[w][lane] = row_addr;
  syncwarp();
  for (int m = 0; m < 4; ++m) {
    unsigned short lo = 0, hi = 0;
    std::memcpy(&lo, g_cta.rows[w][8 * m + 2 * (lane % 4)] + 2 * (lane / 4), 2);
    std::memcpy(&hi, g_cta.rows[w][8 * m + 2 * (lane % 4) + 1] + 2 * (lane / 4), 2);
    r[m] = static_cast<unsigned int>(lo) | (static_cast<unsigned int>(hi) << 16);
  }
  syncwarp();
}
// ld.shared.v2.u32 and the optimisation fence around a shared address (an identity here).
inline void lds_b64(unsigned int* b, SmemAddr addr) {
  if (!aligned(addr, 8)) fault("ld.shared.v2 address not 8-byte aligned");
  std::memcpy(b, addr, 8);
}
inline SmemAddr opaque(SmemAddr x) { return x; }
inline void cp_async_commit() { ++self().committed; }
inline void cp_async_wait_all() { land_copies(true); }
// cp.async.wait_group N: every copy of the groups committed before the last N has landed.
template <int N>
inline void cp_async_wait_group() {
  auto& p = self().pending;
  const int limit = self().committed - N;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i].group < limit) std::memcpy(p[i].dst, p[i].data, 16);
    else p[kept++] = p[i];
  }
  p.resize(kept);
}
// cp.async.bulk.prefetch.L2: a hint with no effect on results; its operands are still checked.
inline void prefetch_l2(const void* p, unsigned int bytes) {
  if (!aligned(p, 16) || bytes % 16 != 0) fault("cp.async.bulk.prefetch.L2 of an unaligned address or size");
}
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

// mbarrier + cp.async.bulk (BULK = 1). A bulk copy lands either at once (before the issuing
// thread goes on: a copy into a buffer other warps still read then corrupts their results) or
// only when a thread waits on its mbarrier (a read before that wait sees stale shared memory), at
// random; the phase completes when the expected bytes have landed. A waiting thread yields until
// its phase completes (a phase that never completes is a fault, not a hang).
inline Mbar* find_mbar(SmemAddr bar) {
  auto it = g_cta.mbars.find(bar);
  if (it == g_cta.mbars.end()) {
    fault("mbarrier used before mbarrier.init");
    return nullptr;
  }
  return &it->second;
}
inline void mbar_land(Mbar& m) {
  for (auto& [dst, bytes] : m.pending) {
    std::memcpy(dst, bytes.data(), bytes.size());
    m.landed += static_cast<unsigned>(bytes.size());
  }
  m.pending.clear();
  if (m.armed && m.landed == m.expected) {
    m.phase ^= 1u;
    m.armed = false;
    m.expected = m.landed = 0;
  }
}
inline void mbar_init(SmemAddr bar) {
  if (!aligned(bar, 8)) fault("mbarrier.init at an address not 8-byte aligned");
  g_cta.mbars[bar] = Mbar{};
}
inline void mbar_init_fence() {}
inline void mbar_expect_tx(SmemAddr bar, unsigned int bytes) {
  if (Mbar* m = find_mbar(bar)) {
    if (m->armed) fault("mbarrier.arrive.expect_tx on a phase already armed (count 1)");
    m->armed = true;
    m->expected = bytes;
  }
}
inline void bulk_copy(SmemAddr dst, const void* src, unsigned int bytes, SmemAddr bar) {
  if (!aligned(dst, 16) || !aligned(src, 16) || bytes % 16 != 0)
    fault("cp.async.bulk with an address or size not a multiple of 16 bytes");
  Mbar* m = find_mbar(bar);
  if (!m) return;
  if (!m->armed) fault("cp.async.bulk completing on an mbarrier that expects no bytes");
  const auto* s = static_cast<const unsigned char*>(src);
  m->pending.emplace_back(dst, std::vector<unsigned char>(s, s + bytes));
  if (g_cta.copy_rng() & 1u) mbar_land(*m);
}
inline void mbar_wait(SmemAddr bar, unsigned int parity) {
  Mbar* m = find_mbar(bar);
  if (!m) return;
  for (long spins = 0; m->phase == parity; ++spins) {
    mbar_land(*m);
    if (m->phase != parity) break;
    if (spins > 100000) {
      fault("mbarrier wait on a phase that never completes");
      return;
    }
    yield_to_scheduler();  // the issuing thread may not have run yet
  }
}

// wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 with A in registers (MMA = wgmma), decoded
// by the PTX ISA: warp w of the warpgroup holds rows 16 w .. 16 w + 15 of A and D in the m16n8k16
// A and C/D fragment layouts (D: four floats per n8 tile, in tile order); B (K x N) K-major in
// shared memory through a descriptor without swizzle: 8 x 8 core matrices of 128 contiguous bytes,
// element (k, n) at start + n / 8 * SBO + k / 8 * LBO + n % 8 * 16 + k % 8 * 2 (LBO 128 here).
struct WgDesc {
  const unsigned char* base = nullptr;
  int sbo = 0;
};
inline WgDesc wg_desc(SmemAddr a, int sbo) { return {a, sbo}; }
inline WgDesc wg_desc_at(WgDesc d, int bytes) { return {d.base + bytes, d.sbo}; }
inline void wg_fence() {}
inline void wg_keep(float&) {}
inline void fence_proxy_async() {}
// PREPARE_CTAS > 0: the prepare's chunk flags. Every prepare CTA runs before any recurrence CTA
// here, so a flag still 0 when the recurrence waits on it is a chunk the prepare never released
// (the wrong flag); g_flag_waits counts the waits on each flag for run_split's check that every
// chain waited on exactly its own chunks.
inline std::map<const unsigned int*, int> g_flag_waits;
inline void griddep_launch_dependents() {}
inline void fence_proxy_async_global() {}
inline void flag_release(unsigned int* p) {
  if (*p != 0u) fault("a chunk flag released twice, or not reset before the prepare");
  *p = 1u;
}
inline void flag_wait(const unsigned int* p) {
  if (*p != 1u) fault("the recurrence waits on a chunk flag the prepare never released");
  ++g_flag_waits[p];
}
inline void wg_commit() { ++self().wg_committed; }
inline void syncgroup() {
  const int g = g_cta.current / 128;
  if (g_cta.nthreads % 128 != 0) fault("wgmma in a CTA that is not whole warpgroups");
  arrive(g_cta.group_arrived[g], 128, g * 128, g * 128 + 128);
}
inline void wg_run(const WgOp& op) {
  const int t = g_cta.current, g0 = (t / 128) * 128;
  for (int i = 0; i < 4; ++i) g_cta.wgfrag[t][i] = op.a[i];
  syncgroup();
  auto half = [](unsigned int r, int k) { return uint_as_float(((k & 1) ? (r >> 16) : (r & 0xffffu)) << 16); };
  // A (r, k): warp r / 16, lane (r % 8) * 4 + (k % 8) / 2, register (r % 16) / 8 + 2 (k / 8).
  auto A = [&](int r, int k) {
    return half(g_cta.wgfrag[g0 + (r / 16) * 32 + (r % 8) * 4 + (k % 8) / 2][(r % 16) / 8 + 2 * (k / 8)], k);
  };
  auto B = [&](int k, int n) {
    unsigned short h;
    std::memcpy(&h, op.b + (n / 8) * op.sbo + (k / 8) * 128 + (n % 8) * 16 + (k % 8) * 2, 2);
    return uint_as_float(static_cast<unsigned int>(h) << 16);
  };
  const int wi = (t % 128) / 32, lane = t % 32, gq = lane / 4, tq = lane % 4;
  std::vector<float> out(static_cast<std::size_t>(op.n / 2));
  for (int j = 0; j < op.n / 8; ++j)
    for (int e = 0; e < 4; ++e) {
      const int r = wi * 16 + gq + (e >> 1) * 8, n = 8 * j + 2 * tq + (e & 1);
      float acc = 0.f;
      for (int k = 0; k < 16; ++k) acc += A(r, k) * B(k, n);
      out[static_cast<std::size_t>(4 * j + e)] = op.d[4 * j + e] + acc;
    }
  syncgroup();
  for (int i = 0; i < op.n / 2; ++i) op.d[i] = out[static_cast<std::size_t>(i)];
}
// wgmma.wait_group N: every wgmma of the groups committed before the last N runs now, in order.
template <int N>
inline void wg_wait() {
  auto& p = self().wg_pending;
  const int limit = self().wg_committed - N;
  std::vector<WgOp> kept;
  for (const WgOp& op : std::vector<WgOp>(p)) {
    if (op.group < limit) wg_run(op);
    else kept.push_back(op);
  }
  p = kept;
}
inline void wgmma_n(float* d, const unsigned int* a, WgDesc desc, int n) {
  if (reinterpret_cast<std::uintptr_t>(desc.base) % 16 != 0 || desc.sbo % 16 != 0)
    fault("wgmma descriptor with a start address or stride not 16-byte aligned");
  self().wg_pending.push_back({d, a, desc.base, desc.sbo, n, self().wg_committed});
}
inline void wgmma_n16(float* d, const unsigned int* a, WgDesc desc) { wgmma_n(d, a, desc, 16); }
inline void wgmma_n32(float* d, const unsigned int* a, WgDesc desc) { wgmma_n(d, a, desc, 32); }
inline void wgmma_n64(float* d, const unsigned int* a, WgDesc desc) { wgmma_n(d, a, desc, 64); }
inline void wgmma_n128(float* d, const unsigned int* a, WgDesc desc) { wgmma_n(d, a, desc, 128); }

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
#define gridDim (::kda_host::g_cta.grid)
#define KDA_HOST_EMULATION 1

// The largest layout the op admits (227 KB) plus guard bytes that must stay untouched.
constexpr std::size_t kSmemCap = 232448, kGuard = 4096;
