// A part of kernels/kda/kda_fwd_chunked.cu, expanded into it where it is included (inside
// namespace kda_chunked, after the knobs and the parts before it); not a header of its own.
// Shared by the split kernels: sequence and workspace-slot arithmetic, the triangular solves of
// the WY form, and the L / M tile products.

// Tokens [bos, eos) of sequence n.
__device__ __forceinline__ void seq_range(const Args& a, long long n, long long& bos, long long& eos) {
  if (a.cu_seqlens) {
    bos = a.cu_seqlens[n];
    eos = a.cu_seqlens[n + 1];
  } else {
    bos = n * a.T;
    eos = bos + a.T;
  }
}
// Chunk slots a head has in the workspace: chunk c of sequence n is slot n + bos_n / C + c. Slots
// of consecutive sequences never overlap (ceil(len / C) <= floor(len / C) + 1) and the last one is
// below N + T_total / C, without a pass over the lengths; KdaFwdOp sizes the workspace the same way.
__device__ __forceinline__ long long ws_slots(const Args& a, int nseq) {
  const long long total = a.cu_seqlens ? a.T : (long long)nseq * a.T;
  return nseq + total / kC;
}

// x <- (I + L)^-1 x for the chunk's strictly lower-triangular fp32 L (C x C, row-major in shared
// memory), x in registers; L's rows by 16-byte reads (every thread of the CTA reads the same row:
// broadcasts), 4x fewer loads. Each row's dot product in four partial sums (one a component of
// the 16-byte read): dependent FMA chains of about i / 4 instead of i, C (C - 1) / 8 + 2 C FMA
// latencies a column instead of C (C - 1) / 2 (with WY_IN_RECURRENCE 1 the prepare's last step is
// this substitution by one half-warp while the rest of the CTA has left).
__device__ __forceinline__ void forward_substitute(float (&xv)[kC], const float* pL) {
#pragma unroll
  for (int i = 1; i < kC; ++i) {
    float u0 = xv[i], u1 = 0.f, u2 = 0.f, u3 = 0.f;
#pragma unroll
    for (int m = 0; m < i; m += 4) {
      const float4 l = *reinterpret_cast<const float4*>(pL + i * kC + m);
      u0 = fmaf(-l.x, xv[m], u0);
      if (m + 1 < i) u1 = fmaf(-l.y, xv[m + 1], u1);
      if (m + 2 < i) u2 = fmaf(-l.z, xv[m + 2], u2);
      if (m + 3 < i) u3 = fmaf(-l.w, xv[m + 3], u3);
    }
    xv[i] = (u0 + u1) + (u2 + u3);
  }
}

// Column j of T' = (I + L)^-1 diag(beta) (the WY form's C x C factor), into xv: 0 on padding
// tokens (beta 0), whose columns vanish.
__device__ __forceinline__ void tprime_column(float (&xv)[kC], int j, const float* pL, const float* pBeta) {
#pragma unroll
  for (int i = 0; i < kC; ++i) xv[i] = i == j ? 1.f : 0.f;
  forward_substitute(xv, pL);
  const float bj = pBeta[j];
#pragma unroll
  for (int i = 0; i < kC; ++i) xv[i] *= bj;
}

// forward_substitute for two right-hand sides at once (one read of each float4 of L for both).
__device__ __forceinline__ void forward_substitute2(float (&xa)[kC], float (&xb)[kC], const float* pL) {
#pragma unroll
  for (int i = 1; i < kC; ++i) {
    float ua = xa[i], ub = xb[i];
#pragma unroll
    for (int m = 0; m < i; m += 4) {
      const float4 l = *reinterpret_cast<const float4*>(pL + i * kC + m);
      ua = fmaf(-l.x, xa[m], ua);
      ub = fmaf(-l.x, xb[m], ub);
      if (m + 1 < i) {
        ua = fmaf(-l.y, xa[m + 1], ua);
        ub = fmaf(-l.y, xb[m + 1], ub);
      }
      if (m + 2 < i) {
        ua = fmaf(-l.z, xa[m + 2], ua);
        ub = fmaf(-l.z, xb[m + 2], ub);
      }
      if (m + 3 < i) {
        ua = fmaf(-l.w, xa[m + 3], ua);
        ub = fmaf(-l.w, xb[m + 3], ub);
      }
    }
    xa[i] = ua;
    xb[i] = ub;
  }
}

// One (n8 tile, L or M) job of step 4: k steps [ks0, ks1) of the left factors (rows 0-15 of fh /
// fl) against the right factors' rows n0 .. n0 + 7, three accumulators (hi hi, hi lo, lo hi).
// kTerms 2 drops hi lo (the right factor as its bf16 rounding alone), 1 also lo hi.
template <int kTerms = 3>
__device__ __forceinline__ void lm_tile_mma(float (&c0)[4], float (&c1)[4], float (&c2)[4], const unsigned short* fh,
                                            const unsigned short* fl, const unsigned short* yh_base,
                                            const unsigned short* yl_base, int ld, int n0, int ks0, int ks1,
                                            int lane) {
#pragma unroll 4
  for (int ks = ks0; ks < ks1; ++ks) {
    unsigned int xh[4], xl[4], yh[2], yl[2];
    load_a(xh, fh, ld, 0, ks * 16, lane);
    load_b(yh, yh_base, ld, n0, ks * 16, lane);
    mma_bf16(c0, xh, yh);
    if (kTerms >= 3) {
      load_b(yl, yl_base, ld, n0, ks * 16, lane);
      mma_bf16(c1, xh, yl);
    }
    if (kTerms >= 2) {
      load_a(xl, fl, ld, 0, ks * 16, lane);
      mma_bf16(c2, xl, yh);
    }
  }
}
// Its result: L (beta folded in, zero on and above the diagonal) to shared memory, or M (zero above
// the diagonal, hi + lo bf16) to the workspace, for rows i0 + g8 (+ 8), columns j0 + 2 t4 (+ 1);
// M's diagonal from pDiag where given (one-pass form with LMTERMS < 3).
__device__ __forceinline__ void lm_tile_store(const float (&c0)[4], const float (&c1)[4], const float (&c2)[4],
                                              bool is_m, int i0, int j0, int g8, int t4, float* pL,
                                              const float* pBeta, unsigned short* wMhi, unsigned short* wMlo,
                                              const float* pDiag = nullptr, float* pMf = nullptr) {
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int i = i0 + g8 + (e >> 1) * 8, j = j0 + 2 * t4 + (e & 1);
    const float v = c0[e] + (c1[e] + c2[e]);
    if (!is_m) {
      pL[i * kC + j] = j < i ? pBeta[i] * v : 0.f;
    } else {
      const float m = j < i ? v : j == i ? (pDiag != nullptr ? pDiag[i] : v) : 0.f;
      if (pMf != nullptr) {  // WY_IN_RECURRENCE 2: M in fp32 for M2 = M T' (step 5)
        pMf[i * kC + j] = m;
        continue;
      }
      const unsigned short mh = bf16_bits(m);
      wMhi[wsb(i, j, kC)] = mh;
      wMlo[wsb(i, j, kC)] = bf16_bits(m - bf16_value(mh));
    }
  }
}
