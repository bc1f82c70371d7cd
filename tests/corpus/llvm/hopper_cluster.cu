// corpus: archs=sm_90a opts=-O0,-O2,-O2 -g
// Exercises (LLVM NVPTX, sm_90a): cluster builtins (cluster_ctarank/nctarank/clusterid, barrier.cluster arrive/wait, mapa, getctarank, isspacep.shared::cluster, fence.sc.cluster), plus inline-asm mbarrier expect_tx / try_wait loop, cp.async.bulk, fence.proxy.async, elect.sync, setmaxnreg, wgmma fence/commit/wait.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))

static __device__ inline unsigned smem_u32(const void *p) {
  return (unsigned)(unsigned long)(__attribute__((address_space(3))) const char *)p;
}

extern "C" __global__ void __attribute__((launch_bounds(256, 1))) cluster_exchange(const float *__restrict__ x, float *__restrict__ out) {
  __shared__ float buf[256];
  unsigned rank = __nvvm_read_ptx_sreg_cluster_ctarank();
  unsigned nranks = __nvvm_read_ptx_sreg_cluster_nctarank();
  int t = __nvvm_read_ptx_sreg_tid_x();
  buf[t] = x[__nvvm_read_ptx_sreg_ctaid_x() * 256 + t];
  __nvvm_barrier_cluster_arrive();
  __nvvm_barrier_cluster_wait();
  float *peer = (float *)__nvvm_mapa(buf, (rank + 1) % nranks);
  float v = peer[(t + 1) & 255];
  unsigned owner = __nvvm_getctarank(peer);
  int is_cluster = __nvvm_isspacep_shared_cluster(peer);
  __nvvm_fence_sc_cluster();
  __nvvm_barrier_cluster_arrive_relaxed();
  __nvvm_barrier_cluster_wait();
  out[__nvvm_read_ptx_sreg_ctaid_x() * 256 + t] = v + (float)(owner * 2 + is_cluster) + (float)__nvvm_read_ptx_sreg_clusterid_x();
}

extern "C" __global__ void __attribute__((launch_bounds(384, 1))) bulk_pipeline(const float *__restrict__ src, float *__restrict__ dst) {
  __shared__ __attribute__((aligned(128))) float tile[2048];
  __shared__ __attribute__((aligned(8))) unsigned long long bar;
  int t = __nvvm_read_ptx_sreg_tid_x();
  unsigned b = smem_u32(&bar);
  if (t == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (t < 128) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;" ::: "memory");
    unsigned elected = 0;
    if (t < 32)
      asm volatile("{\n\t.reg .pred p;\n\t.reg .b32 l;\n\telect.sync l|p, 0xffffffff;\n\tselp.u32 %0, 1, 0, p;\n\t}" : "=r"(elected));
    if (elected && t < 32) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 8192;" ::"r"(b) : "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 8192, [%2];" ::"r"(smem_u32(tile)),
                   "l"(src + __nvvm_read_ptx_sreg_ctaid_x() * 2048), "r"(b)
                   : "memory");
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;" ::: "memory");
    asm volatile(
        "{\n\t.reg .pred P1;\n\tLAB_WAIT:\n\tmbarrier.try_wait.parity.shared::cta.b64 P1, [%0], 0;\n\t@P1 bra DONE;\n\tbra "
        "LAB_WAIT;\n\tDONE:\n\t}" ::"r"(b)
        : "memory");
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    for (int i = t - 128; i < 2048; i += 256) dst[__nvvm_read_ptx_sreg_ctaid_x() * 2048 + i] = tile[i] * 2.0f;
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
}
