// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: paged-KV decode attention (one query token): block-table indirection, bf16 K/V with 128-bit loads, q·k dot products split across lanes, online softmax across KV blocks, warp-split reduction through shared memory, rotary embedding (sincosf) and ALiBi-style bias, 64-bit index math.
#include <cuda_bf16.h>

#define HEAD_DIM 128
#define BLOCK_TOKENS 16
#define NWARPS 4
#define NEG_INF (-__int_as_float(0x7f800000))

__device__ __forceinline__ void load_bf16x8(const __nv_bfloat16 *p, float f[8]) {
  uint4 u = *reinterpret_cast<const uint4 *>(p);
  const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    float2 t = __bfloat1622float2(h[k]);
    f[2 * k] = t.x;
    f[2 * k + 1] = t.y;
  }
}

// grid: (num_heads, num_seqs); block: NWARPS*32 threads. Each warp handles a strided subset of KV blocks;
// within a warp, 16 lanes x 8 elements cover one 128-wide head, so a warp processes 2 tokens at a time.
extern "C" __global__ void __launch_bounds__(NWARPS * 32) paged_attention_decode(
    __nv_bfloat16 *__restrict__ out, const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k_cache,
    const __nv_bfloat16 *__restrict__ v_cache, const int *__restrict__ block_tables, const int *__restrict__ seq_lens,
    const float *__restrict__ alibi_slopes, int max_blocks_per_seq, int num_kv_heads, float scale) {
  __shared__ float s_m[NWARPS], s_l[NWARPS];
  __shared__ float s_acc[NWARPS][HEAD_DIM];
  const int head = blockIdx.x, seq = blockIdx.y, num_heads = gridDim.x;
  const int kv_head = head / (num_heads / num_kv_heads);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int half = lane >> 4, sub = lane & 15;
  const int seq_len = seq_lens[seq];
  const float slope = alibi_slopes ? alibi_slopes[head] : 0.f;
  float qf[8];
  load_bf16x8(q + ((size_t)seq * num_heads + head) * HEAD_DIM + sub * 8, qf);
  float m = NEG_INF, l = 0.f, acc[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) acc[k] = 0.f;
  const int nblocks = (seq_len + BLOCK_TOKENS - 1) / BLOCK_TOKENS;
  for (int b = warp; b < nblocks; b += NWARPS) {
    const long long phys = block_tables[(size_t)seq * max_blocks_per_seq + b];
#pragma unroll 2
    for (int t = half; t < BLOCK_TOKENS; t += 2) {
      const int tok = b * BLOCK_TOKENS + t;
      const size_t off = ((phys * BLOCK_TOKENS + t) * num_kv_heads + kv_head) * HEAD_DIM + sub * 8;
      float kf[8];
      load_bf16x8(k_cache + off, kf);
      float s = 0.f;
#pragma unroll
      for (int k = 0; k < 8; ++k) s = fmaf(qf[k], kf[k], s);
#pragma unroll
      for (int o = 8; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);  // reduce within 16 lanes
      s = s * scale + slope * (float)(tok - seq_len + 1);
      if (tok >= seq_len) s = NEG_INF;
      const float nm = fmaxf(m, s);
      const float corr = __expf(m - nm), p = __expf(s - nm);
      float vf[8];
      load_bf16x8(v_cache + off, vf);
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[k] = acc[k] * corr + p * vf[k];
      l = l * corr + p;
      m = nm;
    }
  }
  // merge the two half-warps
  {
    const float om = __shfl_xor_sync(0xffffffffu, m, 16), ol = __shfl_xor_sync(0xffffffffu, l, 16);
    const float nm = fmaxf(m, om);
    const float c0 = m == NEG_INF ? 0.f : __expf(m - nm), c1 = om == NEG_INF ? 0.f : __expf(om - nm);
#pragma unroll
    for (int k = 0; k < 8; ++k) acc[k] = acc[k] * c0 + __shfl_xor_sync(0xffffffffu, acc[k], 16) * c1;
    l = l * c0 + ol * c1;
    m = nm;
  }
  if (lane < 16) {
#pragma unroll
    for (int k = 0; k < 8; ++k) s_acc[warp][sub * 8 + k] = acc[k];
  }
  if (lane == 0) {
    s_m[warp] = m;
    s_l[warp] = l;
  }
  __syncthreads();
  if (threadIdx.x < HEAD_DIM) {
    float gm = NEG_INF;
#pragma unroll
    for (int w = 0; w < NWARPS; ++w) gm = fmaxf(gm, s_m[w]);
    float num = 0.f, den = 0.f;
#pragma unroll
    for (int w = 0; w < NWARPS; ++w) {
      const float c = s_m[w] == NEG_INF ? 0.f : __expf(s_m[w] - gm);
      num += s_acc[w][threadIdx.x] * c;
      den += s_l[w] * c;
    }
    out[((size_t)seq * num_heads + head) * HEAD_DIM + threadIdx.x] = __float2bfloat16(num / den);
  }
}

// Rotary position embedding applied in place to q and k (neox layout), fp32 math with sincosf.
extern "C" __global__ void rotary_embedding_bf16(__nv_bfloat16 *__restrict__ q, __nv_bfloat16 *__restrict__ k,
                                                 const int *__restrict__ positions, int num_heads, int num_kv_heads,
                                                 int rot_dim, float base) {
  const int token = blockIdx.x;
  const float pos = (float)positions[token];
  const int half_dim = rot_dim / 2;
  for (int idx = threadIdx.x; idx < (num_heads + num_kv_heads) * half_dim; idx += blockDim.x) {
    const int h = idx / half_dim, i = idx % half_dim;
    const float inv_freq = __powf(base, -2.0f * (float)i / (float)rot_dim);
    float s, c;
    sincosf(pos * inv_freq, &s, &c);
    __nv_bfloat16 *ptr = h < num_heads ? q + ((size_t)token * num_heads + h) * rot_dim
                                       : k + ((size_t)token * num_kv_heads + (h - num_heads)) * rot_dim;
    const float x = __bfloat162float(ptr[i]), y = __bfloat162float(ptr[i + half_dim]);
    ptr[i] = __float2bfloat16(x * c - y * s);
    ptr[i + half_dim] = __float2bfloat16(y * c + x * s);
  }
}
