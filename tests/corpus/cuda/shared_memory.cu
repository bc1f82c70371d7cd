// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: static __shared__ (2-D padded tiles, multiple types), extern __shared__ dynamic arrays (aliased as several types), tiled transpose, bitonic sort in shared memory, ld/st.shared.v4, cvta.to.shared / __cvta_generic_to_shared, shared 64-bit atomics.

#define TILE 32
#define ROWS 8

extern "C" __global__ void transpose_padded(const float *__restrict__ in, float *__restrict__ out, int w, int h) {
  __shared__ float tile[TILE][TILE + 1];
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
#pragma unroll
  for (int j = 0; j < TILE; j += ROWS)
    if (x < w && y + j < h) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * w + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
#pragma unroll
  for (int j = 0; j < TILE; j += ROWS)
    if (x < h && y + j < w) out[(size_t)(y + j) * h + x] = tile[threadIdx.x][threadIdx.y + j];
}

// Bitonic sort of blockDim.x*2 keys with payload, dynamic shared memory split into two arrays.
extern "C" __global__ void bitonic_sort_kv(unsigned *__restrict__ keys, unsigned *__restrict__ vals) {
  extern __shared__ unsigned smem_u32[];
  const int n = blockDim.x * 2;
  unsigned *sk = smem_u32;
  unsigned *sv = smem_u32 + n;
  unsigned *gk = keys + (size_t)blockIdx.x * n;
  unsigned *gv = vals + (size_t)blockIdx.x * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    sk[i] = gk[i];
    sv[i] = gv[i];
  }
  __syncthreads();
  for (int size = 2; size <= n; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      int t = threadIdx.x;
      int pos = 2 * t - (t & (stride - 1));
      bool up = ((pos & size) == 0);
      unsigned a = sk[pos], b = sk[pos + stride];
      if ((a > b) == up) {
        sk[pos] = b;
        sk[pos + stride] = a;
        unsigned va = sv[pos];
        sv[pos] = sv[pos + stride];
        sv[pos + stride] = va;
      }
      __syncthreads();
    }
  }
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    gk[i] = sk[i];
    gv[i] = sv[i];
  }
}

// Dynamic shared memory reinterpreted as float4 and double, explicit shared-window addressing.
extern "C" __global__ void smem_vector_and_asm(const float4 *__restrict__ in, float4 *__restrict__ out,
                                               unsigned long long *__restrict__ counters) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float4 *s4 = reinterpret_cast<float4 *>(smem_raw);
  double *sd = reinterpret_cast<double *>(smem_raw + blockDim.x * sizeof(float4));
  __shared__ unsigned long long s_counter;
  if (threadIdx.x == 0) s_counter = 0;
  s4[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
  sd[threadIdx.x] = (double)threadIdx.x;
  __syncthreads();
  unsigned saddr = (unsigned)__cvta_generic_to_shared(&s4[(threadIdx.x + 1) % blockDim.x]);
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(saddr));
  v.x += (float)sd[(threadIdx.x + 3) % blockDim.x];
  atomicAdd(&s_counter, (unsigned long long)__float_as_uint(v.x) & 0xff);
  __syncthreads();
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(saddr), "f"(v.w), "f"(v.z), "f"(v.y), "f"(v.x)
               : "memory");
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = s4[threadIdx.x];
  if (threadIdx.x == 0) counters[blockIdx.x] = s_counter;
  unsigned dyn_size, total;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn_size));
  asm("mov.u32 %0, %%total_smem_size;" : "=r"(total));
  if (threadIdx.x == 1) counters[gridDim.x + blockIdx.x] = ((unsigned long long)dyn_size << 32) | total;
}

// Shared memory used through a generic pointer selected at runtime (forces generic addressing).
extern "C" __global__ void generic_or_shared(float *__restrict__ g, int use_shared, int n) {
  __shared__ float s[256];
  float *p = use_shared ? s : g + blockIdx.x * 256;
  p[threadIdx.x] = (float)threadIdx.x;
  __syncthreads();
  float v = p[(threadIdx.x + 1) & 255];
  bool is_sh = __isShared(p);
  bool is_gl = __isGlobal(p);
  if (threadIdx.x < n) g[gridDim.x * 256 + blockIdx.x * 256 + threadIdx.x] = v + (is_sh ? 1.f : 0.f) + (is_gl ? 2.f : 0.f);
}
