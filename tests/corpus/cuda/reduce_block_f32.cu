// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: block/warp float sum + max reductions (shfl.sync.down/bfly), static __shared__, atomicAdd(float), grid-stride loops.

#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    v += __shfl_down_sync(FULL_MASK, v, off);
  return v;
}

__device__ __forceinline__ float warp_max_all(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, off));
  return v;
}

template <int BLOCK>
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[BLOCK / 32];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = (threadIdx.x < BLOCK / 32) ? partial[lane] : 0.0f;
  if (warp == 0) v = warp_sum(v);
  return v;
}

// Sum of all elements of x into *out (out must be zeroed before launch).
extern "C" __global__ void __launch_bounds__(256)
reduce_sum_f32(const float *__restrict__ x, float *__restrict__ out, int n) {
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    acc += x[i];
  acc = block_sum<256>(acc);
  if (threadIdx.x == 0) atomicAdd(out, acc);
}

// Per-row max and sum of squares; one block per row.
extern "C" __global__ void __launch_bounds__(128)
row_stats_f32(const float *__restrict__ x, float *__restrict__ row_max,
              float *__restrict__ row_sumsq, int cols) {
  __shared__ float s_max[4];
  const float *row = x + (size_t)blockIdx.x * cols;
  float m = -__int_as_float(0x7f800000);
  float ss = 0.0f;
  for (int c = threadIdx.x; c < cols; c += 128) {
    float v = row[c];
    m = fmaxf(m, v);
    ss = fmaf(v, v, ss);
  }
  m = warp_max_all(m);
  if ((threadIdx.x & 31) == 0) s_max[threadIdx.x >> 5] = m;
  ss = block_sum<128>(ss);
  __syncthreads();
  if (threadIdx.x == 0) {
    row_max[blockIdx.x] = fmaxf(fmaxf(s_max[0], s_max[1]), fmaxf(s_max[2], s_max[3]));
    row_sumsq[blockIdx.x] = ss;
  }
}

// Two-pass style: each block writes its partial, last block finishes (threadfence + atomic counter).
__device__ unsigned int g_blocks_done = 0;

extern "C" __global__ void reduce_sum_lastblock(const float *__restrict__ x, float *__restrict__ partials,
                                                float *__restrict__ out, int n) {
  __shared__ bool is_last;
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    acc += x[i];
  acc = block_sum<256>(acc);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = acc;
    __threadfence();
    unsigned int ticket = atomicInc(&g_blocks_done, gridDim.x);
    is_last = (ticket == gridDim.x - 1);
  }
  __syncthreads();
  if (is_last) {
    float t = 0.0f;
    for (int i = threadIdx.x; i < gridDim.x; i += blockDim.x)
      t += ((volatile float *)partials)[i];
    t = block_sum<256>(t);
    if (threadIdx.x == 0) {
      *out = t;
      g_blocks_done = 0;
    }
  }
}
