// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: block-wide exclusive scan (warp shfl.up + shared), decoupled look-back style flags with volatile/acquire loads, 4-bit LSD radix sort pass (ballot/match-based ranking), stream compaction, segmented prefix sums with 64-bit keys.

#define BLOCK 256
#define WARPS (BLOCK / 32)

template <typename T>
__device__ __forceinline__ T warp_inclusive_scan(T v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    T t = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += t;
  }
  return v;
}

template <typename T>
__device__ __forceinline__ T block_exclusive_scan(T v, T *smem, T *total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  T inc = warp_inclusive_scan(v);
  if (lane == 31) smem[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    T w = lane < WARPS ? smem[lane] : T(0);
    w = warp_inclusive_scan(w);
    if (lane < WARPS) smem[lane] = w;
  }
  __syncthreads();
  T prefix = warp > 0 ? smem[warp - 1] : T(0);
  *total = smem[WARPS - 1];
  __syncthreads();
  return prefix + inc - v;
}

// Single-pass scan with chained tile prefixes (flags: 0 = none, 1 = aggregate, 2 = inclusive prefix).
extern "C" __global__ void __launch_bounds__(BLOCK) scan_lookback_u32(const unsigned *__restrict__ in, unsigned *__restrict__ out,
                                                                      unsigned long long *__restrict__ tile_state,
                                                                      unsigned *__restrict__ tile_counter, int n) {
  __shared__ unsigned s_warp[WARPS];
  __shared__ unsigned s_tile, s_prefix;
  if (threadIdx.x == 0) s_tile = atomicAdd(tile_counter, 1u);
  __syncthreads();
  const unsigned tile = s_tile;
  const int i = tile * BLOCK + threadIdx.x;
  unsigned v = i < n ? in[i] : 0u, total;
  unsigned ex = block_exclusive_scan<unsigned>(v, s_warp, &total);
  if (threadIdx.x == 0) {
    unsigned long long mine = ((unsigned long long)(tile == 0 ? 2u : 1u) << 32) | total;
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(tile_state + tile), "l"(mine) : "memory");
    unsigned prefix = 0;
    for (int t = (int)tile - 1; t >= 0; --t) {
      unsigned long long st;
      do {
        asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(st) : "l"(tile_state + t) : "memory");
      } while ((st >> 32) == 0);
      prefix += (unsigned)st;
      if ((st >> 32) == 2) break;
    }
    if (tile != 0) {
      unsigned long long inc = (2ull << 32) | (prefix + total);
      asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(tile_state + tile), "l"(inc) : "memory");
    }
    s_prefix = prefix;
  }
  __syncthreads();
  if (i < n) out[i] = s_prefix + ex;
}

// One 4-bit LSD radix pass over BLOCK keys per block: local ranks via match.any + popc.
extern "C" __global__ void __launch_bounds__(BLOCK) radix_pass_4bit(const unsigned *__restrict__ keys_in, unsigned *__restrict__ keys_out,
                                                                    unsigned *__restrict__ block_hist, int shift, int n) {
  __shared__ unsigned s_hist[16];
  __shared__ unsigned s_scan[WARPS];
  __shared__ unsigned s_keys[BLOCK];
  const int i = blockIdx.x * BLOCK + threadIdx.x;
  const unsigned key = i < n ? keys_in[i] : 0xffffffffu;
  const unsigned digit = (key >> shift) & 15u;
  if (threadIdx.x < 16) s_hist[threadIdx.x] = 0;
  __syncthreads();
  const unsigned peers = __match_any_sync(0xffffffffu, digit);
  const int lane = threadIdx.x & 31;
  const unsigned rank_in_warp = __popc(peers & ((1u << lane) - 1));
  const int leader = __ffs(peers) - 1;
  unsigned base = 0;
  if (lane == leader) base = atomicAdd(&s_hist[digit], (unsigned)__popc(peers));
  base = __shfl_sync(0xffffffffu, base, leader);
  __syncthreads();
  unsigned total;
  unsigned h = threadIdx.x < 16 ? s_hist[threadIdx.x] : 0u;
  unsigned digit_start = block_exclusive_scan<unsigned>(h, s_scan, &total);
  if (threadIdx.x < 16) {
    block_hist[threadIdx.x * gridDim.x + blockIdx.x] = h;
    s_hist[threadIdx.x] = digit_start;
  }
  __syncthreads();
  s_keys[s_hist[digit] + base + rank_in_warp] = key;
  __syncthreads();
  if (i < n) keys_out[i] = s_keys[threadIdx.x];
}

// Stream compaction of non-zero floats, and segmented inclusive sum over 64-bit values.
extern "C" __global__ void __launch_bounds__(BLOCK) compact_and_segscan(const float *__restrict__ in, float *__restrict__ out,
                                                                        unsigned *__restrict__ out_count,
                                                                        const unsigned long long *__restrict__ vals,
                                                                        const int *__restrict__ seg_head,
                                                                        unsigned long long *__restrict__ seg_out, int n) {
  __shared__ unsigned s_warp[WARPS];
  __shared__ unsigned s_base;
  const int i = blockIdx.x * BLOCK + threadIdx.x;
  float v = i < n ? in[i] : 0.f;
  unsigned keep = v != 0.f, total;
  unsigned pos = block_exclusive_scan<unsigned>(keep, s_warp, &total);
  if (threadIdx.x == 0) s_base = atomicAdd(out_count, total);
  __syncthreads();
  if (keep) out[s_base + pos] = v;
  // segmented scan within a warp: reset at heads
  const int lane = threadIdx.x & 31;
  unsigned long long x = i < n ? vals[i] : 0ull;
  unsigned head_mask = __ballot_sync(0xffffffffu, i < n && seg_head[i]);
  unsigned below = head_mask & ((2u << lane) - 1u);
  int seg_start = below ? 31 - __clz(below) : 0;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    unsigned long long t = __shfl_up_sync(0xffffffffu, x, d);
    if (lane - d >= seg_start) x += t;
  }
  if (i < n) seg_out[i] = x;
}
