// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: LayerNorm with Welford (mean/var merge via shuffles), fp16 I/O, online softmax (running max + rescaled sum) with exp2f and log-sum-exp, masked causal softmax, cross-entropy loss with atomics.
#include <cuda_fp16.h>

#define NEG_INF (-__int_as_float(0x7f800000))

struct Welford {
  float mean, m2, n;
};

__device__ __forceinline__ Welford welford_merge(Welford a, Welford b) {
  float n = a.n + b.n;
  if (n == 0.f) return a;
  float d = b.mean - a.mean;
  float nb = b.n / n;
  Welford r;
  r.mean = a.mean + d * nb;
  r.m2 = a.m2 + b.m2 + d * d * a.n * nb;
  r.n = n;
  return r;
}

extern "C" __global__ void __launch_bounds__(256) layernorm_fp16(const __half *__restrict__ x, const __half *__restrict__ gamma,
                                                                 const __half *__restrict__ beta, __half *__restrict__ y,
                                                                 float *__restrict__ mean_out, float *__restrict__ rstd_out,
                                                                 int cols, float eps) {
  __shared__ Welford s_w[8];
  __shared__ float s_mean, s_rstd;
  const __half *row = x + (size_t)blockIdx.x * cols;
  Welford w{0.f, 0.f, 0.f};
  for (int c = threadIdx.x; c < cols; c += 256) {
    float v = __half2float(row[c]);
    w.n += 1.f;
    float d = v - w.mean;
    w.mean += d / w.n;
    w.m2 += d * (v - w.mean);
  }
#pragma unroll
  for (int o = 16; o; o >>= 1) {
    Welford other;
    other.mean = __shfl_xor_sync(0xffffffffu, w.mean, o);
    other.m2 = __shfl_xor_sync(0xffffffffu, w.m2, o);
    other.n = __shfl_xor_sync(0xffffffffu, w.n, o);
    w = welford_merge(w, other);
  }
  if ((threadIdx.x & 31) == 0) s_w[threadIdx.x >> 5] = w;
  __syncthreads();
  if (threadIdx.x == 0) {
    Welford t = s_w[0];
    for (int k = 1; k < 8; ++k) t = welford_merge(t, s_w[k]);
    s_mean = t.mean;
    s_rstd = rsqrtf(t.m2 / t.n + eps);
    mean_out[blockIdx.x] = s_mean;
    rstd_out[blockIdx.x] = s_rstd;
  }
  __syncthreads();
  const float mu = s_mean, rs = s_rstd;
  __half *yr = y + (size_t)blockIdx.x * cols;
  for (int c = threadIdx.x; c < cols; c += 256)
    yr[c] = __float2half_rn((__half2float(row[c]) - mu) * rs * __half2float(gamma[c]) + __half2float(beta[c]));
}

// Online softmax, one warp per row, fp32.
extern "C" __global__ void softmax_online_warp(const float *__restrict__ x, float *__restrict__ y, int rows, int cols,
                                               float scale) {
  int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float *xr = x + (size_t)row * cols;
  const float log2e = 1.4426950408889634f;
  float m = NEG_INF, s = 0.f;
  for (int c = lane; c < cols; c += 32) {
    float v = xr[c] * scale * log2e;
    float nm = fmaxf(m, v);
    s = s * exp2f(m - nm) + exp2f(v - nm);
    m = nm;
  }
#pragma unroll
  for (int o = 16; o; o >>= 1) {
    float om = __shfl_xor_sync(0xffffffffu, m, o);
    float os = __shfl_xor_sync(0xffffffffu, s, o);
    float nm = fmaxf(m, om);
    s = s * exp2f(m - nm) + os * exp2f(om - nm);
    m = nm;
  }
  float inv = 1.f / s;
  float *yr = y + (size_t)row * cols;
  for (int c = lane; c < cols; c += 32) yr[c] = exp2f(xr[c] * scale * log2e - m) * inv;
}

// Causal-masked softmax over fp16 attention scores (row i sees columns <= i + offset).
extern "C" __global__ void causal_softmax_fp16(__half *__restrict__ scores, int seq, int offset) {
  __shared__ float red[32];
  int row = blockIdx.x;
  __half *sr = scores + (size_t)row * seq;
  int limit = min(seq, row + offset + 1);
  float m = NEG_INF;
  for (int c = threadIdx.x; c < limit; c += blockDim.x) m = fmaxf(m, __half2float(sr[c]));
  for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
  __syncthreads();
  m = red[0];
  for (int k = 1; k < (int)(blockDim.x >> 5); ++k) m = fmaxf(m, red[k]);
  __syncthreads();
  float s = 0.f;
  for (int c = threadIdx.x; c < limit; c += blockDim.x) s += __expf(__half2float(sr[c]) - m);
  for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
  __syncthreads();
  s = 0.f;
  for (int k = 0; k < (int)(blockDim.x >> 5); ++k) s += red[k];
  float inv = __frcp_rn(s);
  for (int c = threadIdx.x; c < seq; c += blockDim.x)
    sr[c] = c < limit ? __float2half(__expf(__half2float(sr[c]) - m) * inv) : __float2half(0.f);
}

// Cross-entropy: logsumexp per row minus target logit, averaged with atomicAdd.
extern "C" __global__ void cross_entropy_fwd(const float *__restrict__ logits, const int *__restrict__ targets,
                                             float *__restrict__ loss, int vocab, float inv_rows) {
  const float *lr = logits + (size_t)blockIdx.x * vocab;
  float m = NEG_INF, s = 0.f;
  for (int c = threadIdx.x; c < vocab; c += blockDim.x) {
    float v = lr[c];
    if (v > m) {
      s = s * __expf(m - v) + 1.f;
      m = v;
    } else {
      s += __expf(v - m);
    }
  }
  for (int o = 16; o; o >>= 1) {
    float om = __shfl_xor_sync(0xffffffffu, m, o), os = __shfl_xor_sync(0xffffffffu, s, o);
    float nm = fmaxf(m, om);
    s = s * __expf(m - nm) + os * __expf(om - nm);
    m = nm;
  }
  if (threadIdx.x == 0) {
    int t = targets[blockIdx.x];
    float l = (t >= 0) ? (__logf(s) + m - lr[t]) : 0.f;
    atomicAdd(loss, l * inv_rows);
  }
}
