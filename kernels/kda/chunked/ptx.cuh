// A part of kernels/kda/kda_fwd_chunked.cu, expanded into it where it is included (inside
// namespace kda_chunked, after the knobs and the parts before it); not a header of its own.
// Device primitives: bf16 packing, fast math, cp.async and bulk copies, mbarriers, flags,
// mma.sync and wgmma fragments and their shared-memory layouts.

// Two words of bf16 pairs (the lower element in the low half) as four floats.
__device__ __forceinline__ void unpack_bf16x4(unsigned int w0, unsigned int w1, float* f) {
  f[0] = __uint_as_float(w0 << 16);
  f[1] = __uint_as_float(w0 & 0xffff0000u);
  f[2] = __uint_as_float(w1 << 16);
  f[3] = __uint_as_float(w1 & 0xffff0000u);
}
// The PTX primitives. kernels/tests/kda_host_emulation.hpp defines KDA_HOST_EMULATION and
// supplies CPU versions of exactly these (an emulated warp for shfl and mma), so that the rest of
// this file, the kernel's own indexing and control flow, runs on the CPU against the reference.
#ifndef KDA_HOST_EMULATION
__device__ __forceinline__ float ex2(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float lg2(float x) {
  float r;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float rcp(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float rsqrt(float x) {
  float r;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float shfl_bfly(float v, int lane_mask) {
  float r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r) : "f"(v), "r"(lane_mask));
  return r;
}
__device__ __forceinline__ float shfl_idx(float v, int src_lane) {
  float r;
  asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r) : "f"(v), "r"(src_lane));
  return r;
}

#endif  // KDA_HOST_EMULATION
// Tells the compiler a thread index is in range: with it, signed index arithmetic (idx / 64,
// idx % 64 of an unrolled loop) folds into per-thread constants instead of ~1,000 sign fix-ups a
// chunk in the prepare (measured on the H200).
#ifndef KDA_HOST_EMULATION
#define KDA_ASSUME(x) __builtin_assume(x)
#else
#define KDA_ASSUME(x) ((void)0)
#endif
#define KDA_LOG2E 1.4426950408889634f
#define KDA_LN2 0.6931471805599453f

__device__ __forceinline__ float sigmoid(float z) { return rcp(1.f + ex2(-z * KDA_LOG2E)); }

// The gate (docs/kda.md 1.2): log-decay a <= 0 (nats) from x = g + dt_bias, ea = exp(A_log).
__device__ __forceinline__ float log_decay(float x, float ea, float lower_bound) {
#if KDA_GATE_SOFTPLUS
  const float sp = x > 20.f ? x : KDA_LN2 * lg2(1.f + ex2(x * KDA_LOG2E));  // FLA's threshold 20
  (void)lower_bound;
  return -ea * sp;
#else
  return lower_bound * sigmoid(ea * x);
#endif
}

#ifndef KDA_HOST_EMULATION
// Raw bf16 pairs / quads (converted where used, so that loads of several tokens fly together).
__device__ __forceinline__ unsigned int load_bf16x2_raw(const __nv_bfloat16* p) {
  unsigned int w;
  asm("ld.global.nc.u32 %0, [%1];" : "=r"(w) : "l"(p));
  return w;
}
__device__ __forceinline__ uint2 load_bf16x4_raw(const __nv_bfloat16* p) {
  uint2 w;
  asm("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(w.x), "=r"(w.y) : "l"(p));
  return w;
}
__device__ __forceinline__ void load_bf16x4(const __nv_bfloat16* p, float* f) {
  const uint2 w = load_bf16x4_raw(p);
  unpack_bf16x4(w.x, w.y, f);
}
__device__ __forceinline__ float load_bf16(const __nv_bfloat16* p) {
  unsigned short h;
  asm("ld.global.nc.u16 %0, [%1];" : "=h"(h) : "l"(p));
  return __uint_as_float((unsigned int)h << 16);
}
__device__ __forceinline__ unsigned short bf16_bits(float x) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}
// Two floats as one bf16 pair, lo in the low half (cvt.rn.bf16x2.f32 puts its first operand in
// the upper half): one instruction where two cvt and a shift-or were.
__device__ __forceinline__ unsigned int pack_bf16x2(float lo, float hi) {
  unsigned int d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}
#endif  // KDA_HOST_EMULATION
__device__ __forceinline__ float bf16_value(unsigned short h) { return __uint_as_float((unsigned int)h << 16); }
// Two floats as hi + lo bf16 pairs (element 0 in the low half, as fragments want it).
__device__ __forceinline__ void split_bf16x2(float v0, float v1, unsigned int& hi, unsigned int& lo) {
  hi = pack_bf16x2(v0, v1);
  lo = pack_bf16x2(v0 - __uint_as_float(hi << 16), v1 - __uint_as_float(hi & 0xffff0000u));
}
#ifndef KDA_HOST_EMULATION
__device__ __forceinline__ void store_bf16x2(__nv_bfloat16* p, float lo, float hi) {
  asm volatile("st.global.u32 [%0], %1;" ::"l"(p), "r"(pack_bf16x2(lo, hi)) : "memory");
}

// The intrinsic rather than inline cvta: the compiler folds base + constant offsets through it.
__device__ __forceinline__ unsigned int smem_addr(const void* p) { return (unsigned int)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
// A shared-memory destination as its 32-bit window address, converted once and stepped by
// constants: converting a generic pointer per copy costs ~10 instructions (S2R of the CTA's
// window, shifts, adds), ~100 a chunk in the recurrence (measured on the H200).
typedef unsigned int SmemAddr;
__device__ __forceinline__ SmemAddr smem_at(void* p) { return smem_addr(p); }
// stmatrix .x4 .trans: lanes 8 m .. 8 m + 7 give the row addresses of matrix m (8 rows of 16
// bytes); register m of lane l holds the matrix's elements (row 2 (l % 4), column l / 4) and
// (row 2 (l % 4) + 1, column l / 4), the lower row in the low half: an mma accumulator tile
// (rows l / 4, columns 2 (l % 4) ..) stored transposed.
__device__ __forceinline__ void stmatrix_x4_trans(SmemAddr row_addr, unsigned int r0, unsigned int r1, unsigned int r2,
                                                  unsigned int r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(row_addr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}
// ldmatrix .x4 .trans: the inverse of stmatrix_x4_trans above (lanes 8 m .. 8 m + 7 give matrix
// m's row addresses; register m of lane l gets (row 2 (l % 4), column l / 4) in its low half and
// (row 2 (l % 4) + 1, column l / 4) in its high half): token rows read as an A fragment whose
// rows are value columns.
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned int (&r)[4], SmemAddr row_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(row_addr)
               : "memory");
}
// An 8-byte fragment load from a 32-bit shared address, and that address hidden from the
// optimiser: a base it cannot see through stays one register that loads add immediates to,
// instead of being re-associated into one loop-invariant sum a load plus one add a load a chunk.
__device__ __forceinline__ void lds_b64(unsigned int* b, SmemAddr addr) {
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(b[0]), "=r"(b[1]) : "r"(addr));
}
__device__ __forceinline__ SmemAddr opaque(SmemAddr x) {
  asm volatile("" : "+r"(x));
  return x;
}
__device__ __forceinline__ void cp_async16_at(SmemAddr dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }
// Waits until at most N of this thread's committed cp.async groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
// BULK = 1: the recurrence's stage copies on the bulk copy engine, one thread issuing, completion
// counted in bytes by the stage's mbarrier: mbar_init, mbar_init_fence, mbar_expect_tx, bulk_copy,
// mbar_wait (SmemAddr is the 32-bit shared-window address they take).
#include "../../common/mbarrier.cuh"
// Asks the copy engine to bring `bytes` (a multiple of 16, 16-byte aligned) into L2.
__device__ __forceinline__ void prefetch_l2(const void* p, unsigned int bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}
// PREPARE_CTAS > 0: the prepare lets the recurrence's grid start at once (programmatic dependent
// launch; KdaFwdOp launches the recurrence with programmatic stream serialization) and publishes
// each chunk with a release at GPU scope after a CTA barrier (the CUTLASS semaphore pattern); the
// recurrence's issuing thread acquires the flag, then orders its bulk copies (async proxy) after
// the generic-proxy stores it now sees.
__device__ __forceinline__ void griddep_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
__device__ __forceinline__ void flag_release(unsigned int* p) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(1u) : "memory");
}
__device__ __forceinline__ unsigned int flag_acquire(const unsigned int* p) {
  unsigned int v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }
#endif  // KDA_HOST_EMULATION
// 4 staged bf16 (8 bytes of shared memory) as floats.
__device__ __forceinline__ void load_shared_bf16x4(const unsigned short* p, float* f) {
  const uint2 w = *reinterpret_cast<const uint2*>(p);
  unpack_bf16x4(w.x, w.y, f);
}

#ifndef KDA_HOST_EMULATION
__device__ __forceinline__ unsigned int dynamic_smem_bytes() {
  unsigned int r;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void trap_now() { asm volatile("trap;"); }
// Spins until the prepare released the flag. 2^24 polls (each an L2 round trip, ~0.5 us, plus a
// short sleep: about 10 s) mean the chunk never comes (a bug, or a launch without the prepare):
// the trap turns a hang into a launch error the gate reports. (No clock: the gate rejects
// candidates that read one.)
__device__ __forceinline__ void flag_wait(const unsigned int* p) {
  for (unsigned int polls = 0; !flag_acquire(p); ++polls) {
    asm volatile("nanosleep.u32 64;");
    if (polls == (1u << 24)) trap_now();
  }
}

// D += A B on one m16n8k16 tile: A row-major bf16 (4 regs), B column-major bf16 (2 regs), fp32.
__device__ __forceinline__ void mma_bf16(float* d, const unsigned int* a, const unsigned int* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

#if KDA_WGMMA
// Warpgroup MMA (MMA = wgmma): D (64 x N, fp32, the m16n8k16 accumulator layout per warp and n8
// tile) += A (64 x 16, bf16 in registers, the m16n8k16 A layout per warp) B (16 x N, bf16 in shared
// memory through a descriptor, K-major). Asynchronous: wg_fence before the first one after other
// instructions wrote its registers, wg_commit, then wg_wait before the results are read.
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// After wg_wait: a register the wgmma wrote, passed through an empty asm so that no read of it is
// scheduled above the wait (the compiler does not know the wait is what completes the write).
__device__ __forceinline__ void wg_keep(float& r) { asm volatile("" : "+f"(r)::"memory"); }
// Shared memory written by cp.async (the generic proxy) must be fenced before wgmma (the async
// proxy) reads it.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// A shared-memory matrix descriptor (PTX ISA, "matrix descriptor"): start address, leading byte
// offset (between core matrices adjacent in K: 128, they are contiguous) and stride byte offset
// (between core matrices adjacent in N), all in 16-byte units; no swizzle.
typedef unsigned long long WgDesc;
__device__ __forceinline__ WgDesc wg_desc(unsigned int addr, int sbo) {
  return (WgDesc)((addr & 0x3FFFFu) >> 4) | ((WgDesc)(128 >> 4) << 16) | ((WgDesc)(sbo >> 4) << 32);
}
// The descriptor `bytes` further on (a k step is 256 bytes: two core matrices along K).
__device__ __forceinline__ WgDesc wg_desc_at(WgDesc d, int bytes) { return d + (WgDesc)(bytes >> 4); }
__device__ __forceinline__ void wgmma_n16(float* d, const unsigned int* a, unsigned long long desc) {
  asm volatile(
      "{ .reg .pred p; setp.eq.u32 p, 1, 1; wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7}, "
      "{%8, %9, %10, %11}, %12, p, 1, 1, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}
__device__ __forceinline__ void wgmma_n32(float* d, const unsigned int* a, unsigned long long desc) {
  asm volatile(
      "{ .reg .pred p; setp.eq.u32 p, 1, 1; wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
      "{%16, %17, %18, %19}, %20, p, 1, 1, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}
__device__ __forceinline__ void wgmma_n64(float* d, const unsigned int* a, unsigned long long desc) {
  asm volatile(
      "{ .reg .pred p; setp.eq.u32 p, 1, 1; wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}
__device__ __forceinline__ void wgmma_n128(float* d, const unsigned int* a, unsigned long long desc) {
  asm volatile(
      "{ .reg .pred p; setp.eq.u32 p, 1, 1; wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}
#endif  // KDA_WGMMA

#endif  // KDA_HOST_EMULATION

// Fragments from shared memory. `base` is a bf16 matrix with row stride `ld` elements.
// A (16 x 16 at row r0, column k0, row-major): lane (g = lane / 4, t = lane % 4) holds
// (r0 + g, k0 + 2t..), (r0 + g + 8, k0 + 2t..), (r0 + g, k0 + 8 + 2t..), (r0 + g + 8, k0 + 8 + 2t..).
__device__ __forceinline__ void load_a(unsigned int* a, const unsigned short* base, int ld, int r0, int k0, int lane) {
  const int g = lane >> 2, t = lane & 3;
  const unsigned short* p = base + (r0 + g) * ld + k0 + 2 * t;
  a[0] = *reinterpret_cast<const unsigned int*>(p);
  a[1] = *reinterpret_cast<const unsigned int*>(p + 8 * ld);
  a[2] = *reinterpret_cast<const unsigned int*>(p + 8);
  a[3] = *reinterpret_cast<const unsigned int*>(p + 8 * ld + 8);
}
// Element offset of (r, c) in a [rows][n] array whose 16-byte chunks (epc elements each) are
// XOR-permuted within each row by a function of r, so that the eight rows g = 0..7 that one
// fragment load touches read eight different chunks (conflict-free, as padding would be) while
// the array stays dense: the prepare writes the workspace so and the recurrence copies a chunk's
// operands with one linear loop.
__device__ __forceinline__ int swz(int r, int c, int n, int epc) {
  const int nch = n / epc;  // chunks a row: 2 .. 16
  const int x = nch >= 8 ? (r & 7) : ((r >> (nch == 2 ? 2 : 1)) & (nch - 1));
  return r * n + (((c / epc) ^ x) * epc) + (c % epc);
}
// B (16 x 8 at k0, column n0) from its transpose stored row-major [n][k]: lane holds
// (k0 + 2t.., n0 + g) and (k0 + 8 + 2t.., n0 + g).
__device__ __forceinline__ void load_b(unsigned int* b, const unsigned short* base_t, int ld, int n0, int k0, int lane) {
  const int g = lane >> 2, t = lane & 3;
  const unsigned short* p = base_t + (n0 + g) * ld + k0 + 2 * t;
  b[0] = *reinterpret_cast<const unsigned int*>(p);
  b[1] = *reinterpret_cast<const unsigned int*>(p + 8);
}

// The recurrence's B operands (W0, Qd, Kr^T, M) in fragment order: within each 16-column block
// the four columns lane t needs (2t, 2t + 1, 8 + 2t, 9 + 2t) sit together at 4t .. 4t + 3, so one
// 8-byte load fills a fragment; and the blocks (32 bytes) XOR-permuted by the row so that the
// four rows of each 16-lane phase of that load hit distinct banks. Element offset of (r, c) in a
// bf16 [rows][n] array so laid out:
__device__ __forceinline__ int swzf(int r, int c, int n) {
  const int nu = n / 16;  // 32-byte blocks a row: 1 .. 8
  const int x = nu >= 4 ? (r & 3) : (nu == 2 ? ((r >> 1) & 1) : 0);
  const int k = c & 15;
  return r * n + (((c >> 4) ^ x) << 4) + ((k & 7) >> 1) * 4 + (k >> 3) * 2 + (k & 1);
}
#if KDA_WGMMA
// The m64nC variant (N = the chunk's tokens).
#if CHUNK == 16
#define wgmma_nc wgmma_n16
#elif CHUNK == 32
#define wgmma_nc wgmma_n32
#else
#define wgmma_nc wgmma_n64
#endif
#endif
// MMA = wgmma: the recurrence's B operands in wgmma's canonical K-major layout without swizzle
// instead: 8 x 8 core matrices of 128 contiguous bytes (8 rows of 16 bytes), core matrix (r / 8,
// c / 8) of a bf16 [rows][n] array at r / 8 * 8 n + c / 8 * 64 elements, so that a descriptor
// walks K by 128 bytes and N by 16 n bytes. Element offset of (r, c); `wsb` is the layout the
// prepare writes and the recurrence reads (fragment order or this).
__device__ __forceinline__ int wgl(int r, int c, int n) { return (r >> 3) * (n * 8) + (c >> 3) * 64 + (r & 7) * 8 + (c & 7); }
__device__ __forceinline__ int wsb(int r, int c, int n) {
#if KDA_WGMMA
  return wgl(r, c, n);
#else
  return swzf(r, c, n);
#endif
}
// load_b from a fragment-order (swzf) bf16 [n][ld] array: one 8-byte load.
__device__ __forceinline__ void load_b_frag(unsigned int* b, const unsigned short* base_t, int ld, int n0, int k0,
                                            int lane) {
  const int g = lane >> 2, t = lane & 3;
  const uint2 v = *reinterpret_cast<const uint2*>(base_t + swzf(n0 + g, k0 + 2 * t, ld));
  b[0] = v.x;
  b[1] = v.y;
}
