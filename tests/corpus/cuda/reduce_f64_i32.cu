// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: double and integer reductions, atomicAdd(double), atomicCAS loops (float max, double min), red.global via inline asm, 64-bit atomics.

__device__ __forceinline__ double warp_sum_f64(double v) {
  for (int off = 16; off > 0; off >>= 1)
    v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}

__device__ __forceinline__ long long warp_sum_i64(long long v) {
  for (int off = 16; off > 0; off >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ float atomic_max_float(float *addr, float val) {
  int *iaddr = reinterpret_cast<int *>(addr);
  int old = *iaddr, assumed;
  do {
    assumed = old;
    if (__int_as_float(assumed) >= val) break;
    old = atomicCAS(iaddr, assumed, __float_as_int(val));
  } while (assumed != old);
  return __int_as_float(old);
}

__device__ double atomic_min_double(double *addr, double val) {
  unsigned long long *uaddr = reinterpret_cast<unsigned long long *>(addr);
  unsigned long long old = *uaddr, assumed;
  do {
    assumed = old;
    if (__longlong_as_double((long long)assumed) <= val) break;
    old = atomicCAS(uaddr, assumed, (unsigned long long)__double_as_longlong(val));
  } while (assumed != old);
  return __longlong_as_double((long long)old);
}

__device__ __forceinline__ void red_add_u32(unsigned int *addr, unsigned int v) {
  asm volatile("red.global.add.u32 [%0], %1;" ::"l"(addr), "r"(v) : "memory");
}

__device__ __forceinline__ void red_add_f32_relaxed_gpu(float *addr, float v) {
  asm volatile("red.relaxed.gpu.global.add.f32 [%0], %1;" ::"l"(addr), "f"(v) : "memory");
}

extern "C" __global__ void reduce_sum_f64(const double *__restrict__ x, double *out, long long n) {
  __shared__ double warp_part[32];
  double acc = 0.0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)blockDim.x * gridDim.x)
    acc += x[i];
  acc = warp_sum_f64(acc);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_part[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < (blockDim.x >> 5) ? warp_part[lane] : 0.0;
    acc = warp_sum_f64(acc);
    if (lane == 0) atomicAdd(out, acc);
  }
}

extern "C" __global__ void reduce_int_stats(const int *__restrict__ x, int n, long long *sum,
                                            int *mn, int *mx, unsigned int *count_pos,
                                            unsigned long long *xor_all) {
  long long s = 0;
  int lo = 0x7fffffff, hi = -0x7fffffff - 1;
  unsigned int pos = 0;
  unsigned long long xr = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    int v = x[i];
    s += v;
    lo = min(lo, v);
    hi = max(hi, v);
    pos += v > 0;
    xr ^= (unsigned long long)(unsigned)v << (i & 31);
  }
  s = warp_sum_i64(s);
  for (int off = 16; off > 0; off >>= 1) {
    lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, off));
    hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, off));
    pos += __shfl_xor_sync(0xffffffffu, pos, off);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd((unsigned long long *)sum, (unsigned long long)s);
    atomicMin(mn, lo);
    atomicMax(mx, hi);
    red_add_u32(count_pos, pos);
  }
  atomicXor(xor_all, xr);
}

extern "C" __global__ void reduce_extrema_cas(const float *__restrict__ xf, const double *__restrict__ xd, int n,
                                              float *fmax_out, double *dmin_out, float *fsum_out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  atomic_max_float(fmax_out, xf[i]);
  atomic_min_double(dmin_out, xd[i]);
  red_add_f32_relaxed_gpu(fsum_out, xf[i]);
}
