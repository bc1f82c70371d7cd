// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: shfl.sync up/down/bfly/idx (with width), vote.sync any/all/ballot/uni, match.any/all, redux.sync (add/min/max/and/or/xor), activemask, __syncwarp with partial masks.

extern "C" __global__ void warp_scan_and_vote(const int *__restrict__ in, int *__restrict__ scan_out,
                                              unsigned *__restrict__ vote_out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x & 31;
  int v = i < n ? in[i] : 0;
  // inclusive scan via shfl.up
  int s = v;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    int t = __shfl_up_sync(0xffffffffu, s, d);
    if (lane >= d) s += t;
  }
  // broadcast of lane 31 via shfl.idx
  int total = __shfl_sync(0xffffffffu, s, 31);
  // rotate within sub-groups of 8 lanes (width operand -> clamp/mask value)
  int rot = __shfl_sync(0xffffffffu, v, (lane + 1) & 7, 8);
  int dn = __shfl_down_sync(0xffffffffu, v, 3, 16);
  int up = __shfl_up_sync(0xffffffffu, v, 2, 16);
  int bf = __shfl_xor_sync(0xffffffffu, v, 5, 32);

  unsigned ballot = __ballot_sync(0xffffffffu, v > 0);
  int any_neg = __any_sync(0xffffffffu, v < 0);
  int all_small = __all_sync(0xffffffffu, v < 1000);
  int uni = __uni_sync(0xffffffffu, v == total);
  unsigned peers = __match_any_sync(0xffffffffu, v & 0xf);
  int pred;
  unsigned all_eq = __match_all_sync(0xffffffffu, v >> 4, &pred);

  if (i < n) {
    scan_out[i] = s + rot * 3 + dn - up + (bf ^ total);
    vote_out[i] = ballot ^ (peers << 1) ^ all_eq ^ (unsigned)(any_neg + 2 * all_small + 4 * pred + 8 * uni);
  }
}

extern "C" __global__ void warp_redux(const unsigned *__restrict__ in, unsigned *__restrict__ out) {
  unsigned v = in[blockIdx.x * blockDim.x + threadIdx.x];
  unsigned a = __reduce_add_sync(0xffffffffu, v);
  unsigned mn = __reduce_min_sync(0xffffffffu, v);
  unsigned mx = __reduce_max_sync(0xffffffffu, v);
  int smn = __reduce_min_sync(0xffffffffu, (int)v);
  int smx = __reduce_max_sync(0xffffffffu, (int)v);
  unsigned an = __reduce_and_sync(0xffffffffu, v);
  unsigned o = __reduce_or_sync(0xffffffffu, v);
  unsigned x = __reduce_xor_sync(0xffffffffu, v);
  if ((threadIdx.x & 31) == 0) {
    unsigned *dst = out + (blockIdx.x * blockDim.x + threadIdx.x) / 32 * 8;
    dst[0] = a; dst[1] = mn; dst[2] = mx; dst[3] = (unsigned)smn;
    dst[4] = (unsigned)smx; dst[5] = an; dst[6] = o; dst[7] = x;
  }
}

// Divergent code: active mask, partial-mask shuffles, __syncwarp(mask).
extern "C" __global__ void warp_partial(const float *__restrict__ in, float *__restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x & 31;
  float v = i < n ? in[i] : 0.f;
  if (lane < 16) {
    unsigned m = __activemask();
    float t = __shfl_xor_sync(0x0000ffffu, v, 1);
    __syncwarp(0x0000ffffu);
    v = v + t + (float)__popc(m);
  } else {
    float t = __shfl_down_sync(0xffff0000u, v, 1, 16);
    __syncwarp(0xffff0000u);
    v = v * t;
  }
  __syncwarp();
  // reduce via redux-like fallback for floats
  for (int off = 16; off; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if (i < n) out[i] = v;
}

// Leader election via ballot + ffs, warp-aggregated atomics.
extern "C" __global__ void warp_aggregated_append(const int *__restrict__ in, int *__restrict__ out,
                                                  unsigned *counter, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  bool keep = i < n && (in[i] & 1);
  unsigned mask = __ballot_sync(0xffffffffu, keep);
  if (keep) {
    int leader = __ffs(mask) - 1;
    int lane = threadIdx.x & 31;
    unsigned base = 0;
    if (lane == leader) base = atomicAdd(counter, __popc(mask));
    base = __shfl_sync(mask, base, leader);
    unsigned rank = __popc(mask & ((1u << lane) - 1));
    out[base + rank] = in[i];
  }
}
