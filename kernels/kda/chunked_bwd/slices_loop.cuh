// A part of kernels/kda/kda_bwd_chunked.cu, expanded into it where it is included (inside
// namespace kda_bwd, with MMA 1 and after the chunk helpers); not a header of its own.
// kda_bwd_chunk_slices with SLICE_LOOP 1: a CTA per (chunk, head) over every value slice.

// The share products of kda_bwd_chunk_slices with SLICE_LOOP 1: chunk_mm3's three products, each
// call adding to accumulators that live across the caller's loop over value slices. Warp w owns
// tiles w, w + kW, ... (kTiles of them) in every call, so a lane always holds the same elements.
template <int R, int CC>
struct Acc3 {
  static constexpr int kTiles = (R / 16) * (CC / 8) / kW;
  static_assert(kTiles * kW == (R / 16) * (CC / 8), "Acc3: tiles a warp");
  float v[kTiles][3][4];
};
#if MMA_BLOCK
// One k step of product `prod` on warp w's tiles, the (R / 16) x (CC / 8 / kW) grid of rows 16 m
// and columns 8 (w + kW n): one A fragment a row and one B fragment a column (MmaBlock's reuse).
// The warp's tile m BN + n is tile w + kW (m BN + n): row block m, column tile w + kW n.
template <int R, int CC, int kTerms, class A, class B>
__device__ __forceinline__ void acc3_block(Acc3<R, CC>& acc, int prod, A a, B b, int k) {
  static_assert((CC / 8) % kW == 0, "chunk_acc3: columns a warp");
  constexpr int BM = R / 16, BN = CC / 8 / kW;
  const int warp = threadIdx.x / 32, g = (threadIdx.x % 32) >> 2;
  unsigned int ah[BM][4], al[BM][4], bh[BN][2], bl[BN][2];
#pragma unroll
  for (int m = 0; m < BM; ++m) frag_a(a, 16 * m + g, k, ah[m], al[m]);
#pragma unroll
  for (int n = 0; n < BN; ++n) frag_b(b, k, 8 * (warp + kW * n) + g, bh[n], bl[n]);
#pragma unroll
  for (int m = 0; m < BM; ++m)
#pragma unroll
    for (int n = 0; n < BN; ++n) mma_terms<kTerms>(acc.v[m * BN + n][prod], ah[m], al[m], bh[n], bl[n]);
}
// Products 0 and 1 over one B operand: its fragments built once, each product's A fragments in
// turn (the registers of one A set), every accumulator's terms as acc3_block's.
template <int R, int CC, int kTerms, class A, int BN>
__device__ __forceinline__ void acc3_block_a(Acc3<R, CC>& acc, int prod, A a, int k, const unsigned int (&bh)[BN][2],
                                             const unsigned int (&bl)[BN][2]) {
  constexpr int BM = R / 16;
  const int g = (threadIdx.x % 32) >> 2;
  unsigned int ah[BM][4], al[BM][4];
#pragma unroll
  for (int m = 0; m < BM; ++m) frag_a(a, 16 * m + g, k, ah[m], al[m]);
#pragma unroll
  for (int m = 0; m < BM; ++m)
#pragma unroll
    for (int n = 0; n < BN; ++n) mma_terms<kTerms>(acc.v[m * BN + n][prod], ah[m], al[m], bh[n], bl[n]);
}
template <int R, int CC, int kTerms, class A0, class A1, class B>
__device__ __forceinline__ void acc3_block_shared_b(Acc3<R, CC>& acc, A0 a0, A1 a1, B b, int k) {
  static_assert((CC / 8) % kW == 0, "chunk_acc3: columns a warp");
  constexpr int BN = CC / 8 / kW;
  const int warp = threadIdx.x / 32, g = (threadIdx.x % 32) >> 2;
  unsigned int bh[BN][2], bl[BN][2];
#pragma unroll
  for (int n = 0; n < BN; ++n) frag_b(b, k, 8 * (warp + kW * n) + g, bh[n], bl[n]);
  acc3_block_a<R, CC, kTerms>(acc, 0, a0, k, bh, bl);
  acc3_block_a<R, CC, kTerms>(acc, 1, a1, k, bh, bl);
}
#endif

// kSameB01: b0 and b1 are the same operand (MMA_BLOCK 1 then builds its fragments once for both).
template <int R, int CC, int X, bool kSameB01 = false, int kTerms = MMA_TERMS, class A0, class B0, class A1, class B1,
          class A2, class B2>
__device__ __forceinline__ void chunk_acc3(Acc3<R, CC>& acc, A0 a0, B0 b0, A1 a1, B1 b1, A2 a2, B2 b2) {
  static_assert(X % 16 == 0, "chunk_acc3: tile shape");
  constexpr int TN = CC / 8;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
#if MMA_BLOCK
  (void)warp, (void)g, (void)TN;
#pragma unroll
  for (int x0 = 0; x0 < X; x0 += 16) {
    if constexpr (kSameB01) {
      acc3_block_shared_b<R, CC, kTerms>(acc, a0, a1, b0, x0 + 2 * t);
    } else {
      acc3_block<R, CC, kTerms>(acc, 0, a0, b0, x0 + 2 * t);
      acc3_block<R, CC, kTerms>(acc, 1, a1, b1, x0 + 2 * t);
    }
    acc3_block<R, CC, kTerms>(acc, 2, a2, b2, x0 + 2 * t);
  }
#else
#pragma unroll
  for (int j = 0; j < Acc3<R, CC>::kTiles; ++j) {
    const int tile = warp + j * kW, r0 = (tile / TN) * 16 + g, c0 = (tile % TN) * 8;
#pragma unroll
    for (int x0 = 0; x0 < X; x0 += 16) {
      mma_k16<kTerms>(acc.v[j][0], a0, b0, r0, c0 + g, x0 + 2 * t);
      mma_k16<kTerms>(acc.v[j][1], a1, b1, r0, c0 + g, x0 + 2 * t);
      mma_k16<kTerms>(acc.v[j][2], a2, b2, r0, c0 + g, x0 + 2 * t);
    }
  }
#endif
}

// ---- kda_bwd_chunk_slices, SLICE_LOOP 1 ----
// Chunk (n, c) of head h on every value slice in turn: per slice what the SLICE_LOOP 0 body in
// kda_bwd_chunked.cu does on one (U, dU, dW, dv), with the share products dQd = dO S0^T, dKd = -diag(b) dW S0^T, dKr = U dS^T
// summed over the slices in registers, the dM and dL rows in shared memory and dW . Y, dS . S0 in
// registers; then one epilogue writes each token's single share (z = 0) as the SLICE_LOOP 0 body writes
// a slice's, its record words loaded and its exponentials taken once.
// Shared: the SLICE_LOOP 0 body's arrays, then the sums of the dM and dL rows [kC][kCp] each (with
// FINISH_IN_SLICES, then the finish's over them).
__device__ __forceinline__ void chunk_slices_body(const ChunkArgs& p, float* sm) {
  const int h = blockIdx.y, i = threadIdx.x;
  const Chunk ch = chunk_in_slot(p, blockIdx.x);
  if (ch.count == 0) {
#if KDA_BWD_FINISH_IN_SLICES
    chunk_finish_body(p, sm);  // a slot without a chunk: zero sums
#endif
    return;
  }
  const long long th = token_heads(p);
  const SlicesSmem L(sm);
  float* dm_sum = L.end;
  float* dl_sum = dm_sum + kC * kCp;
  decayed(p, ch, h, nullptr, L.kr, nullptr, L.egt);
  chunk_mats(p, ch, h, L.bs, L.xs, L.ms);
  Acc3<kC, kK> acc;
#pragma unroll
  for (int j = 0; j < Acc3<kC, kK>::kTiles; ++j)
#pragma unroll
    for (int m = 0; m < 3; ++m)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc.v[j][m][e] = 0.f;
  float dss = 0.f, db = 0.f;  // key channel i's dS . S0; token i's dW . Y
  for (int z = 0; z < kS; ++z) {
    load_slice_states(p, ch, h, z, L);
    load_slice_rows(p, ch, h, z, L);
    slice_products(L);
    for (int e = i; e < ch.count * kB; e += kT) {
      const int t = e / kB, j = e % kB;
      p.dv[((ch.t0 + t) * p.H + h) * kK + z * kB + j] = L.bs[t] * L.dw[t * kBp + j];
    }
    chunk_acc3<kC, kK, kB, true>(  // products 0 and 1 both take S0^T
        acc, [&](int r, int x) { return L.dO[r * kBp + x]; }, [&](int x, int c2) { return L.s0[c2 * kBp + x]; },
        [&](int r, int x) { return -L.bs[r] * L.dw[r * kBp + x]; }, [&](int x, int c2) { return L.s0[c2 * kBp + x]; },
        [&](int r, int x) { return L.us[r * kBp + x]; }, [&](int x, int c2) { return L.dS[c2 * kBp + x]; });
    {
      float part = 0.f;
      for (int j = 0; j < kB; ++j) part = fmaf(L.dS[i * kBp + j], L.s0[i * kBp + j], part);
      dss += part;
    }
    if (i < ch.count) {
      float part = 0.f;
      for (int j = 0; j < kB; ++j) part = fmaf(L.dw[i * kBp + j], L.ys[i * kBp + j], part);
      db += part;
    }
    // The rows of dM = dO U^T and dL = dW U^T (negated when written); a lane adds to the same
    // elements in every slice, so the sums need no barrier of their own.
    chunk_mm<kC, kC, kB, 3>([&](int r, int x) { return L.dO[r * kBp + x]; },
                            [&](int x, int c2) { return L.us[c2 * kBp + x]; },
                            [&](int r, int c2, float v) { dm_sum[r * kCp + c2] = z ? dm_sum[r * kCp + c2] + v : v; });
    chunk_mm<kC, kC, kB, 3>([&](int r, int x) { return L.dw[r * kBp + x]; },
                            [&](int x, int c2) { return L.us[c2 * kBp + x]; },
                            [&](int r, int c2, float v) { dl_sum[r * kCp + c2] = z ? dl_sum[r * kCp + c2] + v : v; });
    __syncthreads();  // the next slice's loads overwrite what this one read
  }
  // Each element's shares of dq and dk, its dQd Qd + dKd Kd (into ga) and its dKr Kr (into Kr's
  // place: no longer read) from the summed products.
  {
    constexpr int TN = kK / 8;
    const int warp = i / 32, lane = i % 32, g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int j = 0; j < Acc3<kC, kK>::kTiles; ++j) {
      const int tile = warp + j * kW, r0 = (tile / TN) * 16 + g, c = (tile % TN) * 8 + 2 * t4;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = r0 + 8 * (e >> 1), d = c + (e & 1);
        if (t >= ch.count) continue;
        const float* rec = record(p, ch.t0 + t, h);
        const float G = rec[2 * kK + d], k = rec[kK + d], qs = p.scale * rec[d];
        const float eg = exp_r(G), er = exp_r(L.egt[kK + d] - G);
        const float aq = acc.v[j][0][e], akd = acc.v[j][1][e], akr = acc.v[j][2][e];
        float* sh = share_of(p, th, 0, ch.t0 + t, h);
        sh[d] = p.scale * eg * aq;
        sh[kK + d] = fmaf(akr, er, akd * eg);
        L.ga[t * kDp + d] = fmaf(akd, k * eg, aq * qs * eg);
        L.kr[t * kDp + d] = akr * k * er;
      }
    }
  }
  __syncthreads();
  {
    // Key channel i: the log-decay share as the SLICE_LOOP 0 body forms a slice's.
    float pre = 0.f;
    for (int t = 0; t < ch.count; ++t) {
      const float x = L.kr[t * kDp + i];
      L.kr[t * kDp + i] = pre;
      pre += x;
    }
    float suf = dss * L.egt[i];
    for (int t = ch.count - 1; t >= 0; --t) {
      suf += L.ga[t * kDp + i];
      share_of(p, th, 0, ch.t0 + t, h)[2 * kK + i] = suf + L.kr[t * kDp + i];
    }
  }
  for (int e = i; e < kC * kC; e += kT) {
    const int r = e / kC, c2 = e % kC;
    if (r >= ch.count || c2 > r) continue;
    float* sh = share_of(p, th, 0, ch.t0 + r, h);
    sh[3 * kK + c2] = dm_sum[r * kCp + c2];
    if (c2 < r) sh[3 * kK + kC + c2] = -dl_sum[r * kCp + c2];
  }
  if (i < ch.count) share_of(p, th, 0, ch.t0 + i, h)[3 * kK + 2 * kC] = db;
#if KDA_BWD_FINISH_IN_SLICES
  // The finish of this (chunk, head) on the share just written: the barrier orders the block's
  // global writes before its reads, and the finish's shared arrays start over this body's.
  __syncthreads();
  chunk_finish_body(p, sm);
#endif
}
