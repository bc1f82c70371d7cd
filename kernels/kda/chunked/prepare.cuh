// A part of kernels/kda/kda_fwd_chunked.cu, expanded into it where it is included (inside
// namespace kda_chunked, after the knobs and the parts before it); not a header of its own.
// kda_fwd_prepare (FUSED = 0) and kda_fwd_flags_reset (PREPARE_CTAS > 0): per (chunk, head),
// everything that does not depend on the state, written to the workspace.

#define KDA_SPLIT_FACTOR_DIAG (LM_TENSOR_CORES && !KDA_GATE_SOFTPLUS)
#define KDA_ONE_PASS (CHUNK == 16 && KDA_SPLIT_FACTOR_DIAG)
// WY by substitution with both of a thread's columns in one pass (CHUNK 16, one Kd and one V
// column a thread).
#define KDA_WY_PAIRED (CHUNK == 16 && WARPS == 4 && !WY_TENSOR_CORES && !WY_IN_RECURRENCE)
// Kr^T written by the cumsum step (CHUNK 16 in swzf's fragment order: 16 G values a thread).
#define KDA_KRT_IN_CUMSUM (CHUNK == 16 && !KDA_WGMMA)
// The paired substitution's right-hand side beta Kd = beta k 2^G written over k's fp32 rows by the
// one-pass step, which already holds k and 2^G (for Qd) of its pairs: the substitution then reads
// one value a token instead of beta, k and G and an exponential. Only with Kr^T from the cumsum
// step: the separate Kr^T pass reads other threads' k pairs with no barrier before the one-pass.
#define KDA_KD_IN_ONE_PASS (KDA_ONE_PASS && KDA_WY_PAIRED && KDA_KRT_IN_CUMSUM)
// Step 1's L2 norms of four tokens a warp reduced together (CHUNK 16 with four warps, CHUNK 32
// with eight).
#define KDA_NORM_BATCHED (CHUNK / WARPS == 4)
// Step 1 loads its q, k, g straight from global memory into registers (a warp's four tokens in
// flight at once) rather than through shared-memory staging: 12 KB less written to and read from
// shared memory a chunk (the prepare is bound by its L1 / shared-memory pipe); only v is staged.
#define KDA_DIRECT_QKG (KDA_NORM_BATCHED && KDA_Q_REGS)

// kda_fwd_prepare's work for one (chunk slot x, head h): everything of the chunk that does not
// depend on the state, written to the workspace (layout kWs*); false for a slot no chunk uses
// (then `release` is not released).
// PREPARE_CTAS: thread 0 releases `release` (the previous item's flag, or null) once this item's
// loads are in flight: a release waits for the CTA's earlier stores to complete, which right after
// them stalled the whole CTA (the next barrier waits for thread 0).
__device__ __forceinline__ bool kda_prepare_item(const Args& a, unsigned char* __restrict__ ws, int nseq, long long x,
                                                 int h, unsigned int* release) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* pQ = reinterpret_cast<float*>(smem + kPOffQ);
#if KDA_Q_REGS
  (void)pQ;  // no fp32 q rows: the one-pass step reads q from registers
#endif
  float* pK = reinterpret_cast<float*>(smem + kPOffK);
  float* pG = reinterpret_cast<float*>(smem + kPOffG);
  float* pBeta = reinterpret_cast<float*>(smem + kPOffBeta);
  float* pL = reinterpret_cast<float*>(smem + kPOffL);
  unsigned short* pXh = reinterpret_cast<unsigned short*>(smem + kPOffXh);
  unsigned short* pXl = reinterpret_cast<unsigned short*>(smem + kPOffXl);
  unsigned short* pQh = reinterpret_cast<unsigned short*>(smem + kPOffQh);
  unsigned short* pQl = reinterpret_cast<unsigned short*>(smem + kPOffQl);
  unsigned short* pYh = reinterpret_cast<unsigned short*>(smem + kPOffYh);
  unsigned short* pYl = reinterpret_cast<unsigned short*>(smem + kPOffYl);
  if (dynamic_smem_bytes() < (unsigned int)kPSmemBytes) trap_now();

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  KDA_ASSUME(tid >= 0 && tid < kPThreads);
  const int g8 = lane >> 2, t4 = lane & 3;
  // The sequence whose slots hold x: the last n with n + bos_n / C <= x (increasing in n).
  int lo = 0, hi = nseq - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    long long b, e;
    seq_range(a, mid, b, e);
    if (mid + b / kC <= x) lo = mid;
    else hi = mid - 1;
  }
  long long bos, eos;
  seq_range(a, lo, bos, eos);
  const long long t0 = bos + (x - lo - bos / kC) * kC;
  if (t0 >= eos) return false;  // a slot no chunk uses (the whole CTA leaves before any barrier)
  const int count = (int)(eos - t0 < kC ? eos - t0 : (long long)kC);
  unsigned char* wsc = ws + ((long long)h * ws_slots(a, nseq) + x) * kWsChunkBytes;

  // 0. The chunk's raw q, k, g rows into shared memory with cp.async, all at once (step 1 would
  // otherwise have one token's rows a warp in flight: too few bytes to keep DRAM busy); they use
  // the factor area of step 4, which is free until then.
  // v goes to its own area (step 5 reads it after the factors are used): its load latency is
  // then hidden here rather than exposed at the end.
  unsigned short* rawq = reinterpret_cast<unsigned short*>(smem + kPOffXh);
  unsigned short* rawk = rawq + kC * kD;
  unsigned short* rawg = rawk + kC * kD;
  unsigned short* rawv = reinterpret_cast<unsigned short*>(smem + kPOffV);
  // Loops of this kernel run a fixed number of rounds (the layout's sizes are multiples of the
  // thread count), fully unrolled: the indexing then folds into per-thread constants. Here a
  // thread always copies the same 16-byte segment of the same tensor (kPThreads is a multiple of
  // the 64 segments of a token), every kPThreads / 64 tokens: its source and destination are
  // chosen once and stepped by constants (per-copy selects and 64-bit index products cost ~1,500
  // instructions a chunk, measured on the H200).
#if KDA_DIRECT_QKG
  static_assert(kPThreads == 128, "direct q, k, g loads: four warps");
  if (!WY_IN_RECURRENCE) {  // WY_IN_RECURRENCE: the recurrence reads v
    const int seg = tid & 15, tt0 = tid >> 4;  // eight tokens of v a round
    const __nv_bfloat16* src = a.v + ((t0 + tt0) * a.H + h) * (long long)kD + seg * 8;
    const long long src_step = 8LL * a.H * kD;
    const SmemAddr sdst = smem_at(rawv + tt0 * kD + seg * 8);
#pragma unroll
    for (int it = 0; it < kC / 8; ++it)
      if (tt0 + it * 8 < count) cp_async16_at(sdst + it * 8 * kD * 2, src + it * src_step);
  }
  cp_async_commit();
  // This warp's four tokens: q at the one-pass step's channel pairs, k and g as quads.
  unsigned int qraw[4][2];
  uint2 kraw[4], graw[4];
#pragma unroll
  for (int it = 0; it < 4; ++it) {
    const int tt = warp + it * kPWarps;
    qraw[it][0] = qraw[it][1] = 0u;
    kraw[it] = graw[it] = make_uint2(0u, 0u);
    if (tt < count) {
      const long long base = ((t0 + tt) * a.H + h) * (long long)kD;
      qraw[it][0] = load_bf16x2_raw(a.q + base + 2 * lane);
      qraw[it][1] = load_bf16x2_raw(a.q + base + 64 + 2 * lane);
      kraw[it] = load_bf16x4_raw(a.k + base + lane * 4);
      graw[it] = load_bf16x4_raw(a.g + base + lane * 4);
    }
  }
#else
  {
    constexpr int kTokStep = kPThreads / 64;
    const int which = (tid & 63) >> 4, tt0 = tid >> 6, seg = tid & 15;
    const __nv_bfloat16* src = which == 0 ? a.q : which == 1 ? a.k : which == 2 ? a.g : a.v;
    src += ((t0 + tt0) * a.H + h) * (long long)kD + seg * 8;
    const long long src_step = (long long)kTokStep * a.H * kD;
    unsigned short* dst = (which == 0 ? rawq : which == 1 ? rawk : which == 2 ? rawg : rawv) + tt0 * kD + seg * 8;
    const SmemAddr sdst = smem_at(dst);
#pragma unroll
    for (int it = 0; it < kC / kTokStep; ++it) {
      if (tt0 + it * kTokStep < count && !(WY_IN_RECURRENCE && which == 3)) {
        cp_async16_at(sdst + it * kTokStep * kD * 2, src + it * src_step);
      }
#if WY_TENSOR_CORES
      // Step 5's products read every v row: padding rows must be zeros, not stale shared memory
      // (their weights are 0, but 0 x NaN is NaN).
      else if (which == 3) {
        *reinterpret_cast<uint4*>(dst + it * kTokStep * kD) = make_uint4(0u, 0u, 0u, 0u);
      }
#endif
    }
  }
  cp_async_commit();
#endif  // KDA_DIRECT_QKG
  // The small per-head and per-token inputs load while the copies fly.
  float dtb[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) dtb[e] = a.dt_bias[h * kD + lane * 4 + e];
  const float ea = ex2(a.a_log[h] * KDA_LOG2E);
#if !KDA_GATE_SOFTPLUS
  // The lower-bound gate in log2 units, lb log2(e) sigmoid(ea (g + dt_bias)), with the constants
  // folded per lane: one FFMA, two MUFU, an FADD and an FMUL an element (eight before).
  const float gc = -ea * KDA_LOG2E, lbl = a.lower_bound * KDA_LOG2E;
  float dtc[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) dtc[e] = dtb[e] * gc;
#endif
  const float beta_logit = tid < count ? load_bf16(a.beta + (t0 + tid) * a.H + h) : 0.f;
#if PREPARE_CTAS
  if (release != nullptr && tid == 0) flag_release(release);
#else
  (void)release;
#endif
#if !KDA_DIRECT_QKG
  cp_async_wait_all();
  __syncthreads();
#endif
  // 1. Pre-processing, one warp per token (as the fused kernel); padding rows are zero, a = 0.
#if KDA_Q_REGS
  // q's channels 2 lane, 2 lane + 1, 64 + 2 lane, 65 + 2 lane: the one-pass step's pairs.
  float qr[kC / kPWarps][4];
#endif
  // One token's four channels of this lane: q's and k's partial sums of squares and the gate's
  // log2-decays.
  auto channel_quad = [&](const float (&q)[4], const float (&k)[4], const float (&gg)[4], float& sq, float& sk,
                          float (&ld)[4]) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      sq = fmaf(q[e], q[e], sq);
      sk = fmaf(k[e], k[e], sk);
#if KDA_GATE_SOFTPLUS
      ld[e] = log_decay(gg[e] + dtb[e], ea, a.lower_bound) * KDA_LOG2E;
#else
      ld[e] = lbl * rcp(1.f + ex2(fmaf(gg[e], gc, dtc[e])));
#endif
    }
  };
#if KDA_NORM_BATCHED
  // Four tokens a warp: the eight sums of squares (q and k of each) reduced together by recursive
  // halving (each butterfly level sends half the values still held), then one rsqrt a lane and
  // eight broadcasts: 17 shuffles and 9 adds a warp instead of 40 and 40.
  {
    float kv[4][4], ss[8];
#pragma unroll
    for (int it = 0; it < 4; ++it) {
      const int tt = warp + it * kPWarps;
      float q[4] = {0.f, 0.f, 0.f, 0.f}, ld[4] = {0.f, 0.f, 0.f, 0.f};
      float sq = 0.f, sk = 0.f;
#pragma unroll
      for (int e = 0; e < 4; ++e) kv[it][e] = 0.f;
      if (tt < count) {
        float gg[4];
#if KDA_DIRECT_QKG
        unpack_bf16x4(qraw[it][0], qraw[it][1], q);
        unpack_bf16x4(kraw[it].x, kraw[it].y, kv[it]);
        unpack_bf16x4(graw[it].x, graw[it].y, gg);
#else
#if KDA_Q_REGS
        unpack_bf16x4(*reinterpret_cast<const unsigned int*>(rawq + tt * kD + 2 * lane),
                      *reinterpret_cast<const unsigned int*>(rawq + tt * kD + 64 + 2 * lane), q);
#else
        load_shared_bf16x4(rawq + tt * kD + lane * 4, q);
#endif
        load_shared_bf16x4(rawk + tt * kD + lane * 4, kv[it]);
        load_shared_bf16x4(rawg + tt * kD + lane * 4, gg);
#endif
        channel_quad(q, kv[it], gg, sq, sk, ld);
      }
#if KDA_Q_REGS
#pragma unroll
      for (int e = 0; e < 4; ++e) qr[it][e] = q[e];
#else
      *reinterpret_cast<float4*>(pQ + tt * kLd + lane * 4) = make_float4(q[0], q[1], q[2], q[3]);
#endif
      *reinterpret_cast<float4*>(pG + tt * kLd + lane * 4) = make_float4(ld[0], ld[1], ld[2], ld[3]);
      ss[2 * it] = sq;
      ss[2 * it + 1] = sk;
    }
    // Value v = 2 it + (k ? 1 : 0) ends in the lanes with (lane >> 2) & 7 == v.
    const bool b4 = (lane & 16) != 0, b3 = (lane & 8) != 0, b2 = (lane & 4) != 0;
    float s4[4], s2[2];
#pragma unroll
    for (int j = 0; j < 4; ++j) s4[j] = (b4 ? ss[j + 4] : ss[j]) + shfl_bfly(b4 ? ss[j] : ss[j + 4], 16);
#pragma unroll
    for (int j = 0; j < 2; ++j) s2[j] = (b3 ? s4[j + 2] : s4[j]) + shfl_bfly(b3 ? s4[j] : s4[j + 2], 8);
    float s1 = (b2 ? s2[1] : s2[0]) + shfl_bfly(b2 ? s2[0] : s2[1], 4);
    s1 += shfl_bfly(s1, 2);
    s1 += shfl_bfly(s1, 1);
    const float rs = rsqrt(s1 + 1e-6f) * (b2 ? 1.f : a.scale);  // odd v (b2): k's, no scale
#pragma unroll
    for (int it = 0; it < 4; ++it) {
      const int tt = warp + it * kPWarps;
      const float rq = shfl_idx(rs, 8 * it), rk = shfl_idx(rs, 8 * it + 4);
#if KDA_Q_REGS
#pragma unroll
      for (int e = 0; e < 4; ++e) qr[it][e] *= rq;
#else
      float4* pq = reinterpret_cast<float4*>(pQ + tt * kLd + lane * 4);
      const float4 qv = *pq;
      *pq = make_float4(qv.x * rq, qv.y * rq, qv.z * rq, qv.w * rq);
#endif
      *reinterpret_cast<float4*>(pK + tt * kLd + lane * 4) =
          make_float4(kv[it][0] * rk, kv[it][1] * rk, kv[it][2] * rk, kv[it][3] * rk);
    }
  }
#else
#pragma unroll
  for (int it = 0; it < kC / kPWarps; ++it) {
    const int tt = warp + it * kPWarps;
    float q[4] = {0.f, 0.f, 0.f, 0.f}, k[4] = {0.f, 0.f, 0.f, 0.f}, ld[4] = {0.f, 0.f, 0.f, 0.f};
    float rq = 0.f, rk = 0.f;
    if (tt < count) {
      float gg[4];
#if KDA_Q_REGS
      unpack_bf16x4(*reinterpret_cast<const unsigned int*>(rawq + tt * kD + 2 * lane),
                    *reinterpret_cast<const unsigned int*>(rawq + tt * kD + 64 + 2 * lane), q);
#else
      load_shared_bf16x4(rawq + tt * kD + lane * 4, q);
#endif
      load_shared_bf16x4(rawk + tt * kD + lane * 4, k);
      load_shared_bf16x4(rawg + tt * kD + lane * 4, gg);
      float sq = 0.f, sk = 0.f;
      channel_quad(q, k, gg, sq, sk, ld);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        sq += shfl_bfly(sq, o);
        sk += shfl_bfly(sk, o);
      }
      rq = rsqrt(sq + 1e-6f) * a.scale;
      rk = rsqrt(sk + 1e-6f);
    }
#if KDA_Q_REGS
#pragma unroll
    for (int e = 0; e < 4; ++e) qr[it][e] = q[e] * rq;
#else
    *reinterpret_cast<float4*>(pQ + tt * kLd + lane * 4) = make_float4(q[0] * rq, q[1] * rq, q[2] * rq, q[3] * rq);
#endif
    *reinterpret_cast<float4*>(pK + tt * kLd + lane * 4) = make_float4(k[0] * rk, k[1] * rk, k[2] * rk, k[3] * rk);
    *reinterpret_cast<float4*>(pG + tt * kLd + lane * 4) = make_float4(ld[0], ld[1], ld[2], ld[3]);
  }
#endif  // KDA_NORM_BATCHED
  if (tid < kC) pBeta[tid] = tid < count ? sigmoid(beta_logit) : 0.f;
  __syncthreads();
  // 2. G = chunk-local inclusive cumsum of the log2-decays; 2^Gtot to the workspace.
  unsigned short* wKrT = reinterpret_cast<unsigned short*>(wsc + kWsKrT);
#if KDA_KRT_IN_CUMSUM
  // With Kr^T: the thread owning channel d holds its 16 G values, so row d of Kr^T = (k 2^(Gtot -
  // G))^T comes from registers and one read of k's column, and leaves as two 16-byte stores (the
  // fragment order of swzf permutes within the row's 32 bytes) instead of a later pass that read
  // k and G again (with two-way bank conflicts) and stored 4 bytes at a time.
  if (tid < kD) {
    const int d = tid;
    float gv[kC];
    float gsum = 0.f;
#pragma unroll
    for (int i = 0; i < kC; ++i) {
      gsum += pG[i * kLd + d];
      gv[i] = gsum;
      pG[i * kLd + d] = gsum;
    }
    reinterpret_cast<float*>(wsc + kWsDec)[d] = ex2(gsum);
#if KDA_WY_FOLD  // WY_IN_RECURRENCE 2: Kr2^T = Kr^T T' in step 5
    (void)wKrT;
    (void)gv;
#else
    unsigned int wv[8];
#pragma unroll
    for (int r = 0; r < kC; r += 2) {
      // swzf's position of the pair (r, r + 1) in the row: ((r & 7) >> 1) * 4 + (r >> 3) * 2.
      wv[((r & 7) >> 1) * 2 + (r >> 3)] =
          pack_bf16x2(pK[r * kLd + d] * ex2(gsum - gv[r]), pK[(r + 1) * kLd + d] * ex2(gsum - gv[r + 1]));
    }
    uint4* dst = reinterpret_cast<uint4*>(wKrT + swzf(d, 0, kC));
    dst[0] = make_uint4(wv[0], wv[1], wv[2], wv[3]);
    dst[1] = make_uint4(wv[4], wv[5], wv[6], wv[7]);
#endif
  }
#else
  for (int d = tid; d < kD; d += kPThreads) {
    float gsum = 0.f;
#pragma unroll 8
    for (int i = 0; i < kC; ++i) {
      gsum += pG[i * kLd + d];
      pG[i * kLd + d] = gsum;
    }
    reinterpret_cast<float*>(wsc + kWsDec)[d] = ex2(gsum);
  }
#endif
  __syncthreads();
  // 3. Qd = q 2^G (scale folded into q) and Kr^T = (k 2^(Gtot - G))^T, bf16 pairs
  // (WY_IN_RECURRENCE: and -Kd = -k 2^G, in W0's place: the recurrence's accumulators start at V^T
  // and end at U'^T with no negation on its chain).
  unsigned short* wQd = reinterpret_cast<unsigned short*>(wsc + kWsQd);
#if WY_IN_RECURRENCE
  unsigned short* wKd = reinterpret_cast<unsigned short*>(wsc + kWsW);
#endif
#if !KDA_ONE_PASS
#pragma unroll
  for (int it = 0; it < kC * kD / 2 / kPThreads; ++it) {
    const int idx = tid + it * kPThreads;
#if KDA_WGMMA
    // Pair idx is the pair at element 2 idx of the core-matrix layout: a warp's stores are
    // contiguous (the row-major walk would put 4 bytes in each of eight core matrices).
    const int p = 2 * idx, cm = p >> 6;
    const int r = (cm / (kD / 8)) * 8 + ((p & 63) >> 3), d = (cm % (kD / 8)) * 8 + (p & 7);
#else
    const int r = idx / (kD / 2), d = 2 * (idx % (kD / 2));
#endif
    const float2 qq = *reinterpret_cast<const float2*>(pQ + r * kLd + d);
    const float2 gg = *reinterpret_cast<const float2*>(pG + r * kLd + d);
    const float e0 = ex2(gg.x), e1 = ex2(gg.y);
    *reinterpret_cast<unsigned int*>(wQd + wsb(r, d, kD)) = pack_bf16x2(qq.x * e0, qq.y * e1);
#if WY_IN_RECURRENCE
    const float2 kk = *reinterpret_cast<const float2*>(pK + r * kLd + d);
    *reinterpret_cast<unsigned int*>(wKd + wsb(r, d, kD)) = pack_bf16x2(-kk.x * e0, -kk.y * e1);  // -Kd
#endif
  }
#endif
#if !KDA_KRT_IN_CUMSUM
#pragma unroll
  for (int it = 0; it < kD * kC / 2 / kPThreads; ++it) {
    const int idx = tid + it * kPThreads;
#if KDA_WGMMA
    const int p = 2 * idx, cm = p >> 6;  // as Qd: contiguous stores
    const int d = (cm / (kC / 8)) * 8 + ((p & 63) >> 3), r = (cm % (kC / 8)) * 8 + (p & 7);
#else
    const int d = idx / (kC / 2), r = 2 * (idx % (kC / 2));
#endif
    const float gt = pG[(kC - 1) * kLd + d];
    const float v0 = pK[r * kLd + d] * ex2(gt - pG[r * kLd + d]);
    const float v1 = pK[(r + 1) * kLd + d] * ex2(gt - pG[(r + 1) * kLd + d]);
    *reinterpret_cast<unsigned int*>(wKrT + wsb(d, r, kC)) = pack_bf16x2(v0, v1);
  }
#endif
#if KDA_ONE_PASS
  // 3 + 4 for CHUNK 16 with the factored diagonal block (one 16-token block, pivot token 7; the
  // general form is step 4 below): one pass over (token, channel pair) writes Qd and the block's
  // left factors (k, q) 2^(G - G_7) and right factors k 2^(G_7 - G) (hi + lo bf16, the expressions
  // of step 4's loops: bit-identical results), each q, k, G pair read once instead of three times;
  // in two rounds of 64 channels, each followed by its half of the L and M products (one (n8 tile,
  // L or M) job a warp, accumulated across the rounds), so that the factors take half the area:
  // five CTAs a SM instead of four.
  {
    const int nt = (warp >> 1) & 1, is_m = warp & 1;  // the warp's job when warp < 4
    const unsigned short* fh = is_m ? pQh : pXh;
    const unsigned short* fl = is_m ? pQl : pXl;
    float c0[4] = {0.f, 0.f, 0.f, 0.f}, c1[4] = {0.f, 0.f, 0.f, 0.f}, c2[4] = {0.f, 0.f, 0.f, 0.f};
#if LMTERMS < 3
    // M's diagonal q_i . k_i (its decays cancel) in fp32 rather than from single bf16 factors: at
    // T = 1 it is the whole output, and the factors' rounding over a small q . k was a large
    // relative error (H200: 8.3e-3 at T = 1 with LMTERMS 1). Token warp + it kPWarps a lane's pairs,
    // reduced after the last round into the right factors' lo area (unused below 3 terms).
    float qkd[16 * 32 / kPThreads];
#pragma unroll
    for (int it = 0; it < 16 * 32 / kPThreads; ++it) qkd[it] = 0.f;
    float* pDiag = reinterpret_cast<float*>(smem + kPOffYl);
#else
    const float* pDiag = nullptr;
#endif
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (h == 1) __syncthreads();  // round 0's products have read the factors round 1 overwrites
#if !KDA_WGMMA
      // d = 64 h + 2 (tid % 32) in every iteration: G_7's pair loaded once a round.
      const float2 gp = *reinterpret_cast<const float2*>(pG + 7 * kLd + 64 * h + 2 * (tid % 32));
#endif
#pragma unroll
      for (int it = 0; it < 16 * 32 / kPThreads; ++it) {
        const int idx = tid + it * kPThreads;
#if KDA_WGMMA
        // Pair idx of the round is the pair at element 2 idx of its two 512-element halves of the
        // core-matrix layout (row group e / 512, core matrices 8 h .. 8 h + 7): contiguous stores.
        const int e = 2 * idx, rg = e >> 9, q = e & 511;
        const int r = rg * 8 + ((q & 63) >> 3), d = (8 * h + (q >> 6)) * 8 + (q & 7);
        const float2 gp = *reinterpret_cast<const float2*>(pG + 7 * kLd + d);
#else
        const int r = idx / 32, d = 64 * h + 2 * (idx % 32);
#endif
        const int df = d - 64 * h;  // the pair's column in the round's factor rows
#if KDA_Q_REGS
        const float2 qq = make_float2(qr[it][2 * h], qr[it][2 * h + 1]);  // r = warp + it kPWarps, d = 64 h + 2 lane
#else
        const float2 qq = *reinterpret_cast<const float2*>(pQ + r * kLd + d);
#endif
        const float2 gg = *reinterpret_cast<const float2*>(pG + r * kLd + d);
        const float2 kk = *reinterpret_cast<const float2*>(pK + r * kLd + d);
#if LMTERMS < 3
        qkd[it] = fmaf(qq.x, kk.x, fmaf(qq.y, kk.y, qkd[it]));
#endif
        const float e0 = ex2(gg.x), e1 = ex2(gg.y);
        *reinterpret_cast<unsigned int*>(wQd + wsb(r, d, kD)) = pack_bf16x2(qq.x * e0, qq.y * e1);
#if KDA_KD_IN_ONE_PASS
        // This thread's pair of k is read here for the last time before step 5.
        const float br = pBeta[r];
        *reinterpret_cast<float2*>(pK + r * kLd + d) = make_float2(br * kk.x * e0, br * kk.y * e1);
#endif
#if WY_IN_RECURRENCE
        *reinterpret_cast<unsigned int*>(wKd + wsb(r, d, kD)) = pack_bf16x2(-kk.x * e0, -kk.y * e1);  // -Kd
#endif
        const float f0 = ex2(gg.x - gp.x), f1 = ex2(gg.y - gp.y);
        unsigned int wh, wl;
        split_bf16x2(kk.x * f0, kk.y * f1, wh, wl);
        *reinterpret_cast<unsigned int*>(pXh + r * kPadF + df) = wh;
        if (LMTERMS >= 2) *reinterpret_cast<unsigned int*>(pXl + r * kPadF + df) = wl;
        split_bf16x2(qq.x * f0, qq.y * f1, wh, wl);
        *reinterpret_cast<unsigned int*>(pQh + r * kPadF + df) = wh;
        if (LMTERMS >= 2) *reinterpret_cast<unsigned int*>(pQl + r * kPadF + df) = wl;
        split_bf16x2(kk.x * ex2(gp.x - gg.x), kk.y * ex2(gp.y - gg.y), wh, wl);
        *reinterpret_cast<unsigned int*>(pYh + r * kPadF + df) = wh;
        if (LMTERMS >= 3) *reinterpret_cast<unsigned int*>(pYl + r * kPadF + df) = wl;
      }
#if LMTERMS < 3
      if (h == 1) {
#pragma unroll
        for (int it = 0; it < 16 * 32 / kPThreads; ++it) {
          float v = qkd[it];
#pragma unroll
          for (int o = 16; o > 0; o >>= 1) v += shfl_bfly(v, o);
          if (lane == 0) pDiag[warp + it * kPWarps] = v;
        }
      }
#endif
      __syncthreads();
      if (warp < 4) lm_tile_mma<LMTERMS>(c0, c1, c2, fh, fl, pYh, pYl, kPadF, nt * 8, 0, kFk / 16, lane);
    }
    if (warp < 4)
      lm_tile_store(c0, c1, c2, is_m, 0, nt * 8, g8, t4, pL, pBeta,
                    reinterpret_cast<unsigned short*>(wsc + kWsMhi), reinterpret_cast<unsigned short*>(wsc + kWsMlo), pDiag,
                    KDA_WY_FOLD ? reinterpret_cast<float*>(smem + kPOffMf) : nullptr);
#if KDA_DIRECT_QKG
    cp_async_wait_all();  // v's rows (step 5), in flight since step 0
#endif
    __syncthreads();  // L is complete; the factor area is free for step 5
  }
#else
  // 4. L (fp32, shared memory) and M (hi + lo bf16, workspace) by 16-token row blocks. For rows
  // i of block I and columns j of an earlier block, 2^(G_i - G_j) = 2^(G_i - G_p) 2^(G_p - G_j)
  // with the pivot p = I's first token: both factors <= 1 for any gate, so the dot products run on
  // tensor cores (factors as hi + lo bf16 terms, hi hi + hi lo + lo hi) without overflow. The
  // diagonal block: with KDA_SPLIT_FACTOR_DIAG (lower-bound gate, LM_TENSOR_CORES = 1) the same
  // with the pivot p = I's token 7 (the gate bounds a token's decay to 5 nats, so both factors stay
  // within 2^58, as in the fused kernel's tensor-core L and M); otherwise term by term with one
  // ex2 each.
  unsigned short* wMhi = reinterpret_cast<unsigned short*>(wsc + kWsMhi);
  unsigned short* wMlo = reinterpret_cast<unsigned short*>(wsc + kWsMlo);
  for (int idx = tid; idx < kC * kC; idx += kPThreads)
    if ((idx % kC) / 16 > (idx / kC) / 16) {
      wMhi[wsb(idx / kC, idx % kC, kC)] = 0;
      wMlo[wsb(idx / kC, idx % kC, kC)] = 0;
    }
#pragma unroll 1
  for (int bi = 0; bi < kNb; ++bi) {
    const int b0 = bi * 16;
    const int piv = KDA_SPLIT_FACTOR_DIAG ? b0 + 7 : b0;
    const int ny = KDA_SPLIT_FACTOR_DIAG ? b0 + 16 : b0;  // right-factor rows
    // Left factors of block bi serve the column blocks before it (and its own when factored):
    // none for the first block otherwise (CHUNK 16's factor area holds only 64 channels).
    if (KDA_SPLIT_FACTOR_DIAG || bi > 0) {
#pragma unroll
    for (int it = 0; it < 16 * kD / 2 / kPThreads; ++it) {
      const int idx = tid + it * kPThreads;
      const int il = idx / (kD / 2), d = 2 * (idx % (kD / 2)), i = b0 + il;
      const float2 gi = *reinterpret_cast<const float2*>(pG + i * kLd + d);
      const float2 gp = *reinterpret_cast<const float2*>(pG + piv * kLd + d);
      const float2 ki = *reinterpret_cast<const float2*>(pK + i * kLd + d);
      const float2 qi = *reinterpret_cast<const float2*>(pQ + i * kLd + d);
      const float f0 = ex2(gi.x - gp.x), f1 = ex2(gi.y - gp.y);
      const float kx[2] = {ki.x * f0, ki.y * f1}, qx[2] = {qi.x * f0, qi.y * f1};
      unsigned int wh, wl;
      split_bf16x2(kx[0], kx[1], wh, wl);
      *reinterpret_cast<unsigned int*>(pXh + il * kPadK + d) = wh;
      *reinterpret_cast<unsigned int*>(pXl + il * kPadK + d) = wl;
      split_bf16x2(qx[0], qx[1], wh, wl);
      *reinterpret_cast<unsigned int*>(pQh + il * kPadK + d) = wh;
      *reinterpret_cast<unsigned int*>(pQl + il * kPadK + d) = wl;
    }
    }
    for (int idx = tid; idx < ny * kD / 2; idx += kPThreads) {
      const int j = idx / (kD / 2), d = 2 * (idx % (kD / 2));
      const float2 kj = *reinterpret_cast<const float2*>(pK + j * kLd + d);
      const float2 gp = *reinterpret_cast<const float2*>(pG + piv * kLd + d);
      const float2 gj = *reinterpret_cast<const float2*>(pG + j * kLd + d);
      const float ky[2] = {kj.x * ex2(gp.x - gj.x), kj.y * ex2(gp.y - gj.y)};
      unsigned int wh, wl;
      split_bf16x2(ky[0], ky[1], wh, wl);
      *reinterpret_cast<unsigned int*>(pYh + j * kPadK + d) = wh;
      *reinterpret_cast<unsigned int*>(pYl + j * kPadK + d) = wl;
    }
    __syncthreads();
    const int nblocks = KDA_SPLIT_FACTOR_DIAG ? bi + 1 : bi;  // column blocks on tensor cores
    // Four jobs a column block, one a warp: (n8 tile, L or M); three accumulators (hi hi, hi lo,
    // lo hi) so that no chain of dependent mma.sync is longer than the k loop.
    for (int job = warp; job < nblocks * 4; job += kPWarps) {
      const int bj = job >> 2, nt = (job >> 1) & 1, is_m = job & 1;
      const unsigned short* fh = is_m ? pQh : pXh;
      const unsigned short* fl = is_m ? pQl : pXl;
      float c0[4] = {0.f, 0.f, 0.f, 0.f}, c1[4] = {0.f, 0.f, 0.f, 0.f}, c2[4] = {0.f, 0.f, 0.f, 0.f};
      lm_tile_mma(c0, c1, c2, fh, fl, pYh, pYl, kPadK, bj * 16 + nt * 8, 0, kD / 16, lane);
      lm_tile_store(c0, c1, c2, is_m, b0, bj * 16 + nt * 8, g8, t4, pL, pBeta, wMhi, wMlo, nullptr,
                    KDA_WY_FOLD ? reinterpret_cast<float*>(smem + kPOffMf) : nullptr);
    }
#if !KDA_SPLIT_FACTOR_DIAG
    for (int idx = tid; idx < 256; idx += kPThreads) {
      const int i = b0 + (idx >> 4), j = b0 + (idx & 15);
      float lk = 0.f, mq = 0.f;
      if (j <= i) {
#pragma unroll 4
        for (int d = 0; d < kD; ++d) {
          const float kx = pK[j * kLd + d] * ex2(pG[i * kLd + d] - pG[j * kLd + d]);
          lk = fmaf(pK[i * kLd + d], kx, lk);
          mq = fmaf(pQ[i * kLd + d], kx, mq);
        }
      }
      pL[i * kC + j] = j < i ? pBeta[i] * lk : 0.f;
#if KDA_WY_FOLD
      reinterpret_cast<float*>(smem + kPOffMf)[i * kC + j] = mq;  // M2 = M T' in step 5
#else
      const unsigned short mh = bf16_bits(mq);
      wMhi[wsb(i, j, kC)] = mh;
      wMlo[wsb(i, j, kC)] = bf16_bits(mq - bf16_value(mh));
#endif
    }
#endif
    __syncthreads();  // the next block overwrites the factors
  }
#endif  // KDA_ONE_PASS
#if KDA_WY_FOLD
  // 5. T' = (I + L)^-1 diag(beta) (C x C, one thread a column of the identity) folded into the
  // recurrence's other operands: Kr2^T = Kr^T T' (128 x C, on tensor cores: Kr^T and T' as hi + lo
  // bf16 terms) and M2 = M T' (fp32 on CUDA cores), as bf16 in Kr^T's and M's places (the
  // recurrence's accumulators hold U'). Kr^T's rows are recomputed here from k and G
  // (the cumsum step skips them).
  {
    float* pMf = reinterpret_cast<float*>(smem + kPOffMf);
    float* pTf = reinterpret_cast<float*>(smem + kPOffTf);
    unsigned short* pTh = reinterpret_cast<unsigned short*>(smem + kPOffFTh);
    unsigned short* pTl = reinterpret_cast<unsigned short*>(smem + kPOffFTl);
    unsigned short* pKrh = reinterpret_cast<unsigned short*>(smem + kPOffKdh);
    unsigned short* pKrl = reinterpret_cast<unsigned short*>(smem + kPOffKdl);
    constexpr int kLdF = kC + 8;
    if (tid < kC) {
      float xv[kC];
      tprime_column(xv, tid, pL, pBeta);
#pragma unroll
      for (int i = 0; i < kC; ++i) {
        const float t = xv[i];
        const unsigned short th = bf16_bits(t);
        pTf[i * kC + tid] = t;
        pTh[tid * kLdF + i] = th;  // B[k = j][n = i] = T'[j][i], stored [n][k]: T'^T row-major
        pTl[tid * kLdF + i] = bf16_bits(t - bf16_value(th));
      }
    }
    if (tid < kD) {  // Kr^T's row d as hi + lo bf16 (A of Kr2^T = Kr^T T')
      const int d = tid;
      const float gt = pG[(kC - 1) * kLd + d];
#pragma unroll
      for (int j = 0; j < kC; j += 2) {
        unsigned int wh, wl;
        split_bf16x2(pK[j * kLd + d] * ex2(gt - pG[j * kLd + d]), pK[(j + 1) * kLd + d] * ex2(gt - pG[(j + 1) * kLd + d]),
                     wh, wl);
        *reinterpret_cast<unsigned int*>(pKrh + d * kLdF + j) = wh;
        *reinterpret_cast<unsigned int*>(pKrl + d * kLdF + j) = wl;
      }
    }
    __syncthreads();
    // Kr2^T: 8 row blocks of 16 key channels x 2 n8 tiles of tokens, one k step (C = 16).
    unsigned short* wKrT2 = reinterpret_cast<unsigned short*>(wsc + kWsKrT);
#pragma unroll
    for (int job = warp; job < 16; job += kPWarps) {
      const int mb = job >> 1, nt = job & 1;
      unsigned int ah[4], al[4], bh[2], bl[2];
      load_a(ah, pKrh, kLdF, mb * 16, 0, lane);
      load_a(al, pKrl, kLdF, mb * 16, 0, lane);
      load_b(bh, pTh, kLdF, nt * 8, 0, lane);
      load_b(bl, pTl, kLdF, nt * 8, 0, lane);
      float c0[4] = {0.f, 0.f, 0.f, 0.f}, c1[4] = {0.f, 0.f, 0.f, 0.f};
      mma_bf16(c0, ah, bh);
      mma_bf16(c1, ah, bl);
      mma_bf16(c1, al, bh);
#pragma unroll
      for (int hr = 0; hr < 2; ++hr)
        *reinterpret_cast<unsigned int*>(wKrT2 + swzf(mb * 16 + g8 + hr * 8, nt * 8 + 2 * t4, kC)) =
            pack_bf16x2(c0[2 * hr] + c1[2 * hr], c0[2 * hr + 1] + c1[2 * hr + 1]);
    }
    // M2 = M T' (lower triangular): element (i, j) = sum over j <= m <= i of M[i][m] T'[m][j].
    unsigned short* wMhi = reinterpret_cast<unsigned short*>(wsc + kWsMhi);
    unsigned short* wMlo = reinterpret_cast<unsigned short*>(wsc + kWsMlo);
#pragma unroll
    for (int it = 0; it < kC * kC / kPThreads; ++it) {
      const int idx = tid + it * kPThreads, i = idx / kC, j = idx % kC;
      float m2 = 0.f;
      for (int m = j; m <= i; ++m) m2 = fmaf(pMf[i * kC + m], pTf[m * kC + j], m2);
      const unsigned short mh = bf16_bits(m2);
      wMhi[wsb(i, j, kC)] = mh;
      wMlo[wsb(i, j, kC)] = bf16_bits(m2 - bf16_value(mh));
    }
  }
  return true;
#elif WY_IN_RECURRENCE
  // 5. T' = (I + L)^-1 diag(beta) (C x C) by forward substitution, one thread a column of the
  // identity, as hi + lo bf16 in M's fragment order; the recurrence applies it to V - Kd S.
  if (tid < kC) {
    float xv[kC];
    tprime_column(xv, tid, pL, pBeta);
    unsigned short* wTh = reinterpret_cast<unsigned short*>(wsc + kWsThi);
    unsigned short* wTl = reinterpret_cast<unsigned short*>(wsc + kWsTlo);
#pragma unroll
    for (int i = 0; i < kC; ++i) {
      const float t = xv[i];
      const unsigned short th = bf16_bits(t);
      wTh[wsb(i, tid, kC)] = th;
      wTl[wsb(i, tid, kC)] = bf16_bits(t - bf16_value(th));
    }
  }
  return true;
#else
  // 5. The WY form: [W0 | U0] = (I + L)^-1 diag(beta) [Kd | V].
  unsigned short* wW = reinterpret_cast<unsigned short*>(wsc + kWsW);
  unsigned char* wU = wsc + kWsU;
#if WY_TENSOR_CORES
  // On tensor cores (as FLA's solve_tril + bf16 GEMMs): T' = (I + L)^-1 diag(beta) once (C x C,
  // fp32 forward substitution, one thread per column of the identity), then W0 = T' Kd and
  // U0^T = V^T T'^T by mma.sync with T' and Kd as hi + lo bf16 terms (V is bf16 already), so the
  // products stay near fp32; the C (C - 1) / 2 FMAs a column of the substitution below become
  // about 3 C / 16 mma.sync per 16 x 8 tile.
  unsigned short* pTh = reinterpret_cast<unsigned short*>(smem + kPOffTh);
  unsigned short* pTl = reinterpret_cast<unsigned short*>(smem + kPOffTl);
  unsigned short* pKdh = reinterpret_cast<unsigned short*>(smem + kPOffKdh);
  unsigned short* pKdl = reinterpret_cast<unsigned short*>(smem + kPOffKdl);
  if (tid < kC) {
    float xv[kC];
    tprime_column(xv, tid, pL, pBeta);
    // Split once here (hi + lo bf16), not at every fragment load of every job.
#pragma unroll
    for (int i = 0; i < kC; ++i) {
      const float t = xv[i];
      const unsigned short th = bf16_bits(t);
      pTh[i * kLdT + tid] = th;
      pTl[i * kLdT + tid] = bf16_bits(t - bf16_value(th));
    }
  }
  // Kd^T = (k 2^G)^T as hi + lo bf16, token pairs a thread (the B operand of W0 = T' Kd).
#pragma unroll
  for (int it = 0; it < kD * kC / 2 / kPThreads; ++it) {
    const int idx = tid + it * kPThreads;
    const int d = idx / (kC / 2), r = 2 * (idx % (kC / 2));
    const float v0 = pK[r * kLd + d] * ex2(pG[r * kLd + d]);
    const float v1 = pK[(r + 1) * kLd + d] * ex2(pG[(r + 1) * kLd + d]);
    unsigned int wh, wl;
    split_bf16x2(v0, v1, wh, wl);
    *reinterpret_cast<unsigned int*>(pKdh + d * kLdKd + r) = wh;
    *reinterpret_cast<unsigned int*>(pKdl + d * kLdKd + r) = wl;
  }
  __syncthreads();
  // Jobs, a fixed number a warp (unrolled): the first 8 C / 16 are W0 tiles (16 tokens x 16 key
  // channels), the rest U0^T tiles (16 value columns x 16 tokens). T' is lower triangular, so k
  // steps past the tile's token block are zero and skipped. One job at a time (not unrolled): the
  // unrolled jobs' accumulators pushed the prepare past the 128 registers that keep four CTAs a SM.
#pragma unroll 1
  for (int jj = 0; jj < 16 * kNb / kPWarps; ++jj) {
    constexpr int kWJobs = 8 * kNb / kPWarps;  // W0 jobs a warp; the rest are U0^T jobs
    const bool is_u = jj >= kWJobs;
    const int jb = warp + (is_u ? jj - kWJobs : jj) * kPWarps;
    const int tb = jb >> 3, cb = jb & 7;  // token block, 16-column block
    float c0[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
    float c1[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll 1
    for (int ks = 0; ks < (kNb == 1 ? 1 : tb + 1); ++ks) {
      if (!is_u) {
        // A = T' rows [16 tb, +16), k = tokens [16 ks, +16) (hi, lo); B = Kd^T's two terms.
        unsigned int ah[4], al[4];
        load_a(ah, pTh, kLdT, tb * 16, ks * 16, lane);
        load_a(al, pTl, kLdT, tb * 16, ks * 16, lane);
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          unsigned int bh[2], bl[2];
          load_b(bh, pKdh, kLdKd, cb * 16 + n * 8, ks * 16, lane);
          load_b(bl, pKdl, kLdKd, cb * 16 + n * 8, ks * 16, lane);
          mma_bf16(c0[n], ah, bh);
          mma_bf16(c1[n], ah, bl);
          mma_bf16(c1[n], al, bh);
        }
      } else {
        // A = V^T rows (value columns [16 cb, +16)), k = tokens [16 ks, +16), gathered from v's
        // rows; B = T'^T (B[m][i] = T'[i][m], columns i = tokens [16 tb, +16)): T' row-major is
        // its transpose stored row-major, as load_b wants.
        unsigned int av[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const unsigned short* p = rawv + (ks * 16 + (r >> 1) * 8 + 2 * t4) * kD + cb * 16 + g8 + (r & 1) * 8;
          av[r] = (unsigned int)p[0] | ((unsigned int)p[kD] << 16);
        }
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          unsigned int bh[2], bl[2];
          load_b(bh, pTh, kLdT, tb * 16 + n * 8, ks * 16, lane);
          load_b(bl, pTl, kLdT, tb * 16 + n * 8, ks * 16, lane);
          mma_bf16(c0[n], av, bh);
          mma_bf16(c1[n], av, bl);
        }
      }
    }
    if (!is_u) {
      // Lane holds tokens (16 tb + g8, + 8) x columns (2 t4, + 1) of both n8 tiles: in fragment
      // order (swzf) those four columns are adjacent, one 8-byte store a row.
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        uint2 w;
        w.x = pack_bf16x2(c0[0][2 * hr] + c1[0][2 * hr], c0[0][2 * hr + 1] + c1[0][2 * hr + 1]);
        w.y = pack_bf16x2(c0[1][2 * hr] + c1[1][2 * hr], c0[1][2 * hr + 1] + c1[1][2 * hr + 1]);
#if KDA_WGMMA
        // wgmma's layout: the two column pairs sit in adjacent core matrices.
        *reinterpret_cast<unsigned int*>(wW + wgl(tb * 16 + g8 + hr * 8, cb * 16 + 2 * t4, kD)) = w.x;
        *reinterpret_cast<unsigned int*>(wW + wgl(tb * 16 + g8 + hr * 8, cb * 16 + 8 + 2 * t4, kD)) = w.y;
#else
        *reinterpret_cast<uint2*>(wW + swzf(tb * 16 + g8 + hr * 8, cb * 16 + 2 * t4, kD)) = w;
#endif
      }
    } else {
      // Lane holds value columns (16 cb + g8, + 8) x tokens (16 tb + 8 n + 2 t4, + 1): token pairs.
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          const int col = cb * 16 + g8 + hr * 8, tok = tb * 16 + n * 8 + 2 * t4;
          const float u0 = c0[n][2 * hr] + c1[n][2 * hr], u1 = c0[n][2 * hr + 1] + c1[n][2 * hr + 1];
#if U0_BITS == 32
          *reinterpret_cast<float2*>(reinterpret_cast<float*>(wU) + swz(col, tok, kC, 4)) = make_float2(u0, u1);
#else
          *reinterpret_cast<unsigned int*>(reinterpret_cast<unsigned short*>(wU) + swz(col, tok, kC, 8)) =
              pack_bf16x2(u0, u1);
#endif
        }
    }
  }
#else
  // By forward substitution in fp32, one thread per column (128 of Kd, then 128 of V), the column
  // in registers. W0's column as bf16 (fragment order), U0^T's row as fp32 or bf16 pairs.
  auto store_w = [&](int col, const float (&xv)[kC]) {
#pragma unroll
    for (int i = 0; i < kC; ++i) wW[wsb(i, col, kD)] = bf16_bits(xv[i]);
  };
  auto store_u = [&](int vc, const float (&xv)[kC]) {
#if U0_BITS == 32
    float* dst = reinterpret_cast<float*>(wU);
#pragma unroll
    for (int i = 0; i < kC; i += 4) {
      float4 f;
      f.x = xv[i];
      f.y = xv[i + 1];
      f.z = xv[i + 2];
      f.w = xv[i + 3];
      *reinterpret_cast<float4*>(dst + swz(vc, i, kC, 4)) = f;
    }
#else
    // bf16 pairs (FLA keeps u in bf16): 256 fewer workspace bytes a token-head each way.
    unsigned short* dst = reinterpret_cast<unsigned short*>(wU);
#pragma unroll
    for (int i = 0; i < kC; i += 8) {
      uint4 f;
      f.x = pack_bf16x2(xv[i], xv[i + 1]);
      f.y = pack_bf16x2(xv[i + 2], xv[i + 3]);
      f.z = pack_bf16x2(xv[i + 4], xv[i + 5]);
      f.w = pack_bf16x2(xv[i + 6], xv[i + 7]);
      *reinterpret_cast<uint4*>(dst + swz(vc, i, kC, 8)) = f;
    }
#endif
  };
#if KDA_WY_PAIRED
  // One thread a Kd column and the V column of the same index, substituted together: each float4
  // of L read from shared memory serves both (half the broadcast reads).
  {
    const int col = tid;
    float xk[kC], xu[kC];
#pragma unroll
    for (int i = 0; i < kC; ++i) {
#if KDA_KD_IN_ONE_PASS
      xk[i] = pK[i * kLd + col];  // beta k 2^G, from the one-pass step
#else
      xk[i] = pBeta[i] * pK[i * kLd + col] * ex2(pG[i * kLd + col]);
#endif
      xu[i] = i < count ? pBeta[i] * bf16_value(rawv[i * kD + col]) : 0.f;
    }
    forward_substitute2(xk, xu, pL);
    store_w(col, xk);
    store_u(col, xu);
  }
#else
  for (int col = tid; col < 2 * kD; col += kPThreads) {
    float xv[kC];
    if (col < kD) {  // one branch a column, not one a token
#pragma unroll
      for (int i = 0; i < kC; ++i) xv[i] = pBeta[i] * pK[i * kLd + col] * ex2(pG[i * kLd + col]);
    } else {
#pragma unroll
      for (int i = 0; i < kC; ++i) xv[i] = i < count ? pBeta[i] * bf16_value(rawv[i * kD + col - kD]) : 0.f;
    }
    forward_substitute(xv, pL);
    if (col < kD) store_w(col, xv);
    else store_u(col - kD, xv);
  }
#endif
#endif  // WY_TENSOR_CORES
  return true;
#endif  // WY_IN_RECURRENCE
}

// The flags of PREPARE_CTAS > 0, one word a (head, chunk slot), after the workspace's chunks.
__device__ __forceinline__ unsigned int* ws_flags(const Args& a, const unsigned char* ws, int nseq) {
  return reinterpret_cast<unsigned int*>(const_cast<unsigned char*>(ws) + (long long)a.H * ws_slots(a, nseq) * kWsChunkBytes);
}

// The sequence split's segment states (SEQSPLIT > 1), after the flags, 16-byte aligned: for each
// (sequence, head) and segment j < P - 1 a block of 256 x 128 fp32, V-first: rows 0..127 segment j's
// end state from its pass-1 start (S0_j^T; the combine overwrites it with E_(j+1)^T, the state
// entering segment j + 1), rows 128..255 its transition as X_j[m][d] = A_j[d][m].
enum : int { kSegRows = 2 * kD };
__device__ __forceinline__ float* ws_seg(const Args& a, const unsigned char* ws, int nseq) {
  const long long at = (long long)a.H * ws_slots(a, nseq) * (kWsChunkBytes + 4);
  return reinterpret_cast<float*>(const_cast<unsigned char*>(ws) + (at + 15) / 16 * 16);
}
// Segment seg's chunks [c0, c1) of a sequence of nch chunks split into nseg (empty past the end).
__device__ __forceinline__ void seg_chunks(int nch, int nseg, int seg, int& c0, int& c1) {
  const int per = (nch + nseg - 1) / nseg;
  c0 = seg * per < nch ? seg * per : nch;
  c1 = c0 + per < nch ? c0 + per : nch;
}

// kda_fwd_prepare. PREPARE_CTAS = 0: one CTA per (chunk slot, head). PREPARE_CTAS > 0: persistent
// CTAs taking (slot, head) items in slot-major order (the order the recurrence's chains consume
// them), each chunk released to the recurrence by its flag once the whole CTA has written it.
__device__ __forceinline__ void kda_prepare_body(const Args& a, unsigned char* __restrict__ ws, int nseq) {
#if PREPARE_CTAS
  // Every CTA of this grid is resident once all have run this: the recurrence, whose CTAs may then
  // take the remaining room, can never keep a prepare CTA from starting, so its waits end.
  griddep_launch_dependents();
  const long long slots = ws_slots(a, nseq), items = slots * a.H;
  unsigned int* flags = ws_flags(a, ws, nseq);
  unsigned int* pending = nullptr;  // the last item's flag, released during the next item
  for (long long i = blockIdx.x; i < items; i += gridDim.x) {
    const long long x = i / a.H;
    const int h = (int)(i - x * a.H);
    if (kda_prepare_item(a, ws, nseq, x, h, pending)) {
      __syncthreads();  // every thread's stores of the chunk before the release; shared memory free again
      pending = flags + (long long)h * slots + x;
    } else if (pending != nullptr) {  // an unused slot (rare): release now
      if (threadIdx.x == 0) flag_release(pending);
      pending = nullptr;
    }
  }
  if (pending != nullptr && threadIdx.x == 0) flag_release(pending);
#else
  (void)kda_prepare_item(a, ws, nseq, blockIdx.x, blockIdx.y, nullptr);
#endif
}

// kda_fwd_flags_reset (PREPARE_CTAS > 0, before the prepare): every flag to 0. The workspace is
// scratch (the gate poisons it), so each run of the plan starts from here.
#define KDA_RESET_THREADS 256
__device__ __forceinline__ void kda_flags_reset_body(const Args& a, unsigned char* __restrict__ ws, int nseq) {
  const long long n = (long long)a.H * ws_slots(a, nseq);
  unsigned int* flags = ws_flags(a, ws, nseq);
  for (long long i = (long long)blockIdx.x * KDA_RESET_THREADS + threadIdx.x; i < n; i += (long long)gridDim.x * KDA_RESET_THREADS)
    flags[i] = 0u;
}
