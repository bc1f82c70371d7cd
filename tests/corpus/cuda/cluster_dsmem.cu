// corpus: archs=sm_90a,sm_100a
// Exercises: thread-block clusters: __cluster_dims__ (.reqnctapercluster/.explicitcluster), __launch_bounds__ max-cluster-rank, barrier.cluster.arrive(.relaxed/.release)/wait(.acquire), mapa, getctarank, ld/st/atom on shared::cluster, st.async and red.async with remote mbarrier complete_tx, cp.async.bulk shared::cta->shared::cluster, multicast TMA, cluster special registers, elect.sync, fence.acq_rel.cluster.

struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

__device__ __forceinline__ unsigned smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ unsigned cluster_ctarank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ unsigned cluster_nctarank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ unsigned map_to_rank(unsigned local_smem, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(local_smem), "r"(rank));
  return r;
}
__device__ __forceinline__ void cluster_sync_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ void mbar_wait_cluster(unsigned bar, unsigned phase) {
  asm volatile(
      "{\n\t"
      ".reg .pred P1;\n\t"
      "WAIT_%=:\n\t"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 P1, [%0], %1;\n\t"
      "@!P1 bra WAIT_%=;\n\t"
      "}" ::"r"(bar),
      "r"(phase)
      : "memory");
}

// Cluster-wide reduction through distributed shared memory (4 CTAs).
extern "C" __global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(256) cluster_reduce_dsmem(const float *__restrict__ x,
                                                                                                  float *__restrict__ out,
                                                                                                  int n) {
  __shared__ float partial[256];
  __shared__ float cluster_total;
  const unsigned rank = cluster_ctarank();
  float v = 0.f;
  for (int i = blockIdx.x * 256 + threadIdx.x; i < n; i += gridDim.x * 256) v += x[i];
  partial[threadIdx.x] = v;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  cluster_sync();
  if (rank == 0 && threadIdx.x == 0) {
    float t = 0.f;
    const unsigned nr = cluster_nctarank();
    for (unsigned r = 0; r < nr; ++r) {
      unsigned remote = map_to_rank(smem_addr(&partial[0]), r);
      float pv;
      asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(pv) : "r"(remote) : "memory");
      t += pv;
    }
    cluster_total = t;
    __threadfence_block();
    t = cluster_total * 0.5f + t * 0.5f;
    unsigned cid, ncid;
    asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(cid));
    asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(ncid));
    out[cid] = t;
    out[ncid + cid] = (float)ncid;
  }
  cluster_sync_relaxed();
  // Remote store + remote atomic using generic (cluster-mapped) pointers.
  if (threadIdx.x == 0) {
    unsigned peer = (rank + 1) % cluster_nctarank();
    unsigned remote = map_to_rank(smem_addr(&partial[1]), peer);
    asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(remote), "f"((float)rank) : "memory");
    unsigned remote2 = map_to_rank(smem_addr(&partial[2]), peer);
    asm volatile("red.shared::cluster.add.f32 [%0], %1;" ::"r"(remote2), "f"(1.0f) : "memory");
    float *gen = &partial[3];
    unsigned long long gremote;
    asm volatile("mapa.u64 %0, %1, %2;" : "=l"(gremote) : "l"(gen), "r"(peer));
    *reinterpret_cast<float *>(gremote) = 2.0f;
    unsigned owner;
    asm volatile("getctarank.shared::cluster.u32 %0, %1;" : "=r"(owner) : "r"(remote));
    partial[4] = (float)owner;
  }
  asm volatile("fence.acq_rel.cluster;" ::: "memory");
  cluster_sync();
  if (threadIdx.x == 0) out[2 * gridDim.x + blockIdx.x] = partial[1] + partial[2] + partial[3] + partial[4];
}

// Neighbour exchange with st.async / red.async completing on the receiver's mbarrier (2-CTA cluster).
extern "C" __global__ void __cluster_dims__(2, 1, 1) halo_exchange_st_async(const unsigned *__restrict__ in,
                                                                           unsigned *__restrict__ out) {
  __shared__ __align__(16) unsigned recv[128];
  __shared__ unsigned counter;
  __shared__ __align__(8) unsigned long long bar;
  const unsigned rank = cluster_ctarank();
  const unsigned peer = rank ^ 1;
  if (threadIdx.x == 0) {
    counter = 0;
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    // expect 128 x 4 bytes of st.async + 128 x 4 bytes of red.async
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(&bar)), "r"(1024) : "memory");
  }
  cluster_sync();
  unsigned v = in[blockIdx.x * 128 + threadIdx.x];
  unsigned rdst = map_to_rank(smem_addr(&recv[threadIdx.x]), peer);
  unsigned rbar = map_to_rank(smem_addr(&bar), peer);
  unsigned rcnt = map_to_rank(smem_addr(&counter), peer);
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%0], %1, [%2];" ::"r"(rdst), "r"(v), "r"(rbar)
               : "memory");
  asm volatile("red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32 [%0], %1, [%2];" ::"r"(rcnt),
               "r"(1u), "r"(rbar)
               : "memory");
  mbar_wait_cluster(smem_addr(&bar), 0);
  out[blockIdx.x * 128 + threadIdx.x] = recv[(threadIdx.x + 1) & 127] + counter;
  cluster_sync_relaxed();
}

// Bulk DSMEM copy (shared::cta -> peer shared::cluster) and multicast TMA load to all CTAs of the cluster.
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(128, 1)
    cluster_bulk_and_multicast(const __grid_constant__ TensorMap tmap, float *__restrict__ out) {
  __shared__ __align__(128) float mine[1024];
  __shared__ __align__(128) float theirs[1024];
  __shared__ __align__(1024) float mc[32 * 32];
  __shared__ __align__(8) unsigned long long bars[2];
  const unsigned rank = cluster_ctarank();
  for (int i = threadIdx.x; i < 1024; i += 128) mine[i] = (float)(rank * 1024 + i);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bars[0])) : "memory");
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bars[1])) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 4096;" ::"r"(smem_addr(&bars[0])) : "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 4096;" ::"r"(smem_addr(&bars[1])) : "memory");
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  cluster_sync();
  unsigned is_leader = 0;
  if (threadIdx.x < 32) {
    asm volatile(
        "{\n\t.reg .pred P;\n\t.reg .b32 laneid;\n\telect.sync laneid|P, 0xffffffff;\n\tselp.u32 %0, 1, 0, P;\n\t}"
        : "=r"(is_leader));
  }
  if (is_leader) {
    unsigned peer = rank ^ 1;
    asm volatile(
        "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], 4096, [%2];" ::"r"(
            map_to_rank(smem_addr(theirs), peer)),
        "r"(smem_addr(mine)), "r"(map_to_rank(smem_addr(&bars[0]), peer))
        : "memory");
    if (rank == 0) {
      unsigned short mask = 0x3;
      asm volatile(
          "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, "
          "{%2, %3}], [%4], %5;" ::"r"(smem_addr(mc)),
          "l"(reinterpret_cast<unsigned long long>(&tmap)), "r"(0), "r"((int)blockIdx.y * 32), "r"(smem_addr(&bars[1])),
          "h"(mask)
          : "memory");
    }
  }
  mbar_wait_cluster(smem_addr(&bars[0]), 0);
  mbar_wait_cluster(smem_addr(&bars[1]), 0);
  float s = 0.f;
  for (int i = threadIdx.x; i < 1024; i += 128) s += theirs[i] + mc[i];
  unsigned ctaid_x, nctaid_x, is_explicit;
  asm volatile("mov.u32 %0, %%cluster_ctaid.x;" : "=r"(ctaid_x));
  asm volatile("mov.u32 %0, %%cluster_nctaid.x;" : "=r"(nctaid_x));
  asm volatile("{\n\t.reg .pred p;\n\tmov.pred p, %%is_explicit_cluster;\n\tselp.u32 %0, 1, 0, p;\n\t}" : "=r"(is_explicit));
  out[blockIdx.x * 128 + threadIdx.x] = s + (float)(ctaid_x + nctaid_x * 10 + is_explicit * 100);
  cluster_sync();
}

// Cluster shape chosen at launch time (cudaLaunchKernelEx); only an upper bound on the cluster size is declared
// (.maxclusterrank via the third __launch_bounds__ argument).
extern "C" __global__ void __launch_bounds__(128, 1, 8) cluster_runtime_shape(unsigned *__restrict__ out) {
  unsigned v[8];
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(v[0]));
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(v[1]));
  asm volatile("mov.u32 %0, %%cluster_ctaid.y;" : "=r"(v[2]));
  asm volatile("mov.u32 %0, %%cluster_nctaid.z;" : "=r"(v[3]));
  asm volatile("mov.u32 %0, %%clusterid.y;" : "=r"(v[4]));
  asm volatile("mov.u32 %0, %%nclusterid.z;" : "=r"(v[5]));
  asm volatile("mov.u32 %0, %%cluster_ctaid.z;" : "=r"(v[6]));
  asm volatile("mov.u32 %0, %%cluster_nctaid.x;" : "=r"(v[7]));
  cluster_sync_relaxed();
  if (threadIdx.x < 8) out[blockIdx.x * 8 + threadIdx.x] = v[threadIdx.x];
}
