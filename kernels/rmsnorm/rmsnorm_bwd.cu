// Seed for rmsnorm_bwd: per row c1 = mean(x_hat * w * dout), dx = (w * dout - x_hat * c1) * rstd,
// dw = sum over rows of dout * x_hat. A persistent grid of G row groups walks the rows (group g
// takes rows g, g + G, ...); each group keeps its dw partial in fp32 and writes it once, as row g
// of the scratch tensor dw_partial; rmsnorm_bwd_dw_reduce sums the G rows (no atomics).
//
// Entries (RmsNormBwdOp::launch_plan names one per shape; kernels/rmsnorm/README.md):
//   rmsnorm_bwd               the first template's paths, one CTA per group (G = gridDim.x):
//                             rows of at most THREADS * ITEMS * VEC elements held in registers,
//                             longer rows streamed twice with the dw partial updated in place,
//                             any other N (or misaligned pointers) scalar.
//   rmsnorm_bwd_ring          (STAGES > 0) one CTA per group: the row's x and dout go through a
//                             ring of shared-memory stages filled by cp.async.bulk (one thread
//                             issues, an mbarrier per stage counts the bytes), so the next rows'
//                             loads are in flight while a row is reduced and written.
//   rmsnorm_bwd_ring_cluster  (STAGES > 0, CLUSTER > 1) the same with a group = a cluster of c
//                             CTAs (c = 2, 4, 8, 16 from the launch): CTA rank r owns a fixed
//                             slice of the columns (units [r s, (r + 1) s), s = ceil(N / VEC / c))
//                             for every row, and the CTA sums of a row are added through
//                             distributed shared memory (one barrier.cluster per row).
//   rmsnorm_bwd_ring_cluster_long  (LONG_THREADS > 0) the clustered ring with a tile of its own
//                             (LONG_THREADS threads, LONG_ITEMS units a thread, LONG_MIN_BLOCKS):
//                             the plan gives it rows of at least LONG_MIN_N elements, so long rows
//                             and shorter ones can run different CTA shapes and slice sizes.
//   rmsnorm_bwd_regs          (REGS_CLUSTER 1) a group = a cluster of c CTAs (c = 1 ... CLUSTER from
//                             the launch), slices as in the ring cluster, but no ring: each thread
//                             loads its units of x and dout straight into registers, and several
//                             small CTAs an SM overlap one another's loads, sums and stores.
// Ring layout: dynamic shared memory of `stages` stages, each s units of x then s units of dout
// (16 bytes per unit); the kernel reads the stage count back from %dynamic_smem_size. Thread t
// owns units t, t + THREADS, ... (at most ITEMS) of its CTA's slice, so its dw partial (and, with
// WREG, its weights) stay in fp32 registers for the whole walk. Per row: wait for the stage's
// mbarrier; pass 1 reads x, dout from shared memory and sums x * dout * w; the CTA sum goes
// through shared memory with one __syncthreads, after which thread 0 refills the stage of the
// previous row (every thread is done with it) with the row STAGES - 1 ahead; cluster sum; pass 2
// reads x, dout from shared memory again and writes dx. Sums are added in a fixed order, so every
// thread of a group gets the bitwise-same c1 and results are deterministic. 64-bit offsets.
// OVERLAP_SUM 1 (clusters, at least three stages): a row's cluster barrier is split around the
// next row's pass 1 (arrive after the row's CTA sum, wait before its pass 2), so a CTA does not
// stall on its peers' sums; each stage is then refilled one row later.
// ASYNC_SUM 1 (clusters, without OVERLAP_SUM): no cluster barrier per row. Each CTA's sum goes to
// every peer by st.async onto the peer's mbarrier of that row parity (its bytes complete the
// phase), so no thread waits on a release fence for its earlier dx stores (what the barrier's
// release costs: Nsight Compute put half of the stall cycles on it).
//
// Defines: XT, WT (element types), HAS_WEIGHT; knobs: THREADS, ITEMS, STAGES, CLUSTER, WREG,
// OVERLAP_SUM, ASYNC_SUM, REGS_CLUSTER, MIN_BLOCKS, LONG_THREADS, LONG_ITEMS, LONG_MIN_BLOCKS (and
// BLOCKS, SMEM_KB, RTHREADS, LONG_MIN_N, LONG_CBLOCKS, LONG_SMEM_KB for the launch plan only).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#ifndef XT
#define XT __nv_bfloat16
#endif
#ifndef WT
#define WT float
#endif
#ifndef HAS_WEIGHT
#define HAS_WEIGHT 1
#endif
#ifndef THREADS
#define THREADS 512
#endif
#ifndef ITEMS
#define ITEMS 4
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef CLUSTER
#define CLUSTER 16
#endif
#ifndef WREG
#define WREG 1
#endif
#ifndef OVERLAP_SUM
#define OVERLAP_SUM 0
#endif
#ifndef ASYNC_SUM
#define ASYNC_SUM 0
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif
#ifndef REGS_CLUSTER
#define REGS_CLUSTER 0
#endif
#ifndef LONG_THREADS
#define LONG_THREADS 0
#endif
#ifndef LONG_ITEMS
#define LONG_ITEMS 1
#endif
#ifndef LONG_MIN_BLOCKS
#define LONG_MIN_BLOCKS 1
#endif
#define VEC (16 / (int)sizeof(XT))

#if (STAGES > 0 || CLUSTER > 1 || REGS_CLUSTER) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "STAGES > 0 (cp.async.bulk) and CLUSTER > 1 need sm_90 or later"
#endif

#if MIN_BLOCKS > 0
#define PTXEVO_BOUNDS __launch_bounds__(THREADS, MIN_BLOCKS)
#else
#define PTXEVO_BOUNDS __launch_bounds__(THREADS)
#endif
#if LONG_MIN_BLOCKS > 0
#define PTXEVO_LONG_BOUNDS __launch_bounds__(LONG_THREADS, LONG_MIN_BLOCKS)
#else
#define PTXEVO_LONG_BOUNDS __launch_bounds__(LONG_THREADS)
#endif

// Enumerators, not constexpr variables: NVRTC emits namespace-scope constexpr variables as .global.
enum : int { kThreads = THREADS, kItems = ITEMS, kStages = STAGES };
static_assert(kThreads % 32 == 0 && kThreads >= 32 && kThreads <= 1024, "THREADS: a multiple of 32 in [32, 1024]");
static_assert(kItems >= 1 && kItems <= 16, "ITEMS: 1..16");
static_assert(kStages == 0 || (kStages >= 2 && kStages <= 8), "STAGES: 0 (no ring) or 2..8");
static_assert(CLUSTER == 1 || CLUSTER == 2 || CLUSTER == 4 || CLUSTER == 8 || CLUSTER == 16, "CLUSTER: 1, 2, 4, 8, 16");
static_assert(LONG_THREADS == 0 || (LONG_THREADS % 32 == 0 && LONG_THREADS >= 32 && LONG_THREADS <= 1024),
              "LONG_THREADS: 0 (off) or a multiple of 32 in [32, 1024]");
static_assert(LONG_ITEMS >= 1 && LONG_ITEMS <= 16, "LONG_ITEMS: 1..16");

// A CTA's register tile: kThreads threads of kItems 16-byte units each. The ring's functions take
// it as a parameter so the long rows' entry can have its own (LONG_THREADS, LONG_ITEMS).
template <int T, int I>
struct Tile {
  enum : int { kThreads = T, kItems = I, kWarps = T / 32 };
};
using MainTile = Tile<THREADS, ITEMS>;

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }

template <class T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_f<__half>(float v) {
  return __float2half_rn(v);
}

__device__ __forceinline__ uint4 load16(const XT* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
__device__ __forceinline__ float elem(const uint4& raw, int i) { return to_f(reinterpret_cast<const XT*>(&raw)[i]); }
__device__ __forceinline__ float weight(const WT* w, long long j) { return HAS_WEIGHT ? to_f(__ldg(w + j)) : 1.f; }

// The VEC weights of unit u in fp32 (1 without a weight), in 16-byte loads: VEC * sizeof(WT) is 16
// or 32 bytes (fp32 weights with 8- or 4-wide units, 16-bit weights with 8-wide ones), so
// w + u * VEC is 16-byte aligned when w is.
__device__ __forceinline__ void weights(const WT* __restrict__ w, long long u, float* wv) {
#if HAS_WEIGHT
  if constexpr (sizeof(WT) == 4) {  // VEC = 4 or 8: one or two float4
#pragma unroll
    for (int q = 0; q < VEC / 4; ++q) {
      const float4 f = __ldg(reinterpret_cast<const float4*>(w + u * VEC) + q);
      wv[4 * q] = f.x;
      wv[4 * q + 1] = f.y;
      wv[4 * q + 2] = f.z;
      wv[4 * q + 3] = f.w;
    }
  } else {  // 16-bit weights with 16-bit x: VEC = 8, one 16-byte vector
    const uint4 raw = __ldg(reinterpret_cast<const uint4*>(w + u * VEC));
#pragma unroll
    for (int i = 0; i < VEC; ++i) wv[i] = to_f(reinterpret_cast<const WT*>(&raw)[i]);
  }
#else
#pragma unroll
  for (int i = 0; i < VEC; ++i) wv[i] = 1.f;
#endif
}

// Sum over the CTA of Tl::kThreads threads; every thread gets the total.
template <class Tl>
__device__ __forceinline__ float block_sum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = lane < Tl::kWarps ? red[lane] : 0.f;
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  __syncthreads();  // red is reused by the next row
  return t;
}

// ---- the first template's paths (entry rmsnorm_bwd; also the fallback of the ring entries) ----
// Group g of G: rows g, g + G, ...; `part` is the group's dw partial row.

// Rows that fit the registers: x and dout as raw 16-byte vectors, the dw partial in fp32.
__device__ __forceinline__ void bwd_registers(const XT* __restrict__ x, const WT* __restrict__ w,
                                              const XT* __restrict__ dout, const float* __restrict__ rstd,
                                              XT* __restrict__ dx, float* __restrict__ part, long long M, long long N,
                                              long long g, long long G, float* red) {
  const long long nv = N / VEC;
  float acc[ITEMS][VEC];
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int i = 0; i < VEC; ++i) acc[k][i] = 0.f;
  for (long long r = g; r < M; r += G) {
    uint4 xv[ITEMS], dv[ITEMS];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const long long v = threadIdx.x + static_cast<long long>(k) * THREADS;
      if (v < nv) {
        xv[k] = load16(x + r * N + v * VEC);
        dv[k] = load16(dout + r * N + v * VEC);
      }
    }
    const float rs = rstd[r];
    float c = 0.f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const long long v = threadIdx.x + static_cast<long long>(k) * THREADS;
      if (v < nv)
#pragma unroll
        for (int i = 0; i < VEC; ++i) c += elem(xv[k], i) * elem(dv[k], i) * weight(w, v * VEC + i);
    }
    const float c1 = block_sum<MainTile>(c, red) * rs / static_cast<float>(N);
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const long long v = threadIdx.x + static_cast<long long>(k) * THREADS;
      if (v < nv) {
        uint4 o;
        XT* oe = reinterpret_cast<XT*>(&o);
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          const float xh = elem(xv[k], i) * rs;
          const float dy = elem(dv[k], i);
          oe[i] = from_f<XT>((dy * weight(w, v * VEC + i) - xh * c1) * rs);
          acc[k][i] += dy * xh;
        }
        *reinterpret_cast<uint4*>(dx + r * N + v * VEC) = o;
      }
    }
  }
  if (HAS_WEIGHT) {
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const long long v = threadIdx.x + static_cast<long long>(k) * THREADS;
      if (v < nv)
#pragma unroll
        for (int i = 0; i < VEC; ++i) part[v * VEC + i] = acc[k][i];
    }
  }
}

// Longer rows: 16-byte vectors, two passes over the row, the dw partial updated in place.
__device__ __forceinline__ void bwd_stream(const XT* __restrict__ x, const WT* __restrict__ w,
                                           const XT* __restrict__ dout, const float* __restrict__ rstd,
                                           XT* __restrict__ dx, float* __restrict__ part, long long M, long long N,
                                           long long g, long long G, float* red) {
  const long long nv = N / VEC;
  if (HAS_WEIGHT)
    for (long long j = threadIdx.x; j < N; j += THREADS) part[j] = 0.f;
  for (long long r = g; r < M; r += G) {
    const float rs = rstd[r];
    float c = 0.f;
    for (long long v = threadIdx.x; v < nv; v += THREADS) {
      const uint4 xr = load16(x + r * N + v * VEC), dr = load16(dout + r * N + v * VEC);
#pragma unroll
      for (int i = 0; i < VEC; ++i) c += elem(xr, i) * elem(dr, i) * weight(w, v * VEC + i);
    }
    const float c1 = block_sum<MainTile>(c, red) * rs / static_cast<float>(N);
    for (long long v = threadIdx.x; v < nv; v += THREADS) {
      const uint4 xr = load16(x + r * N + v * VEC), dr = load16(dout + r * N + v * VEC);
      uint4 o;
      XT* oe = reinterpret_cast<XT*>(&o);
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        const float xh = elem(xr, i) * rs;
        const float dy = elem(dr, i);
        oe[i] = from_f<XT>((dy * weight(w, v * VEC + i) - xh * c1) * rs);
        if (HAS_WEIGHT) part[v * VEC + i] += dy * xh;
      }
      *reinterpret_cast<uint4*>(dx + r * N + v * VEC) = o;
    }
  }
}

// Any N: scalar accesses, by a CTA of Tl::kThreads threads.
template <class Tl>
__device__ __forceinline__ void bwd_scalar(const XT* __restrict__ x, const WT* __restrict__ w,
                                           const XT* __restrict__ dout, const float* __restrict__ rstd,
                                           XT* __restrict__ dx, float* __restrict__ part, long long M, long long N,
                                           long long g, long long G, float* red) {
  // Thread t owns columns t, t + kThreads, ... of the partial row, here and below: no race.
  if (HAS_WEIGHT)
    for (long long j = threadIdx.x; j < N; j += Tl::kThreads) part[j] = 0.f;
  for (long long r = g; r < M; r += G) {
    const XT* xr = x + r * N;
    const XT* dr = dout + r * N;
    const float rs = rstd[r];
    float c1 = 0.f;
    for (long long j = threadIdx.x; j < N; j += Tl::kThreads) c1 += to_f(xr[j]) * rs * to_f(dr[j]) * weight(w, j);
    c1 = block_sum<Tl>(c1, red) / static_cast<float>(N);
    for (long long j = threadIdx.x; j < N; j += Tl::kThreads) {
      const float xh = to_f(xr[j]) * rs;
      const float dy = to_f(dr[j]);
      dx[r * N + j] = from_f<XT>((dy * weight(w, j) - xh * c1) * rs);
      if (HAS_WEIGHT) part[j] += dy * xh;
    }
  }
}

__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<unsigned long long>(p) & 15) == 0; }

// Null (absent) pointers count as aligned.
__device__ __forceinline__ bool vectors_ok(const XT* x, const WT* w, const XT* dout, const XT* dx, const float* part,
                                           long long N) {
  return N % VEC == 0 && aligned16(x) && aligned16(dout) && aligned16(dx) && aligned16(part) &&
         (!HAS_WEIGHT || aligned16(w));
}

__device__ __forceinline__ void bwd_classic(const XT* __restrict__ x, const WT* __restrict__ w,
                                            const XT* __restrict__ dout, const float* __restrict__ rstd,
                                            XT* __restrict__ dx, float* __restrict__ dw_partial, long long M,
                                            long long N, long long g, long long G, float* red) {
  float* part = HAS_WEIGHT ? dw_partial + g * N : nullptr;
  if (!vectors_ok(x, w, dout, dx, dw_partial, N)) bwd_scalar<MainTile>(x, w, dout, rstd, dx, part, M, N, g, G, red);
  else if (N <= static_cast<long long>(THREADS) * ITEMS * VEC) bwd_registers(x, w, dout, rstd, dx, part, M, N, g, G, red);
  else bwd_stream(x, w, dout, rstd, dx, part, M, N, g, G, red);
}

extern "C" __global__ void PTXEVO_BOUNDS rmsnorm_bwd(const XT* __restrict__ x, const WT* __restrict__ w,
                                                     const XT* __restrict__ dout, const float* __restrict__ rstd,
                                                     XT* __restrict__ dx, float* __restrict__ dw_partial, long long M,
                                                     long long N) {
  __shared__ float red[32];
  bwd_classic(x, w, dout, rstd, dx, dw_partial, M, N, blockIdx.x, gridDim.x, red);
}

#if STAGES > 0 || REGS_CLUSTER
// ---- the ring (entries rmsnorm_bwd_ring and rmsnorm_bwd_ring_cluster) and its helpers ----
extern __shared__ __align__(128) unsigned char ring[];

__device__ __forceinline__ unsigned int smem_addr(const void* p) {
  return static_cast<unsigned int>(__cvta_generic_to_shared(p));
}

#include "../common/mbarrier.cuh"

// Thread 0 only: loads row `row`'s slice of x and dout (`bytes` each) into the stage at `dst` and
// makes the stage's mbarrier expect them (a zero-length slice completes the phase by the arrive).
__device__ __forceinline__ void ring_issue(unsigned int bar, unsigned int dst, const XT* xs, const XT* ds,
                                           unsigned int bytes) {
  mbar_expect_tx(bar, 2u * bytes);
  if (bytes > 0) {
    bulk_copy(dst, xs, bytes, bar);
    bulk_copy(dst + bytes, ds, bytes, bar);
  }
}

// The weights of unit u: from the registers (WREG) or loaded.
__device__ __forceinline__ void unit_weights(const WT* __restrict__ w, long long u, const float (&wrj)[VEC],
                                             float* wv) {
#if HAS_WEIGHT && WREG
#pragma unroll
  for (int i = 0; i < VEC; ++i) wv[i] = wrj[i];
#else
  weights(w, u, wv);
#endif
}

// Where this thread's units of a row's slice are: unit k of the slice (its j-th, k = threadIdx.x
// + j * kThreads) in a ring stage (x's units, then dout's), or slot j of its registers.
struct StageUnits {
  const uint4* xs;
  const uint4* ds;
  __device__ __forceinline__ StageUnits(const unsigned char* stage, unsigned int bytes)
      : xs(reinterpret_cast<const uint4*>(stage)), ds(reinterpret_cast<const uint4*>(stage + bytes)) {}
  __device__ __forceinline__ uint4 x(int, int k) const { return xs[k]; }
  __device__ __forceinline__ uint4 d(int, int k) const { return ds[k]; }
};
struct RegisterUnits {
  const uint4 (&xv)[ITEMS];
  const uint4 (&dv)[ITEMS];
  __device__ __forceinline__ uint4 x(int j, int) const { return xv[j]; }
  __device__ __forceinline__ uint4 d(int j, int) const { return dv[j]; }
};

// This thread's share of a row's sum of x * dout * w over its units of the slice (len units);
// wr holds the weights when WREG (else they are loaded).
template <class Tl, class Units>
__device__ __forceinline__ float slice_dot(const Units& units, int len, const WT* __restrict__ w, long long u0,
                                           const float (&wr)[Tl::kItems][VEC]) {
  float c = 0.f;
#pragma unroll
  for (int j = 0; j < Tl::kItems; ++j) {
    const int k = threadIdx.x + j * Tl::kThreads;
    if (k < len) {
      const uint4 xv = units.x(j, k);
      const uint4 dv = units.d(j, k);
      float wv[VEC];
      unit_weights(w, u0 + k, wr[j], wv);
#pragma unroll
      for (int i = 0; i < VEC; ++i) c = fmaf(elem(xv, i) * elem(dv, i), wv[i], c);
    }
  }
  return c;
}

// dx of this thread's units (row pointer dxr at the slice's first unit) and the dw partial.
template <class Tl, class Units>
__device__ __forceinline__ void slice_dx(const Units& units, int len, const WT* __restrict__ w, long long u0,
                                         const float (&wr)[Tl::kItems][VEC], float (&acc)[Tl::kItems][VEC],
                                         XT* __restrict__ dxr, float rs, float c1) {
#pragma unroll
  for (int j = 0; j < Tl::kItems; ++j) {
    const int k = threadIdx.x + j * Tl::kThreads;
    if (k < len) {
      const uint4 xv = units.x(j, k);
      const uint4 dv = units.d(j, k);
      float wv[VEC];
      unit_weights(w, u0 + k, wr[j], wv);
      uint4 o;
      XT* oe = reinterpret_cast<XT*>(&o);
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        const float xh = elem(xv, i) * rs;
        const float dy = elem(dv, i);
        oe[i] = from_f<XT>((dy * wv[i] - xh * c1) * rs);
        acc[j][i] = fmaf(dy, xh, acc[j][i]);
      }
      reinterpret_cast<uint4*>(dxr)[k] = o;
    }
  }
}

// The CTA sum in two halves around the barrier, so thread 0 can issue a refill in between:
// warp sums into red (one slot a warp), then every thread adds the slots in warp order.
__device__ __forceinline__ void cta_sum_arrive(float c, float* red) {
  for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = c;
  __syncthreads();
}
template <class Tl>
__device__ __forceinline__ float cta_sum_total(const float* red) {
  float total = 0.f;
#pragma unroll
  for (int i = 0; i < Tl::kWarps; ++i) total += red[i];
  return total;
}
template <class Tl>
__device__ __forceinline__ float cta_sum(float c, float* red) {
  cta_sum_arrive(c, red);
  return cta_sum_total<Tl>(red);
}

// Stores v at this CTA's shared address `local` in the CTA of cluster rank `peer`, counted as 4
// bytes on that CTA's mbarrier at this CTA's address `bar`.
__device__ __forceinline__ void dsmem_put_async(unsigned int local, unsigned int bar, unsigned int peer, float v) {
  unsigned int remote, remote_bar;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(peer));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_bar) : "r"(bar), "r"(peer));
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];" ::"r"(remote), "f"(v),
               "r"(remote_bar)
               : "memory");
}

// Stores v at this CTA's shared address `local` in the CTA of cluster rank `peer`.
__device__ __forceinline__ void dsmem_put(unsigned int local, unsigned int peer, float v) {
  unsigned int remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(peer));
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(remote), "f"(v) : "memory");
}

// Zeroes the dw partial and (WREG) loads the weights of this thread's units of the slice.
template <class Tl>
__device__ __forceinline__ void start_partial(const WT* __restrict__ w, long long u0, int len,
                                              float (&acc)[Tl::kItems][VEC], float (&wr)[Tl::kItems][VEC]) {
#pragma unroll
  for (int j = 0; j < Tl::kItems; ++j) {
#pragma unroll
    for (int i = 0; i < VEC; ++i) acc[j][i] = 0.f;
#if HAS_WEIGHT && WREG
    const int k = threadIdx.x + j * Tl::kThreads;
    if (k < len) weights(w, u0 + k, wr[j]);
#endif
  }
}

// Writes this thread's units of the dw partial row `part` (at the slice's first unit).
template <class Tl>
__device__ __forceinline__ void write_partial(float* __restrict__ part, int len, const float (&acc)[Tl::kItems][VEC]) {
#pragma unroll
  for (int j = 0; j < Tl::kItems; ++j) {
    const int k = threadIdx.x + j * Tl::kThreads;
    if (k < len)
#pragma unroll
      for (int q = 0; q < VEC / 4; ++q)
        reinterpret_cast<float4*>(part + static_cast<long long>(k) * VEC)[q] =
            make_float4(acc[j][4 * q], acc[j][4 * q + 1], acc[j][4 * q + 2], acc[j][4 * q + 3]);
  }
}

template <class Tl, bool kClustered>
__device__ __forceinline__ void ring_body(const XT* __restrict__ x, const WT* __restrict__ w,
                                          const XT* __restrict__ dout, const float* __restrict__ rstd,
                                          XT* __restrict__ dx, float* __restrict__ dw_partial, long long M,
                                          long long N) {
  __shared__ __align__(8) unsigned long long full[kStages];  // one mbarrier per stage
  __shared__ float red[2][32];                               // CTA sums, double-buffered by row parity
  __shared__ float slots[2][16];                             // cluster: CTA sums of every rank, by parity
  __shared__ __align__(8) unsigned long long sums_full[2];   // ASYNC_SUM: the slots' mbarriers, by parity
  unsigned int rank = 0, nranks = 1;
  if constexpr (kClustered) {
    asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(nranks));
    if (nranks & (nranks - 1)) __trap();  // the plan launches clusters of 2, 4, 8 or 16 along x
  }
  const int shift = __ffs(nranks) - 1;
  const long long g = blockIdx.x >> shift, G = gridDim.x >> shift;  // group, groups
  const long long nu = N / VEC;                                     // units (vectors) per row
  const long long s = (nu + nranks - 1) >> shift;                   // units per slice
  const long long u0 = min(nu, static_cast<long long>(rank) * s);
  const int len = static_cast<int>(min(nu - u0, s));  // this CTA's units: <= kThreads * kItems (the plan)
  unsigned int dyn;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  const unsigned int stage_bytes = static_cast<unsigned int>(s) * 32u;  // s units of x, s of dout
  const int stages = static_cast<int>(min(static_cast<unsigned int>(kStages), dyn / max(stage_bytes, 1u)));
  if (!vectors_ok(x, w, dout, dx, dw_partial, N) || stages < 2 || s > static_cast<long long>(Tl::kThreads) * Tl::kItems) {
    // Not what the plan launches for (it checks the same); correct anyway: rank 0 of each group
    // does the group's rows alone on the scalar path (few registers). No DSMEM is touched.
    if (rank == 0) bwd_scalar<Tl>(x, w, dout, rstd, dx, HAS_WEIGHT ? dw_partial + g * N : nullptr, M, N, g, G, red[0]);
    return;
  }
#if CLUSTER > 1 && ASYNC_SUM
  // The peers' st.async may arrive as soon as the cluster barrier below completes: initialised
  // and fenced before this CTA's arrive.
  if (kClustered && threadIdx.x == 0) {
    mbar_init(smem_addr(&sums_full[0]));
    mbar_init(smem_addr(&sums_full[1]));
    mbar_init_fence();
  }
#endif
  if constexpr (kClustered) asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  const long long rows = g < M ? (M - g + G - 1) / G : 0;  // rows of this group: g, g + G, ...
  const unsigned int ring0 = smem_addr(ring), bar0 = smem_addr(full);
  const unsigned int bytes = static_cast<unsigned int>(len) * 16u;
  if (threadIdx.x == 0) {
    for (int i = 0; i < stages; ++i)
      mbar_init(bar0 + 8u * i);
    // Makes the initialised barriers visible to the bulk copies' complete_tx (the async proxy);
    // the proxy fence too, for the copies this thread issues right away.
    mbar_init_fence();
    for (long long i = 0; i < min(rows, static_cast<long long>(stages)); ++i) {
      const long long off = (g + i * G) * N + u0 * VEC;
      ring_issue(bar0 + 8u * i, ring0 + static_cast<unsigned int>(i) * stage_bytes, x + off, dout + off, bytes);
    }
  }
  __syncthreads();  // the barriers are initialised before anyone waits on them
  // Every CTA of the cluster has started (its shared memory may be written) after this wait.
  if constexpr (kClustered) asm volatile("barrier.cluster.wait.aligned;" ::: "memory");

  float acc[Tl::kItems][VEC];
#if HAS_WEIGHT && WREG
  float wr[Tl::kItems][VEC];
#else
  float(&wr)[Tl::kItems][VEC] = acc;  // unused: slice_dot and slice_dx load the weights
#endif
  start_partial<Tl>(w, u0, len, acc, wr);
  const float inv_n = 1.f / static_cast<float>(N);
  // Stage of row `it` (it % stages), the stage of the previous row, and the phase parity of the
  // stage's mbarrier (flips each time the ring wraps); counted, not divided (64-bit divisions
  // are calls).
  int st = 0, prev = stages - 1;
  unsigned int parity = 0;
  // Thread 0, after a barrier every thread passed with row `done` finished: row done's stage
  // takes row done + stages.
  auto refill = [&](long long done, int stage) {
    if (threadIdx.x == 0 && done >= 0 && done + stages < rows) {
      const long long off = (g + (done + stages) * G) * N + u0 * VEC;
      // Orders this CTA's generic-proxy reads of the stage before the async-proxy writes.
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      ring_issue(bar0 + 8u * stage, ring0 + static_cast<unsigned int>(stage) * stage_bytes, x + off, dout + off, bytes);
    }
  };
#if CLUSTER > 1 && OVERLAP_SUM
  if (kClustered && stages >= 3) {
    // The cluster barrier of row `it` is split: its arrive follows row it's CTA sum, its wait
    // comes after row it + 1's pass 1, so the peers' sums travel while this CTA reads the next
    // stage. Row it + 1's stage is then read before row it's is free: a stage is refilled one row
    // later than in the loop below (one row fewer in flight), hence at least three stages.
    auto publish = [&](float total, int p) {
      if (threadIdx.x < nranks) dsmem_put(smem_addr(&slots[p][rank]), threadIdx.x, total);
      asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    };
    float next = 0.f;
    if (rows > 0) {
      mbar_wait(bar0, 0);
      next = cta_sum<Tl>(slice_dot<Tl>(StageUnits(ring, bytes), len, w, u0, wr), red[0]);
      publish(next, 0);
    }
    for (long long it = 0; it < rows; ++it) {
      const long long row = g + it * G;
      const float rs = rstd[row];
      const int p = static_cast<int>(it & 1);
      const int nst = st + 1 == stages ? 0 : st + 1;
      if (it + 1 < rows) {
        const unsigned char* xs = ring + static_cast<unsigned int>(nst) * stage_bytes;
        mbar_wait(bar0 + 8u * nst, nst == 0 ? parity ^ 1u : parity);
        cta_sum_arrive(slice_dot<Tl>(StageUnits(xs, bytes), len, w, u0, wr), red[p ^ 1]);
        // Every thread has finished row it - 1.
        refill(it - 1, prev);
        next = cta_sum_total<Tl>(red[p ^ 1]);
      }
      asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
      float total = 0.f;
      for (unsigned int i = 0; i < nranks; ++i) total += slots[p][i];
      const unsigned char* xs = ring + static_cast<unsigned int>(st) * stage_bytes;
      slice_dx<Tl>(StageUnits(xs, bytes), len, w, u0, wr, acc, dx + row * N + u0 * VEC, rs, total * rs * inv_n);
      if (it + 1 < rows) publish(next, p ^ 1);
      prev = st;
      st = nst;
      if (st == 0) parity ^= 1u;
    }
  } else
#endif
  {
    for (long long it = 0; it < rows; ++it) {
      const long long row = g + it * G;
      const unsigned char* xs = ring + static_cast<unsigned int>(st) * stage_bytes;
      const float rs = rstd[row];
      mbar_wait(bar0 + 8u * st, parity);
      const float c = slice_dot<Tl>(StageUnits(xs, bytes), len, w, u0, wr);
      // CTA sum: one barrier; red is double-buffered by row parity (a row's slots are rewritten
      // two rows later, after every thread has passed the next row's barrier, hence read them).
      const int p = static_cast<int>(it & 1);
      cta_sum_arrive(c, red[p]);
      // Every thread has finished row it - 1 (pass 2 comes before this barrier).
      refill(it - 1, prev);
      float total = cta_sum_total<Tl>(red[p]);
      if constexpr (kClustered) {
        // Rank i's sum goes to slot i of every CTA; after the barrier each CTA adds the slots in
        // rank order. Slots are double-buffered by parity: a peer writes this parity again only
        // after the next row's barrier, which every thread here passes after reading them.
#if ASYNC_SUM
        // Without the barrier: a peer sends row it + 2's sum only after it has every CTA's sum of
        // row it + 1, which this CTA sends after the barrier above, past its reads of row it's.
        // Rows p, p + 2, ... use mbarrier p: phase parity (it >> 1) & 1.
        const unsigned int bar = smem_addr(&sums_full[p]);
        if (threadIdx.x == 0) mbar_expect_tx(bar, 4u * nranks);
        if (threadIdx.x < nranks) dsmem_put_async(smem_addr(&slots[p][rank]), bar, threadIdx.x, total);
        mbar_wait(bar, static_cast<unsigned int>(it >> 1) & 1u);
#else
        if (threadIdx.x < nranks) dsmem_put(smem_addr(&slots[p][rank]), threadIdx.x, total);
        asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
        total = 0.f;
        for (unsigned int i = 0; i < nranks; ++i) total += slots[p][i];
      }
      slice_dx<Tl>(StageUnits(xs, bytes), len, w, u0, wr, acc, dx + row * N + u0 * VEC, rs, total * rs * inv_n);
      prev = st;
      if (++st == stages) {
        st = 0;
        parity ^= 1u;
      }
    }
  }
#if CLUSTER > 1 && ASYNC_SUM
  // A CTA's shared memory must outlive the peers' last st.async into it (each CTA has its own
  // before its last wait; this keeps the rule independent of that).
  if constexpr (kClustered)
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
#endif
  // No DSMEM access follows the last row's cluster barrier, so CTAs may exit at once.
  if (HAS_WEIGHT) write_partial<Tl>(dw_partial + g * N + u0 * VEC, len, acc);
}

#if STAGES > 0
extern "C" __global__ void PTXEVO_BOUNDS rmsnorm_bwd_ring(const XT* __restrict__ x, const WT* __restrict__ w,
                                                          const XT* __restrict__ dout, const float* __restrict__ rstd,
                                                          XT* __restrict__ dx, float* __restrict__ dw_partial,
                                                          long long M, long long N) {
  ring_body<MainTile, false>(x, w, dout, rstd, dx, dw_partial, M, N);
}

#if CLUSTER > 1
extern "C" __global__ void PTXEVO_BOUNDS rmsnorm_bwd_ring_cluster(const XT* __restrict__ x, const WT* __restrict__ w,
                                                                  const XT* __restrict__ dout,
                                                                  const float* __restrict__ rstd, XT* __restrict__ dx,
                                                                  float* __restrict__ dw_partial, long long M,
                                                                  long long N) {
  ring_body<MainTile, true>(x, w, dout, rstd, dx, dw_partial, M, N);
}

#if LONG_THREADS > 0
// The clustered ring with the long rows' own tile (LONG_THREADS x LONG_ITEMS, LONG_MIN_BLOCKS).
extern "C" __global__ void PTXEVO_LONG_BOUNDS rmsnorm_bwd_ring_cluster_long(
    const XT* __restrict__ x, const WT* __restrict__ w, const XT* __restrict__ dout, const float* __restrict__ rstd,
    XT* __restrict__ dx, float* __restrict__ dw_partial, long long M, long long N) {
  ring_body<Tile<LONG_THREADS, LONG_ITEMS>, true>(x, w, dout, rstd, dx, dw_partial, M, N);
}
#endif
#endif
#endif  // STAGES > 0

#if REGS_CLUSTER
// ---- registers, no ring (entry rmsnorm_bwd_regs) ----
// Group g = cluster g of the launch (c CTAs, c = 1 ... 16 from the launch); CTA rank r owns the
// slice [u0, u0 + len) of every row of its group, thread t the units t, t + THREADS, ... of it.
// Per row: x and dout into registers, the CTA sum (one __syncthreads), the cluster sum through
// distributed shared memory (one barrier.cluster), dx from the registers. No ring and no
// dynamic shared memory: the overlap comes from several CTAs an SM (small THREADS, MIN_BLOCKS).
extern "C" __global__ void PTXEVO_BOUNDS rmsnorm_bwd_regs(const XT* __restrict__ x, const WT* __restrict__ w,
                                                          const XT* __restrict__ dout, const float* __restrict__ rstd,
                                                          XT* __restrict__ dx, float* __restrict__ dw_partial,
                                                          long long M, long long N) {
  __shared__ float red[2][32];    // CTA sums, double-buffered by row parity (as in ring_body)
  __shared__ float slots[2][16];  // the cluster's CTA sums, by row parity
  unsigned int rank, nranks;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(nranks));
  if (nranks & (nranks - 1)) __trap();  // the plan launches clusters of 1, 2, 4, 8 or 16 along x
  const int shift = __ffs(nranks) - 1;
  const long long g = blockIdx.x >> shift, G = gridDim.x >> shift;  // group, groups
  const long long nu = N / VEC;
  const long long s = (nu + nranks - 1) >> shift;  // units per slice
  const long long u0 = min(nu, static_cast<long long>(rank) * s);
  const int len = static_cast<int>(min(nu - u0, s));
  if (!vectors_ok(x, w, dout, dx, dw_partial, N) || s > static_cast<long long>(kThreads) * kItems) {
    // Not what the plan launches for; correct anyway, as in ring_body: rank 0 alone, scalar.
    if (rank == 0) bwd_scalar<MainTile>(x, w, dout, rstd, dx, HAS_WEIGHT ? dw_partial + g * N : nullptr, M, N, g, G, red[0]);
    return;
  }
  if (nranks > 1) asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  float acc[ITEMS][VEC];
#if HAS_WEIGHT && WREG
  float wr[ITEMS][VEC];
#else
  float(&wr)[ITEMS][VEC] = acc;  // unused: slice_dot and slice_dx load the weights
#endif
  start_partial<MainTile>(w, u0, len, acc, wr);
  const float inv_n = 1.f / static_cast<float>(N);
  // Every CTA of the cluster has started (its shared memory may be written) after this wait.
  if (nranks > 1) asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
  const long long rows = g < M ? (M - g + G - 1) / G : 0;
  for (long long it = 0; it < rows; ++it) {
    const long long row = g + it * G;
    const long long off = row * N + u0 * VEC;
    uint4 xv[ITEMS], dv[ITEMS];
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
      const int k = threadIdx.x + j * THREADS;
      if (k < len) {
        xv[j] = load16(x + off + static_cast<long long>(k) * VEC);
        dv[j] = load16(dout + off + static_cast<long long>(k) * VEC);
      }
    }
    const float rs = rstd[row];
    const RegisterUnits units{xv, dv};
    const int p = static_cast<int>(it & 1);
    cta_sum_arrive(slice_dot<MainTile>(units, len, w, u0, wr), red[p]);
    float total = cta_sum_total<MainTile>(red[p]);
    if (nranks > 1) {  // as in ring_body: rank i's sum in slot i of every CTA, added in rank order
      if (threadIdx.x < nranks) dsmem_put(smem_addr(&slots[p][rank]), threadIdx.x, total);
      asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
      total = 0.f;
      for (unsigned int i = 0; i < nranks; ++i) total += slots[p][i];
    }
    slice_dx<MainTile>(units, len, w, u0, wr, acc, dx + off, rs, total * rs * inv_n);
  }
  // No DSMEM access follows the last row's cluster barrier, so CTAs may exit at once.
  if (HAS_WEIGHT) write_partial<MainTile>(dw_partial + g * N + u0 * VEC, len, acc);
}
#endif  // REGS_CLUSTER
#endif  // STAGES > 0 || REGS_CLUSTER

// dw[j] = sum of the `rows` partial rows, in row order. A CTA covers 32 columns; its RTHREADS / 32
// warps take rows q, q + RTHREADS / 32, ... (coalesced 128-byte rows, several loads in flight per
// column), then warp 0 adds the warps' sums in order: deterministic.
// Column blocks beyond the grid are taken in a grid-stride loop (N may exceed 32 * 2^31).
extern "C" __global__ void rmsnorm_bwd_dw_reduce(const float* __restrict__ partial, float* __restrict__ dw,
                                                 long long rows, long long N) {
  __shared__ float sums[32][33];
  const int lane = threadIdx.x & 31, q = threadIdx.x >> 5, nq = blockDim.x >> 5;
  for (long long j0 = static_cast<long long>(blockIdx.x) * 32; j0 < N; j0 += static_cast<long long>(gridDim.x) * 32) {
    const long long j = j0 + lane;
    float s = 0.f;
    if (j < N) {
#pragma unroll 4
      for (long long p = q; p < rows; p += nq) s += partial[p * N + j];  // loads ahead of the (ordered) adds
    }
    sums[q][lane] = s;
    __syncthreads();
    if (q == 0 && j < N) {
      float t = 0.f;
      for (int i = 0; i < nq; ++i) t += sums[i][lane];
      dw[j] = t;
    }
    __syncthreads();  // sums is rewritten by the next column block
  }
}
