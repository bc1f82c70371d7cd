// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: Ampere cp.async: .ca (4/8/16 B) and .cg (16 B) copies, zero-fill via src-size operand, ignore-src predicate form, L2::128B prefetch hint, cp.async.commit_group / wait_group N / wait_all, cp.async.mbarrier.arrive.noinc, a 3-stage software pipeline feeding a reduction.

#define STAGES 3
#define TILE_FLOATS 1024

__device__ __forceinline__ unsigned s_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void cp_async_cg16(void *smem, const void *gmem, bool valid) {
  int src_size = valid ? 16 : 0;  // 0 -> zero-fill destination
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;" ::"r"(s_addr(smem)), "l"(gmem), "r"(src_size)
               : "memory");
}
__device__ __forceinline__ void cp_async_ca16(void *smem, const void *gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(s_addr(smem)), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_ca8(void *smem, const void *gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(s_addr(smem)), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_ca4_pred(void *smem, const void *gmem, bool ignore) {
  asm volatile(
      "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %2, 0;\n\tcp.async.ca.shared.global [%0], [%1], 4, p;\n\t}" ::"r"(s_addr(smem)),
      "l"(gmem), "r"((int)ignore)
      : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// Multi-stage pipelined sum of squares over rows of length `cols` (256 threads, 4 floats each per stage).
extern "C" __global__ void __launch_bounds__(256) pipelined_sumsq(const float *__restrict__ x, float *__restrict__ out,
                                                                  int cols) {
  __shared__ __align__(16) float buf[STAGES][TILE_FLOATS];
  __shared__ float red[8];
  const float *row = x + (size_t)blockIdx.x * cols;
  const int ntiles = (cols + TILE_FLOATS - 1) / TILE_FLOATS;
  // prologue
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    int col = s * TILE_FLOATS + threadIdx.x * 4;
    if (s < ntiles) cp_async_cg16(&buf[s][threadIdx.x * 4], row + (col < cols ? col : 0), col < cols);
    cp_async_commit();
  }
  float acc = 0.f;
  for (int t = 0; t < ntiles; ++t) {
    int nt = t + STAGES - 1;
    if (nt < ntiles) {
      int col = nt * TILE_FLOATS + threadIdx.x * 4;
      cp_async_cg16(&buf[nt % STAGES][threadIdx.x * 4], row + (col < cols ? col : 0), col < cols);
    }
    cp_async_commit();
    cp_async_wait<STAGES - 1>();
    __syncthreads();
    float4 v = *reinterpret_cast<const float4 *>(&buf[t % STAGES][threadIdx.x * 4]);
    acc += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    __syncthreads();
  }
  cp_async_wait_all();
  for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.f;
    for (int w = 0; w < 8; ++w) s += red[w];
    out[blockIdx.x] = s;
  }
}

// Gather with mixed copy sizes and an mbarrier-tracked completion (sm_80 mbarrier: init/arrive/test_wait).
extern "C" __global__ void __launch_bounds__(128) gather_mixed_sizes(const float4 *__restrict__ src16,
                                                                     const float2 *__restrict__ src8,
                                                                     const float *__restrict__ src4,
                                                                     const int *__restrict__ idx, float *__restrict__ out,
                                                                     int n) {
  __shared__ __align__(16) float4 s16[128];
  __shared__ __align__(8) float2 s8[128];
  __shared__ float s4[128];
  __shared__ __align__(8) unsigned long long bar;
  const int t = threadIdx.x;
  // 128 threads x (one async .noinc arrive + one regular arrive) = 256 expected arrivals.
  if (t == 0) asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(s_addr(&bar)), "r"(256) : "memory");
  __syncthreads();
  int j = idx[blockIdx.x * 128 + t];
  bool ok = j >= 0 && j < n;
  cp_async_ca16(&s16[t], src16 + (ok ? j : 0));
  cp_async_ca8(&s8[t], src8 + (ok ? j : 0));
  cp_async_ca4_pred(&s4[t], src4 + (ok ? j : 0), !ok);
  // The barrier's pending count is decremented when this thread's prior cp.async ops complete.
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];" ::"r"(s_addr(&bar)) : "memory");
  asm volatile("mbarrier.arrive.shared.b64 _, [%0];" ::"r"(s_addr(&bar)) : "memory");
  // Wait for phase 0 to complete.
  asm volatile(
      "{\n\t"
      ".reg .pred done;\n\t"
      "WAIT_LOOP:\n\t"
      "mbarrier.test_wait.parity.shared.b64 done, [%0], 0;\n\t"
      "@!done bra WAIT_LOOP;\n\t"
      "}" ::"r"(s_addr(&bar))
      : "memory");
  __syncthreads();
  float4 a = s16[(t + 1) & 127];
  float2 b = s8[(t + 2) & 127];
  out[blockIdx.x * 128 + t] = a.x + a.y + a.z + a.w + b.x + b.y + (ok ? s4[t] : 0.f);
  if (t == 0) asm volatile("mbarrier.inval.shared.b64 [%0];" ::"r"(s_addr(&bar)) : "memory");
}
