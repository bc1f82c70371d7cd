// A part of kernels/kda/kda_bwd_chunked.cu, expanded into it where it is included (inside
// namespace kda_bwd, after the chunk helpers); not a header of its own.
// CHAIN_PREFETCH 1: the chunk-serial kernels' record words of the next chunk (column i's k and G,
// 64 registers a thread), loaded while this chunk's products run, so a step's longest run of
// dependent loads is behind the step before rather than behind the barrier that starts it. What is
// staged into shared memory is decayed's and decayed_keys' values bit for bit (same expressions);
// X, M, b, q and the V / dO rows are still loaded at the step, each in one round of loads.

// Column i's record words of a chunk: k and G of its tokens (0 past the chunk's end) and Gtot.
struct ChainWords {
  float k[kC], G[kC], gtot;
};

__device__ __forceinline__ void load_chain_words(const ChunkArgs& p, const Chunk& ch, int h, ChainWords& w) {
  const int i = threadIdx.x;
  w.gtot = record(p, ch.t0 + ch.count - 1, h)[2 * kK + i];
#pragma unroll
  for (int t = 0; t < kC; ++t) {
    w.k[t] = w.G[t] = 0.f;
    if (t < ch.count) {
      const float* rec = record(p, ch.t0 + t, h);
      w.G[t] = rec[2 * kK + i];
      w.k[t] = rec[kK + i];
    }
  }
}

// decayed from the words (kd and qd may be null; q is read from the records here).
__device__ __forceinline__ void stage_decayed(const ChunkArgs& p, const Chunk& ch, int h, const ChainWords& w,
                                              float* kd, float* kr, float* qd, float* egt) {
  const int i = threadIdx.x;
  egt[i] = exp_r(w.gtot);
  egt[kK + i] = w.gtot;
#pragma unroll
  for (int t = 0; t < kC; ++t) {
    float q = 0.f, eg = 0.f, er = 0.f;
    if (t < ch.count) {
      if (qd) q = record(p, ch.t0 + t, h)[i];
      eg = exp_r(w.G[t]);
      er = exp_r(w.gtot - w.G[t]);
    }
    if (kd) kd[t * kDp + i] = w.k[t] * eg;
    kr[t * kDp + i] = w.k[t] * er;
    if (qd) qd[t * kDp + i] = p.scale * q * eg;
  }
}

// decayed_keys from the words: Kd = k e^G (rows past the chunk's end zero).
__device__ __forceinline__ void stage_decayed_keys(const Chunk& ch, const ChainWords& w, float* kd) {
#pragma unroll
  for (int t = 0; t < kC; ++t) kd[t * kDp + threadIdx.x] = t < ch.count ? w.k[t] * exp_r(w.G[t]) : 0.f;
}
