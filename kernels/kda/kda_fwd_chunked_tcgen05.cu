// kda_fwd chunked seed, tcgen05 variant (sm_100a only): the same chunked WY / UT-transform algorithm
// as kda_fwd_chunked.cu (docs/kda.md section 2.1; read that file's header first), with the chunk's
// state GEMMs on Blackwell's fifth-generation tensor cores: tcgen05.mma (kind::f16, bf16 operands
// in shared memory described by matrix descriptors, fp32 accumulators in tensor memory), completion
// through tcgen05.commit to an mbarrier, results read back with tcgen05.ld.
//
// COMPILE-ONLY: this file has been compiled (NVRTC, sm_100a) and checked by ptxas (nvJitLink) but
// has NEVER RUN on any GPU (no Blackwell device was available). Its layouts follow the PTX ISA's
// tcgen05 sections as read, not as measured.
//
// What runs where (per chunk of C tokens; one CTA per (sequence, head, BV value columns)):
//   CUDA cores / mma.sync, as in kda_fwd_chunked.cu: pre-processing, the cumsum of the decays, the
//     decayed operands, L and M (LM_TENSOR_CORES: mma.sync), the forward substitution
//     U = (I + L)^-1 U'.
//   tcgen05.mma (M = 128 always, cta_group::1):
//     GEMM1  D1 = S^T [Kd; Qd]^T      M = 128 (value column j; rows >= BV are don't-care), N = 2C,
//                                       K = 128 keys; S^T as hi + lo bf16 (two MMAs per k step)
//            -> D1[j][i] = W[i][j] = (Kd S)[i][j] (i < C), D1[j][C + i] = Qs[i][j] = (Qd S)[i][j]
//     OUT    D1[:, C..2C) += U^T M^T    M = 128 (j), N = C (token i), K = C (token m); U and M hi + lo:
//                                       U_hi M_hi + U_lo M_hi + U_hi M_lo -> out[i][j] = D1[j][C + i]
//     STATE  S += Kr^T U                M = 128 (key channel d), N = BV, K = C; U hi + lo
//   The state S (128 x BV fp32) lives in tensor memory for the whole sequence: lane d = key
//   channel, column j = value column. Each chunk reads it once (tcgen05.ld) to form S^T's bf16 terms
//   for GEMM1 and writes it back scaled by 2^Gtot (tcgen05.st) before the STATE MMA accumulates.
//
// Layout reasoning (PTX ISA, "tcgen05 Matrix Descriptors", "Shared memory layouts", "Data path
// layout"):
//   * Every shared-memory operand is K-major with no swizzling: the canonical layout
//     ((8, m), (T, 2k)) : ((1T, SBO), (1, LBO)) with T = 8 bf16 (16 bytes). A core matrix is 8 rows
//     x 16 bytes stored as 128 contiguous bytes (row r at r * 16). Here the core matrices of one
//     8-row group are contiguous along K (LBO = 128 bytes, the distance between K-adjacent core
//     matrices) and 8-row groups follow each other (SBO = Kdim * 16 bytes), so element (r, k) of an
//     R x Kdim operand sits at byte (r / 8) * Kdim * 16 + (k / 8) * 128 + (r % 8) * 16 + (k % 8) * 2
//     (canon_off below). One MMA consumes K = 16 (two core matrices along K): the k-th step's
//     descriptor starts 256 bytes further on.
//   * "A" is M x K and "B" is N x K, both K-major (instruction-descriptor transpose bits 0):
//     D[m][n] = sum_k A[m][k] B[n][k]. So S^T is stored [j][d], [Kd; Qd] as [token][d], U^T as
//     [j][token], M as [i][m] (its natural row-major order), Kr^T as [d][token].
//   * Shared-memory descriptor (64 bits): start address >> 4 in bits 0-13, LBO >> 4 in 16-29,
//     SBO >> 4 in 32-45, the fixed value 0b001 in bits 46-48, base offset 0, LBO mode 0 (relative),
//     swizzle mode 0 (none) in bits 61-63. Operands start 16-byte aligned.
//   * Instruction descriptor (32 bits, kind::f16): D format f32 (bits 4-5 = 1), A and B bf16 (bits
//     7-9 and 10-12 = 1), no negation, K-major A and B (bits 15, 16 = 0), N >> 3 in bits 17-22,
//     M >> 4 in bits 24-28.
//   * Tensor memory: an address is lane << 16 | column. For M = 128 with cta_group::1 the
//     accumulator's row m is lane m and column n is column n (one fp32 a cell). Warp w may access
//     lanes [32 (w % 4), 32 (w % 4) + 32) only; tcgen05.ld/st .32x32b.x16 gives lane 32 (w % 4) +
//     laneid to thread laneid, 16 consecutive columns in 16 registers.
//   * Rows of an A operand past BV (S^T, U^T when BV < 128) are whatever the shared memory holds
//     (the buffers are sized for 128 rows, so every read stays inside them): row m of A only feeds
//     row m of D, i.e. tensor-memory lanes >= BV of D1, which nothing reads.
//
// Ordering (PTX ISA memory consistency for tcgen05): generic-proxy shared-memory writes of MMA
// operands are made visible to the tensor core with fence.proxy.async.shared::cta before the CTA
// barrier; tcgen05.fence::before_thread_sync / after_thread_sync bracket every barrier between
// tcgen05 operations of different threads (tcgen05.st or tcgen05.ld then an MMA, an MMA's
// completion then tcgen05.ld); one thread issues the MMAs and tcgen05.commit arrives once on an
// mbarrier when they (and their shared-memory reads) are complete; every thread waits on it with
// the phase parity, which flips per commit. Tensor memory is allocated by warp 0 (tcgen05.alloc,
// power of two >= 32 columns; relinquish_alloc_permit right after) and freed by it before exit.
//
// Knobs (validated by KdaFwdOp::chunked_geometry; kda_fwd_sm100a.spec):
//   MMA     tcgen05 (the only value this source implements; the matrix unit of the chunk's GEMMs)
//   CHUNK   16, 32 or 64       BV     16, 32, 64 or 128      WARPS  4 or 8
//   STAGE   0 or 1 (cp.async staging of the next chunk, as in kda_fwd_chunked.cu)
//   LM_TENSOR_CORES  0 or 1 (L and M on mma.sync tensor cores, lower-bound gate and CHUNK = 16 only)
#include <cuda_bf16.h>

// The knob's old name: refused, so that an old -D is never silently ignored (KdaFwdOp::knob_renames
// maps it where specs, command lines and trace databases give knobs).
#ifdef LMTC
#error "knob LMTC was renamed LM_TENSOR_CORES"
#endif

// The matrix-unit knob: this source is the tcgen05 one; the mma.sync kernel is kda_fwd_chunked.cu.
#define KDA_MMA_ID_tcgen05 1
#define KDA_MMA_ID_sync 2
#define KDA_MMA_CAT_(a, b) a##b
#define KDA_MMA_CAT(a, b) KDA_MMA_CAT_(a, b)
#ifndef MMA
#define MMA tcgen05
#endif
#if KDA_MMA_CAT(KDA_MMA_ID_, MMA) != KDA_MMA_ID_tcgen05
#error "kda_fwd_chunked_tcgen05.cu implements only knob MMA=tcgen05 (MMA=sync is kda_fwd_chunked.cu)"
#endif
// tcgen05 exists only on sm_100a-class targets: refuse any other arch with a message naming both.
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM100_ALL) && !defined(__CUDA_ARCH_FEAT_SM103_ALL)
#if __CUDA_ARCH__ == 900
#error "knob MMA=tcgen05 (kda_fwd_chunked_tcgen05.cu) needs arch sm_100a; this build targets sm_90a, which has no tcgen05: use MMA=sync (kda_fwd_chunked.cu, kda_fwd.spec) there"
#else
#error "knob MMA=tcgen05 (kda_fwd_chunked_tcgen05.cu) needs arch sm_100a; this build targets another arch, which has no tcgen05: use MMA=sync (kda_fwd_chunked.cu) there"
#endif
#endif

#ifndef KDA_GATE_SOFTPLUS
#define KDA_GATE_SOFTPLUS 0
#endif
#ifndef HAS_INITIAL_STATE
#define HAS_INITIAL_STATE 1
#endif
#ifndef HAS_FINAL_STATE
#define HAS_FINAL_STATE 1
#endif
#ifndef CHUNK
#define CHUNK 16
#endif
#ifndef BV
#define BV 32
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef STAGE
#define STAGE 1
#endif
#ifndef LM_TENSOR_CORES
#define LM_TENSOR_CORES 1
#endif
#define KDA_LM_TC (LM_TENSOR_CORES && !KDA_GATE_SOFTPLUS && CHUNK == 16)

namespace kda_tc05 {

enum : int {
  kD = 128,  // K = V
  kC = CHUNK,
  kBv = BV,
  kWarps = WARPS,
  kThreads = WARPS * 32,
  kWarpSets = WARPS / 4,             // warps that share one tensor-memory lane quadrant
  kLd = kD + 1,                      // fp32 [C][K] rows (odd stride: column walks hit distinct banks)
  kPairs = kC * (kC + 1) / 2,        // (i, j) pairs with j <= i of L and M
  kPairLanes = kC == 16 ? 8 : kC == 32 ? 4 : 1,
  kPairRounds = (kPairs * kPairLanes + kThreads - 1) / kThreads,
  kStageSegs = 48 + kBv / 8,         // 16-byte cp.async segments per token: q, k, g rows and v's slice
  // Tensor memory: S in columns [0, BV), D1 in [BV, BV + 2C); allocations are powers of two >= 32.
  kTmemD1 = kBv,
  kTmemNeed = kBv + 2 * kC,
  kTmemCols = kTmemNeed <= 32 ? 32 : kTmemNeed <= 64 ? 64 : kTmemNeed <= 128 ? 128 : 256,
  // Instruction descriptors (kind::f16, bf16 x bf16 -> f32, K-major A and B), M = 128.
  kIdescBase = (1 << 4) | (1 << 7) | (1 << 10) | ((128 >> 4) << 24),
  kIdescG1 = kIdescBase | ((2 * kC) >> 3) << 17,   // GEMM1: N = 2C
  kIdescOut = kIdescBase | (kC >> 3) << 17,        // OUT:   N = C
  kIdescState = kIdescBase | (kBv >> 3) << 17,     // STATE: N = BV
};

static_assert(kC == 16 || kC == 32 || kC == 64, "CHUNK: 16, 32 or 64");
static_assert(kBv == 16 || kBv == 32 || kBv == 64 || kBv == 128, "BV: 16, 32, 64 or 128");
static_assert(kWarps == 4 || kWarps == 8, "WARPS: 4 or 8 (warps 0-3 cover the 128 tensor-memory lanes)");
static_assert(STAGE == 0 || STAGE == 1, "STAGE: 0 or 1");
static_assert(LM_TENSOR_CORES == 0 || LM_TENSOR_CORES == 1, "LM_TENSOR_CORES: 0 or 1");
// M = 128 needs N a multiple of 16 in [16, 256]: 2C, C and BV all are.
static_assert(kTmemNeed <= 256, "tensor memory: S and D1 fit 256 columns");

// Dynamic shared memory, in bytes from the base (every offset a multiple of 16; MMA operands need
// 16-byte alignment without swizzling). Region A (steps 1-3b) holds the fp32 pre-processed chunk;
// region B1 (3c to GEMM1's completion) holds S^T's bf16 terms, region B2 (after GEMM1) U' / U and
// U^T's bf16 terms; all three share the start of the buffer.
enum : int {
  kOffQ = 0,                                        // fp32 [C][kLd]   q * scale / |q|
  kOffK = kOffQ + ((kC * kLd * 4 + 15) / 16) * 16,  // fp32 [C][kLd]   k / |k|
  kOffG = kOffK + ((kC * kLd * 4 + 15) / 16) * 16,  // fp32 [C][kLd]   log2-decays, then their cumsum
  kRegionA = kOffG + ((kC * kLd * 4 + 15) / 16) * 16,
  kOffShi = 0,                                      // bf16 canonical [128][128] S^T high terms  (B1)
  kOffSlo = kOffShi + 128 * kD * 2,                 // bf16 canonical [128][128] S^T - high     (B1)
  kRegionB1 = kOffSlo + 128 * kD * 2,
  kOffU = 0,                                        // fp32 [C][BV]    U' then U              (B2)
  kOffUhi = kOffU + kC * kBv * 4,                   // bf16 canonical [128][C] U^T high terms   (B2)
  kOffUlo = kOffUhi + 128 * kC * 2,                 // bf16 canonical [128][C] U^T - high       (B2)
  kRegionB2 = kOffUlo + 128 * kC * 2,
  kUnion = (((kRegionA > kRegionB1 ? (kRegionA > kRegionB2 ? kRegionA : kRegionB2)
                                   : (kRegionB1 > kRegionB2 ? kRegionB1 : kRegionB2)) + 1023) / 1024) * 1024,
  kOffV = kUnion,                                   // fp32 [C][BV]    this CTA's value columns
  kOffBeta = kOffV + kC * kBv * 4,                  // fp32 [C]
  kOffDec = kOffBeta + ((kC * 4 + 15) / 16) * 16,   // fp32 [K]        2^Gtot
  kOffKQ = kOffDec + kD * 4,                        // bf16 canonical [2C][128] Kd rows, then Qd rows
  kOffKrT = kOffKQ + 2 * kC * kD * 2,               // bf16 canonical [128][C]  Kr^T
  kOffL = kOffKrT + kD * kC * 2,                    // fp32 [C][C]
  kOffMhi = kOffL + kC * kC * 4,                    // bf16 canonical [C][C] M, high terms
  kOffMlo = kOffMhi + kC * kC * 2,                  // bf16 canonical [C][C] M - high terms
  kOffBar = kOffMlo + kC * kC * 2,                  // u64 mbarrier, then u32 tensor-memory base
  kOffRq = kOffBar + 16,                            // bf16 [C][K]  staged raw q      (STAGE = 1)
  kOffRk = kOffRq + kC * kD * 2,                    // bf16 [C][K]  staged raw k
  kOffRg = kOffRk + kC * kD * 2,                    // bf16 [C][K]  staged raw g
  kOffRv = kOffRg + kC * kD * 2,                    // bf16 [C][BV] staged v slice
  kSmemBytes = STAGE ? kOffRv + kC * kBv * 2 : kOffRq,
};
// The tensor-core L and M's partial sums (LM_TENSOR_CORES; 4 channel quarters x 2 x 16 x 16 fp32)
// use the [Kd; Qd] area before 3a.
static_assert(!KDA_LM_TC || 4 * 2 * 16 * 16 * 4 <= 2 * kC * kD * 2,
              "LM_TENSOR_CORES scratch must fit the [Kd; Qd] area");
static_assert(kSmemBytes <= 232448, "at most 227 KB of shared memory per CTA");

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

__device__ __forceinline__ void load_bf16x4(const __nv_bfloat16* p, float* f) {
  unsigned int w0, w1;
  asm("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(w0), "=r"(w1) : "l"(p));
  f[0] = __uint_as_float(w0 << 16);
  f[1] = __uint_as_float(w0 & 0xffff0000u);
  f[2] = __uint_as_float(w1 << 16);
  f[3] = __uint_as_float(w1 & 0xffff0000u);
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
__device__ __forceinline__ float bf16_value(unsigned short h) { return __uint_as_float((unsigned int)h << 16); }
__device__ __forceinline__ void split_bf16x2(float v0, float v1, unsigned int& hi, unsigned int& lo) {
  const unsigned short h0 = bf16_bits(v0), h1 = bf16_bits(v1);
  const unsigned short l0 = bf16_bits(v0 - bf16_value(h0)), l1 = bf16_bits(v1 - bf16_value(h1));
  hi = (unsigned int)h0 | ((unsigned int)h1 << 16);
  lo = (unsigned int)l0 | ((unsigned int)l1 << 16);
}
__device__ __forceinline__ void store_bf16(__nv_bfloat16* p, float x) {
  asm volatile("st.global.u16 [%0], %1;" ::"l"(p), "h"(bf16_bits(x)) : "memory");
}
__device__ __forceinline__ unsigned int smem_addr(const void* p) {
  unsigned int r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }
__device__ __forceinline__ void load_shared_bf16x4(const unsigned short* p, float* f) {
  const uint2 w = *reinterpret_cast<const uint2*>(p);
  f[0] = __uint_as_float(w.x << 16);
  f[1] = __uint_as_float(w.x & 0xffff0000u);
  f[2] = __uint_as_float(w.y << 16);
  f[3] = __uint_as_float(w.y & 0xffff0000u);
}
__device__ __forceinline__ unsigned int dynamic_smem_bytes() {
  unsigned int r;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void trap_now() { asm volatile("trap;"); }

// mma.sync (the L and M of LM_TENSOR_CORES only): D += A B on one m16n8k16 tile, A row-major,
// B column-major.
__device__ __forceinline__ void mma_bf16(float* d, const unsigned int* a, const unsigned int* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// ---- tcgen05 primitives --------------------------------------------------------------------

// Byte offset of element (r, k) of a K-major, unswizzled bf16 operand with kdim columns (header).
__device__ __forceinline__ int canon_off(int r, int k, int kdim) {
  return (r >> 3) * (kdim * 16) + (k >> 3) * 128 + (r & 7) * 16 + (k & 7) * 2;
}
__device__ __forceinline__ void store_canon(unsigned char* base, int r, int k, int kdim, unsigned short v) {
  *reinterpret_cast<unsigned short*>(base + canon_off(r, k, kdim)) = v;
}
// Shared-memory matrix descriptor: start, LBO = 128 bytes, SBO = kdim * 16 bytes, no swizzle.
__device__ __forceinline__ unsigned long long smem_desc(unsigned int saddr, int kdim) {
  return (unsigned long long)((saddr >> 4) & 0x3FFFu) | ((unsigned long long)(128 >> 4) << 16) |
         ((unsigned long long)(((unsigned int)kdim * 16u >> 4) & 0x3FFFu) << 32) | (1ull << 46);
}
// D (tensor memory) = A B^T (+ D when accumulate): issued by one thread.
__device__ __forceinline__ void tc05_mma(unsigned int d_tmem, unsigned long long a_desc, unsigned long long b_desc,
                                         unsigned int idesc, unsigned int accumulate) {
  asm volatile(
      "{ .reg .pred p; setp.ne.u32 p, %4, 0; tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p; }" ::"r"(d_tmem),
      "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(accumulate)
      : "memory");
}
// The completion of every tcgen05.mma this thread issued so far arrives once on the mbarrier.
__device__ __forceinline__ void tc05_commit(unsigned int bar) {
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned int bar, unsigned int parity) {
  unsigned int done = 0;
  do {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
__device__ __forceinline__ void tc05_before_sync() { asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory"); }
__device__ __forceinline__ void tc05_after_sync() { asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory"); }
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// 16 columns of this thread's lane, loaded and waited for in one statement (the registers are
// undefined until tcgen05.wait::ld, so nothing may be scheduled between the two).
__device__ __forceinline__ void tmem_ld16(unsigned int taddr, float* v) {
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x16.b32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "
      "%15}, [%16];\n\ttcgen05.wait::ld.sync.aligned;"
      : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3]), "=f"(v[4]), "=f"(v[5]), "=f"(v[6]), "=f"(v[7]), "=f"(v[8]),
        "=f"(v[9]), "=f"(v[10]), "=f"(v[11]), "=f"(v[12]), "=f"(v[13]), "=f"(v[14]), "=f"(v[15])
      : "r"(taddr)
      : "memory");
}
__device__ __forceinline__ void tmem_st16(unsigned int taddr, const float* v) {
  asm volatile(
      "tcgen05.st.sync.aligned.32x32b.x16.b32 [%0], {%1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "
      "%15, %16};" ::"r"(taddr),
      "f"(v[0]), "f"(v[1]), "f"(v[2]), "f"(v[3]), "f"(v[4]), "f"(v[5]), "f"(v[6]), "f"(v[7]), "f"(v[8]), "f"(v[9]),
      "f"(v[10]), "f"(v[11]), "f"(v[12]), "f"(v[13]), "f"(v[14]), "f"(v[15])
      : "memory");
}
__device__ __forceinline__ void tmem_wait_st() { asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory"); }

struct Args {
  const __nv_bfloat16* __restrict__ q;
  const __nv_bfloat16* __restrict__ k;
  const __nv_bfloat16* __restrict__ v;
  const __nv_bfloat16* __restrict__ g;
  const __nv_bfloat16* __restrict__ beta;
  const float* __restrict__ a_log;
  const float* __restrict__ dt_bias;
  const long long* __restrict__ cu_seqlens;  // null: fixed rows of T tokens
  const float* __restrict__ initial_state;   // [N, H, V, K]
  __nv_bfloat16* __restrict__ out;
  float* __restrict__ final_state;           // [N, H, V, K]
  long long T;
  int H;
  float scale, lower_bound;
};

__device__ __forceinline__ void kda_tc05_body(const Args& a) {
  extern __shared__ __align__(1024) unsigned char smem[];
  float* sQ = reinterpret_cast<float*>(smem + kOffQ);
  float* sK = reinterpret_cast<float*>(smem + kOffK);
  float* sG = reinterpret_cast<float*>(smem + kOffG);
  float* sU = reinterpret_cast<float*>(smem + kOffU);
  float* sV = reinterpret_cast<float*>(smem + kOffV);
  float* sBeta = reinterpret_cast<float*>(smem + kOffBeta);
  float* sDec = reinterpret_cast<float*>(smem + kOffDec);
  float* sL = reinterpret_cast<float*>(smem + kOffL);
  unsigned int* sTmemBase = reinterpret_cast<unsigned int*>(smem + kOffBar + 8);

  // A launch with less dynamic shared memory than this layout needs is a plan error: stop loudly.
  if (dynamic_smem_bytes() < (unsigned int)kSmemBytes) trap_now();

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g8 = lane >> 2, t4 = lane & 3;  // mma.sync fragment coordinates (LM_TENSOR_CORES)
  (void)g8;
  (void)t4;
  const int quad = warp & 3;       // tensor-memory lanes [32 quad, 32 quad + 32) are this warp's
  const int wset = warp >> 2;      // which of the kWarpSets warps on that quadrant
  const unsigned int lane_field = (unsigned int)(quad * 32) << 16;
  const long long n = blockIdx.x;
  const int h = blockIdx.y;
  const int col0 = blockIdx.z * kBv;
  long long bos, eos;
  if (a.cu_seqlens) {
    bos = a.cu_seqlens[n];
    eos = a.cu_seqlens[n + 1];
  } else {
    bos = n * a.T;
    eos = bos + a.T;
  }
  float dtb[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) dtb[e] = a.dt_bias[h * kD + lane * 4 + e];
  const float ea = ex2(a.a_log[h] * KDA_LOG2E);

  // Tensor memory (warp 0 allocates, then gives up its permit so co-resident CTAs can allocate)
  // and the MMA-completion mbarrier (one arrival per phase: the commit).
  const unsigned int bar = smem_addr(smem + kOffBar);
  if (warp == 0) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(smem_addr(sTmemBase)),
                 "n"((int)kTmemCols)
                 : "memory");
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
  }
  if (tid == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  tc05_before_sync();
  __syncthreads();
  tc05_after_sync();
  const unsigned int tmem = *sTmemBase;             // lane 0, first allocated column
  const unsigned int tS = tmem;                     // S: columns [0, BV)
  const unsigned int tD1 = tmem + kTmemD1;          // D1: W^T in [BV, BV + C), Qs^T (then out^T) in [BV + C, BV + 2C)
  unsigned int phase = 0;

  // The state slice into tensor memory: thread (quad, lane) holds key channel d = 32 quad + lane,
  // 16 value columns a load; the warps on one quadrant split the column groups.
  const long long sbase = (n * a.H + h) * (long long)kD * kD + (long long)col0 * kD;  // V-first [j][i]
  {
    const int d = quad * 32 + lane;
    for (int cg = wset; cg < kBv / 16; cg += kWarpSets) {
      float v[16];
#pragma unroll
      for (int e = 0; e < 16; ++e) {
#if HAS_INITIAL_STATE
        v[e] = a.initial_state[sbase + (long long)(cg * 16 + e) * kD + d];
#else
        v[e] = 0.f;
#endif
      }
      tmem_st16(tS + lane_field + cg * 16, v);
    }
    tmem_wait_st();
    (void)d;
  }

#if STAGE
  unsigned short* sRq = reinterpret_cast<unsigned short*>(smem + kOffRq);
  unsigned short* sRk = reinterpret_cast<unsigned short*>(smem + kOffRk);
  unsigned short* sRg = reinterpret_cast<unsigned short*>(smem + kOffRg);
  unsigned short* sRv = reinterpret_cast<unsigned short*>(smem + kOffRv);
  // Starts the copies of chunk [t1, t1 + C) into the staging buffer (rows past eos are not
  // copied: step 1 zeroes them) and loads its beta logits, thread tt holding token tt's.
  float beta_raw = 0.f;
  auto stage = [&](long long t1) {
    if (t1 < eos) {
      const int cn = (int)(eos - t1 < kC ? eos - t1 : (long long)kC);
      for (int idx = tid; idx < cn * kStageSegs; idx += kThreads) {
        const int tt = idx / kStageSegs, sg = idx % kStageSegs;
        const long long tokrow = ((t1 + tt) * a.H + h) * (long long)kD;
        if (sg < 48) {
          const int which = sg >> 4, seg = sg & 15;
          const __nv_bfloat16* src = (which == 0 ? a.q : which == 1 ? a.k : a.g) + tokrow + seg * 8;
          unsigned short* dst = (which == 0 ? sRq : which == 1 ? sRk : sRg) + tt * kD + seg * 8;
          cp_async16(dst, src);
        } else {
          const int seg = sg - 48;
          cp_async16(sRv + tt * kBv + seg * 8, a.v + tokrow + col0 + seg * 8);
        }
      }
      if (tid < cn) beta_raw = load_bf16(a.beta + (t1 + tid) * a.H + h);
    }
    cp_async_commit();
  };
  stage(bos);
#endif

  for (long long t0 = bos; t0 < eos; t0 += kC) {
    const int count = (int)(eos - t0 < kC ? eos - t0 : (long long)kC);
#if STAGE
    cp_async_wait_all();
    __syncthreads();
#endif
    // 1. Pre-processing, one warp per token; padding rows are zero (a = 0: no decay).
    for (int tt = warp; tt < kC; tt += kWarps) {
      float q[4] = {0.f, 0.f, 0.f, 0.f}, k[4] = {0.f, 0.f, 0.f, 0.f}, ld[4] = {0.f, 0.f, 0.f, 0.f};
      float rq = 0.f, rk = 0.f;
      if (tt < count) {
        float gg[4];
#if STAGE
        load_shared_bf16x4(sRq + tt * kD + lane * 4, q);
        load_shared_bf16x4(sRk + tt * kD + lane * 4, k);
        load_shared_bf16x4(sRg + tt * kD + lane * 4, gg);
#else
        const long long row = ((t0 + tt) * a.H + h) * (long long)kD + lane * 4;
        load_bf16x4(a.q + row, q);
        load_bf16x4(a.k + row, k);
        load_bf16x4(a.g + row, gg);
#endif
        float sq = 0.f, sk = 0.f;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          sq = fmaf(q[e], q[e], sq);
          sk = fmaf(k[e], k[e], sk);
          ld[e] = log_decay(gg[e] + dtb[e], ea, a.lower_bound) * KDA_LOG2E;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
          sq += shfl_bfly(sq, o);
          sk += shfl_bfly(sk, o);
        }
        rq = rsqrt(sq + 1e-6f) * a.scale;
        rk = rsqrt(sk + 1e-6f);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sQ[tt * kLd + lane * 4 + e] = q[e] * rq;
        sK[tt * kLd + lane * 4 + e] = k[e] * rk;
        sG[tt * kLd + lane * 4 + e] = ld[e];
      }
    }
    for (int i = tid; i < kC * kBv; i += kThreads) {
      const int tt = i / kBv, j = i % kBv;
#if STAGE
      sV[i] = tt < count ? bf16_value(sRv[i]) : 0.f;
#else
      sV[i] = tt < count ? load_bf16(a.v + ((t0 + tt) * a.H + h) * (long long)kD + col0 + j) : 0.f;
#endif
      (void)j;
    }
    if (tid < kC) {
#if STAGE
      sBeta[tid] = tid < count ? sigmoid(beta_raw) : 0.f;
#else
      sBeta[tid] = tid < count ? sigmoid(load_bf16(a.beta + (t0 + tid) * a.H + h)) : 0.f;
#endif
    }
    __syncthreads();
#if STAGE
    // The staging buffer and beta_raw are consumed: copy the next chunk while this one computes.
    stage(t0 + kC);
#endif
    // 2. Chunk-local inclusive cumsum of the log2-decays, one thread per key channel.
    for (int d = tid; d < kD; d += kThreads) {
      float gsum = 0.f;
#pragma unroll 8
      for (int i = 0; i < kC; ++i) {
        gsum += sG[i * kLd + d];
        sG[i * kLd + d] = gsum;
      }
      sDec[d] = ex2(gsum);
    }
    __syncthreads();
#if KDA_LM_TC
    // 3b (tensor cores, LM_TENSOR_CORES). Warp w < 4 takes channels [32 w, 32 w + 32) of every
    // entry of L and M: its lane holds rows g8 and g8 + 8 at channels 2 t4 (+1, +8, +9) of each k
    // step, which are also the (channel, j) pairs of its B fragments for the n tiles j < 8 and
    // j >= 8, so y = 1 / x of the same elements. Partial sums go to the [Kd; Qd] area (free until
    // 3a, which follows).
    {
      float* part = reinterpret_cast<float*>(smem + kOffKQ);  // [4][2][16][16], before 3a
      if (warp < 4) {
        float accl[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
        float accm[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll 1
        for (int ks = 0; ks < 2; ++ks) {
          const int k0 = warp * 32 + ks * 16;
          unsigned int akh[4], akl[4], aqh[4], aql[4], byh[2][2], byl[2][2];
#pragma unroll
          for (int rs = 0; rs < 2; ++rs)
#pragma unroll
            for (int cp = 0; cp < 2; ++cp) {
              const int i = g8 + 8 * rs, d = k0 + 2 * t4 + 8 * cp;
              float kx[2], qx[2], ky[2];
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const float gd = sG[i * kLd + d + e] - sG[7 * kLd + d + e];
                const float x = ex2(gd), y = ex2(-gd), kk = sK[i * kLd + d + e];
                kx[e] = kk * x;
                qx[e] = sQ[i * kLd + d + e] * x;
                ky[e] = kk * y;
              }
              split_bf16x2(kx[0], kx[1], akh[rs + 2 * cp], akl[rs + 2 * cp]);
              split_bf16x2(qx[0], qx[1], aqh[rs + 2 * cp], aql[rs + 2 * cp]);
              split_bf16x2(ky[0], ky[1], byh[rs][cp], byl[rs][cp]);
            }
#pragma unroll
          for (int nt = 0; nt < 2; ++nt) {
            mma_bf16(accl[nt], akh, byh[nt]);
            mma_bf16(accl[nt], akh, byl[nt]);
            mma_bf16(accl[nt], akl, byh[nt]);
            mma_bf16(accm[nt], aqh, byh[nt]);
            mma_bf16(accm[nt], aqh, byl[nt]);
            mma_bf16(accm[nt], aql, byh[nt]);
          }
        }
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int i = g8 + (e >> 1) * 8, j = nt * 8 + 2 * t4 + (e & 1);
            part[((warp * 2 + 0) * 16 + i) * 16 + j] = accl[nt][e];
            part[((warp * 2 + 1) * 16 + i) * 16 + j] = accm[nt][e];
          }
      }
      __syncthreads();
      // The four quarters in a fixed order (deterministic); zeros above the diagonal.
      for (int x = tid; x < 256; x += kThreads) {
        const int i = x >> 4, j = x & 15;
        float lk = 0.f, mq = 0.f;
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          lk += part[((w * 2 + 0) * 16 + i) * 16 + j];
          mq += part[((w * 2 + 1) * 16 + i) * 16 + j];
        }
        sL[i * kC + j] = j < i ? sBeta[i] * lk : 0.f;
        const unsigned short mhi = j <= i ? bf16_bits(mq) : (unsigned short)0;
        store_canon(smem + kOffMhi, i, j, kC, mhi);
        store_canon(smem + kOffMlo, i, j, kC, j <= i ? bf16_bits(mq - bf16_value(mhi)) : (unsigned short)0);
      }
      __syncthreads();  // 3a overwrites the partial sums
    }
#else
    // 3b. L and M: kPairLanes adjacent lanes share one (i, j) pair with j <= i (each takes every
    // kPairLanes-th channel; shuffles combine them), in whole rounds of the CTA so that every lane
    // of a warp reaches the shuffles; zeros above the diagonal.
#pragma unroll 1
    for (int round = 0; round < kPairRounds; ++round) {
      const int item = round * kThreads + tid;
      const int p = item / kPairLanes, part = item % kPairLanes;
      const bool valid = p < kPairs;
      const int pc = valid ? p : 0;
      int i = (int)((sqrtf(8.f * (float)pc + 1.f) - 1.f) * 0.5f);
      while ((i + 1) * (i + 2) / 2 <= pc) ++i;
      while (i * (i + 1) / 2 > pc) --i;
      const int j = pc - i * (i + 1) / 2;
      const float* gi = sG + i * kLd;
      const float* gj = sG + j * kLd;
      const float* ki = sK + i * kLd;
      const float* kj = sK + j * kLd;
      const float* qi = sQ + i * kLd;
      float lk = 0.f, mq = 0.f;
#pragma unroll 8
      for (int d = part; d < kD; d += kPairLanes) {
        const float x = ex2(gi[d] - gj[d]);
        const float kx = kj[d] * x;
        lk = fmaf(ki[d], kx, lk);
        mq = fmaf(qi[d], kx, mq);
      }
#pragma unroll
      for (int o = kPairLanes / 2; o > 0; o >>= 1) {
        lk += shfl_bfly(lk, o);
        mq += shfl_bfly(mq, o);
      }
      if (valid && part == 0) {
        sL[i * kC + j] = j < i ? sBeta[i] * lk : 0.f;
        const unsigned short mhi = bf16_bits(mq);
        store_canon(smem + kOffMhi, i, j, kC, mhi);
        store_canon(smem + kOffMlo, i, j, kC, bf16_bits(mq - bf16_value(mhi)));
        if (j < i) {
          sL[j * kC + i] = 0.f;
          store_canon(smem + kOffMhi, j, i, kC, 0);
          store_canon(smem + kOffMlo, j, i, kC, 0);
        }
      }
    }
#endif
    // 3a. Decayed bf16 operands in the MMA layouts: [Kd; Qd] (B of GEMM1, rows = tokens) and Kr^T
    // (A of STATE, rows = key channels).
    for (int i = tid; i < kC * kD; i += kThreads) {
      const int r = i / kD, d = i % kD;
      const float gi = sG[r * kLd + d], gt = sG[(kC - 1) * kLd + d];
      const float kk = sK[r * kLd + d], e = ex2(gi);
      store_canon(smem + kOffKQ, r, d, kD, bf16_bits(kk * e));
      store_canon(smem + kOffKQ, kC + r, d, kD, bf16_bits(sQ[r * kLd + d] * e));
      store_canon(smem + kOffKrT, d, r, kC, bf16_bits(kk * ex2(gt - gi)));
    }
    __syncthreads();  // 3c overwrites region A with S^T's terms
    // 3c. S from tensor memory: S^T as hi + lo bf16 (A of GEMM1, rows = value columns j, K = key
    // channels) from the chunk-start state, and S <- diag(2^Gtot) S written back for STATE.
    {
      const int d = quad * 32 + lane;
      const float dec = sDec[d];
      for (int cg = wset; cg < kBv / 16; cg += kWarpSets) {
        float v[16];
        tmem_ld16(tS + lane_field + cg * 16, v);
#pragma unroll
        for (int e = 0; e < 16; ++e) {
          const unsigned short hi = bf16_bits(v[e]);
          store_canon(smem + kOffShi, cg * 16 + e, d, kD, hi);
          store_canon(smem + kOffSlo, cg * 16 + e, d, kD, bf16_bits(v[e] - bf16_value(hi)));
          v[e] *= dec;
        }
        tmem_st16(tS + lane_field + cg * 16, v);
      }
      tmem_wait_st();
    }
    // Operands written by threads become visible to the tensor core's (async) proxy; the tensor-
    // memory stores are ordered before the MMAs by the fence pair around the barrier.
    fence_async_smem();
    tc05_before_sync();
    __syncthreads();
    // 4. GEMM1 on tcgen05: D1 = S^T [Kd; Qd]^T (S^T = hi + lo), 8 k steps of 16 key channels.
    if (tid == 0) {
      tc05_after_sync();
      const unsigned int shi = smem_addr(smem + kOffShi), slo = smem_addr(smem + kOffSlo);
      const unsigned int kq = smem_addr(smem + kOffKQ);
#pragma unroll
      for (int ks = 0; ks < kD / 16; ++ks) {
        const unsigned long long b = smem_desc(kq + ks * 256, kD);
        tc05_mma(tD1, smem_desc(shi + ks * 256, kD), b, kIdescG1, ks > 0 ? 1u : 0u);
        tc05_mma(tD1, smem_desc(slo + ks * 256, kD), b, kIdescG1, 1u);
      }
      tc05_commit(bar);
    }
    mbar_wait(bar, phase);
    phase ^= 1u;
    tc05_after_sync();
    // U' = beta (V - W): thread (quad, lane) reads D1's lane j = 32 quad + lane, W[i][j] for 16
    // tokens i a load; region B2 (U') replaces S^T, whose reads completed with the commit.
    if (quad * 32 < kBv) {
      const int j = quad * 32 + lane;
      for (int cg = wset; cg < kC / 16; cg += kWarpSets) {
        float w[16];
        tmem_ld16(tD1 + lane_field + cg * 16, w);
        if (j < kBv) {
#pragma unroll
          for (int e = 0; e < 16; ++e) {
            const int i = cg * 16 + e;
            sU[i * kBv + j] = sBeta[i] * (sV[i * kBv + j] - w[e]);
          }
        }
      }
    }
    __syncthreads();
    // 5. U = (I + L)^-1 U' by forward substitution down each column; U^T as hi + lo bf16 in the
    // MMA layout (A of OUT with rows j, B of STATE with rows j; K = tokens).
    for (int j = tid; j < kBv; j += kThreads) {
      for (int i = 0; i < kC; ++i) {
        float u = sU[i * kBv + j];
        for (int m = 0; m < i; ++m) u = fmaf(-sL[i * kC + m], sU[m * kBv + j], u);
        sU[i * kBv + j] = u;
        const unsigned short hi = bf16_bits(u);
        store_canon(smem + kOffUhi, j, i, kC, hi);
        store_canon(smem + kOffUlo, j, i, kC, bf16_bits(u - bf16_value(hi)));
      }
    }
    fence_async_smem();
    tc05_before_sync();
    __syncthreads();
    // 6. OUT and STATE on tcgen05, one commit for both:
    //    D1[:, C..2C) += U^T M^T (U_hi M_hi + U_lo M_hi + U_hi M_lo), i.e. out^T = (Qs + M U)^T;
    //    S += Kr^T U (U_hi + U_lo), S already scaled by 2^Gtot in 3c.
    if (tid == 0) {
      tc05_after_sync();
      const unsigned int uhi = smem_addr(smem + kOffUhi), ulo = smem_addr(smem + kOffUlo);
      const unsigned int mhi = smem_addr(smem + kOffMhi), mlo = smem_addr(smem + kOffMlo);
      const unsigned int krt = smem_addr(smem + kOffKrT);
#pragma unroll
      for (int ks = 0; ks < kC / 16; ++ks) {
        const unsigned long long ah = smem_desc(uhi + ks * 256, kC), al = smem_desc(ulo + ks * 256, kC);
        const unsigned long long bh = smem_desc(mhi + ks * 256, kC), bl = smem_desc(mlo + ks * 256, kC);
        tc05_mma(tD1 + kC, ah, bh, kIdescOut, 1u);
        tc05_mma(tD1 + kC, al, bh, kIdescOut, 1u);
        tc05_mma(tD1 + kC, ah, bl, kIdescOut, 1u);
        const unsigned long long kr = smem_desc(krt + ks * 256, kC);
        tc05_mma(tS, kr, ah, kIdescState, 1u);
        tc05_mma(tS, kr, al, kIdescState, 1u);
      }
      tc05_commit(bar);
    }
    mbar_wait(bar, phase);
    phase ^= 1u;
    tc05_after_sync();
    // out[i][j] = D1[j][C + i] for the chunk's real tokens (consecutive j across a warp's lanes).
    if (quad * 32 < kBv) {
      const int j = quad * 32 + lane;
      for (int cg = wset; cg < kC / 16; cg += kWarpSets) {
        float o[16];
        tmem_ld16(tD1 + kC + lane_field + cg * 16, o);
        if (j < kBv) {
#pragma unroll
          for (int e = 0; e < 16; ++e) {
            const int i = cg * 16 + e;
            if (i < count) store_bf16(a.out + ((t0 + i) * a.H + h) * (long long)kD + col0 + j, o[e]);
          }
        }
      }
    }
    // The next chunk's GEMM1 overwrites D1 after these loads (a barrier lies between); the next
    // pre-processing overwrites region A (U's terms), read by the MMAs that have completed.
    tc05_before_sync();
#if !STAGE
    __syncthreads();
#endif
  }
#if HAS_FINAL_STATE
  {
    const int d = quad * 32 + lane;
    for (int cg = wset; cg < kBv / 16; cg += kWarpSets) {
      float v[16];
      tmem_ld16(tS + lane_field + cg * 16, v);
#pragma unroll
      for (int e = 0; e < 16; ++e) a.final_state[sbase + (long long)(cg * 16 + e) * kD + d] = v[e];
    }
  }
#endif
  (void)sbase;
  // Every tensor-memory access is complete (tcgen05.ld waits in place): warp 0 frees the columns.
  tc05_before_sync();
  __syncthreads();
  if (warp == 0) {
    tc05_after_sync();
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" ::"r"(tmem), "n"((int)kTmemCols) : "memory");
  }
}

}  // namespace kda_tc05

extern "C" __global__ void __launch_bounds__(WARPS * 32) kda_fwd_chunked_tcgen05(
    const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k, const __nv_bfloat16* __restrict__ v,
    const __nv_bfloat16* __restrict__ g, const __nv_bfloat16* __restrict__ beta, const float* __restrict__ a_log,
    const float* __restrict__ dt_bias, const long long* __restrict__ cu_seqlens,
    const float* __restrict__ initial_state, __nv_bfloat16* __restrict__ out, float* __restrict__ final_state,
    long long T, int H, float scale, float lower_bound) {
  kda_tc05::kda_tc05_body(
      {q, k, v, g, beta, a_log, dt_bias, cu_seqlens, initial_state, out, final_state, T, H, scale, lower_bound});
}
