// A part of kernels/kda/kda_fwd_chunked.cu, expanded into it where it is included (inside
// namespace kda_chunked, after the knobs and the parts before it); not a header of its own.
// kda_fwd_recurrence (FUSED = 0): the serial chain over the chunks with the state in registers.

// kda_fwd_recurrence: one CTA per (sequence, head, value slice of BV columns), warp w owning value
// columns [col0 + 16 w, col0 + 16 w + 16) of the state for all 128 key channels, as S^T in
// accumulator fragments (rows: value column, columns: key channel), so that S^T serves as the A
// operand of the next products straight from registers (hi + lo bf16) and U^T stays in the warp:
// the warps never exchange data, the only barrier is the one that hands over a staged chunk.
// SEQSPLIT > 1: pass 0 runs whole sequences; pass 1 and pass 3 the segments of the sequence split
// (SEQSPLIT above): the grid's x then counts (sequence, segment) pairs, and pass 1's z covers 256
// value columns (slices past 128 / BV hold the transition's columns).
__device__ __forceinline__ void kda_recurrence_body(const Args& a, const unsigned char* __restrict__ ws, int nseq,
                                                    int nseg, int pass) {
  extern __shared__ __align__(16) unsigned char smem[];
  if (dynamic_smem_bytes() < (unsigned int)kRSmemTotal) trap_now();
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  KDA_ASSUME(tid >= 0 && tid < kRThreads);
  const int g8 = lane >> 2, t4 = lane & 3;
  // Longest chains first: the block scheduler starts CTAs in linear order (x fastest), so the
  // linear index L = x + N (y + H z) is read as (rank r = L / (H S), head, slice) and, for up to 16
  // packed sequences, rank r as the r-th longest sequence (ties by index): every head and slice of
  // the longest sequence starts in the first wave and short sequences fill the tail. The slices of
  // one (sequence, head) are adjacent, so they run at the same time and the later ones read that
  // chain's shared operands (Qd, W0, Kr^T, M) from L2 rather than DRAM when the grid needs several
  // waves. A permutation of the grid, so every (sequence, head, slice) still runs once.
  constexpr int kSlices = kD / kBv;
#if SEQSPLIT > 1
  // Pass 1: segments 0 .. P-2, pass 3: 1 .. P-1, adjacent in the linear order (a sequence's
  // segments start together); pass 1's slices kSlices .. 2 kSlices - 1 are the transition's.
  const int segs = pass == 0 ? 1 : nseg - 1;
  const int slices = pass == 1 ? 2 * kSlices : kSlices;
#else
  constexpr int slices = kSlices;
  (void)nseg;
  (void)pass;
#endif
  const long long hs = (long long)a.H * slices;
#if SEQSPLIT > 1
  const long long lin = blockIdx.x + (long long)nseq * segs * (blockIdx.y + (long long)a.H * blockIdx.z);
  const long long rank = lin / hs / segs;
  const int h = (int)((lin % hs) / slices);
  const int slice = (int)((lin % hs) % slices);
  const int col0 = (slice % kSlices) * kBv;
  const int seg = (int)(lin / hs % segs) + (pass == 3 ? 1 : 0);
  const bool amat = slice >= kSlices;  // pass 1: a column of A_j (v = 0, from the identity)
  if (amat && seg == 0) return;        // segment 0 starts from the true state: no transition
#else
  // The unsplit decode kept as it was: the one above with segs = 1 still costs integer work (NVVM
  // cannot prove slice < kSlices), and the default build's SASS stays the measured one.
  const long long lin = blockIdx.x + (long long)nseq * (blockIdx.y + (long long)a.H * blockIdx.z);
  const long long rank = lin / hs;
  const int h = (int)((lin % hs) / kSlices);
  const int col0 = (int)((lin % hs) % kSlices) * kBv;
#endif
  long long n = rank;
  if (a.cu_seqlens && nseq <= 16) {  // N^2 comparisons by every thread: a few hundred at most
    for (int m = 0; m < nseq; ++m) {
      const long long lm = a.cu_seqlens[m + 1] - a.cu_seqlens[m];
      long long r = 0;
      for (int j = 0; j < nseq; ++j) {
        const long long lj = a.cu_seqlens[j + 1] - a.cu_seqlens[j];
        r += (lj > lm || (lj == lm && j < m)) ? 1 : 0;
      }
      if (r == rank) n = m;
    }
  }
  long long bos, eos;
  seq_range(a, n, bos, eos);
#if SEQSPLIT > 1
  // The segment's chunks as a sequence of their own (its tokens, its workspace slots).
  int c0 = 0, c1 = 0;
  seg_chunks((int)((eos - bos + kC - 1) / kC), pass == 0 ? 1 : nseg, pass == 0 ? 0 : seg, c0, c1);
  const unsigned char* wsh = ws + ((long long)h * ws_slots(a, nseq) + n + bos / kC + c0) * kWsChunkBytes;
  eos = bos + (long long)c1 * kC < eos ? bos + (long long)c1 * kC : eos;
  bos += (long long)c0 * kC;
  if (bos > eos) bos = eos;
  // Pass 1's segment-state block of this chain and segment (ws_seg).
  float* const segst = ws_seg(a, ws, nseq) + ((n * a.H + h) * (long long)(nseg - 1) + (seg - (pass == 3 ? 1 : 0))) *
                                                 (long long)kSegRows * kD;
#else
  const unsigned char* wsh = ws + ((long long)h * ws_slots(a, nseq) + n + bos / kC) * kWsChunkBytes;
#endif
#if PREPARE_CTAS
  const unsigned int* flags = ws_flags(a, ws, nseq) + (long long)h * ws_slots(a, nseq) + n + bos / kC;  // chunk 0's
#endif
  const int nchunks = (int)((eos - bos + kC - 1) / kC);
  // The sequence's tokens (int: a workspace of 2^31 tokens would not fit the GPU) and the
  // elements between one chunk's rows and the next's in [T, H, 128] inputs and outputs: the chunk
  // loop's global addresses are per-thread bases plus c times this, and its row bounds 32-bit
  // compares (the 64-bit index products and bounds cost ~40 instructions a warp a chunk on the
  // chain, H200 SASS).
  const int len = (int)(eos - bos);
  const long long tok_step = (long long)kC * a.H * kD;
  // KSPLIT warps share a group of 16 value columns, warp kh of them holding key channels
  // [kh kDw, kh kDw + kDw): the chain's per-warp work shrinks by KSPLIT at the price of one
  // exchange of partial W^T and Qs^T through shared memory (and one more barrier) a chunk.
  const int jw = (warp / kKs) * 16;  // the warp's first value column within the slice
  const int kh = warp % kKs, d0 = kh * kDw;
  const long long sbase = (n * a.H + h) * (long long)kD * kD;  // V-first [j][d]

  // S^T: tile nt holds rows (value columns) col0 + jw + g8 (+ 8), key channels d0 + nt * 8 + 2 t4 (+ 1).
  float s[kDw / 8][4];
#pragma unroll
  for (int nt = 0; nt < kDw / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int j = col0 + jw + g8 + (e >> 1) * 8, d = d0 + nt * 8 + 2 * t4 + (e & 1);
#if SEQSPLIT > 1
      // Pass 3: the entering state the combine left in the previous segment's block; pass 1: the
      // identity for A_j's columns, zero for S0_j past segment 0.
      if (pass == 3) {
        s[nt][e] = segst[(long long)j * kD + d];
        continue;
      }
      if (pass == 1 && (amat || seg > 0)) {
        s[nt][e] = amat && j == d ? 1.f : 0.f;
        continue;
      }
#endif
#if HAS_INITIAL_STATE
      s[nt][e] = a.initial_state[sbase + (long long)j * kD + d];
#else
      s[nt][e] = 0.f;
      (void)j;
      (void)d;
#endif
    }
#if SEQSPLIT > 1
  // Out is written by pass 0, pass 3, and pass 1's segment 0 (it starts from the true state); A_j's
  // columns take v = 0 (no rows copied, all masked).
  const bool wout = pass != 1 || (seg == 0 && !amat);
  const int vlen = pass == 1 && amat ? 0 : len;
#else
  constexpr bool wout = true;
  const int vlen = len;
#endif
  (void)vlen;

  // Copies chunk c's operands into buffer buf with cp.async: the workspace already holds them in
  // the layout the reads below want (dense, swizzled), so two linear loops of 16-byte segments.
  const SmemAddr smem0 = smem_at(smem);
#if BULK
  const SmemAddr bar0 = smem0 + kROffBar;
  if (tid == 0) {
    for (int i = 0; i < kRBuffers; ++i) mbar_init(bar0 + 8 * i);
    mbar_init_fence();
  }
  __syncthreads();  // the barriers are initialised before any thread waits on them
  unsigned int wpar = 0;  // the parity of the current round of uses of the buffers
#endif
#if WY_IN_RECURRENCE
  // v's row 0 of the sequence at this head and slice (the copy adds the row and segment).
  const __nv_bfloat16* vbase = a.v + (bos * a.H + h) * (long long)kD + col0;
#endif
  auto stage = [&](int c, int buf) {
    const unsigned char* src = wsh + (long long)c * kWsChunkBytes;
    const SmemAddr dst = smem0 + buf * kRStageBytes;
#if BULK
    // Two bulk copies by one thread: Qd .. 2^Gtot, then this CTA's rows of U0^T.
    if (tid == 0) {
      const SmemAddr bar = bar0 + 8 * buf;
#if PREPARE_CTAS
      flag_wait(flags + c);
      fence_proxy_async_global();
#endif
      mbar_expect_tx(bar, kWsU + kSegU * 16);
      bulk_copy(dst, src, kWsU, bar);
      if (kSegU > 0) bulk_copy(dst + kROffU, src + kWsU + col0 * (kC * kUBytes), kSegU * 16, bar);
    }
#else
    // Fixed trip counts, unrolled by 8 (fully, it overflows CHUNK 64's registers): each copy's
    // offsets are constants from one base.
#pragma unroll 8
    for (int i = 0; i < (kSegShared + kRThreads - 1) / kRThreads; ++i) {
      const int idx = tid + i * kRThreads;
      if (kSegShared % kRThreads == 0 || idx < kSegShared) cp_async16_at(dst + idx * 16, src + idx * 16);
    }
    const unsigned char* srcu = src + kWsU + col0 * (kC * kUBytes);
#pragma unroll 8
    for (int i = 0; i < (kSegU + kRThreads - 1) / kRThreads; ++i) {
      const int idx = tid + i * kRThreads;
      if (kSegU % kRThreads == 0 || idx < kSegU) cp_async16_at(dst + kROffU + idx * 16, srcu + idx * 16);
    }
#endif
#if WY_IN_RECURRENCE
    // The slice's v rows of chunk c (16-byte segments, one a thread at CHUNK 16), straight from
    // the input; rows past the sequence are not copied (the products mask them).
    {
      constexpr int kSegRow = kBv / 8, kSegV = kC * kSegRow;
      const __nv_bfloat16* vc = vbase + (long long)c * tok_step;
#pragma unroll
      for (int i = 0; i < (kSegV + kRThreads - 1) / kRThreads; ++i) {
        const int idx = tid + i * kRThreads;
        const int r = idx / kSegRow, sg = idx % kSegRow;
        if ((kSegV % kRThreads == 0 || idx < kSegV) && c * kC + r < vlen)
          cp_async16_at(dst + kROffV + r * kVRow + sg * 16, vc + ((long long)r * a.H) * kD + sg * 8);
      }
    }
#endif
#if !BULK || WY_IN_RECURRENCE
    cp_async_commit();
#endif
  };
  // Chunk cc's out rows (tokens t0c .. t0c + countc - 1, this slice's columns) from its staging
  // buffer to global memory: one 16-byte segment a thread, whole rows of BV values (coalesced;
  // the per-lane 4-byte stores of the accumulator layout cost ~12% of the recurrence, H200).
  // Called after a barrier that follows the buffer's stmatrix.
#if KDA_OUT_STAGED
  __nv_bfloat16* const obase = a.out + (bos * a.H + h) * (long long)kD + col0;
  auto flush_out = [&](int cc, int countc) {
    const unsigned char* ob = smem + kROffO + (cc & 1) * kOBufBytes;
    __nv_bfloat16* oc = obase + (long long)cc * tok_step;
    constexpr int kSegs = kC * (kBv / 8);  // 16-byte row segments: one a thread at KSPLIT 1
#pragma unroll
    for (int it = 0; it < (kSegs + kRThreads - 1) / kRThreads; ++it) {
      const int idx = tid + it * kRThreads;
      const int i = idx / (kBv / 8), seg = idx % (kBv / 8);
      if ((kSegs % kRThreads == 0 || idx < kSegs) && i < countc)
        *reinterpret_cast<uint4*>(oc + ((long long)i * a.H) * kD + seg * 8) =
            *reinterpret_cast<const uint4*>(ob + i * kORow + seg * 16);
    }
  };
#endif
  // The chain waits on memory once a chunk unless its operands were asked for early enough:
  // STAGE chunks are copied ahead into their own buffers (one cp.async group each, empty past the
  // end, so the wait count is a constant), and with PREFETCH_CHUNKS the copy engine prefetches into
  // L2 the chunk PREFETCH_CHUNKS ahead.
#if PREFETCH_CHUNKS
  if (tid == 0)
    for (int p = STAGE; p < PREFETCH_CHUNKS && p < nchunks; ++p) {
      prefetch_l2(wsh + (long long)p * kWsChunkBytes, kWsU);
      if (kSegU > 0) prefetch_l2(wsh + (long long)p * kWsChunkBytes + kWsU + col0 * (kC * kUBytes), kSegU * 16);
    }
#endif
#if STAGE
  for (int p = 0; p < STAGE; ++p) {
    if (p < nchunks) stage(p, p);
#if !BULK || WY_IN_RECURRENCE
    else cp_async_commit();
#endif
  }
#endif
  // CHUNK 16: chunks in rounds of kRBuffers, the round's loop unrolled: chunk c is in buffer
  // c % kRBuffers = ub, a constant in each unrolled copy, so the shared-memory addresses below are
  // per-lane bases plus immediates (with a run-time buffer index ptxas recomputed the swizzled
  // addresses of every chunk: about 100 integer instructions of a warp's ~450 a chunk). Larger
  // chunks keep one copy (unrolled, they need more registers: spills at CHUNK 64), and so do
  // STAGE 2 and 3 (three or four copies of the body measured slower on the H200: 0.566 and 0.617
  // against 0.552 ms at scenario 1, instruction fetch).
  constexpr int kRUnroll = kC == 16 && kRBuffers <= 2 ? kRBuffers : 1;
  // Otherwise chunk c's buffer c % kRBuffers, counted rather than divided (a division by 3 at
  // STAGE 2, three times a chunk).
  int rbuf = 0;
#if !KDA_WGMMA && KSPLIT == 1
  // W0's and Qd's B fragments (swzf, K = 128: block b of 16 columns of row r at block b ^ (r & 3)):
  // for n tile nt and k step ks (block ks) lane (g8, t4) reads element (nt 8 + g8) 128 +
  // ((ks ^ (g8 & 3)) << 4) + 4 t4 = xo[ks & 3] + nt 1024 + (ks & 4) 16: four per-lane offsets
  // (bytes) and immediates.
  unsigned int xo[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) xo[j] = 2u * (unsigned int)(g8 * kD + ((j ^ (g8 & 3)) << 4) + 4 * t4);
#endif
  for (int cb = 0; cb < nchunks; cb += kRUnroll) {
#pragma unroll
  for (int ub = 0; ub < kRUnroll; ++ub) {
    const int c = cb + ub;
    if (c >= nchunks) break;
#if !KDA_OUT_STAGED
    const long long t0 = bos + (long long)c * kC;
    const int count = (int)(eos - t0 < kC ? eos - t0 : (long long)kC);
#endif
#if BULK
    const int buf = kRUnroll == kRBuffers ? ub : rbuf;
#if !STAGE
    stage(c, 0);
#endif
    mbar_wait(bar0 + 8 * buf, wpar);
    if (buf == kRBuffers - 1) wpar ^= 1u;
#if WY_IN_RECURRENCE
    cp_async_wait_group<(STAGE > 0 ? STAGE - 1 : 0)>();  // this thread's v rows of chunk c
#endif
#elif STAGE
    const int buf = kRUnroll == kRBuffers ? ub : rbuf;
    cp_async_wait_group<STAGE - 1>();
#else
    const int buf = 0;
    stage(c, 0);
    cp_async_wait_group<0>();
#endif
#if KDA_WGMMA && !BULK
    fence_proxy_async();  // this thread's landed copies, visible to the wgmma reads below
#endif
    __syncthreads();  // chunk c is staged; every warp is done with chunk c - 1 (its buffer is free)
    // Chunk c - 1's out rows (its stmatrix came before the barrier above; a full chunk: only the
    // last can be short). Buffer c & 1, written below, was flushed during chunk c - 1, before it.
#if KDA_OUT_STAGED
    if (c > 0 && wout) flush_out(c - 1, kC);
#endif
#if STAGE
    if (c + STAGE < nchunks) stage(c + STAGE, buf == 0 ? STAGE : buf - 1);  // (buf + STAGE) % (STAGE + 1)
#if !BULK || WY_IN_RECURRENCE
    else cp_async_commit();
#endif
#endif
#if PREFETCH_CHUNKS
    if (tid == 0 && c + PREFETCH_CHUNKS < nchunks) {
      prefetch_l2(wsh + (long long)(c + PREFETCH_CHUNKS) * kWsChunkBytes, kWsU);
      if (kSegU > 0)
        prefetch_l2(wsh + (long long)(c + PREFETCH_CHUNKS) * kWsChunkBytes + kWsU + col0 * (kC * kUBytes), kSegU * 16);
    }
#endif
    const unsigned char* sb = smem + buf * kRStageBytes;
#if !KDA_WGMMA
#if KSPLIT == 1
    SmemAddr xb[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) xb[j] = opaque(smem0 + buf * kRStageBytes + xo[j]);
#else
    const unsigned short* sQd = reinterpret_cast<const unsigned short*>(sb + kROffQd);
    const unsigned short* sW = reinterpret_cast<const unsigned short*>(sb + kROffW);
#endif
    const unsigned short* sKrT = reinterpret_cast<const unsigned short*>(sb + kROffKrT);
    const unsigned short* sMhi = reinterpret_cast<const unsigned short*>(sb + kROffMhi);
    const unsigned short* sMlo = reinterpret_cast<const unsigned short*>(sb + kROffMlo);
#endif
    const float* sDec = reinterpret_cast<const float*>(sb + kROffDec);
#if WY_IN_RECURRENCE
#elif U0_BITS == 32
    const float* sU = reinterpret_cast<const float*>(sb + kROffU);
#else
    const unsigned short* sU = reinterpret_cast<const unsigned short*>(sb + kROffU);
#endif

#if KDA_WGMMA
    // MMA = wgmma: the warpgroup (4 warps, 64 value columns) multiplies S^T (64 x 128, its bf16
    // rounding from the accumulators, STATE_HI_LO 0) by W0^T and Qd^T straight from the staged
    // buffer (descriptors; no fragment loads), one wgmma a 16-key step, both products in flight at
    // once.
    const SmemAddr sa = smem0 + buf * kRStageBytes;
    const WgDesc dW = wg_desc(sa + kROffW, kD * 16), dQ = wg_desc(sa + kROffQd, kD * 16);
    const WgDesc dK = wg_desc(sa + kROffKrT, kC * 16);
    const WgDesc dMh = wg_desc(sa + kROffMhi, kC * 16), dMl = wg_desc(sa + kROffMlo, kC * 16);
    unsigned int ah[kD / 16][4];
    // W^T in one accumulator: four round-robin accumulators (a chain of 2 dependent wgmmas, not 8)
    // measured slower on the H200 (recurrence 0.737 against 0.698 ms at scenario 1).
    float w[kNtC][4], qs[kNtC][4];
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      ah[ks][0] = pack_bf16x2(s[2 * ks][0], s[2 * ks][1]);
      ah[ks][1] = pack_bf16x2(s[2 * ks][2], s[2 * ks][3]);
      ah[ks][2] = pack_bf16x2(s[2 * ks + 1][0], s[2 * ks + 1][1]);
      ah[ks][3] = pack_bf16x2(s[2 * ks + 1][2], s[2 * ks + 1][3]);
    }
#pragma unroll
    for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        // Each zero its own register, defined above the fence (copies of one zero register sunk
        // between the wgmmas make ptxas serialise them).
        w[nt][e] = qs[nt][e] = 0.f;
        wg_keep(w[nt][e]);
        wg_keep(qs[nt][e]);
      }
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) wgmma_nc(&w[0][0], ah[ks], wg_desc_at(dW, ks * 256));
    wg_commit();
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) wgmma_nc(&qs[0][0], ah[ks], wg_desc_at(dQ, ks * 256));
    wg_commit();
    wg_wait<1>();  // W^T (the older group) is complete; Qs^T may still be in flight
#pragma unroll
    for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) wg_keep(w[nt][e]);
#else
    // W^T = S^T W0^T and Qs^T = S^T Qd^T (16 value columns x C tokens), S^T as hi + lo terms
    // (STATE_HI_LO = 1) or its bf16 rounding alone (STATE_HI_LO = 0: as FLA's bf16 state operands;
    // half the products and a sixth of the conversions, at about one more bf16 rounding of error on
    // W and Qs, the same size as W0's and Qd's own). W^T is on the chain's critical path (U, then
    // the state update, need it): two accumulators (S^T's hi and lo terms, or with STATE_HI_LO = 0
    // even and odd k steps) halve its dependent mma.sync.
    float w[kNtC][4], w2[kNtC][4], qs[kNtC][4];
#pragma unroll
    for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        w[nt][e] = 0.f;
        w2[nt][e] = 0.f;
        qs[nt][e] = 0.f;
      }
#if WY_IN_RECURRENCE
    // W^T's accumulators start at V^T, so that they end at V^T - W^T = U'^T with no subtraction
    // or negation on the chain (the prepare stores -Kd). V^T's A-layout fragments straight from
    // the staged token rows by ldmatrix.trans (matrix m: tokens 16 ks + 8 (m >> 1) .., value columns
    // jw + 8 (m & 1) ..), before the products so that its latency hides behind them; rows past the
    // sequence masked to zero (stale shared memory may hold NaN, and 0 x NaN is NaN even where T'
    // is zero).
    {
      const int vcount = vlen - c * kC < kC ? vlen - c * kC : kC;
#pragma unroll
      for (int ks = 0; ks < kKsC; ++ks) {
        unsigned int vr[4];
        const int m = lane >> 3;
        ldmatrix_x4_trans(vr, smem0 + buf * kRStageBytes + kROffV + (ks * 16 + (m >> 1) * 8 + (lane & 7)) * kVRow +
                                  (jw + (m & 1) * 8) * 2);
        if (vcount < kC) {
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const int tk = ks * 16 + (r >> 1) * 8 + 2 * t4;
            if (tk >= vcount) vr[r] &= 0xffff0000u;
            if (tk + 1 >= vcount) vr[r] &= 0x0000ffffu;
          }
        }
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          w[2 * ks + (r >> 1)][2 * (r & 1)] = __uint_as_float(vr[r] << 16);
          w[2 * ks + (r >> 1)][2 * (r & 1) + 1] = __uint_as_float(vr[r] & 0xffff0000u);
        }
      }
    }
#endif
#pragma unroll
    for (int ks = 0; ks < kDw / 16; ++ks) {
      unsigned int ah[4];
#if STATE_HI_LO
      unsigned int al[4];
      split_bf16x2(s[2 * ks][0], s[2 * ks][1], ah[0], al[0]);
      split_bf16x2(s[2 * ks][2], s[2 * ks][3], ah[1], al[1]);
      split_bf16x2(s[2 * ks + 1][0], s[2 * ks + 1][1], ah[2], al[2]);
      split_bf16x2(s[2 * ks + 1][2], s[2 * ks + 1][3], ah[3], al[3]);
#else
      ah[0] = pack_bf16x2(s[2 * ks][0], s[2 * ks][1]);
      ah[1] = pack_bf16x2(s[2 * ks][2], s[2 * ks][3]);
      ah[2] = pack_bf16x2(s[2 * ks + 1][0], s[2 * ks + 1][1]);
      ah[3] = pack_bf16x2(s[2 * ks + 1][2], s[2 * ks + 1][3]);
#endif
#pragma unroll
      for (int nt = 0; nt < kNtC; ++nt) {
        unsigned int bw[2], bq[2];
#if KSPLIT == 1
        const int imm = 2 * (nt * 8 * kD + ((ks & 4) << 4));
        lds_b64(bw, xb[ks & 3] + kROffW + imm);
        lds_b64(bq, xb[ks & 3] + kROffQd + imm);
#else
        load_b_frag(bw, sW, kD, nt * 8, d0 + ks * 16, lane);
        load_b_frag(bq, sQd, kD, nt * 8, d0 + ks * 16, lane);
#endif
#if STATE_HI_LO
        mma_bf16(w[nt], ah, bw);
        mma_bf16(w2[nt], al, bw);
        mma_bf16(qs[nt], ah, bq);
        mma_bf16(qs[nt], al, bq);
#else
        mma_bf16((ks & 1) ? w2[nt] : w[nt], ah, bw);
        mma_bf16(qs[nt], ah, bq);
#endif
      }
    }
#pragma unroll
    for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) w[nt][e] += w2[nt][e];
#if KSPLIT > 1
    // Every warp of the group writes its partials and sums all of them in the same order, so the
    // group's warps hold bit-identical W^T and Qs^T (and so the same U).
    {
      float* xb = reinterpret_cast<float*>(smem + kROffX) + (c & 1) * (kRWarps * 32 * kXFloats);
#pragma unroll
      for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          xb[((warp * kXFloats) + nt * 4 + e) * 32 + lane] = w[nt][e];
          xb[((warp * kXFloats) + kXFloats / 2 + nt * 4 + e) * 32 + lane] = qs[nt][e];
        }
      __syncthreads();
      const int w0 = warp - kh;
#pragma unroll
      for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float sw = 0.f, sq = 0.f;
#pragma unroll
          for (int r = 0; r < kKs; ++r) {
            sw += r == kh ? w[nt][e] : xb[(((w0 + r) * kXFloats) + nt * 4 + e) * 32 + lane];
            sq += r == kh ? qs[nt][e] : xb[(((w0 + r) * kXFloats) + kXFloats / 2 + nt * 4 + e) * 32 + lane];
          }
          w[nt][e] = sw;
          qs[nt][e] = sq;
        }
    }
#endif
#endif  // KDA_WGMMA
#if WY_IN_RECURRENCE == 2
    // WY_IN_RECURRENCE 2: T' is folded into Kr2 and M2 (the prepare): U'^T enters the updates
    // as it is.
#elif WY_IN_RECURRENCE
    // U^T = U'^T T'^T: W^T's accumulators hold U'^T (above), as its bf16 rounding; T' as hi + lo
    // terms (two accumulators, no dependent pair).
    {
      unsigned int up[kKsC][4];
#pragma unroll
      for (int ks = 0; ks < kKsC; ++ks) {
        up[ks][0] = pack_bf16x2(w[2 * ks][0], w[2 * ks][1]);
        up[ks][1] = pack_bf16x2(w[2 * ks][2], w[2 * ks][3]);
        up[ks][2] = pack_bf16x2(w[2 * ks + 1][0], w[2 * ks + 1][1]);
        up[ks][3] = pack_bf16x2(w[2 * ks + 1][2], w[2 * ks + 1][3]);
      }
      const unsigned short* sThi = reinterpret_cast<const unsigned short*>(sb + kWsThi);
      const unsigned short* sTlo = reinterpret_cast<const unsigned short*>(sb + kWsTlo);
#pragma unroll
      for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          w[nt][e] = 0.f;
          w2[nt][e] = 0.f;
        }
#pragma unroll
      for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
        for (int ks = 0; ks < kKsC; ++ks)
          if (ks <= nt / 2) {
            unsigned int bh[2], bl[2];
            load_b_frag(bh, sThi, kC, nt * 8, ks * 16, lane);
            load_b_frag(bl, sTlo, kC, nt * 8, ks * 16, lane);
            mma_bf16(w[nt], up[ks], bh);
            mma_bf16(w2[nt], up[ks], bl);
          }
#pragma unroll
      for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) w[nt][e] += w2[nt][e];
    }
#else
    // U^T = U0^T - W^T, as hi + lo A fragments over the chunk's tokens (one read per pair).
    // U_HI_LO 0 (knob): U^T enters the state update and out^T as its bf16 rounding alone (FLA's
    // bf16 v_new), the lo terms unused (the compiler drops them).
#pragma unroll
    for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int jl = jw + g8 + hf * 8, i = nt * 8 + 2 * t4;
#if U0_BITS == 32
        const float2 u = *reinterpret_cast<const float2*>(sU + swz(jl, i, kC, 4));
        w[nt][2 * hf] = u.x - w[nt][2 * hf];
        w[nt][2 * hf + 1] = u.y - w[nt][2 * hf + 1];
#else
        const unsigned int u = *reinterpret_cast<const unsigned int*>(sU + swz(jl, i, kC, 8));
        w[nt][2 * hf] = __uint_as_float(u << 16) - w[nt][2 * hf];
        w[nt][2 * hf + 1] = __uint_as_float(u & 0xffff0000u) - w[nt][2 * hf + 1];
#endif
      }
#endif  // WY_IN_RECURRENCE
    unsigned int uh[kKsC][4], ul[kKsC][4];
#pragma unroll
    for (int ks = 0; ks < kKsC; ++ks) {
      split_bf16x2(w[2 * ks][0], w[2 * ks][1], uh[ks][0], ul[ks][0]);
      split_bf16x2(w[2 * ks][2], w[2 * ks][3], uh[ks][1], ul[ks][1]);
      split_bf16x2(w[2 * ks + 1][0], w[2 * ks + 1][1], uh[ks][2], ul[ks][2]);
      split_bf16x2(w[2 * ks + 1][2], w[2 * ks + 1][3], uh[ks][3], ul[ks][3]);
    }
#if KDA_WGMMA
    // S^T <- S^T diag(2^Gtot) + U^T Kr (one m64n128 wgmma a 16-token step and U term) and out^T =
    // Qs^T + U^T M^T (the whole C x C M: wgmma has no per-tile skip), both groups in flight.
#pragma unroll
    for (int nt = 0; nt < kD / 8; ++nt) {
      const float2 dec = *reinterpret_cast<const float2*>(sDec + nt * 8 + 2 * t4);
      s[nt][0] *= dec.x;
      s[nt][1] *= dec.y;
      s[nt][2] *= dec.x;
      s[nt][3] *= dec.y;
    }
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < kKsC; ++ks) {
      wgmma_n128(&s[0][0], uh[ks], wg_desc_at(dK, ks * 256));
#if U_HI_LO
      wgmma_n128(&s[0][0], ul[ks], wg_desc_at(dK, ks * 256));
#endif
    }
    wg_commit();
#pragma unroll
    for (int ks = 0; ks < kKsC; ++ks) {
      wgmma_nc(&qs[0][0], uh[ks], wg_desc_at(dMh, ks * 256));
#if U_HI_LO
      wgmma_nc(&qs[0][0], ul[ks], wg_desc_at(dMh, ks * 256));
#endif
      wgmma_nc(&qs[0][0], uh[ks], wg_desc_at(dMl, ks * 256));
    }
    wg_commit();
    wg_wait<0>();
#pragma unroll
    for (int nt = 0; nt < kD / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) wg_keep(s[nt][e]);
#pragma unroll
    for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) wg_keep(qs[nt][e]);
#endif  // KDA_WGMMA
    // out^T = Qs^T + U^T M^T (M lower triangular: token blocks up to the output tile's own), by
    // the group's first warp.
    if (kh == 0) {
#if !KDA_WGMMA
#pragma unroll
    for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
      for (int ks = 0; ks < kKsC; ++ks)
        if (ks <= nt / 2) {
          unsigned int bh[2], bl[2];
          load_b_frag(bh, sMhi, kC, nt * 8, ks * 16, lane);
          load_b_frag(bl, sMlo, kC, nt * 8, ks * 16, lane);
          mma_bf16(qs[nt], uh[ks], bh);
#if U_HI_LO
          mma_bf16(qs[nt], ul[ks], bh);
#endif
          mma_bf16(qs[nt], uh[ks], bl);
        }
#endif
#if KDA_OUT_STAGED
    // out^T's bf16 tile into this chunk's staging buffer, transposed to token rows by stmatrix
    // (four 8 x 8 matrices: n8 tiles nt, nt + 1 x value columns jw .. + 7, jw + 8 .. + 15); the
    // rows leave as 16-byte stores during the next chunk (flush_out).
    {
      const SmemAddr ob = smem0 + kROffO + (c & 1) * kOBufBytes;
      const int m = lane >> 3, mi = lane & 7;
#pragma unroll
      for (int nt = 0; nt < kNtC; nt += 2)
        stmatrix_x4_trans(ob + ((nt + (m >> 1)) * 8 + mi) * kORow + (jw + (m & 1) * 8) * 2,
                          pack_bf16x2(qs[nt][0], qs[nt][1]), pack_bf16x2(qs[nt][2], qs[nt][3]),
                          pack_bf16x2(qs[nt + 1][0], qs[nt + 1][1]), pack_bf16x2(qs[nt + 1][2], qs[nt + 1][3]));
    }
#else
    // Stores: lanes g8 and g8 ^ 1 swap one value so that each stores two adjacent value columns
    // of one token (even g8: token 2 t4, odd g8: token 2 t4 + 1).
    const int odd = g8 & 1;
#pragma unroll
    for (int nt = 0; nt < kNtC; ++nt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float v0 = qs[nt][2 * half], v1 = qs[nt][2 * half + 1];
        const float other = shfl_bfly(odd ? v0 : v1, 4);
        const int i = nt * 8 + 2 * t4 + odd, j = col0 + jw + g8 + 8 * half - odd;
        if (wout && i < count)
          store_bf16x2(a.out + ((t0 + i) * a.H + h) * (long long)kD + j, odd ? other : v0, odd ? v1 : other);
      }
#endif
    }
#if !KDA_WGMMA
    // S^T <- S^T diag(2^Gtot) + U^T Kr.
#pragma unroll
    for (int nt = 0; nt < kDw / 8; ++nt) {
      const float2 dec = *reinterpret_cast<const float2*>(sDec + d0 + nt * 8 + 2 * t4);
      s[nt][0] *= dec.x;
      s[nt][1] *= dec.y;
      s[nt][2] *= dec.x;
      s[nt][3] *= dec.y;
#pragma unroll
      for (int ks = 0; ks < kKsC; ++ks) {
        unsigned int bk[2];
        load_b_frag(bk, sKrT, kC, d0 + nt * 8, ks * 16, lane);
        mma_bf16(s[nt], uh[ks], bk);
#if U_HI_LO
        mma_bf16(s[nt], ul[ks], bk);
#endif
      }
    }
#endif
#if !STAGE
    __syncthreads();  // the next chunk's copies overwrite the only buffer
#endif
    rbuf = rbuf == kRBuffers - 1 ? 0 : rbuf + 1;
  }
  }
#if KDA_OUT_STAGED
  if (nchunks > 0 && wout) {  // the last chunk's out rows
    __syncthreads();  // its stmatrix
    flush_out(nchunks - 1, len - (nchunks - 1) * kC);
  }
#endif
#if SEQSPLIT > 1
  // Pass 1: S0_j or A_j's columns into the segment's block; pass 3: only the last segment's end
  // is the final state.
  if (pass == 1) {
#pragma unroll
    for (int nt = 0; nt < kDw / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = col0 + jw + g8 + (e >> 1) * 8, d = d0 + nt * 8 + 2 * t4 + (e & 1);
        segst[(long long)((amat ? kD : 0) + j) * kD + d] = s[nt][e];
      }
    return;
  }
  if (pass == 3 && seg != nseg - 1) return;
#endif
#if HAS_FINAL_STATE
#pragma unroll
  for (int nt = 0; nt < kDw / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int j = col0 + jw + g8 + (e >> 1) * 8, d = d0 + nt * 8 + 2 * t4 + (e & 1);
      a.final_state[sbase + (long long)j * kD + d] = s[nt][e];
    }
#endif
  (void)sbase;
}
