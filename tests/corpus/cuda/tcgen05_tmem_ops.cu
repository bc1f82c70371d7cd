// corpus: archs=sm_100a
// Exercises: tensor-memory data movement and MMA variants: tcgen05.st (32x32b, 16x64b) + wait::st, tcgen05.ld shapes (16x64b, 16x128b, 16x256b, 16x32bx2, .pack::16b), tcgen05.cp smem->tmem (128x256b, 4x256b), tcgen05.shift, MMA kinds tf32 (A from TMEM), f8f6f4, i8, mxf8f6f4.block_scale; cta_group::2 alloc/mma/commit with multicast in a 2-CTA cluster.

__device__ __forceinline__ unsigned smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ unsigned long long umma_desc(const void *p, unsigned lbo, unsigned sbo) {
  unsigned long long d = (smem_addr(p) & 0x3FFFFull) >> 4;
  d |= (unsigned long long)((lbo >> 4) & 0x3FFF) << 16;
  d |= (unsigned long long)((sbo >> 4) & 0x3FFF) << 32;
  d |= 1ull << 46;
  return d;  // no swizzle (interleaved core matrices)
}

__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned phase) {
  asm volatile(
      "{\n\t"
      ".reg .pred P1;\n\t"
      "WAIT_%=:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n\t"
      "@!P1 bra WAIT_%=;\n\t"
      "}" ::"r"(bar),
      "r"(phase)
      : "memory");
}

extern "C" __global__ void __launch_bounds__(128, 1) tmem_roundtrip(const float *__restrict__ in, float *__restrict__ out,
                                                                    const uint4 *__restrict__ smem_src) {
  __shared__ __align__(1024) uint4 stage[128 * 256 / 128];  // 128 rows x 256 bits
  __shared__ __align__(1024) uint4 opA[128 * 32 / 8];
  __shared__ __align__(1024) uint4 opB[128 * 32 / 8];
  __shared__ __align__(16) uint4 scales[64];
  __shared__ unsigned tbase;
  __shared__ __align__(8) unsigned long long bar;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int i = threadIdx.x; i < 128 * 256 / 128; i += 128) stage[i] = smem_src[i];
  for (int i = threadIdx.x; i < 128 * 32 / 8; i += 128) {
    opA[i] = smem_src[256 + i];
    opB[i] = smem_src[768 + i];
  }
  if (threadIdx.x < 64) scales[threadIdx.x] = smem_src[1280 + threadIdx.x];
  if (warp == 0) asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 512;" ::"r"(smem_addr(&tbase)) : "memory");
  if (threadIdx.x == 32) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  const unsigned t = tbase;
  const unsigned lane_base = (unsigned)(warp * 32) << 16;

  // Registers -> TMEM (columns 0..3 and 64..67), then wait for the stores.
  const float *src = in + threadIdx.x * 8;
  asm volatile("tcgen05.st.sync.aligned.32x32b.x4.b32 [%0], {%1, %2, %3, %4};" ::"r"(t + lane_base), "f"(src[0]),
               "f"(src[1]), "f"(src[2]), "f"(src[3])
               : "memory");
  asm volatile("tcgen05.st.sync.aligned.16x64b.x4.b32 [%0], {%1, %2, %3, %4};" ::"r"(t + lane_base + 64), "f"(src[4]),
               "f"(src[5]), "f"(src[6]), "f"(src[7])
               : "memory");
  asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");

  // TMEM -> registers in several shapes.
  unsigned a0, a1, b0, b1, b2, b3, c0, c1, c2, c3, d0, d1, p0, p1;
  asm volatile("tcgen05.ld.sync.aligned.16x64b.x2.b32 {%0, %1}, [%2];" : "=r"(a0), "=r"(a1) : "r"(t + lane_base));
  asm volatile("tcgen05.ld.sync.aligned.16x128b.x2.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(b0), "=r"(b1), "=r"(b2), "=r"(b3) : "r"(t + lane_base + 8));
  asm volatile("tcgen05.ld.sync.aligned.16x256b.x1.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(c0), "=r"(c1), "=r"(c2), "=r"(c3) : "r"(t + lane_base + 16));
  asm volatile("tcgen05.ld.sync.aligned.16x32bx2.x2.b32 {%0, %1}, [%2], 2;" : "=r"(d0), "=r"(d1) : "r"(t + lane_base + 32));
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x2.pack::16b.b32 {%0, %1}, [%2];" : "=r"(p0), "=r"(p1) : "r"(t + lane_base + 64));
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");

  if (threadIdx.x == 0) {
    // SMEM -> TMEM copies (asynchronous, tracked by tcgen05.commit).
    asm volatile("tcgen05.cp.cta_group::1.128x256b [%0], %1;" ::"r"(t + 128), "l"(umma_desc(stage, 128, 256)) : "memory");
    asm volatile("tcgen05.cp.cta_group::1.4x256b [%0], %1;" ::"r"(t + 136), "l"(umma_desc(scales, 16, 64)) : "memory");
    asm volatile("tcgen05.shift.cta_group::1.down [%0];" ::"r"(t + 128) : "memory");
    // tf32 MMA with A in TMEM (columns 128..), B from shared memory; D at column 256.
    const unsigned idesc_tf32 = (1u << 4) | (2u << 7) | (2u << 10) | ((64u >> 3) << 17) | ((128u >> 4) << 24);
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
                 "tcgen05.mma.cta_group::1.kind::tf32 [%0], [%1], %2, %3, p;\n\t}" ::"r"(t + 256),
                 "r"(t + 128), "l"(umma_desc(opB, 128, 256)), "r"(idesc_tf32), "r"(0)
                 : "memory");
    // fp8 (e4m3 x e4m3) MMA from shared memory, D at column 320.
    const unsigned idesc_f8 = (1u << 4) | ((64u >> 3) << 17) | ((128u >> 4) << 24);
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
                 "tcgen05.mma.cta_group::1.kind::f8f6f4 [%0], %1, %2, %3, p;\n\t}" ::"r"(t + 320),
                 "l"(umma_desc(opA, 128, 256)), "l"(umma_desc(opB, 128, 256)), "r"(idesc_f8), "r"(0)
                 : "memory");
    // int8 MMA with s32 accumulation, D at column 384.
    const unsigned idesc_i8 = (2u << 4) | (1u << 7) | (1u << 10) | ((64u >> 3) << 17) | ((128u >> 4) << 24);
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
                 "tcgen05.mma.cta_group::1.kind::i8 [%0], %1, %2, %3, p;\n\t}" ::"r"(t + 384),
                 "l"(umma_desc(opA, 128, 256)), "l"(umma_desc(opB, 128, 256)), "r"(idesc_i8), "r"(0)
                 : "memory");
    // MX block-scaled fp8 MMA: scale factors for A and B live in TMEM (columns 136, 140).
    const unsigned idesc_mx = ((64u >> 3) << 17) | ((128u >> 4) << 24);
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %6, 0;\n\t"
                 "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale [%0], %1, %2, %3, [%4], [%5], p;\n\t}" ::"r"(t + 448),
                 "l"(umma_desc(opA, 128, 256)), "l"(umma_desc(opB, 128, 256)), "r"(idesc_mx), "r"(t + 136), "r"(t + 140),
                 "r"(0)
                 : "memory");
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(smem_addr(&bar))
                 : "memory");
  }
  __syncwarp();
  mbar_wait(smem_addr(&bar), 0);
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  float r[4];
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x4.b32 {%0, %1, %2, %3}, [%4];"
               : "=f"(r[0]), "=f"(r[1]), "=f"(r[2]), "=f"(r[3]) : "r"(t + lane_base + 256));
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
  out[threadIdx.x] = r[0] + r[1] + r[2] + r[3] +
                     __uint_as_float(a0 ^ a1 ^ b0 ^ b1 ^ b2 ^ b3 ^ c0 ^ c1 ^ c2 ^ c3 ^ d0 ^ d1 ^ p0 ^ p1) * 0.f + (float)lane;
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  if (warp == 0) {
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 512;" ::"r"(t) : "memory");
  }
}

// Pair of CTAs cooperating on one 256-row MMA (cta_group::2); the leader CTA issues, both receive the commit.
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(128, 1) tcgen05_pair_mma(const uint4 *__restrict__ src,
                                                                                                float *__restrict__ out) {
  __shared__ __align__(1024) uint4 opA[128 * 32 / 8];
  __shared__ __align__(1024) uint4 opB[128 * 32 / 8];
  __shared__ unsigned tbase;
  __shared__ __align__(8) unsigned long long bar;
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  const int warp = threadIdx.x >> 5;
  for (int i = threadIdx.x; i < 128 * 32 / 8; i += 128) {
    opA[i] = src[i];
    opB[i] = src[512 + i];
  }
  if (warp == 0) {
    asm volatile("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], 256;" ::"r"(smem_addr(&tbase)) : "memory");
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;" ::: "memory");
  }
  if (threadIdx.x == 32) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  const unsigned t = tbase;
  if (rank == 0 && threadIdx.x == 0) {
    const unsigned idesc = (1u << 4) | (1u << 7) | (1u << 10) | ((128u >> 3) << 17) | ((256u >> 4) << 24);
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
                 "tcgen05.mma.cta_group::2.kind::f16 [%0], %1, %2, %3, p;\n\t}" ::"r"(t),
                 "l"(umma_desc(opA, 128, 256)), "l"(umma_desc(opB, 128, 256)), "r"(idesc), "r"(0)
                 : "memory");
    unsigned short mask = 0x3;
    asm volatile("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;" ::"r"(
                     smem_addr(&bar)),
                 "h"(mask)
                 : "memory");
  }
  mbar_wait(smem_addr(&bar), 0);
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  float v[2];
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x2.b32 {%0, %1}, [%2];" : "=f"(v[0]), "=f"(v[1])
               : "r"(t + ((unsigned)(warp * 32) << 16)));
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
  out[(blockIdx.x * 128 + threadIdx.x) * 2] = v[0];
  out[(blockIdx.x * 128 + threadIdx.x) * 2 + 1] = v[1];
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  if (warp == 0) asm volatile("tcgen05.dealloc.cta_group::2.sync.aligned.b32 %0, 256;" ::"r"(t) : "memory");
}
