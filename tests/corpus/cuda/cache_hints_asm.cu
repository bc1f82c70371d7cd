// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: inline-asm cache operators: ld.global.nc.L1::no_allocate.v4, L2::128B/256B prefetch sizes, createpolicy (fractional, range) + L2::cache_hint, st.global.cs/.wt, prefetch/prefetchu, discard, applypriority, ld.global.L1::evict_last.

__device__ __forceinline__ uint4 ld_nc_na_v4(const void *p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}

__device__ __forceinline__ float4 ld_l2_256b(const void *p) {
  float4 r;
  asm volatile("ld.global.L1::evict_last.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w) : "l"(p));
  return r;
}

__device__ __forceinline__ void st_cs_v4(void *p, float4 v) {
  asm volatile("st.global.cs.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
               : "memory");
}

__device__ __forceinline__ unsigned long long make_policy_evict_first() {
  unsigned long long pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}

__device__ __forceinline__ unsigned long long make_policy_evict_last(float frac) {
  unsigned long long pol;
  asm volatile("createpolicy.fractional.L2::evict_last.L2::evict_unchanged.b64 %0, %1;" : "=l"(pol) : "f"(frac));
  return pol;
}

__device__ __forceinline__ float4 ld_hint(const float4 *p, unsigned long long pol) {
  float4 r;
  asm volatile("ld.global.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
               : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w) : "l"(p), "l"(pol));
  return r;
}

__device__ __forceinline__ void st_hint(float *p, float v, unsigned long long pol) {
  asm volatile("st.global.L2::cache_hint.f32 [%0], %1, %2;" ::"l"(p), "f"(v), "l"(pol) : "memory");
}

extern "C" __global__ void stream_scale(const float4 *__restrict__ in, float4 *__restrict__ out,
                                        const float4 *__restrict__ weights, float s, int n) {
  unsigned long long pol_first = make_policy_evict_first();
  unsigned long long pol_last = make_policy_evict_last(0.5f);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    if (i + 4 * blockDim.x < n) {
      asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(in + i + 4 * blockDim.x));
      asm volatile("prefetch.global.L1 [%0];" ::"l"(weights + i + blockDim.x));
    }
    uint4 raw = ld_nc_na_v4(in + i);
    float4 w = ld_hint(weights + (i & 1023), pol_last);
    float4 b = ld_l2_256b(weights + 1024 + (i & 255));
    float4 v = make_float4(__uint_as_float(raw.x), __uint_as_float(raw.y), __uint_as_float(raw.z),
                           __uint_as_float(raw.w));
    v.x = v.x * s * w.x + b.x;
    v.y = v.y * s * w.y + b.y;
    v.z = v.z * s * w.z + b.z;
    v.w = v.w * s * w.w + b.w;
    st_cs_v4(out + i, v);
    if ((i & 31) == 0) st_hint(reinterpret_cast<float *>(out) + 4 * n + (i >> 5), v.x, pol_first);
  }
}

extern "C" __global__ void l2_maintenance(float *scratch, const float *table, int bytes) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  const char *base = reinterpret_cast<const char *>(table);
  if (i * 128 < bytes) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(base + i * 128));
    asm volatile("prefetchu.L1 [%0];" ::"l"(base + i * 128));
    asm volatile("applypriority.global.L2::evict_normal [%0], 128;" ::"l"(base + i * 128));
  }
  unsigned long long pol;
  asm volatile("createpolicy.range.global.L2::evict_last.L2::evict_first.b64 %0, [%1], %2, %3;"
               : "=l"(pol) : "l"(table), "r"(4096u), "r"(65536u));
  float v;
  asm volatile("ld.global.L1::no_allocate.L2::cache_hint.f32 %0, [%1], %2;" : "=f"(v) : "l"(table + i), "l"(pol));
  asm volatile("st.global.wt.f32 [%0], %1;" ::"l"(scratch + i), "f"(v) : "memory");
  __syncthreads();
  if (threadIdx.x == 0 && blockIdx.x == 0)
    asm volatile("discard.global.L2 [%0], 128;" ::"l"(scratch + 1024) : "memory");
}
