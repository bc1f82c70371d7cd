// corpus: archs=sm_90a,sm_100a
// Exercises: Hopper mbarrier (init, fence.mbarrier_init, arrive, arrive.expect_tx, try_wait.parity loops with labels in scoped inline asm, expect_tx, arrive.release.cluster, test_wait, inval), fence.proxy.async, cp.async.bulk global->shared::cluster with complete_tx, bulk stores/reductions with bulk_group commit/wait, cp.async.bulk.prefetch.L2, L2::cache_hint.

#define STAGES 4
#define CHUNK_BYTES 8192
#define CHUNK_FLOATS (CHUNK_BYTES / 4)

__device__ __forceinline__ unsigned smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbar_init(unsigned long long *bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned long long *bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ unsigned long long mbar_arrive(unsigned long long *bar) {
  unsigned long long state;
  asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=l"(state) : "r"(smem_addr(bar)) : "memory");
  return state;
}

__device__ __forceinline__ void mbar_wait_parity(unsigned long long *bar, unsigned phase) {
  asm volatile(
      "{\n\t"
      ".reg .pred P1;\n\t"
      "LAB_WAIT:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n\t"
      "@P1 bra DONE;\n\t"
      "bra LAB_WAIT;\n\t"
      "DONE:\n\t"
      "}" ::"r"(smem_addr(bar)),
      "r"(phase)
      : "memory");
}

// Variant with a suspend-time hint and acquire.cta semantics, returning when done.
__device__ __forceinline__ void mbar_wait_parity_hint(unsigned long long *bar, unsigned phase) {
  unsigned done = 0;
  while (!done) {
    asm volatile(
        "{\n\t"
        ".reg .pred p;\n\t"
        "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2, %3;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t"
        "}"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(phase), "r"(0x989680)
        : "memory");
  }
}

__device__ __forceinline__ void bulk_g2s(void *dst, const void *src, unsigned bytes, unsigned long long *bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

__device__ __forceinline__ void bulk_g2s_hint(void *dst, const void *src, unsigned bytes, unsigned long long *bar,
                                              unsigned long long policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}

// Streaming scale: x -> y, chunks of 8 KiB, 4-stage ring with full/empty barriers.
// Warp 0 lane 0 is the producer; warps 1..4 consume and write back with bulk stores.
extern "C" __global__ void __launch_bounds__(160) bulk_stream_scale(const float *__restrict__ x, float *__restrict__ y,
                                                                    float *__restrict__ sum_out, float alpha,
                                                                    int nchunks) {
  __shared__ __align__(128) float ring[STAGES][CHUNK_FLOATS];
  __shared__ __align__(128) float outbuf[CHUNK_FLOATS];
  __shared__ __align__(8) unsigned long long full[STAGES];
  __shared__ __align__(8) unsigned long long empty[STAGES];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 4);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();

  if (warp == 0) {
    if (lane == 0) {
      unsigned long long pol;
      asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
      for (int c = 0; c < nchunks; ++c) {
        int s = c % STAGES;
        unsigned phase = (c / STAGES) & 1;
        if (c >= STAGES) mbar_wait_parity(&empty[s], phase ^ 1);
        mbar_arrive_expect_tx(&full[s], CHUNK_BYTES);
        const float *src = x + (size_t)blockIdx.x * nchunks * CHUNK_FLOATS + (size_t)c * CHUNK_FLOATS;
        if (c + STAGES < nchunks)
          asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src + STAGES * CHUNK_FLOATS), "r"(CHUNK_BYTES)
                       : "memory");
        if (c & 1)
          bulk_g2s_hint(&ring[s][0], src, CHUNK_BYTES, &full[s], pol);
        else
          bulk_g2s(&ring[s][0], src, CHUNK_BYTES, &full[s]);
      }
    }
  } else {
    const int ct = threadIdx.x - 32;  // 0..127
    float acc = 0.f;
    for (int c = 0; c < nchunks; ++c) {
      int s = c % STAGES;
      mbar_wait_parity_hint(&full[s], (c / STAGES) & 1);
      // make sure the previous bulk store has finished reading outbuf
      if (ct == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
      asm volatile("bar.sync 1, 128;" ::: "memory");
      for (int i = ct; i < CHUNK_FLOATS; i += 128) {
        float v = ring[s][i] * alpha;
        outbuf[i] = v;
        acc += v;
      }
      if (lane == 0) mbar_arrive(&empty[s]);
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      asm volatile("bar.sync 1, 128;" ::: "memory");
      if (ct == 0) {
        float *dst = y + (size_t)blockIdx.x * nchunks * CHUNK_FLOATS + (size_t)c * CHUNK_FLOATS;
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(smem_addr(outbuf)),
                     "r"(CHUNK_BYTES)
                     : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
      }
    }
    if (ct == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) atomicAdd(sum_out, acc);
  }
  __syncthreads();
  if (threadIdx.x < STAGES) asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(smem_addr(&full[threadIdx.x])) : "memory");
}

// Bulk reductions from shared memory into global (add.f32, min.u32, add.noftz.bf16 style ops).
extern "C" __global__ void __launch_bounds__(128) bulk_reduce_partials(const float *__restrict__ in, float *__restrict__ accum,
                                                                       unsigned *__restrict__ umin, int n) {
  __shared__ __align__(128) float part[1024];
  __shared__ __align__(128) unsigned upart[1024];
  for (int i = threadIdx.x; i < 1024; i += 128) {
    float v = in[(size_t)blockIdx.x * 1024 + i];
    part[i] = v * v;
    upart[i] = __float_as_uint(fabsf(v));
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], 4096;" ::"l"(accum),
                 "r"(smem_addr(part))
                 : "memory");
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.min.u32 [%0], [%1], 4096;" ::"l"(umin),
                 "r"(smem_addr(upart))
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
  }
  __syncthreads();
}

// mbarrier used as a plain CTA barrier with arrival tokens, test_wait polling, explicit tx accounting.
extern "C" __global__ void __launch_bounds__(256) mbarrier_tokens(float *__restrict__ data, unsigned long long *__restrict__ tok_out) {
  __shared__ __align__(8) unsigned long long bar;
  __shared__ __align__(16) float scratch[256];
  if (threadIdx.x == 0) {
    mbar_init(&bar, 256);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  scratch[threadIdx.x] = data[blockIdx.x * 256 + threadIdx.x] + 1.f;
  unsigned long long token = mbar_arrive(&bar);
  unsigned ok = 0;
  while (!ok) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tmbarrier.test_wait.shared::cta.b64 p, [%1], %2;\n\tselp.b32 %0, 1, 0, p;\n\t}"
        : "=r"(ok)
        : "r"(smem_addr(&bar)), "l"(token)
        : "memory");
  }
  data[blockIdx.x * 256 + threadIdx.x] = scratch[255 - threadIdx.x];
  tok_out[blockIdx.x * 256 + threadIdx.x] = token;
  // Second phase: thread 0 adds a transaction count and completes it itself.
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], 16;" ::"r"(smem_addr(&bar)) : "memory");
    asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], 16;" ::"r"(smem_addr(&bar)) : "memory");
  }
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0], 1;" ::"r"(smem_addr(&bar)) : "memory");
  mbar_wait_parity(&bar, 1);
  unsigned pending;
  asm volatile("mbarrier.pending_count.b64 %0, %1;" : "=r"(pending) : "l"(token));
  if (threadIdx.x == 0) tok_out[gridDim.x * 256 + blockIdx.x] = pending;
}
