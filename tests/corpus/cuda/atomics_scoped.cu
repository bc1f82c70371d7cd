// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: atomic family (exch/min/max/and/or/xor/inc/dec/CAS 16/32/64-bit), _block/_system scopes, half2/bf16 atomics, shared-memory atomics, inline atom with .sem/.scope qualifiers.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

extern "C" __global__ void atomic_zoo(int *ip, unsigned *up, unsigned long long *ullp, long long *llp,
                                      float *fp, double *dp, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int old = atomicExch(ip + 0, i);
  atomicMin(ip + 1, old);
  atomicMax(ip + 2, old);
  atomicAnd(ip + 3, ~i);
  atomicOr(ip + 4, 1 << (i & 31));
  atomicXor(ip + 5, i);
  atomicSub(ip + 6, 3);
  atomicInc(up + 0, 1023u);
  atomicDec(up + 1, 1023u);
  atomicMin(ullp + 0, (unsigned long long)i);
  atomicMax(llp + 0, (long long)i * -3);
  atomicAnd(ullp + 1, 0xff00ff00ff00ff00ull);
  atomicExch(ullp + 2, (unsigned long long)i);
  atomicExch(fp + 0, (float)i);
  atomicAdd_block(fp + 1, 1.0f);
  atomicAdd_system(fp + 2, 2.0f);
  atomicAdd(dp + 0, 0.5);
  atomicAdd_block(dp + 1, 0.25);
  atomicCAS_system(ip + 7, 0, i);
  atomicCAS(ullp + 3, 0ull, (unsigned long long)i);
  atomicCAS((unsigned short int *)(up + 2), (unsigned short)0, (unsigned short)i);
}

extern "C" __global__ void atomic_half_bf16(__half2 *h2, __half *h, __nv_bfloat162 *b2, __nv_bfloat16 *b,
                                            const float *__restrict__ src, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = src[i];
  atomicAdd(h2, __floats2half2_rn(v, -v));
  atomicAdd(h, __float2half(v));
  atomicAdd(b2, __floats2bfloat162_rn(v, 2.0f * v));
  atomicAdd(b, __float2bfloat16(v));
}

// Shared-memory histogram with atomics (atom.shared.add), then flush with global atomics.
extern "C" __global__ void __launch_bounds__(256) histogram256(const unsigned char *__restrict__ data, int n,
                                                               unsigned int *__restrict__ hist) {
  __shared__ unsigned int s_hist[256];
  s_hist[threadIdx.x] = 0;
  __syncthreads();
  const uchar4 *d4 = reinterpret_cast<const uchar4 *>(data);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n / 4; i += blockDim.x * gridDim.x) {
    uchar4 q = d4[i];
    atomicAdd(&s_hist[q.x], 1u);
    atomicAdd(&s_hist[q.y], 1u);
    atomicAdd(&s_hist[q.z], 1u);
    atomicAdd(&s_hist[q.w], 1u);
  }
  __syncthreads();
  unsigned c = s_hist[threadIdx.x];
  if (c) atomicAdd(&hist[threadIdx.x], c);
}

// Explicit memory-order/scope atomics via inline PTX.
extern "C" __global__ void atomic_orders(unsigned *flag, unsigned long long *ctr, float *acc, int *data) {
  unsigned t = threadIdx.x;
  unsigned prev;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(prev) : "l"(flag), "r"(1u) : "memory");
  unsigned long long p64;
  asm volatile("atom.relaxed.sys.global.add.u64 %0, [%1], %2;" : "=l"(p64) : "l"(ctr), "l"(1ull) : "memory");
  float pf;
  asm volatile("atom.release.cta.global.add.f32 %0, [%1], %2;" : "=f"(pf) : "l"(acc), "f"(1.0f) : "memory");
  unsigned cas;
  asm volatile("atom.acquire.gpu.global.cas.b32 %0, [%1], %2, %3;" : "=r"(cas) : "l"(flag + 1), "r"(0u), "r"(t) : "memory");
  int ex;
  asm volatile("atom.global.exch.b32 %0, [%1], %2;" : "=r"(ex) : "l"(data), "r"((int)t) : "memory");
  asm volatile("red.release.gpu.global.max.s32 [%0], %1;" ::"l"(data + 1), "r"(ex) : "memory");
  asm volatile("red.relaxed.cta.global.inc.u32 [%0], %1;" ::"l"(flag + 2), "r"(255u) : "memory");
  data[2 + t] = (int)(prev + cas + (unsigned)p64) + (int)pf;
}
