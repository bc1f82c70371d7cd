// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: __syncthreads_count/and/or, named barriers (bar.sync id,count / bar.arrive / bar.red), __threadfence variants, fence.sc/acq_rel, membar, ld.acquire/st.release, volatile flags.

__device__ volatile int g_flag = 0;
__device__ int g_payload[64];

extern "C" __global__ void sync_predicates(const int *__restrict__ in, int *__restrict__ out) {
  int v = in[blockIdx.x * blockDim.x + threadIdx.x];
  int cnt = __syncthreads_count(v > 0);
  int all = __syncthreads_and(v != 0);
  int any = __syncthreads_or(v < 0);
  if (threadIdx.x == 0) {
    out[blockIdx.x * 3 + 0] = cnt;
    out[blockIdx.x * 3 + 1] = all;
    out[blockIdx.x * 3 + 2] = any;
  }
}

// Producer warps (0-1) fill a buffer, consumer warps (2-3) wait on named barrier 1.
extern "C" __global__ void __launch_bounds__(128) named_barrier_pc(const float *__restrict__ in,
                                                                  float *__restrict__ out, int iters) {
  __shared__ float buf[64];
  int warp = threadIdx.x >> 5;
  for (int it = 0; it < iters; ++it) {
    if (warp < 2) {
      buf[threadIdx.x] = in[it * 64 + threadIdx.x] * 2.0f;
      asm volatile("bar.arrive 1, 128;" ::: "memory");
      asm volatile("bar.sync 2, 128;" ::: "memory");
    } else {
      asm volatile("bar.sync 1, 128;" ::: "memory");
      out[it * 64 + threadIdx.x - 64] = buf[threadIdx.x - 64] + 1.0f;
      asm volatile("bar.arrive 2, 128;" ::: "memory");
    }
  }
  // Sub-group barrier among only the first 64 threads, using a register barrier id.
  if (threadIdx.x < 64) {
    unsigned id = 3, count = 64;
    asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
  }
  // bar.red.popc / and
  unsigned pop;
  int pred_in = threadIdx.x & 1;
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.s32 p, %1, 0;\n\tbar.red.popc.u32 %0, 0, p;\n\t}" : "=r"(pop) : "r"(pred_in));
  if (threadIdx.x == 0) out[iters * 64] = (float)pop;
  __syncthreads();
  asm volatile("bar.sync 0;" ::: "memory");
  asm volatile("barrier.sync.aligned 0;" ::: "memory");
}

extern "C" __global__ void fences_and_flags(int *data, int *flag_out) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (blockIdx.x == 0) {
    if (threadIdx.x < 64) g_payload[threadIdx.x] = tid * 7;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
      asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(&g_flag), "r"(1) : "memory");
    }
  } else {
    int f;
    do {
      asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(f) : "l"(&g_flag) : "memory");
    } while (f == 0);
    data[tid] = g_payload[threadIdx.x & 63];
  }
  __threadfence_block();
  __threadfence_system();
  asm volatile("membar.gl;" ::: "memory");
  asm volatile("membar.cta;" ::: "memory");
  asm volatile("membar.sys;" ::: "memory");
  asm volatile("fence.sc.gpu;" ::: "memory");
  asm volatile("fence.acq_rel.cta;" ::: "memory");
  asm volatile("fence.acq_rel.sys;" ::: "memory");
  int r;
  asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];" : "=r"(r) : "l"(data) : "memory");
  asm volatile("st.relaxed.sys.global.s32 [%0], %1;" ::"l"(flag_out), "r"(r + g_flag) : "memory");
  asm volatile("ld.volatile.global.s32 %0, [%1];" : "=r"(r) : "l"(data + 1) : "memory");
  asm volatile("st.volatile.global.s32 [%0], %1;" ::"l"(flag_out + 1), "r"(r) : "memory");
}
