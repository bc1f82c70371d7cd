// rmsnorm_fwd seed template: out[m, :] = x[m, :] * rsqrt(mean(x[m, :]^2) + eps) * w
//
// Compiled by NVRTC (device code only) with -DXT=... -DWT=... -DHAS_WEIGHT=0|1 -DSTORE_RSTD=0|1
// and the knobs below; launched by RmsNormFwdOp::launch_plan (kernels/rmsnorm/rmsnorm_fwd_op.cpp):
//   grid.x = ceil(M / (THREADS / TPR)) (grid.y > 1 only when that exceeds 2^31 - 1), block.x =
//   THREADS, no dynamic shared memory.
//
// Knobs (each has a default here that matches the op's):
//   VEC         elements per vector access (1, 2, 4, 8; VEC * sizeof(XT) <= 16)
//   THREADS     threads per CTA (a multiple of 32, at most 1024)
//   TPR         threads per row (a power of two dividing THREADS); THREADS / TPR rows per CTA
//   ITEMS       vectors per thread kept in registers: a row of at most ITEMS * TPR * VEC elements
//               is read from global memory once; longer rows are re-read for the output pass
//   MIN_BLOCKS  second __launch_bounds__ argument (0: none)
//   LOAD_HINT   x loads: 0 ld.global.nc, 1 ld.global.cg, 2 ld.global.nc.L1::no_allocate,
//               3 ld.global.nc.L2::256B
//   STORE_HINT  out stores: 0 st.global, 1 st.global.cs (streaming)
//
// Layout: thread t of a row (t = threadIdx.x % TPR) owns vectors t, t + TPR, t + 2 TPR, ... of
// its row, so every warp-wide access is contiguous. The vector path needs N % VEC == 0 and
// VEC-aligned base pointers (otherwise row starts are misaligned); the scalar path handles any N
// with the same ownership pattern per element. Sums of squares are accumulated in fp32 with
// fmaf, reduced with a shfl.sync.bfly butterfly over the row's lanes and, when TPR > 32, through
// shared memory (one barrier; every lane ends with the bitwise-identical sum, so the result is
// deterministic). Row and column offsets are 64-bit.
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
#ifndef STORE_RSTD
#define STORE_RSTD 0
#endif
#ifndef VEC
#define VEC (16 / (int)sizeof(XT))
#endif
#ifndef THREADS
#define THREADS 256
#endif
#ifndef TPR
#define TPR 256
#endif
#ifndef ITEMS
#define ITEMS 2
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 0
#endif
#ifndef LOAD_HINT
#define LOAD_HINT 0
#endif
#ifndef STORE_HINT
#define STORE_HINT 0
#endif

#if LOAD_HINT == 0
#define PTXEVO_LDX "ld.global.nc"
#elif LOAD_HINT == 1
#define PTXEVO_LDX "ld.global.cg"
#elif LOAD_HINT == 2
#define PTXEVO_LDX "ld.global.nc.L1::no_allocate"
#elif LOAD_HINT == 3
#define PTXEVO_LDX "ld.global.nc.L2::256B"
#else
#error "LOAD_HINT must be 0, 1, 2 or 3"
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
  kTpr = TPR,
  kItems = ITEMS,
  kRows = kThreads / kTpr,
  kLanes = kTpr < 32 ? kTpr : 32,  // lanes of one row inside a warp
  kWarpsPerRow = kTpr > 32 ? kTpr / 32 : 1,
  kXBytes = kVec * (int)sizeof(XT),  // bytes per x / out vector
  kWBytes = kVec * (int)sizeof(WT),  // bytes per weight vector
  kXWords = kXBytes >= 4 ? kXBytes / 4 : 1,
  kWWords = kWBytes >= 4 ? kWBytes / 4 : 1,
  kWAlign = kWBytes < 16 ? kWBytes : 16,  // weight vectors load in <= 16-byte pieces
};

static_assert(kThreads % 32 == 0 && kThreads >= 32 && kThreads <= 1024, "THREADS: a multiple of 32 in [32, 1024]");
static_assert(kTpr >= 1 && (kTpr & (kTpr - 1)) == 0 && kThreads % kTpr == 0, "TPR: a power of two dividing THREADS");
static_assert(kVec >= 1 && (kVec & (kVec - 1)) == 0 && kXBytes <= 16, "VEC: a power of two with VEC * sizeof(XT) <= 16");
static_assert(kItems >= 1, "ITEMS >= 1");

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

// ---- global memory access through inline PTX; B is the byte count (2, 4, 8, 16, or 32) ----
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

template <int B>
__device__ __forceinline__ void store_out(void* p, const unsigned int* w) {
  if constexpr (B == 16) {
    asm volatile(PTXEVO_STO ".v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                 : "memory");
  } else if constexpr (B == 8) {
    asm volatile(PTXEVO_STO ".v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(w[0]), "r"(w[1]) : "memory");
  } else if constexpr (B == 4) {
    asm volatile(PTXEVO_STO ".u32 [%0], %1;" ::"l"(p), "r"(w[0]) : "memory");
  } else {
    static_assert(B == 2, "store of 2, 4, 8 or 16 bytes");
    asm volatile(PTXEVO_STO ".u16 [%0], %1;" ::"l"(p), "h"((unsigned short)w[0]) : "memory");
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

// Sum over the TPR threads of a row; every thread of the CTA must call it (it may hold a barrier).
__device__ __forceinline__ float row_sum(float v) {
#pragma unroll
  for (int o = kLanes / 2; o > 0; o >>= 1) v += shfl_bfly(v, o);
  if constexpr (kTpr > 32) {
    __shared__ float red[kThreads / 32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = red[(warp / kWarpsPerRow) * kWarpsPerRow + lane % kWarpsPerRow];
#pragma unroll
    for (int o = kWarpsPerRow / 2; o > 0; o >>= 1) v += shfl_bfly(v, o);
  }
  return v;
}

}  // namespace rmsnorm_seed
using namespace rmsnorm_seed;

extern "C" __global__ void PTXEVO_BOUNDS rmsnorm_fwd(const XT* __restrict__ x, const WT* __restrict__ w,
                                                     XT* __restrict__ out, float* __restrict__ rstd, long long M,
                                                     long long N, float eps) {
  const int t = threadIdx.x % kTpr;
  const long long block = (long long)blockIdx.y * gridDim.x + blockIdx.x;
  const long long row = block * kRows + threadIdx.x / kTpr;
  const bool active = row < M;
  const long long base = (active ? row : 0) * N;
  const XT* xr = x + base;
  XT* orow = out + base;

  const unsigned long long xaddr = (unsigned long long)x | (unsigned long long)out;
  bool vec_ok = N % kVec == 0 && (xaddr & (unsigned long long)(kXBytes - 1)) == 0;
  if constexpr (HAS_WEIGHT) vec_ok = vec_ok && ((unsigned long long)w & (unsigned long long)(kWAlign - 1)) == 0;

  // The row's first ITEMS vectors stay in registers as raw words of XT (element (it, e) in
  // raw[it]), for the vector and the scalar path alike.
  unsigned int raw[kItems][kXWords];
  float ss = 0.f;
  if (vec_ok) {
    const long long nv = N / kVec;
    if (active) {
#pragma unroll
      for (int it = 0; it < kItems; ++it) {
        const long long k = (long long)it * kTpr + t;
        if (k < nv) {
          load_x<kXBytes>(raw[it], xr + k * kVec);
#pragma unroll
          for (int e = 0; e < kVec; ++e) {
            const float f = Elem<XT>::get(raw[it], e);
            ss = fmaf(f, f, ss);
          }
        }
      }
      for (long long k = (long long)kItems * kTpr + t; k < nv; k += kTpr) {
        unsigned int tmp[kXWords];
        load_x<kXBytes>(tmp, xr + k * kVec);
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const float f = Elem<XT>::get(tmp, e);
          ss = fmaf(f, f, ss);
        }
      }
    }
  } else if (active) {
    // Scalar path: element (it, e) of this thread is column (it * VEC + e) * TPR + t.
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const long long c = (long long)(it * kVec + e) * kTpr + t;
        if (c < N) {
          unsigned int s1[1];
          load_x<(int)sizeof(XT)>(s1, xr + c);
          if constexpr (sizeof(XT) == 4) {
            raw[it][e] = s1[0];
          } else {  // columns grow with e, so the even half is always set before the odd one
            raw[it][e >> 1] = (e & 1) ? (raw[it][e >> 1] | (s1[0] << 16)) : s1[0];
          }
          const float f = Elem<XT>::get(s1, 0);
          ss = fmaf(f, f, ss);
        }
      }
    }
    for (long long c = (long long)kItems * kVec * kTpr + t; c < N; c += kTpr) {
      unsigned int s1[1];
      load_x<(int)sizeof(XT)>(s1, xr + c);
      const float f = Elem<XT>::get(s1, 0);
      ss = fmaf(f, f, ss);
    }
  }

  ss = row_sum(ss);
  const float r = rsqrt_approx(ss / (float)N + eps);
  if (!active) return;  // after the only barrier
  if constexpr (STORE_RSTD) {
    if (t == 0) rstd[row] = r;
  }

  if (vec_ok) {
    const long long nv = N / kVec;
    auto emit = [&](long long k, const unsigned int* xv) {
      float y[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) y[e] = Elem<XT>::get(xv, e) * r;
      if constexpr (HAS_WEIGHT) {
        unsigned int wr[kWWords];
        load_w<kWBytes>(wr, w + k * kVec);
#pragma unroll
        for (int e = 0; e < kVec; ++e) y[e] *= Elem<WT>::get(wr, e);
      }
      unsigned int o[kXWords];
      pack<XT, kVec>(y, o);
      store_out<kXBytes>(orow + k * kVec, o);
    };
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      const long long k = (long long)it * kTpr + t;
      if (k < nv) emit(k, raw[it]);
    }
    for (long long k = (long long)kItems * kTpr + t; k < nv; k += kTpr) {
      unsigned int tmp[kXWords];
      load_x<kXBytes>(tmp, xr + k * kVec);
      emit(k, tmp);
    }
  } else {
    auto emit1 = [&](long long c, float xv) {
      float y = xv * r;
      if constexpr (HAS_WEIGHT) {
        unsigned int wr[1];
        load_w<(int)sizeof(WT)>(wr, w + c);
        y *= Elem<WT>::get(wr, 0);
      }
      unsigned int o[1];
      pack<XT, 1>(&y, o);
      store_out<(int)sizeof(XT)>(orow + c, o);
    };
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const long long c = (long long)(it * kVec + e) * kTpr + t;
        if (c < N) emit1(c, Elem<XT>::get(raw[it], e));
      }
    }
    for (long long c = (long long)kItems * kVec * kTpr + t; c < N; c += kTpr) {
      unsigned int s1[1];
      load_x<(int)sizeof(XT)>(s1, xr + c);
      emit1(c, Elem<XT>::get(s1, 0));
    }
  }
}
