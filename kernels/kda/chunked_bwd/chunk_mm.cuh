// A part of kernels/kda/kda_bwd_chunked.cu, expanded into it where it is included (inside
// namespace kda_bwd, after the workspace accessors); not a header of its own.
// chunk_mm (and with MMA 1 chunk_mm3): the products of the chunked backward over accessors of
// shared memory, on tensor cores (MMA 1) or CUDA cores (MMA 0).

#if MMA
#ifndef KDA_HOST_EMULATION
// Two floats as one bf16 pair, lo in the low half (cvt.rn.bf16x2.f32 puts its first operand in the
// upper half).
__device__ __forceinline__ unsigned int pack_bf16x2(float lo, float hi) {
  unsigned int d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}
// D += A B on one m16n8k16 tile: A row-major bf16 (4 regs), B column-major bf16 (2 regs), fp32.
__device__ __forceinline__ void mma_bf16(float* d, const unsigned int* a, const unsigned int* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif  // KDA_HOST_EMULATION
// (v0, v1) as bf16 pairs hi and lo with v = hi + lo to about 2^-16.
__device__ __forceinline__ void split_pair(float v0, float v1, unsigned int& hi, unsigned int& lo) {
  hi = pack_bf16x2(v0, v1);
  lo = pack_bf16x2(v0 - __uint_as_float(hi << 16), v1 - __uint_as_float(hi & 0xffff0000u));
}

// The A fragment of rows r0, r0 + 8 over columns k, k + 1, k + 8, k + 9, and the B fragment of
// rows k, k + 1, k + 8, k + 9 of column cg (k = x0 + 2 t, r0 = row0 + g, cg = c0 + g), each split
// into bf16 hi and lo halves (the lo halves go unused, and unbuilt, with one term).
template <class A>
__device__ __forceinline__ void frag_a(A a, int r0, int k, unsigned int* ah, unsigned int* al) {
  split_pair(a(r0, k), a(r0, k + 1), ah[0], al[0]);
  split_pair(a(r0 + 8, k), a(r0 + 8, k + 1), ah[1], al[1]);
  split_pair(a(r0, k + 8), a(r0, k + 9), ah[2], al[2]);
  split_pair(a(r0 + 8, k + 8), a(r0 + 8, k + 9), ah[3], al[3]);
}
template <class B>
__device__ __forceinline__ void frag_b(B b, int k, int cg, unsigned int* bh, unsigned int* bl) {
  split_pair(b(k, cg), b(k + 1, cg), bh[0], bl[0]);
  split_pair(b(k + 8, cg), b(k + 9, cg), bh[1], bl[1]);
}
// d += a b on one 16 x 8 x 16 step from split fragments: lo hi + hi lo + hi hi (kTerms 3, in
// that order, every build and blocking alike) or hi hi.
template <int kTerms>
__device__ __forceinline__ void mma_terms(float* d, const unsigned int* ah, const unsigned int* al,
                                          const unsigned int* bh, const unsigned int* bl) {
  if constexpr (kTerms == 3) {
    mma_bf16(d, al, bh);
    mma_bf16(d, ah, bl);
  }
  mma_bf16(d, ah, bh);
}

// One k16 step of a 16 x 8 tile: d += a b over columns k, k + 1, k + 8, k + 9 of this lane's A rows
// r0, r0 + 8 and B column cg (k = x0 + 2 t, r0 = row0 + g, cg = c0 + g).
template <int kTerms, class A, class B>
__device__ __forceinline__ void mma_k16(float* d, A a, B b, int r0, int cg, int k) {
  unsigned int ah[4], al[4], bh[2], bl[2];
  frag_a(a, r0, k, ah, al);
  frag_b(b, k, cg, bh, bl);
  mma_terms<kTerms>(d, ah, al, bh, bl);
}

// MMA_BLOCK 1: the 16 x 8 tiles a warp of NW takes at once, kRows x kCols of them (at most 2 x 4,
// no more than the warp's share of the R x CC output; kRows 1 with kMaxRows 1), so each k step
// builds kRows A fragments and kCols B fragments for kRows x kCols tiles instead of one of each
// per tile: operand loads and bf16 splits are what the chunked kernels spend their shared-memory
// pipe on.
template <int R, int CC, int NW = kW, int kMaxRows = 2>
struct MmaBlock {
  static constexpr int kTilesPerWarp = (R / 16) * (CC / 8) / NW;
  static constexpr int kCols = (CC / 8) % 4 == 0 && kTilesPerWarp >= 4 ? 4 : (CC / 8) % 2 == 0 && kTilesPerWarp >= 2 ? 2 : 1;
  static constexpr int kRows = kMaxRows >= 2 && (R / 16) % 2 == 0 && kTilesPerWarp / kCols >= 2 ? 2 : 1;
};

// chunk_mm's tiles one at a time: each builds its own fragments.
template <int R, int CC, int X, int kTerms, int NW, class A, class B, class F>
__device__ __forceinline__ void chunk_mm_tiles(A a, B b, F f) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  constexpr int TN = CC / 8, tiles = (R / 16) * TN;
  for (int tile = warp; tile < tiles; tile += NW) {
    const int r0 = (tile / TN) * 16 + g, c0 = (tile % TN) * 8;
    float d[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 2
    for (int x0 = 0; x0 < X; x0 += 16) mma_k16<kTerms>(d, a, b, r0, c0 + g, x0 + 2 * t);
    f(r0, c0 + 2 * t, d[0]);
    f(r0, c0 + 2 * t + 1, d[1]);
    f(r0 + 8, c0 + 2 * t, d[2]);
    f(r0 + 8, c0 + 2 * t + 1, d[3]);
  }
}

// out(r, c) = sum over x < X of a(r, x) b(x, c) for r < R, c < CC, handed to f(r, c, value), on
// tensor cores by the CTA's NW warps: each warp takes 16 x 8 output tiles in turn (MMA_BLOCK 1:
// blocks of them, see MmaBlock; kMaxRows 0 keeps a product on single tiles where registers are
// short) and walks x 16 at a time, building its fragments from the accessors (PTX ISA m16n8k16
// layouts: lane 4 g + t holds A rows g, g + 8, columns 2 t, 2 t + 1, 2 t + 8, 2 t + 9; B rows 2 t,
// 2 t + 1, 2 t + 8, 2 t + 9 of column g; D rows g, g + 8, columns 2 t, 2 t + 1). Every output
// element gets the same products in the same order either way.
template <int R, int CC, int X, int kTerms = MMA_TERMS, int NW = kW, int kMaxRows = 2, class A, class B, class F>
__device__ __forceinline__ void chunk_mm(A a, B b, F f) {
  static_assert(R % 16 == 0 && CC % 8 == 0 && X % 16 == 0, "chunk_mm: tile shape");
  if constexpr (!MMA_BLOCK || kMaxRows == 0) {
    chunk_mm_tiles<R, CC, X, kTerms, NW>(a, b, f);
  } else {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    using Block = MmaBlock<R, CC, NW, kMaxRows>;
    constexpr int BM = Block::kRows, BN = Block::kCols, NB = CC / 8 / BN;
    constexpr int blocks = (R / 16 / BM) * NB;
    for (int blk = warp; blk < blocks; blk += NW) {
      const int r0 = (blk / NB) * BM * 16 + g, c0 = (blk % NB) * BN * 8;
      float d[BM][BN][4];
#pragma unroll
      for (int m = 0; m < BM; ++m)
#pragma unroll
        for (int n = 0; n < BN; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) d[m][n][e] = 0.f;
#pragma unroll 1
      for (int x0 = 0; x0 < X; x0 += 16) {
        const int k = x0 + 2 * t;
        unsigned int ah[BM][4], al[BM][4], bh[BN][2], bl[BN][2];
#pragma unroll
        for (int m = 0; m < BM; ++m) frag_a(a, r0 + 16 * m, k, ah[m], al[m]);
#pragma unroll
        for (int n = 0; n < BN; ++n) frag_b(b, k, c0 + 8 * n + g, bh[n], bl[n]);
#pragma unroll
        for (int m = 0; m < BM; ++m)
#pragma unroll
          for (int n = 0; n < BN; ++n) mma_terms<kTerms>(d[m][n], ah[m], al[m], bh[n], bl[n]);
      }
#pragma unroll
      for (int m = 0; m < BM; ++m)
#pragma unroll
        for (int n = 0; n < BN; ++n) {
          const int r = r0 + 16 * m, c = c0 + 8 * n + 2 * t;
          f(r, c, d[m][n][0]);
          f(r, c + 1, d[m][n][1]);
          f(r + 8, c, d[m][n][2]);
          f(r + 8, c + 1, d[m][n][3]);
        }
    }
  }
}

// Three products of one shape in one pass, out_j(r, c) = sum over x < X of a_j(r, x) b_j(x, c),
// with one epilogue per tile: pre(r, c) runs before a tile's products and returns what the
// epilogue needs from global memory (its loads then wait behind the products, not after them),
// f(pre's value, r, c, d0, d1, d2) gets the lane's four elements of each product: (r, c),
// (r, c + 1), (r + 8, c), (r + 8, c + 1) in d_j[0..3]. Each product accumulates as chunk_mm's.
template <int R, int CC, int X, int kTerms = MMA_TERMS, class A0, class B0, class A1, class B1, class A2, class B2,
          class P, class F>
__device__ __forceinline__ void chunk_mm3(A0 a0, B0 b0, A1 a1, B1 b1, A2 a2, B2 b2, P pre, F f) {
  static_assert(R % 16 == 0 && CC % 8 == 0 && X % 16 == 0, "chunk_mm3: tile shape");
  constexpr int TN = CC / 8, tiles = (R / 16) * TN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  for (int tile = warp; tile < tiles; tile += kW) {
    const int r0 = (tile / TN) * 16 + g, c0 = (tile % TN) * 8;
    const auto early = pre(r0, c0 + 2 * t);
    float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f}, d2[4] = {0.f, 0.f, 0.f, 0.f};
    for (int x0 = 0; x0 < X; x0 += 16) {
      mma_k16<kTerms>(d0, a0, b0, r0, c0 + g, x0 + 2 * t);
      mma_k16<kTerms>(d1, a1, b1, r0, c0 + g, x0 + 2 * t);
      mma_k16<kTerms>(d2, a2, b2, r0, c0 + g, x0 + 2 * t);
    }
    f(early, r0, c0 + 2 * t, d0, d1, d2);
  }
}
#else
// out(r, c) = sum over x < X of a(r, x) b(x, c) for r < R, c < CC, handed to f(r, c, value): each
// thread a tile of rows rt + RT i and columns ct + CT j, so a warp reads one a(r, x) (a broadcast)
// and consecutive b(x, c).
template <int R, int CC, int X, int kTerms = MMA_TERMS, int NW = kW, int kMaxRows = 2, class A, class B, class F>
__device__ __forceinline__ void chunk_mm(A a, B b, F f) {
  static_assert(NW == kW, "chunk_mm: CUDA cores with the CTA's 128 threads only");
  constexpr int CT = CC < 32 ? CC : 32, RT = kT / CT, TR = R / RT, TC = CC / CT;
  static_assert(CT * RT == kT && TR * RT == R && TC * CT == CC, "chunk_mm: tile shape");
  const int ct = threadIdx.x % CT, rt = threadIdx.x / CT;
  float acc[TR][TC];
#pragma unroll
  for (int r = 0; r < TR; ++r)
#pragma unroll
    for (int c = 0; c < TC; ++c) acc[r][c] = 0.f;
#pragma unroll 2
  for (int x = 0; x < X; ++x) {
    float av[TR], bv[TC];
#pragma unroll
    for (int r = 0; r < TR; ++r) av[r] = a(rt + RT * r, x);
#pragma unroll
    for (int c = 0; c < TC; ++c) bv[c] = b(x, ct + CT * c);
#pragma unroll
    for (int r = 0; r < TR; ++r)
#pragma unroll
      for (int c = 0; c < TC; ++c) acc[r][c] = fmaf(av[r], bv[c], acc[r][c]);
  }
#pragma unroll
  for (int r = 0; r < TR; ++r)
#pragma unroll
    for (int c = 0; c < TC; ++c) f(rt + RT * r, ct + CT * c, acc[r][c]);
}

#endif  // MMA
