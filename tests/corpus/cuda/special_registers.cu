// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: special registers and timing: clock/clock64, %globaltimer (+ _lo/_hi), %smid/%nsmid, %warpid/%nwarpid, %laneid, %lanemask_*, %gridid, %envreg, %pm counters, %clock_hi; __nanosleep backoff spin lock, __trap / trap / brkpt / pmevent / exit in inline asm.

__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

extern "C" __global__ void timing_probe(unsigned long long *__restrict__ out, float *__restrict__ work, int iters) {
  unsigned long long t0 = globaltimer();
  long long c0 = clock64();
  unsigned cl = clock();
  float v = work[threadIdx.x];
#pragma unroll 1
  for (int i = 0; i < iters; ++i) v = fmaf(v, 1.0001f, 0.5f);
  work[threadIdx.x] = v;
  long long c1 = clock64();
  unsigned long long t1 = globaltimer();
  unsigned smid, nsmid, warpid, nwarpid, laneid, lt, le, eq, gt, ge, lo, hi, chi;
  unsigned long long gridid;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  asm volatile("mov.u32 %0, %%nsmid;" : "=r"(nsmid));
  asm volatile("mov.u32 %0, %%warpid;" : "=r"(warpid));
  asm volatile("mov.u32 %0, %%nwarpid;" : "=r"(nwarpid));
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(laneid));
  asm volatile("mov.u32 %0, %%lanemask_lt;" : "=r"(lt));
  asm volatile("mov.u32 %0, %%lanemask_le;" : "=r"(le));
  asm volatile("mov.u32 %0, %%lanemask_eq;" : "=r"(eq));
  asm volatile("mov.u32 %0, %%lanemask_gt;" : "=r"(gt));
  asm volatile("mov.u32 %0, %%lanemask_ge;" : "=r"(ge));
  asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(lo));
  asm volatile("mov.u32 %0, %%globaltimer_hi;" : "=r"(hi));
  asm volatile("mov.u32 %0, %%clock_hi;" : "=r"(chi));
  asm volatile("mov.u64 %0, %%gridid;" : "=l"(gridid));
  unsigned env0, pm0;
  asm volatile("mov.b32 %0, %%envreg0;" : "=r"(env0));
  asm volatile("mov.u32 %0, %%pm0;" : "=r"(pm0));
  unsigned long long pm4_64;
  asm volatile("mov.u64 %0, %%pm4_64;" : "=l"(pm4_64));
  unsigned long long *o = out + (blockIdx.x * blockDim.x + threadIdx.x) * 8;
  o[0] = t1 - t0;
  o[1] = (unsigned long long)(c1 - c0) + cl;
  o[2] = ((unsigned long long)smid << 32) | nsmid;
  o[3] = ((unsigned long long)warpid << 32) | nwarpid;
  o[4] = ((unsigned long long)laneid << 32) | (lt ^ le ^ eq ^ gt ^ ge);
  o[5] = ((unsigned long long)hi << 32 | lo) ^ chi;
  o[6] = gridid;
  o[7] = ((unsigned long long)env0 << 32) ^ pm0 ^ pm4_64;
}

// Spin lock with exponential __nanosleep backoff.
__device__ int g_lock = 0;
__device__ float g_shared_total = 0.f;

extern "C" __global__ void locked_accumulate(const float *__restrict__ x, int n) {
  float local = 0.f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) local += x[i];
  for (int o = 16; o; o >>= 1) local += __shfl_xor_sync(0xffffffffu, local, o);
  if ((threadIdx.x & 31) == 0) {
    unsigned ns = 8;
    while (atomicCAS(&g_lock, 0, 1) != 0) {
      __nanosleep(ns);
      if (ns < 256) ns *= 2;
    }
    __threadfence();
    g_shared_total += local;
    __threadfence();
    atomicExch(&g_lock, 0);
  }
}

// Error paths: assertion-like trap, breakpoints, performance events, early exit.
extern "C" __global__ void checked_gather(const int *__restrict__ idx, const float *__restrict__ src, float *__restrict__ dst,
                                         int n, int m, int debug) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) asm volatile("exit;");
  int j = idx[i];
  if (j < 0 || j >= m) __trap();
  if (debug == 2) asm volatile("brkpt;");
  if (debug == 3) asm volatile("pmevent 7;");
  if (debug == 4) asm volatile("pmevent.mask 0x5;");
  if (isnan(src[j])) asm volatile("trap;");
  unsigned ns;
  asm volatile("mov.u32 %0, 100;\n\tnanosleep.u32 %0;" : "=r"(ns));
  dst[i] = src[j] + (float)(ns & 1);
}
