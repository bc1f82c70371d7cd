// corpus: archs=sm_100a
// Exercises: Blackwell 5th-gen tensor core: tcgen05.alloc/dealloc/relinquish_alloc_permit (cta_group::1), tcgen05.mma.cta_group::1.kind::f16 (bf16 -> f32 in tensor memory) with smem descriptors + instruction descriptor, tcgen05.commit to an mbarrier, tcgen05.fence before/after_thread_sync, tcgen05.ld.32x32b + wait::ld epilogue, TMA-fed double-buffered K loop.

struct alignas(64) CUtensorMap_ {
  unsigned long long opaque[16];
};

__device__ __forceinline__ unsigned smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

// UMMA shared-memory descriptor (sm_100): start>>4 [0,14), LBO>>4 [16,30), SBO>>4 [32,46), version=1 [46,48),
// base offset [49,52), LBO mode [52], layout/swizzle [61,64) (2 = 128B swizzle).
__device__ __forceinline__ unsigned long long umma_desc(const void *p, unsigned lbo, unsigned sbo, unsigned layout) {
  unsigned long long d = (smem_addr(p) & 0x3FFFFull) >> 4;
  d |= (unsigned long long)((lbo >> 4) & 0x3FFF) << 16;
  d |= (unsigned long long)((sbo >> 4) & 0x3FFF) << 32;
  d |= 1ull << 46;
  d |= (unsigned long long)(layout & 7) << 61;
  return d;
}

// Instruction descriptor for kind::f16: D fmt f32 (bits 4-5 = 1), A/B fmt bf16 (bits 7-9, 10-12 = 1),
// K-major A and B (bits 15,16 = 0), N>>3 at [17,23), M>>4 at [24,29).
__host__ __device__ constexpr unsigned idesc_bf16_f32(int M, int N) {
  return (1u << 4) | (1u << 7) | (1u << 10) | ((unsigned)(N >> 3) << 17) | ((unsigned)(M >> 4) << 24);
}

__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned phase) {
  asm volatile(
      "{\n\t"
      ".reg .pred P1;\n\t"
      "LAB_WAIT:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n\t"
      "@P1 bra DONE;\n\t"
      "bra LAB_WAIT;\n\t"
      "DONE:\n\t"
      "}" ::"r"(bar),
      "r"(phase)
      : "memory");
}

__device__ __forceinline__ void tmem_ld_32x32b_x16(unsigned taddr, float (&v)[16]) {
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x16.b32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
      "[%16];"
      : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3]), "=f"(v[4]), "=f"(v[5]), "=f"(v[6]), "=f"(v[7]), "=f"(v[8]),
        "=f"(v[9]), "=f"(v[10]), "=f"(v[11]), "=f"(v[12]), "=f"(v[13]), "=f"(v[14]), "=f"(v[15])
      : "r"(taddr));
}

// C[128 x 128] fp32 per CTA = A[128 x K] * B[128 x K]^T, bf16 operands, K-major, 128B swizzled tiles of 64 K-elements.
extern "C" __global__ void __launch_bounds__(128, 1) tcgen05_gemm_bf16(const __grid_constant__ CUtensorMap_ tmap_a,
                                                                       const __grid_constant__ CUtensorMap_ tmap_b,
                                                                       float *__restrict__ C, int N, int K) {
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned short *sA = reinterpret_cast<unsigned short *>(smem);                    // [2][128*64]
  unsigned short *sB = reinterpret_cast<unsigned short *>(smem + 2 * 128 * 64 * 2);  // [2][128*64]
  __shared__ __align__(8) unsigned long long full[2], mma_done[2];
  __shared__ unsigned tmem_base_slot;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int m0 = blockIdx.y * 128, n0 = blockIdx.x * 128;

  if (warp == 0) {
    // Whole warp allocates 128 TMEM columns; the base address is written to shared memory.
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 128;" ::"r"(smem_addr(&tmem_base_slot))
                 : "memory");
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
  }
  if (threadIdx.x == 32) {
    for (int s = 0; s < 2; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&full[s])) : "memory");
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&mma_done[s])) : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  const unsigned tmem_d = tmem_base_slot;

  const int ktiles = K / 64;
  const unsigned idesc = idesc_bf16_f32(128, 128);
  if (threadIdx.x == 0) {
    for (int kt = 0; kt < ktiles; ++kt) {
      const int s = kt & 1;
      if (kt >= 2) mbar_wait(smem_addr(&mma_done[s]), ((kt >> 1) - 1) & 1);  // stage free again
      unsigned fb = smem_addr(&full[s]);
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(fb), "r"(2 * 128 * 64 * 2) : "memory");
      asm volatile(
          "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
              smem_addr(sA + s * 128 * 64)),
          "l"(&tmap_a), "r"(kt * 64), "r"(m0), "r"(fb)
          : "memory");
      asm volatile(
          "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
              smem_addr(sB + s * 128 * 64)),
          "l"(&tmap_b), "r"(kt * 64), "r"(n0), "r"(fb)
          : "memory");
      mbar_wait(fb, (kt >> 1) & 1);
      asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        unsigned long long da = umma_desc(sA + s * 128 * 64 + kk * 16, 16, 1024, 2);
        unsigned long long db = umma_desc(sB + s * 128 * 64 + kk * 16, 16, 1024, 2);
        unsigned accumulate = (kt | kk) != 0;
        asm volatile(
            "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
            "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n\t}" ::"r"(tmem_d),
            "l"(da), "l"(db), "r"(idesc), "r"(accumulate)
            : "memory");
      }
      // Arrives on mma_done[s] once all previously issued MMAs have completed (frees the smem stage).
      asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(
                       smem_addr(&mma_done[s]))
                   : "memory");
    }
  }
  __syncwarp();
  // Wait for the last commit, then every warp drains its 32 TMEM lanes.
  const int last = ktiles - 1;
  mbar_wait(smem_addr(&mma_done[last & 1]), (last >> 1) & 1);
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  const int row = m0 + warp * 32 + lane;
#pragma unroll 1
  for (int c = 0; c < 128; c += 16) {
    float v[16];
    unsigned taddr = tmem_d + ((unsigned)(warp * 32) << 16) + (unsigned)c;
    tmem_ld_32x32b_x16(taddr, v);
    asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
    float4 *dst = reinterpret_cast<float4 *>(C + (size_t)row * N + n0 + c);
    dst[0] = make_float4(v[0], v[1], v[2], v[3]);
    dst[1] = make_float4(v[4], v[5], v[6], v[7]);
    dst[2] = make_float4(v[8], v[9], v[10], v[11]);
    dst[3] = make_float4(v[12], v[13], v[14], v[15]);
  }
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  if (warp == 0)
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 128;" ::"r"(tmem_d) : "memory");
}
