// rmsnorm_fwd seed template:
//   h = x (+ residual);  residual_out = h;  out = h * rsqrt(mean(h^2) + eps) * w (+ b)
//
// Compiled by NVRTC (device code only) with the op's defines (XT, WT, BT, RT, HAS_WEIGHT,
// HAS_BIAS, HAS_RESIDUAL, STORE_RSTD) and the knobs below. One module holds several entries, all
// instances of one template; RmsNormFwdOp::launch_plan (kernels/rmsnorm/rmsnorm_fwd_op.cpp) picks
// one per shape, so a single knob assignment suits every row length:
//   rmsnorm_fwd_tpr<T>    T threads per row, THREADS / T rows per CTA, for T = TPR, 2 TPR, ...,
//                         THREADS; grid.x = ceil(M / (THREADS / T))
//   rmsnorm_fwd_cluster   one row per CTA group: the row is split into equal slices over the c
//                         CTAs of a cluster (c = 2 ... CLUSTER, from the launch), which exchange
//                         partial sums through distributed shared memory; grid.x = M * c
// block.x = THREADS for all. Only when grid.x would exceed 2^31 - 1 is it split over grid.y (in
// whole clusters); the CTA index is blockIdx.y * gridDim.x + blockIdx.x, and CTAs past the last
// row do nothing (but still take part in every barrier).
//
// Knobs (each has a default here that matches the op's):
//   VEC         elements per vector access (1, 2, 4, 8; VEC * sizeof(XT) <= 16)
//   THREADS     threads per CTA (a power of two in [32, 1024])
//   TPR         the fewest threads per row (a power of two <= THREADS): the plan takes the smallest
//               power of two >= TPR whose threads hold the row in registers, at most THREADS
//   ITEMS       vectors per thread kept in registers, so a CTA holds THREADS * ITEMS * VEC
//               elements of a row (of a cluster slice) and reads them from global memory once
//   CLUSTER     the largest cluster the plan may split a row over (1: never); needs sm_90+
//   STAGE_KB    dynamic shared memory (KB) the plan may give a CTA for the part of its row (slice)
//               that does not fit the registers; that part is read once and kept there. The
//               kernel reads the size from %dynamic_smem_size; what still does not fit is re-read
//               from global memory for the output.
//   MIN_BLOCKS  second __launch_bounds__ argument (0: none)
//   LOAD_HINT   x and residual loads: 0 ld.global.nc, 1 ld.global.cg, 2 ld.global.nc.L1::no_allocate,
//               3 ld.global.nc.L2::256B, 4 ld.global
//   STORE_HINT  out and residual_out stores: 0 st.global, 1 st.global.cs (streaming)
//   WEIGHT_EARLY 1: the weight (and bias) of the register tile is loaded with x, before the row's
//               reduction, so its latency hides behind x's rather than following the reduction
//               (costs ITEMS * VEC * sizeof(WT) / 4 registers); 0: loaded for the output pass
//   EARLY_LAUNCH 1: launched as a programmatic dependent (sm_90+): each CTA lets the next kernel
//               launch at once (griddepcontrol.launch_dependents) and waits for the previous
//               kernel's writes (griddepcontrol.wait) before its first global access, so the next
//               kernel's launch and CTA start overlap this one's work (latency of short kernels)
//   PERSISTENT_CTAS > 0: the plan launches at most this many CTAs (rmsnorm_fwd_tpr<T> entries;
//               cluster launches ignore it) and each walks the row groups g, g + grid, ...; on
//               the vector path it loads the next group's register tile before it reduces and
//               writes the current one, so loads stay in flight across groups (no tail wave,
//               no CTA start per group). Two tiles: keep ITEMS * VEC small
//   SPREAD_CTAS read by the launch plan only (more threads, then CTAs, per row when rows are few)
//   WIDE_ROWS   > 0 (and THREADS < 1024): one more entry, rmsnorm_fwd_wide, a CTA of 1024 threads
//               per row (__launch_bounds__(1024, 1)); the plan takes it for M <= WIDE_ROWS when
//               the row would otherwise span several CTAs (a cluster, or a CTA re-reading what its
//               registers cannot hold) and 1024 threads hold it in registers: one CTA's barrier
//               instead of a cluster's, for decode batches of long rows
//   SMALL_THREADS > 0: entries rmsnorm_fwd_small<T> (T = TPR ... SMALL_THREADS), a second register
//               tile for rows that fit one small CTA: SMALL_THREADS threads per CTA, SMALL_ITEMS
//               vectors a thread, __launch_bounds__(SMALL_THREADS, SMALL_MIN_BLOCKS). Fewer
//               registers and smaller CTAs give many CTAs an SM on short rows, whose loads then
//               overlap other CTAs' reductions and stores; the plan takes them for a row that fits
//               when the shape has at least SMALL_MIN_ROWS rows. Their tile never holds the weight
//               (WEIGHT_EARLY is for the other entries); no rest loops, 32-bit columns and an
//               approximate division by N keep their per-row instructions few
//   SMALL_WEIGHT_PREFETCH 1: the small entries prefetch their weight (and bias) words into L1
//               with x's loads (prefetch.global.L1), so the weight read after the row's reduction
//               waits on L1 rather than L2, at no register cost (their tile has no weight slots);
//               2: only in grids of at most two waves (2048 / SMALL_THREADS CTAs an SM), where
//               most CTAs start with the weight outside L1; in longer grids the prefetches cost
//               more L1 work than they save
//   SMALL_STAGE 1: the small entries take their rows into shared memory by one bulk copy per CTA
//               (sm_90+) instead of a register tile (small_staged.cuh); the plan sizes it
//
// Layout: a row (or a cluster slice) is a run of units: VEC-element vectors when N % VEC == 0 and
// every base pointer is aligned for them, else single elements (the scalar path, for any N). Thread
// t of a row owns units t, t + T, t + 2 T, ... of its run, so every warp-wide access is contiguous.
// Its first ITEMS * VEC elements stay in registers (raw words of XT; fp32 h with a residual), the
// next ones go to the stage in shared memory, the rest are re-read. Sums of squares are
// accumulated in fp32 with fmaf, reduced with a shfl.sync.bfly butterfly over the row's lanes,
// then (T > 32) once through shared memory (one barrier), then (cluster) over the CTAs' partials in
// rank order: every thread ends with the bitwise-identical sum, so results are deterministic. Row
// offsets are 64-bit; columns too, except in the small entries, whose rows fit their tile.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#ifndef XT
#define XT __nv_bfloat16
#endif
#ifndef WT
#define WT float
#endif
#ifndef BT
#define BT float
#endif
#ifndef RT
#define RT XT
#endif
#ifndef HAS_WEIGHT
#define HAS_WEIGHT 1
#endif
#ifndef HAS_BIAS
#define HAS_BIAS 0
#endif
#ifndef HAS_RESIDUAL
#define HAS_RESIDUAL 0
#endif
#ifndef STORE_RSTD
#define STORE_RSTD 0
#endif
#ifndef VEC
#define VEC (16 / (int)sizeof(XT))
#endif
#ifndef THREADS
#define THREADS 512
#endif
#ifndef TPR
#define TPR 8
#endif
#ifndef ITEMS
#define ITEMS 8
#endif
#ifndef CLUSTER
#define CLUSTER 4
#endif
#ifndef STAGE_KB
#define STAGE_KB 0
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 2
#endif
#ifndef LOAD_HINT
#define LOAD_HINT 0
#endif
#ifndef STORE_HINT
#define STORE_HINT 0
#endif
#ifndef WEIGHT_EARLY
#define WEIGHT_EARLY 0
#endif
#ifndef EARLY_LAUNCH
#define EARLY_LAUNCH 0
#endif
#ifndef PERSISTENT_CTAS
#define PERSISTENT_CTAS 0
#endif
#ifndef WIDE_ROWS
#define WIDE_ROWS 0
#endif
#ifndef SMALL_THREADS
#define SMALL_THREADS 0
#endif
#ifndef SMALL_ITEMS
#define SMALL_ITEMS 1
#endif
#ifndef SMALL_MIN_BLOCKS
#define SMALL_MIN_BLOCKS 0
#endif
#ifndef SMALL_WEIGHT_PREFETCH
#define SMALL_WEIGHT_PREFETCH 0
#endif
#ifndef SMALL_STAGE
#define SMALL_STAGE 0
#endif

#if EARLY_LAUNCH && defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "EARLY_LAUNCH needs griddepcontrol (sm_90 or later); use EARLY_LAUNCH=0 for this arch"
#endif
#if CLUSTER > 1 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "CLUSTER > 1 needs thread-block clusters (sm_90 or later); use CLUSTER=1 for this arch"
#endif

#if LOAD_HINT == 0
#define PTXEVO_LDX "ld.global.nc"
#elif LOAD_HINT == 1
#define PTXEVO_LDX "ld.global.cg"
#elif LOAD_HINT == 2
#define PTXEVO_LDX "ld.global.nc.L1::no_allocate"
#elif LOAD_HINT == 3
#define PTXEVO_LDX "ld.global.nc.L2::256B"
#elif LOAD_HINT == 4
#define PTXEVO_LDX "ld.global"
#else
#error "LOAD_HINT must be 0, 1, 2, 3 or 4"
#endif

#if STORE_HINT == 0
#define PTXEVO_STO "st.global"
#elif STORE_HINT == 1
#define PTXEVO_STO "st.global.cs"
#else
#error "STORE_HINT must be 0 or 1"
#endif

#if MIN_BLOCKS > 0
#define PTXEVO_BOUNDS __launch_bounds__(THREADS, MIN_BLOCKS)
#else
#define PTXEVO_BOUNDS __launch_bounds__(THREADS)
#endif

namespace rmsnorm_seed {

// Compile-time constants as enumerators: namespace-scope constexpr variables would be emitted as
// .global variables in the PTX, and a candidate must have no device globals.
enum : int {
  kVec = VEC,
  kThreads = THREADS,
  kMinTpr = TPR,
  kItems = ITEMS,
  kCluster = CLUSTER,
  kXBytes = kVec * (int)sizeof(XT),  // bytes per x / out vector
  kWBytes = kVec * (int)sizeof(WT),  // bytes per weight vector
  kBBytes = kVec * (int)sizeof(BT),  // bytes per bias vector
  kWideThreads = 1024,               // threads of rmsnorm_fwd_wide's CTA: one row each
  kSmallThreads = SMALL_THREADS > 0 ? SMALL_THREADS : 32,  // CTA of the rmsnorm_fwd_small entries
  kSmallItems = SMALL_ITEMS,                                // their vectors per thread
};

static_assert(kThreads >= 32 && kThreads <= 1024 && (kThreads & (kThreads - 1)) == 0,
              "THREADS: a power of two in [32, 1024]");
static_assert(kMinTpr >= 1 && (kMinTpr & (kMinTpr - 1)) == 0 && kMinTpr <= kThreads,
              "TPR: a power of two <= THREADS");
static_assert(kVec >= 1 && (kVec & (kVec - 1)) == 0 && kXBytes <= 16, "VEC: a power of two with VEC * sizeof(XT) <= 16");
static_assert(kItems >= 1, "ITEMS >= 1");
static_assert(kSmallThreads >= 32 && kSmallThreads <= 1024 && (kSmallThreads & (kSmallThreads - 1)) == 0,
              "SMALL_THREADS: 0 or a power of two in [32, 1024]");
static_assert(kSmallItems >= 1, "SMALL_ITEMS >= 1");
static_assert(kCluster == 1 || kCluster == 2 || kCluster == 4 || kCluster == 8 || kCluster == 16,
              "CLUSTER: 1, 2, 4, 8 or 16");

// Words of 32 bits that hold B bytes (a 2-byte value sits in the low half of one word).
template <int B>
struct Words {
  enum : int { value = B >= 4 ? B / 4 : 1 };
};

// ---- element conversions (raw bits held in 32-bit words, little-endian halves) ----
template <typename T>
struct Elem;
template <>
struct Elem<float> {
  static __device__ __forceinline__ float get(const unsigned int* w, int e) { return __uint_as_float(w[e]); }
};
template <>
struct Elem<__nv_bfloat16> {
  static __device__ __forceinline__ float get(const unsigned int* w, int e) {
    return (e & 1) ? __uint_as_float(w[e >> 1] & 0xffff0000u) : __uint_as_float(w[e >> 1] << 16);
  }
  // d.hi = rn(hi), d.lo = rn(lo)
  static __device__ __forceinline__ unsigned int pack2(float lo, float hi) {
    unsigned int d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
  }
};
template <>
struct Elem<__half> {
  static __device__ __forceinline__ float get(const unsigned int* w, int e) {
    const unsigned int b = (e & 1) ? (w[e >> 1] >> 16) : (w[e >> 1] & 0xffffu);
    return __half2float(__ushort_as_half((unsigned short)b));
  }
  static __device__ __forceinline__ unsigned int pack2(float lo, float hi) {
    unsigned int d;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
  }
};

// Packs n floats (n = VEC for a vector, 1 for a scalar) into words of T.
template <typename T, int n>
__device__ __forceinline__ void pack(const float* y, unsigned int* w) {
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int e = 0; e < n; ++e) w[e] = __float_as_uint(y[e]);
  } else if constexpr (n == 1) {
    w[0] = Elem<T>::pack2(y[0], y[0]) & 0xffffu;
  } else {
#pragma unroll
    for (int e = 0; e < n; e += 2) w[e >> 1] = Elem<T>::pack2(y[e], y[e + 1]);
  }
}

// ---- global memory access through inline PTX; B is the byte count (2, 4, 8, 16 or 32) ----
#define PTXEVO_DEFINE_LOAD(NAME, OP)                                                                   \
  template <int B>                                                                                     \
  __device__ __forceinline__ void NAME(unsigned int* w, const void* p) {                               \
    if constexpr (B > 16) {                                                                            \
      NAME<16>(w, p);                                                                                  \
      NAME<B - 16>(w + 4, static_cast<const char*>(p) + 16);                                           \
    } else if constexpr (B == 16) {                                                                    \
      asm(OP ".v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3]) : "l"(p)); \
    } else if constexpr (B == 8) {                                                                     \
      asm(OP ".v2.u32 {%0, %1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(p));                             \
    } else if constexpr (B == 4) {                                                                     \
      asm(OP ".u32 %0, [%1];" : "=r"(w[0]) : "l"(p));                                                  \
    } else {                                                                                           \
      static_assert(B == 2, "load of 2, 4, 8, 16 or 32 bytes");                                        \
      unsigned short h;                                                                                \
      asm(OP ".u16 %0, [%1];" : "=h"(h) : "l"(p));                                                     \
      w[0] = h;                                                                                        \
    }                                                                                                  \
  }

PTXEVO_DEFINE_LOAD(load_x, PTXEVO_LDX)
PTXEVO_DEFINE_LOAD(load_w, "ld.global.nc")

// The line holding p into L1 (no register, nothing waits on it).
__device__ __forceinline__ void prefetch_l1(const void* p) { asm volatile("prefetch.global.L1 [%0];" ::"l"(p)); }

// Whether this CTA of a small entry prefetches its weight (SMALL_WEIGHT_PREFETCH).
__device__ __forceinline__ bool small_weight_prefetch() {
  if constexpr (SMALL_WEIGHT_PREFETCH == 2) {
    unsigned int sms;
    asm("mov.u32 %0, %%nsmid;" : "=r"(sms));
    return gridDim.y == 1 && gridDim.x <= 2 * sms * (2048u / kSmallThreads);
  }
  return SMALL_WEIGHT_PREFETCH == 1;
}

template <int B>
__device__ __forceinline__ void store_out(void* p, const unsigned int* w) {
  if constexpr (B > 16) {
    store_out<16>(p, w);
    store_out<B - 16>(static_cast<char*>(p) + 16, w + 4);
  } else if constexpr (B == 16) {
    asm volatile(PTXEVO_STO ".v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                 : "memory");
  } else if constexpr (B == 8) {
    asm volatile(PTXEVO_STO ".v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(w[0]), "r"(w[1]) : "memory");
  } else if constexpr (B == 4) {
    asm volatile(PTXEVO_STO ".u32 [%0], %1;" ::"l"(p), "r"(w[0]) : "memory");
  } else {
    static_assert(B == 2, "store of 2, 4, 8, 16 or 32 bytes");
    asm volatile(PTXEVO_STO ".u16 [%0], %1;" ::"l"(p), "h"((unsigned short)w[0]) : "memory");
  }
}

// ---- the stage: dynamic shared memory, one B-byte slot per (overflow unit, thread) ----
extern __shared__ __align__(16) unsigned char stage[];

template <int B>
__device__ __forceinline__ void stage_put(unsigned char* p, const unsigned int* w) {
  if constexpr (B >= 16) {
#pragma unroll
    for (int i = 0; i < B / 16; ++i)
      reinterpret_cast<uint4*>(p)[i] = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
  } else if constexpr (B == 8) {
    *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
  } else if constexpr (B == 4) {
    *reinterpret_cast<unsigned int*>(p) = w[0];
  } else {
    static_assert(B == 2, "stage slots of 2, 4, 8, 16 or 32 bytes");
    *reinterpret_cast<unsigned short*>(p) = (unsigned short)w[0];
  }
}

template <int B>
__device__ __forceinline__ void stage_get(unsigned int* w, const unsigned char* p) {
  if constexpr (B >= 16) {
#pragma unroll
    for (int i = 0; i < B / 16; ++i) {
      const uint4 v = reinterpret_cast<const uint4*>(p)[i];
      w[4 * i] = v.x;
      w[4 * i + 1] = v.y;
      w[4 * i + 2] = v.z;
      w[4 * i + 3] = v.w;
    }
  } else if constexpr (B == 8) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    w[0] = v.x;
    w[1] = v.y;
  } else if constexpr (B == 4) {
    w[0] = *reinterpret_cast<const unsigned int*>(p);
  } else {
    static_assert(B == 2, "stage slots of 2, 4, 8, 16 or 32 bytes");
    w[0] = *reinterpret_cast<const unsigned short*>(p);
  }
}

__device__ __forceinline__ float shfl_bfly(float v, int lane_mask) {
  float r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r) : "f"(v), "r"(lane_mask));
  return r;
}

__device__ __forceinline__ float rsqrt_approx(float v) {
  float r;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
}

// Sum over the kTpr threads of a row through the slot array `red` (kThreads / 32 floats of
// shared memory); every thread of the CTA must call it (it may hold a barrier).
template <int kTpr>
__device__ __forceinline__ float row_sum_through(float v, float* red) {
  constexpr int kLanes = kTpr < 32 ? kTpr : 32;  // lanes of one row inside a warp
  constexpr int kWarpsPerRow = kTpr > 32 ? kTpr / 32 : 1;
#pragma unroll
  for (int o = kLanes / 2; o > 0; o >>= 1) v += shfl_bfly(v, o);
  if constexpr (kTpr > 32) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = red[(warp / kWarpsPerRow) * kWarpsPerRow + lane % kWarpsPerRow];
#pragma unroll
    for (int o = kWarpsPerRow / 2; o > 0; o >>= 1) v += shfl_bfly(v, o);
  }
  return v;
}

// The row sum with its own slot array. row_sum_alt has another: a loop over row groups
// alternates the two, so a warp that runs ahead into the next group's sum cannot overwrite slots
// a slower warp still reads. (row_sum's array keeps its name: recorded PTX must stay identical.)
template <int kTpr>
__device__ __forceinline__ float row_sum(float v) {
  __shared__ float red[kTpr > 32 ? kThreads / 32 : 1];
  return row_sum_through<kTpr>(v, red);
}
template <int kTpr>
__device__ __forceinline__ float row_sum_alt(float v) {
  __shared__ float red_alt[kTpr > 32 ? kThreads / 32 : 1];
  return row_sum_through<kTpr>(v, red_alt);
}
#if SMALL_THREADS > 0
// The row sum of an rmsnorm_fwd_small CTA (kSmallThreads threads, kSmallThreads / kTpr rows).
template <int kTpr>
__device__ __forceinline__ float row_sum_small(float v) {
  __shared__ float red_small[kTpr > 32 ? kSmallThreads / 32 : 1];
  return row_sum_through<kTpr>(v, red_small);
}
#endif
#if WIDE_ROWS > 0
// The row sum of rmsnorm_fwd_wide's CTA (one row over all its threads).
__device__ __forceinline__ float row_sum_wide(float v) {
  __shared__ float red_wide[kWideThreads / 32];
  return row_sum_through<kWideThreads>(v, red_wide);
}
#endif

// Sum of the CTA sums `v` of a cluster (every thread of every CTA calls it with its CTA's sum).
// The barrier.cluster.arrive.relaxed at kernel start pairs with the first wait here: after it
// every CTA of the cluster runs, so its shared memory may be written. CTA i's sum goes to slot i
// of every CTA; after the second (release / acquire) barrier each CTA adds the slots in rank
// order, so all CTAs get the bitwise-same total. Nothing touches another CTA's shared memory
// after that barrier, so CTAs may exit at once.
__device__ __forceinline__ float cluster_sum(float v, unsigned int rank, unsigned int nranks) {
  __shared__ float slots[16];
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
  if (threadIdx.x < nranks) {
    const unsigned int local = (unsigned int)__cvta_generic_to_shared(&slots[rank]);
    unsigned int remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"((unsigned int)threadIdx.x));
    asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(remote), "f"(v) : "memory");
  }
  asm volatile("barrier.cluster.arrive.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
  float total = 0.f;
  for (unsigned int i = 0; i < nranks; ++i) total += slots[i];
  return total;
}

struct Args {
  const XT* __restrict__ x;
  const WT* __restrict__ w;
  const BT* __restrict__ b;
  const XT* __restrict__ res;
  XT* __restrict__ out;
  RT* __restrict__ res_out;
  float* __restrict__ rstd;
  long long M, N;
  float eps;
};

// The register tile: kIt slots (ITEMS, or SMALL_ITEMS for the small entries) of VEC elements as
// raw words of XT, for x and (with a residual) for the residual; h = x + residual is recomputed in
// fp32 from them, bitwise the same each time. Unit j of kU elements holds elements j * kU ...
// j * kU + kU - 1, i.e. slot (j * kU + e) / VEC, position (j * kU + e) % VEC. kEarly: the vector
// path's weight (and bias) words too, loaded with x (WEIGHT_EARLY; never for the small entries,
// whose occupancy needs the registers).
template <int kIt, bool kEarly = (WEIGHT_EARLY != 0)>
struct TileOf {
  unsigned int x[kIt][Words<kXBytes>::value];
#if HAS_RESIDUAL
  unsigned int r[kIt][Words<kXBytes>::value];
#endif
#if HAS_WEIGHT
  unsigned int w[kEarly ? kIt : 1][Words<kWBytes>::value];
#endif
#if HAS_BIAS
  unsigned int b[kEarly ? kIt : 1][Words<kBBytes>::value];
#endif
};
using Tile = TileOf<kItems>;

// Unit `u` of x (and the residual) at element offset `off`: h in fp32, plus the raw x words that
// the tile and the stage keep when there is no residual. With a residual, residual_out = h.
template <int kU>
__device__ __forceinline__ void load_unit(const Args& a, long long off, float* h, unsigned int* xw) {
  load_x<kU * (int)sizeof(XT)>(xw, a.x + off);
#pragma unroll
  for (int e = 0; e < kU; ++e) h[e] = Elem<XT>::get(xw, e);
#if HAS_RESIDUAL
  unsigned int rw[Words<kU * (int)sizeof(XT)>::value];
  load_x<kU * (int)sizeof(XT)>(rw, a.res + off);
#pragma unroll
  for (int e = 0; e < kU; ++e) h[e] += Elem<XT>::get(rw, e);
#endif
}

template <int kU>
__device__ __forceinline__ void store_residual(const Args& a, long long off, const float* h) {
#if HAS_RESIDUAL
  unsigned int o[Words<kU * (int)sizeof(RT)>::value];
  pack<RT, kU>(h, o);
  store_out<kU * (int)sizeof(RT)>(a.res_out + off, o);
#endif
}

// out at element offset `off` (column `col`) from h and the row's rstd r. kEarly: the weight and
// bias words are `we` / `be` (loaded with x), else they are loaded here.
template <int kU, bool kEarly = false>
__device__ __forceinline__ void emit(const Args& a, long long off, long long col, const float* h, float r,
                                     const unsigned int* we = nullptr, const unsigned int* be = nullptr) {
  float y[kU];
#pragma unroll
  for (int e = 0; e < kU; ++e) y[e] = h[e] * r;
#if HAS_WEIGHT
  unsigned int wr[Words<kU * (int)sizeof(WT)>::value];
  if constexpr (kEarly) {
#pragma unroll
    for (int i = 0; i < Words<kU * (int)sizeof(WT)>::value; ++i) wr[i] = we[i];
  } else {
    load_w<kU * (int)sizeof(WT)>(wr, a.w + col);
  }
#pragma unroll
  for (int e = 0; e < kU; ++e) y[e] *= Elem<WT>::get(wr, e);
#endif
#if HAS_BIAS
  unsigned int br[Words<kU * (int)sizeof(BT)>::value];
  if constexpr (kEarly) {
#pragma unroll
    for (int i = 0; i < Words<kU * (int)sizeof(BT)>::value; ++i) br[i] = be[i];
  } else {
    load_w<kU * (int)sizeof(BT)>(br, a.b + col);
  }
#pragma unroll
  for (int e = 0; e < kU; ++e) y[e] += Elem<BT>::get(br, e);
#endif
  unsigned int o[Words<kU * (int)sizeof(XT)>::value];
  pack<XT, kU>(y, o);
  store_out<kU * (int)sizeof(XT)>(a.out + off, o);
}

template <int kU, int kIt, bool kEarly>
__device__ __forceinline__ void tile_get(const TileOf<kIt, kEarly>& tl, int j, float* h) {
#pragma unroll
  for (int e = 0; e < kU; ++e) {
    const int s = (j * kU + e) / kVec, p = (j * kU + e) % kVec;
    h[e] = Elem<XT>::get(tl.x[s], p);
#if HAS_RESIDUAL
    h[e] += Elem<XT>::get(tl.r[s], p);
#endif
  }
}

template <bool kNarrow>
struct IndexOf {
  using type = long long;
};
template <>
struct IndexOf<true> {
  using type = int;
};

// A row (or, clustered, this CTA's slice of it) in units of kU elements: kU = VEC on the vector
// path, 1 on the scalar path. Thread t owns units t, t + kTpr, ... of the run [u0, u0 + len).
// kFits: the caller guarantees the run fits the register tile (len <= kR * kTpr), so there is no
// rest to read and in-row indices are 32-bit (the small entries: fewer instructions a row).
template <int kTpr, bool kClustered, int kU, int kIt = kItems, bool kFits = false>
struct Run {
  enum : int {
    kR = kIt * kVec / kU,  // units per thread in registers
    kXB = kU * (int)sizeof(XT),
    kSlot = HAS_RESIDUAL ? kU * 4 : kXB,  // stage bytes per unit: fp32 h with a residual, raw x without
  };
  using Idx = typename IndexOf<kFits>::type;  // an index within the row
  Idx u0, len;
  long long rbase;
  __device__ __forceinline__ Run(const Args& a, long long row, bool active, unsigned int rank, unsigned int nranks) {
    const Idx nu = (Idx)(a.N / kU);
    u0 = 0;
    len = nu;
    if constexpr (kClustered) {  // slices of ceil(nu / nranks) units (nranks is a power of two)
      const Idx s = (nu + nranks - 1) >> (__ffs(nranks) - 1);
      u0 = min(nu, (Idx)rank * s);
      len = min(nu - u0, s);
    }
    rbase = (active ? row : 0) * a.N;  // the row's first element
  }
};

#if STAGE_KB > 0
// Stage slots per thread: the plan sizes the dynamic shared memory; the kernel reads it back.
template <int kSlot>
__device__ __forceinline__ long long stage_slots() {
  unsigned int dyn;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  return dyn / (unsigned int)(kThreads * kSlot);
}
// Slot s of this thread.
template <int kSlot>
__device__ __forceinline__ unsigned char* stage_slot(long long s) {
  return stage + (s * kThreads + threadIdx.x) * kSlot;
}
#endif

// Loads the register units of the run into the tile. Every load is issued before any value is
// used: a use between two loads would wait for the first, serialising their latencies, while
// this way ITEMS loads per thread are in flight at once.
template <int kTpr, bool kClustered, int kU, int kIt, bool kFits, bool kEarly>
__device__ __forceinline__ void tile_load(const Args& a, const Run<kTpr, kClustered, kU, kIt, kFits>& run,
                                          TileOf<kIt, kEarly>& tl) {
  using Idx = typename Run<kTpr, kClustered, kU, kIt, kFits>::Idx;
  const int t = threadIdx.x % kTpr;
  if constexpr (kU == kVec) {  // unit j is slot j
    // kFits: a small entry, whose weight is read after the reduction (SMALL_WEIGHT_PREFETCH).
    const bool prefetch_w = kFits && !kEarly && small_weight_prefetch();
#pragma unroll
    for (int j = 0; j < kIt; ++j) {
      const Idx k = t + (Idx)j * kTpr;
      if (k < run.len) {
        const long long off = run.rbase + (run.u0 + k) * kU;
        load_x<kXBytes>(tl.x[j], a.x + off);
#if HAS_RESIDUAL
        load_x<kXBytes>(tl.r[j], a.res + off);
#endif
#if HAS_WEIGHT
        if constexpr (kEarly) load_w<kWBytes>(tl.w[j], a.w + (run.u0 + k) * kU);
#endif
#if HAS_BIAS
        if constexpr (kEarly) load_w<kBBytes>(tl.b[j], a.b + (run.u0 + k) * kU);
#endif
        if (prefetch_w) {
#if HAS_WEIGHT
          prefetch_l1(a.w + (run.u0 + k) * kU);
#endif
#if HAS_BIAS
          prefetch_l1(a.b + (run.u0 + k) * kU);
#endif
        }
      }
    }
  } else {  // single elements, slot by slot: VEC loads in flight, then packed into the slot
#pragma unroll
    for (int s = 0; s < kIt; ++s) {
      unsigned int xe[kVec];
#if HAS_RESIDUAL
      unsigned int re[kVec];
#endif
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const Idx k = t + (Idx)(s * kVec + e) * kTpr;
        if (k < run.len) {
          const long long off = run.rbase + run.u0 + k;
          load_x<(int)sizeof(XT)>(&xe[e], a.x + off);
#if HAS_RESIDUAL
          load_x<(int)sizeof(XT)>(&re[e], a.res + off);
#endif
        }
      }
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        if (t + (Idx)(s * kVec + e) * kTpr < run.len) {
          if constexpr (sizeof(XT) == 4) {
            tl.x[s][e] = xe[e];
#if HAS_RESIDUAL
            tl.r[s][e] = re[e];
#endif
          } else {  // validity falls with e, so an even half is always set before its odd neighbour
            tl.x[s][e >> 1] = (e & 1) ? (tl.x[s][e >> 1] | (xe[e] << 16)) : xe[e];
#if HAS_RESIDUAL
            tl.r[s][e >> 1] = (e & 1) ? (tl.r[s][e >> 1] | (re[e] << 16)) : re[e];
#endif
          }
        }
      }
    }
  }
}

// The first pass after the tile is loaded (active rows only): stores residual_out, reads the rest
// of the run into the stage or past it, returns this thread's sum of squares.
template <int kTpr, bool kClustered, int kU, int kIt, bool kFits, bool kEarly>
__device__ __forceinline__ float pass1_rest(const Args& a, const Run<kTpr, kClustered, kU, kIt, kFits>& run,
                                            TileOf<kIt, kEarly>& tl) {
  using R = Run<kTpr, kClustered, kU, kIt, kFits>;
  const int t = threadIdx.x % kTpr;
  float ss = 0.f;
#pragma unroll
  for (int j = 0; j < R::kR; ++j) {
    const typename R::Idx k = t + (typename R::Idx)j * kTpr;
    if (k < run.len) {
      float h[kU];
      tile_get<kU>(tl, j, h);
      store_residual<kU>(a, run.rbase + (run.u0 + k) * kU, h);
#pragma unroll
      for (int e = 0; e < kU; ++e) ss = fmaf(h[e], h[e], ss);
    }
  }
  if constexpr (!kFits) {  // the rest of the run: the stage, then global memory
#if STAGE_KB > 0
    const long long slots = stage_slots<R::kSlot>();
    long long s = 0;
#endif
    for (long long k = t + (long long)R::kR * kTpr; k < run.len; k += kTpr) {
      const long long col = (run.u0 + k) * kU;
      float h[kU];
      unsigned int xw[Words<R::kXB>::value];
      load_unit<kU>(a, run.rbase + col, h, xw);
      store_residual<kU>(a, run.rbase + col, h);
#if STAGE_KB > 0
      if (s < slots) {
#if HAS_RESIDUAL
        unsigned int hw[kU];
#pragma unroll
        for (int e = 0; e < kU; ++e) hw[e] = __float_as_uint(h[e]);
        stage_put<R::kSlot>(stage_slot<R::kSlot>(s), hw);
#else
        stage_put<R::kSlot>(stage_slot<R::kSlot>(s), xw);
#endif
      }
      ++s;
#endif
#pragma unroll
      for (int e = 0; e < kU; ++e) ss = fmaf(h[e], h[e], ss);
    }
  }
  return ss;
}

// First pass (active rows only): loads the run, stores residual_out, keeps the tile (and the
// stage), returns this thread's sum of squares.
template <int kTpr, bool kClustered, int kU, int kIt, bool kFits, bool kEarly>
__device__ __forceinline__ float pass1(const Args& a, const Run<kTpr, kClustered, kU, kIt, kFits>& run,
                                       TileOf<kIt, kEarly>& tl) {
  tile_load<kTpr, kClustered, kU>(a, run, tl);
  return pass1_rest<kTpr, kClustered, kU>(a, run, tl);
}

// Second pass (active rows only): out from the tile, the stage, and re-reads of the rest.
template <int kTpr, bool kClustered, int kU, int kIt, bool kFits, bool kEarly>
__device__ __forceinline__ void pass2(const Args& a, const Run<kTpr, kClustered, kU, kIt, kFits>& run,
                                      const TileOf<kIt, kEarly>& tl, float r) {
  using R = Run<kTpr, kClustered, kU, kIt, kFits>;
  const int t = threadIdx.x % kTpr;
#pragma unroll
  for (int j = 0; j < R::kR; ++j) {
    const typename R::Idx k = t + (typename R::Idx)j * kTpr;
    if (k < run.len) {
      const long long col = (run.u0 + k) * kU;
      float h[kU];
      tile_get<kU>(tl, j, h);
      if constexpr (kEarly && kU == kVec) {  // the vector path loaded them with x (unit j is slot j)
        const unsigned int* we = nullptr;
        const unsigned int* be = nullptr;
#if HAS_WEIGHT
        we = tl.w[j];
#endif
#if HAS_BIAS
        be = tl.b[j];
#endif
        emit<kU, true>(a, run.rbase + col, col, h, r, we, be);
      } else {
        emit<kU>(a, run.rbase + col, col, h, r);
      }
    }
  }
  if constexpr (!kFits) {  // the rest of the run: the stage, then global memory
#if STAGE_KB > 0
    const long long slots = stage_slots<R::kSlot>();
    long long s = 0;
#endif
    for (long long k = t + (long long)R::kR * kTpr; k < run.len; k += kTpr) {
      const long long col = (run.u0 + k) * kU;
      float h[kU];
#if STAGE_KB > 0
      if (s < slots) {
#if HAS_RESIDUAL
        unsigned int hw[kU];
        stage_get<R::kSlot>(hw, stage_slot<R::kSlot>(s));
#pragma unroll
        for (int e = 0; e < kU; ++e) h[e] = __uint_as_float(hw[e]);
#else
        unsigned int xw[Words<R::kSlot>::value];
        stage_get<R::kSlot>(xw, stage_slot<R::kSlot>(s));
#pragma unroll
        for (int e = 0; e < kU; ++e) h[e] = Elem<XT>::get(xw, e);
#endif
      } else
#endif
      {  // re-read: x + residual in fp32 gives the bitwise-same h
        unsigned int xw[Words<R::kXB>::value];
        load_unit<kU>(a, run.rbase + col, h, xw);
      }
#if STAGE_KB > 0
      ++s;
#endif
      emit<kU>(a, run.rbase + col, col, h, r);
    }
  }
}

template <typename T, int kElems>
__device__ __forceinline__ bool aligned_for(const T* p) {
  constexpr int b = kElems * (int)sizeof(T);
  constexpr int need = b < 16 ? b : 16;  // vectors wider than 16 bytes move in 16-byte pieces
  return ((unsigned long long)p & (unsigned long long)(need - 1)) == 0;
}

// kWide: rmsnorm_fwd_wide's CTA of kWideThreads threads, one row (kTpr = kWideThreads). kSmall:
// an rmsnorm_fwd_small CTA (kSmallThreads threads, kSmallItems vectors a thread).
template <int kTpr, bool kClustered, bool kWide = false, bool kSmall = false>
__device__ __forceinline__ void rmsnorm_fwd_body(const Args& a) {
  static_assert(!kWide || (kTpr == kWideThreads && !kClustered), "the wide entry: one row per CTA");
  static_assert(!kSmall || (kTpr <= kSmallThreads && !kClustered && !kWide), "a small entry: rows within its CTA");
  constexpr int kCta = kSmall ? kSmallThreads : kThreads;  // threads of this CTA
  constexpr int kIt = kSmall ? kSmallItems : kItems;       // vectors a thread keeps
  unsigned int rank = 0, nranks = 1;
  if constexpr (kClustered) {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
    asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(nranks));
    // The plan launches clusters of 2, 4, 8 or 16 CTAs along x: shifts instead of 64-bit divisions
    // (a call that would spill).
    if (nranks & (nranks - 1)) __trap();
  }
#if EARLY_LAUNCH
  // The next kernel may start now; its own wait below keeps it from reading before this one's
  // writes are complete and visible. Nothing global is read here before the previous kernel's.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  const long long cta = (long long)blockIdx.y * gridDim.x + blockIdx.x;
  const long long row = kWide         ? cta
                       : kClustered ? cta >> (__ffs(nranks) - 1)
                                    : cta * (kCta / kTpr) + threadIdx.x / kTpr;
  const bool active = row < a.M;
  // Null (absent) pointers count as aligned.
  bool vec_ok = a.N % kVec == 0 && aligned_for<XT, kVec>(a.x) && aligned_for<XT, kVec>(a.out);
  if constexpr (HAS_WEIGHT) vec_ok = vec_ok && aligned_for<WT, kVec>(a.w);
  if constexpr (HAS_BIAS) vec_ok = vec_ok && aligned_for<BT, kVec>(a.b);
  if constexpr (HAS_RESIDUAL) vec_ok = vec_ok && aligned_for<XT, kVec>(a.res) && aligned_for<RT, kVec>(a.res_out);
  // The plan gives a small entry only rows that its tile holds, on either path.
  if (kSmall && a.N > (long long)kTpr * kIt * kVec) __trap();
  const Run<kTpr, kClustered, kVec, kIt, kSmall> vrun(a, row, active, rank, nranks);
  const Run<kTpr, kClustered, 1, kIt, kSmall> srun(a, row, active, rank, nranks);

  // One tile and one reduction for both paths (separate copies would cost registers).
  TileOf<kIt, kSmall ? false : (WEIGHT_EARLY != 0)> tl;
  float ss = 0.f;
  if (active) ss = vec_ok ? pass1<kTpr, kClustered, kVec>(a, vrun, tl) : pass1<kTpr, kClustered, 1>(a, srun, tl);
#if WIDE_ROWS > 0
  if constexpr (kWide) ss = row_sum_wide(ss);
  else
#endif
#if SMALL_THREADS > 0
  if constexpr (kSmall) ss = row_sum_small<kTpr>(ss);
  else
#endif
  ss = row_sum<kTpr>(ss);
  if constexpr (kClustered) ss = cluster_sum(ss, rank, nranks);
  // The small entries divide approximately (2 ulp, beside rsqrt.approx's own): an IEEE division
  // is a slow-path call whose saved registers spill, a cost per row that short rows feel.
  const float r = rsqrt_approx((kSmall ? __fdividef(ss, (float)a.N) : ss / (float)a.N) + a.eps);
  if (!active) return;  // after the last barrier
  if constexpr (STORE_RSTD) {
    if (threadIdx.x % kTpr == 0 && rank == 0) a.rstd[row] = r;
  }
  if (vec_ok) {
    pass2<kTpr, kClustered, kVec>(a, vrun, tl, r);
  } else {
    pass2<kTpr, kClustered, 1>(a, srun, tl, r);
  }
}

#if SMALL_THREADS > 0 && SMALL_STAGE
#include "small_staged.cuh"
#endif

#if PERSISTENT_CTAS > 0
// One row group (kThreads / kTpr rows) whose register tile `tl` is loaded (vector path): the rest
// of the first pass, the row's sum (the alternate slot array when kAlt), rstd and the output pass.
template <int kTpr, bool kAlt>
__device__ __forceinline__ void finish_group(const Args& a, long long g, Tile& tl) {
  const long long row = g * (kThreads / kTpr) + threadIdx.x / kTpr;
  const bool active = row < a.M;
  const Run<kTpr, false, kVec> run(a, row, active, 0, 1);
  float ss = 0.f;
  if (active) ss = pass1_rest<kTpr, false, kVec>(a, run, tl);
  ss = kAlt ? row_sum_alt<kTpr>(ss) : row_sum<kTpr>(ss);
  const float rstd_row = rsqrt_approx(ss / (float)a.N + a.eps);
  if (!active) return;
  if constexpr (STORE_RSTD) {
    if (threadIdx.x % kTpr == 0) a.rstd[row] = rstd_row;
  }
  pass2<kTpr, false, kVec>(a, run, tl, rstd_row);
}

// Group g's register tile into tl (rows past M and groups past the last load nothing).
template <int kTpr>
__device__ __forceinline__ void load_group(const Args& a, long long g, long long groups, Tile& tl) {
  const long long row = g * (kThreads / kTpr) + threadIdx.x / kTpr;
  if (g < groups && row < a.M) tile_load<kTpr, false, kVec>(a, Run<kTpr, false, kVec>(a, row, true, 0, 1), tl);
}

// A CTA walks the row groups blockIdx, + grid, ... Vector path: two tiles, the next group's loads
// issued before the current group's reduction and stores. Every thread of the CTA takes the same
// groups, so the barriers in row_sum line up.
template <int kTpr>
__device__ __forceinline__ void rmsnorm_fwd_rows(const Args& a) {
#if EARLY_LAUNCH
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  const long long groups = (a.M + kThreads / kTpr - 1) / (kThreads / kTpr);
  const long long stride = (long long)gridDim.x * gridDim.y;
  long long g = (long long)blockIdx.y * gridDim.x + blockIdx.x;
  bool vec_ok = a.N % kVec == 0 && aligned_for<XT, kVec>(a.x) && aligned_for<XT, kVec>(a.out);
  if constexpr (HAS_WEIGHT) vec_ok = vec_ok && aligned_for<WT, kVec>(a.w);
  if constexpr (HAS_BIAS) vec_ok = vec_ok && aligned_for<BT, kVec>(a.b);
  if constexpr (HAS_RESIDUAL) vec_ok = vec_ok && aligned_for<XT, kVec>(a.res) && aligned_for<RT, kVec>(a.res_out);
  if (!vec_ok) {  // the scalar path, a group at a time (two slot arrays, alternating)
    for (int k = 0; g < groups; g += stride, ++k) {
      const long long row = g * (kThreads / kTpr) + threadIdx.x / kTpr;
      const bool active = row < a.M;
      const Run<kTpr, false, 1> run(a, row, active, 0, 1);
      Tile tl;
      float ss = active ? pass1<kTpr, false, 1>(a, run, tl) : 0.f;
      ss = (k & 1) ? row_sum_alt<kTpr>(ss) : row_sum<kTpr>(ss);
      const float rstd_row = rsqrt_approx(ss / (float)a.N + a.eps);
      if (active) {
        if constexpr (STORE_RSTD) {
          if (threadIdx.x % kTpr == 0) a.rstd[row] = rstd_row;
        }
        pass2<kTpr, false, 1>(a, run, tl, rstd_row);
      }
    }
    return;
  }
  Tile ta, tb;
  load_group<kTpr>(a, g, groups, ta);
  while (g < groups) {
    load_group<kTpr>(a, g + stride, groups, tb);
    finish_group<kTpr, false>(a, g, ta);
    g += stride;
    if (g >= groups) break;
    load_group<kTpr>(a, g + stride, groups, ta);
    finish_group<kTpr, true>(a, g, tb);
    g += stride;
  }
}
#endif

template <int kTpr, bool kClustered>
__device__ __forceinline__ void entry_body(const Args& a) {
#if PERSISTENT_CTAS > 0
  if constexpr (!kClustered) rmsnorm_fwd_rows<kTpr>(a);
  else rmsnorm_fwd_body<kTpr, true>(a);
#else
  rmsnorm_fwd_body<kTpr, kClustered>(a);
#endif
}

}  // namespace rmsnorm_seed

#include "entries.cuh"
