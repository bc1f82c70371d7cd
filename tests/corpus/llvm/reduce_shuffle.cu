// corpus: archs=sm_80,sm_90a opts=-O0,-O2,-O2 -g
// Exercises (LLVM NVPTX): block reduction through shared memory, shfl.sync bfly/down/up/idx builtins, atomic float add, vote/match/redux builtins, bar.sync, grid-stride loops.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define tid_x() __nvvm_read_ptx_sreg_tid_x()
#define ntid_x() __nvvm_read_ptx_sreg_ntid_x()
#define ctaid_x() __nvvm_read_ptx_sreg_ctaid_x()
#define nctaid_x() __nvvm_read_ptx_sreg_nctaid_x()

static __device__ inline float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __nvvm_shfl_sync_bfly_f32(0xffffffffu, v, off, 31);
  return v;
}

extern "C" __global__ void reduce_sum(const float *__restrict__ x, float *__restrict__ out, int n) {
  __shared__ float partial[32];
  float acc = 0.0f;
  for (int i = ctaid_x() * ntid_x() + tid_x(); i < n; i += ntid_x() * nctaid_x()) acc += x[i];
  acc = warp_sum(acc);
  int lane = tid_x() & 31, warp = tid_x() >> 5;
  if (lane == 0) partial[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < (int)(ntid_x() >> 5) ? partial[lane] : 0.0f;
    acc = warp_sum(acc);
    if (lane == 0) __nvvm_atom_add_gen_f(out, acc);
  }
}

extern "C" __global__ void warp_ops(const int *__restrict__ in, int *__restrict__ out, unsigned *__restrict__ masks) {
  int i = ctaid_x() * ntid_x() + tid_x();
  int lane = tid_x() & 31;
  int v = in[i];
  int s = v;
  for (int d = 1; d < 32; d <<= 1) {
    int t = __nvvm_shfl_sync_up_i32(0xffffffffu, s, d, 0);
    if (lane >= d) s += t;
  }
  int dn = __nvvm_shfl_sync_down_i32(0xffffffffu, v, 4, 31);
  int bc = __nvvm_shfl_sync_idx_i32(0xffffffffu, s, 31, 31);
  unsigned ballot = __nvvm_vote_ballot_sync(0xffffffffu, v > 0);
  int any = __nvvm_vote_any_sync(0xffffffffu, v < 0);
  int all = __nvvm_vote_all_sync(0xffffffffu, v != 0);
  unsigned peers = __nvvm_match_any_sync_i32(0xffffffffu, v & 7);
  int red = __nvvm_redux_sync_add(v, 0xffffffffu);
  int mx = __nvvm_redux_sync_max(v, 0xffffffffu);
  unsigned orr = __nvvm_redux_sync_or((unsigned)v, 0xffffffffu);
  __nvvm_bar_warp_sync(0xffffffffu);
  out[i] = s + dn + bc + red + mx + any + 2 * all;
  masks[i] = ballot ^ peers ^ orr;
}

extern "C" __global__ void block_minmax(const float *__restrict__ x, float *__restrict__ out, int n) {
  __shared__ float smin[256], smax[256];
  int t = tid_x();
  int i = ctaid_x() * 256 + t;
  float v = i < n ? x[i] : 0.0f;
  smin[t] = v;
  smax[t] = v;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (t < s) {
      smin[t] = __builtin_fminf(smin[t], smin[t + s]);
      smax[t] = __builtin_fmaxf(smax[t], smax[t + s]);
    }
    __syncthreads();
  }
  if (t == 0) {
    out[2 * ctaid_x()] = smin[0];
    out[2 * ctaid_x() + 1] = smax[0];
  }
}
