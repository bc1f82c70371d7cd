// A part of kernels/kda/kda_fwd_chunked.cu, expanded into it where it is included (inside
// namespace kda_chunked, after the knobs and the parts before it); not a header of its own.
// kda_fwd_chunked (FUSED = 1): one CTA a (sequence, head, value slice) runs every chunk's
// preparation and the recurrence itself.

__device__ __forceinline__ void kda_chunked_body(const Args& a) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* sQ = reinterpret_cast<float*>(smem + kOffQ);
  float* sK = reinterpret_cast<float*>(smem + kOffK);
  float* sG = reinterpret_cast<float*>(smem + kOffG);
  float* sU = reinterpret_cast<float*>(smem + kOffU);
  unsigned short* sUhi = reinterpret_cast<unsigned short*>(smem + kOffUhi);
  unsigned short* sUlo = reinterpret_cast<unsigned short*>(smem + kOffUlo);
  float* sV = reinterpret_cast<float*>(smem + kOffV);
  float* sBeta = reinterpret_cast<float*>(smem + kOffBeta);
  float* sDec = reinterpret_cast<float*>(smem + kOffDec);
  unsigned short* sKd = reinterpret_cast<unsigned short*>(smem + kOffKd);
  unsigned short* sQd = reinterpret_cast<unsigned short*>(smem + kOffQd);
  unsigned short* sKrT = reinterpret_cast<unsigned short*>(smem + kOffKrT);
  unsigned short* sShi = reinterpret_cast<unsigned short*>(smem + kOffShi);
  unsigned short* sSlo = reinterpret_cast<unsigned short*>(smem + kOffSlo);
  float* sL = reinterpret_cast<float*>(smem + kOffL);
  unsigned short* sMhi = reinterpret_cast<unsigned short*>(smem + kOffMhi);
  unsigned short* sMlo = reinterpret_cast<unsigned short*>(smem + kOffMlo);

  // A launch with less dynamic shared memory than this layout needs is a plan error: stop loudly.
  if (dynamic_smem_bytes() < (unsigned int)kSmemBytes) trap_now();

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g8 = lane >> 2, t4 = lane & 3;  // fragment coordinates
  const long long n = blockIdx.x;
  const int h = blockIdx.y;
  const int col0 = blockIdx.z * kBv;
  long long bos, eos;
  if (a.cu_seqlens) {
    bos = a.cu_seqlens[n];
    eos = a.cu_seqlens[n + 1];
  } else {
    bos = n * a.T;
    eos = bos + a.T;
  }
  float dtb[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) dtb[e] = a.dt_bias[h * kD + lane * 4 + e];
  const float ea = ex2(a.a_log[h] * KDA_LOG2E);

  // The state slice S[row][col0 + col] as accumulator fragments: warp w, tile (mt, nt) holds
  // rows w * kRowsPerWarp + mt * 16 + g8 (+ 8) and columns nt * 8 + 2 t4 (+ 1).
  const int row0 = warp * kRowsPerWarp;
  const long long sbase = (n * a.H + h) * (long long)kD * kD + (long long)col0 * kD;  // V-first [j][i]
  float s[kMt][kNt][4];
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = row0 + mt * 16 + g8 + (e >> 1) * 8, c = nt * 8 + 2 * t4 + (e & 1);
#if HAS_INITIAL_STATE
        s[mt][nt][e] = a.initial_state[sbase + (long long)c * kD + r];
#else
        s[mt][nt][e] = 0.f;
        (void)r;
        (void)c;
#endif
      }

#if STAGE
  unsigned short* sRq = reinterpret_cast<unsigned short*>(smem + kOffRq);
  unsigned short* sRk = reinterpret_cast<unsigned short*>(smem + kOffRk);
  unsigned short* sRg = reinterpret_cast<unsigned short*>(smem + kOffRg);
  unsigned short* sRv = reinterpret_cast<unsigned short*>(smem + kOffRv);
  // Starts the copies of chunk [t1, t1 + C) into the staging buffer (rows past eos are not
  // copied: step 1 zeroes them) and loads its beta logits, thread tt holding token tt's.
  float beta_raw = 0.f;
  auto stage = [&](long long t1) {
    if (t1 < eos) {
      const int cn = (int)(eos - t1 < kC ? eos - t1 : (long long)kC);
      for (int idx = tid; idx < cn * kStageSegs; idx += kThreads) {
        const int tt = idx / kStageSegs, sg = idx % kStageSegs;
        const long long tokrow = ((t1 + tt) * a.H + h) * (long long)kD;
        if (sg < 48) {
          const int which = sg >> 4, seg = sg & 15;
          const __nv_bfloat16* src = (which == 0 ? a.q : which == 1 ? a.k : a.g) + tokrow + seg * 8;
          unsigned short* dst = (which == 0 ? sRq : which == 1 ? sRk : sRg) + tt * kD + seg * 8;
          cp_async16(dst, src);
        } else {
          const int seg = sg - 48;
          cp_async16(sRv + tt * kBv + seg * 8, a.v + tokrow + col0 + seg * 8);
        }
      }
      if (tid < cn) beta_raw = load_bf16(a.beta + (t1 + tid) * a.H + h);
    }
    cp_async_commit();
  };
  stage(bos);
#endif

  for (long long t0 = bos; t0 < eos; t0 += kC) {
    const int count = (int)(eos - t0 < kC ? eos - t0 : (long long)kC);
#if STAGE
    cp_async_wait_all();
    __syncthreads();
#endif
    // 1. Pre-processing, one warp per token; padding rows are zero (a = 0: no decay).
    for (int tt = warp; tt < kC; tt += kWarps) {
      float q[4] = {0.f, 0.f, 0.f, 0.f}, k[4] = {0.f, 0.f, 0.f, 0.f}, ld[4] = {0.f, 0.f, 0.f, 0.f};
      float rq = 0.f, rk = 0.f;
      if (tt < count) {
        float gg[4];
#if STAGE
        load_shared_bf16x4(sRq + tt * kD + lane * 4, q);
        load_shared_bf16x4(sRk + tt * kD + lane * 4, k);
        load_shared_bf16x4(sRg + tt * kD + lane * 4, gg);
#else
        const long long row = ((t0 + tt) * a.H + h) * (long long)kD + lane * 4;
        load_bf16x4(a.q + row, q);
        load_bf16x4(a.k + row, k);
        load_bf16x4(a.g + row, gg);
#endif
        float sq = 0.f, sk = 0.f;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          sq = fmaf(q[e], q[e], sq);
          sk = fmaf(k[e], k[e], sk);
          ld[e] = log_decay(gg[e] + dtb[e], ea, a.lower_bound) * KDA_LOG2E;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
          sq += shfl_bfly(sq, o);
          sk += shfl_bfly(sk, o);
        }
        rq = rsqrt(sq + 1e-6f) * a.scale;
        rk = rsqrt(sk + 1e-6f);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sQ[tt * kLd + lane * 4 + e] = q[e] * rq;
        sK[tt * kLd + lane * 4 + e] = k[e] * rk;
        sG[tt * kLd + lane * 4 + e] = ld[e];
      }
    }
    for (int i = tid; i < kC * kBv; i += kThreads) {
      const int tt = i / kBv, j = i % kBv;
#if STAGE
      sV[i] = tt < count ? bf16_value(sRv[i]) : 0.f;
#else
      sV[i] = tt < count ? load_bf16(a.v + ((t0 + tt) * a.H + h) * (long long)kD + col0 + j) : 0.f;
#endif
      (void)j;
    }
    if (tid < kC) {
#if STAGE
      sBeta[tid] = tid < count ? sigmoid(beta_raw) : 0.f;
#else
      sBeta[tid] = tid < count ? sigmoid(load_bf16(a.beta + (t0 + tid) * a.H + h)) : 0.f;
#endif
    }
    __syncthreads();
#if STAGE
    // The staging buffer and beta_raw are consumed: copy the next chunk while this one computes.
    stage(t0 + kC);
#endif
    // 2. Chunk-local inclusive cumsum of the log2-decays, one thread per key channel.
    for (int d = tid; d < kD; d += kThreads) {
      float gsum = 0.f;
#pragma unroll 8
      for (int i = 0; i < kC; ++i) {
        gsum += sG[i * kLd + d];
        sG[i * kLd + d] = gsum;
      }
      sDec[d] = ex2(gsum);
    }
    __syncthreads();
    // 3a. Decayed bf16 operands.
    for (int i = tid; i < kC * kD; i += kThreads) {
      const int r = i / kD, d = i % kD;
      const float gi = sG[r * kLd + d], gt = sG[(kC - 1) * kLd + d];
      const float kk = sK[r * kLd + d], e = ex2(gi);
      sKd[r * kPadK + d] = bf16_bits(kk * e);
      sQd[r * kPadK + d] = bf16_bits(sQ[r * kLd + d] * e);
      sKrT[d * kPadC + r] = bf16_bits(kk * ex2(gt - gi));
    }
#if KDA_LM_TC
    // 3b (tensor cores, LM_TENSOR_CORES). Warp w < 4 takes channels [32 w, 32 w + 32) of every
    // entry of L and M: its lane holds rows g8 and g8 + 8 at channels 2 t4 (+1, +8, +9) of each k
    // step, which are also the (channel, j) pairs of its B fragments for the n tiles j < 8 and
    // j >= 8, so y = 1 / x of the same elements. Partial sums go to the S^T area (free until 3c).
    {
      float* part = reinterpret_cast<float*>(smem + kOffShi);  // [4][2][16][16]
      if (warp < 4) {
        float accl[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
        float accm[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll 1
        for (int ks = 0; ks < 2; ++ks) {
          const int k0 = warp * 32 + ks * 16;
          unsigned int akh[4], akl[4], aqh[4], aql[4], byh[2][2], byl[2][2];
#pragma unroll
          for (int rs = 0; rs < 2; ++rs)
#pragma unroll
            for (int cp = 0; cp < 2; ++cp) {
              const int i = g8 + 8 * rs, d = k0 + 2 * t4 + 8 * cp;
              float kx[2], qx[2], ky[2];
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const float gd = sG[i * kLd + d + e] - sG[7 * kLd + d + e];
                const float x = ex2(gd), y = ex2(-gd), kk = sK[i * kLd + d + e];
                kx[e] = kk * x;
                qx[e] = sQ[i * kLd + d + e] * x;
                ky[e] = kk * y;
              }
              split_bf16x2(kx[0], kx[1], akh[rs + 2 * cp], akl[rs + 2 * cp]);
              split_bf16x2(qx[0], qx[1], aqh[rs + 2 * cp], aql[rs + 2 * cp]);
              split_bf16x2(ky[0], ky[1], byh[rs][cp], byl[rs][cp]);
            }
#pragma unroll
          for (int nt = 0; nt < 2; ++nt) {
            mma_bf16(accl[nt], akh, byh[nt]);
            mma_bf16(accl[nt], akh, byl[nt]);
            mma_bf16(accl[nt], akl, byh[nt]);
            mma_bf16(accm[nt], aqh, byh[nt]);
            mma_bf16(accm[nt], aqh, byl[nt]);
            mma_bf16(accm[nt], aql, byh[nt]);
          }
        }
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int i = g8 + (e >> 1) * 8, j = nt * 8 + 2 * t4 + (e & 1);
            part[((warp * 2 + 0) * 16 + i) * 16 + j] = accl[nt][e];
            part[((warp * 2 + 1) * 16 + i) * 16 + j] = accm[nt][e];
          }
      }
      __syncthreads();
      // The four quarters in a fixed order (deterministic); zeros above the diagonal.
      for (int x = tid; x < 256; x += kThreads) {
        const int i = x >> 4, j = x & 15;
        float lk = 0.f, mq = 0.f;
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          lk += part[((w * 2 + 0) * 16 + i) * 16 + j];
          mq += part[((w * 2 + 1) * 16 + i) * 16 + j];
        }
        sL[i * kC + j] = j < i ? sBeta[i] * lk : 0.f;
        const unsigned short mhi = j <= i ? bf16_bits(mq) : (unsigned short)0;
        sMhi[i * kPadC + j] = mhi;
        sMlo[i * kPadC + j] = j <= i ? bf16_bits(mq - bf16_value(mhi)) : (unsigned short)0;
      }
      __syncthreads();  // 3c overwrites the partial sums
    }
#else
    // 3b. L and M: kPairLanes adjacent lanes share one (i, j) pair with j <= i (each takes every
    // kPairLanes-th channel; shuffles combine them), in whole rounds of the CTA so that every lane
    // of a warp reaches the shuffles; zeros above the diagonal.
#pragma unroll 1
    for (int round = 0; round < kPairRounds; ++round) {
      const int item = round * kThreads + tid;
      const int p = item / kPairLanes, part = item % kPairLanes;
      const bool valid = p < kPairs;
      const int pc = valid ? p : 0;
      int i = (int)((sqrtf(8.f * (float)pc + 1.f) - 1.f) * 0.5f);
      while ((i + 1) * (i + 2) / 2 <= pc) ++i;
      while (i * (i + 1) / 2 > pc) --i;
      const int j = pc - i * (i + 1) / 2;
      const float* gi = sG + i * kLd;
      const float* gj = sG + j * kLd;
      const float* ki = sK + i * kLd;
      const float* kj = sK + j * kLd;
      const float* qi = sQ + i * kLd;
      float lk = 0.f, mq = 0.f;
#pragma unroll 8
      for (int d = part; d < kD; d += kPairLanes) {
        const float x = ex2(gi[d] - gj[d]);
        const float kx = kj[d] * x;
        lk = fmaf(ki[d], kx, lk);
        mq = fmaf(qi[d], kx, mq);
      }
#pragma unroll
      for (int o = kPairLanes / 2; o > 0; o >>= 1) {
        lk += shfl_bfly(lk, o);
        mq += shfl_bfly(mq, o);
      }
      if (valid && part == 0) {
        sL[i * kC + j] = j < i ? sBeta[i] * lk : 0.f;
        const unsigned short mhi = bf16_bits(mq);
        sMhi[i * kPadC + j] = mhi;
        sMlo[i * kPadC + j] = bf16_bits(mq - bf16_value(mhi));
        if (j < i) {
          sL[j * kC + i] = 0.f;
          sMhi[j * kPadC + i] = 0;
          sMlo[j * kPadC + i] = 0;
        }
      }
    }
#endif
    // 3c. S^T as hi + lo bf16 terms for the tensor-core reads of the chunk-start state.
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = row0 + mt * 16 + g8 + (e >> 1) * 8, c = nt * 8 + 2 * t4 + (e & 1);
          const unsigned short hi = bf16_bits(s[mt][nt][e]);
          sShi[c * kPadK + r] = hi;
          sSlo[c * kPadK + r] = bf16_bits(s[mt][nt][e] - bf16_value(hi));
        }
    __syncthreads();
    // 4. W = Kd S and Qs = Qd S per 16 x 8 output tile; U' = beta (V - W) to shared memory.
    float qs[kTilesPerWarp][4];
#pragma unroll
    for (int tw = 0; tw < kTilesPerWarp; ++tw) {
      const int ot = warp + tw * kWarps;
#pragma unroll
      for (int e = 0; e < 4; ++e) qs[tw][e] = 0.f;
      if (ot < kOutTiles) {
        const int mi = ot / kNt, ni = ot % kNt;
        float w[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 2
        for (int k0 = 0; k0 < kD; k0 += 16) {
          unsigned int ak[4], aq[4], bh[2], bl[2];
          load_a(ak, sKd, kPadK, mi * 16, k0, lane);
          load_a(aq, sQd, kPadK, mi * 16, k0, lane);
          load_b(bh, sShi, kPadK, ni * 8, k0, lane);
          load_b(bl, sSlo, kPadK, ni * 8, k0, lane);
          mma_bf16(w, ak, bh);
          mma_bf16(w, ak, bl);
          mma_bf16(qs[tw], aq, bh);
          mma_bf16(qs[tw], aq, bl);
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = mi * 16 + g8 + (e >> 1) * 8, j = ni * 8 + 2 * t4 + (e & 1);
          sU[i * kBv + j] = sBeta[i] * (sV[i * kBv + j] - w[e]);
        }
      }
    }
    __syncthreads();
    // 5. U = (I + L)^-1 U' by forward substitution down each column; U^T as hi + lo bf16.
    for (int j = tid; j < kBv; j += kThreads) {
      for (int i = 0; i < kC; ++i) {
        float u = sU[i * kBv + j];
        for (int m = 0; m < i; ++m) u = fmaf(-sL[i * kC + m], sU[m * kBv + j], u);
        sU[i * kBv + j] = u;
        const unsigned short hi = bf16_bits(u);
        sUhi[j * kPadC + i] = hi;
        sUlo[j * kPadC + i] = bf16_bits(u - bf16_value(hi));
      }
    }
    __syncthreads();
    // 6a. out = Qs + M U (M is lower triangular: k blocks up to the tile's own row block).
#pragma unroll
    for (int tw = 0; tw < kTilesPerWarp; ++tw) {
      const int ot = warp + tw * kWarps;
      if (ot < kOutTiles) {
        const int mi = ot / kNt, ni = ot % kNt;
        for (int k0 = 0; k0 <= mi * 16; k0 += 16) {
          unsigned int ah[4], al[4], bh[2], bl[2];
          load_a(ah, sMhi, kPadC, mi * 16, k0, lane);
          load_a(al, sMlo, kPadC, mi * 16, k0, lane);
          load_b(bh, sUhi, kPadC, ni * 8, k0, lane);
          load_b(bl, sUlo, kPadC, ni * 8, k0, lane);
          mma_bf16(qs[tw], ah, bh);
          mma_bf16(qs[tw], ah, bl);
          mma_bf16(qs[tw], al, bh);
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int i = mi * 16 + g8 + half * 8, j = ni * 8 + 2 * t4;
          if (i < count)
            store_bf16x2(a.out + ((t0 + i) * a.H + h) * (long long)kD + col0 + j, qs[tw][2 * half],
                         qs[tw][2 * half + 1]);
        }
      }
    }
    // 6b. S <- diag(2^Gtot) S + KrT U.
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) {
      const float d0 = sDec[row0 + mt * 16 + g8], d1 = sDec[row0 + mt * 16 + g8 + 8];
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt) {
        s[mt][nt][0] *= d0;
        s[mt][nt][1] *= d0;
        s[mt][nt][2] *= d1;
        s[mt][nt][3] *= d1;
      }
#pragma unroll
      for (int k0 = 0; k0 < kC; k0 += 16) {
        unsigned int ar[4];
        load_a(ar, sKrT, kPadC, row0 + mt * 16, k0, lane);
#pragma unroll
        for (int nt = 0; nt < kNt; ++nt) {
          unsigned int bh[2], bl[2];
          load_b(bh, sUhi, kPadC, nt * 8, k0, lane);
          load_b(bl, sUlo, kPadC, nt * 8, k0, lane);
          mma_bf16(s[mt][nt], ar, bh);
          mma_bf16(s[mt][nt], ar, bl);
        }
      }
    }
    // The next chunk's pre-processing overwrites region A (U's hi and lo terms live there); with
    // STAGE the barrier after cp.async.wait_all at the top of the loop already separates them.
#if !STAGE
    __syncthreads();
#endif
  }
#if HAS_FINAL_STATE
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = row0 + mt * 16 + g8 + (e >> 1) * 8, c = nt * 8 + 2 * t4 + (e & 1);
        a.final_state[sbase + (long long)c * kD + r] = s[mt][nt][e];
      }
#endif
  (void)sbase;
}
