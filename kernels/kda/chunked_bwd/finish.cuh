// A part of kernels/kda/kda_bwd_chunked.cu, expanded into it where it is included (inside
// namespace kda_bwd, after the slices kernel's bodies); not a header of its own.

// FINISH_ROWS > 1: the finish's pair walk over R rows u_a = t - a (a < R) at a time, so column j's
// k, G and running sums are read and written once for R rows. Every sum gets the same terms in the
// same order as the walk a row at a time: column u_b's updates by rows u_a of the group (a < b)
// come first, in row order, before row u_b's own terms start from them; each row adds its terms
// over the columns below the group (j ascending) and then those of the group's rows below it.
// q_of(u): token u's q (shared memory, or with FINISH_LEAN its record, then loaded a group ahead
// in q_next); a row's dq goes to dq (q's place, or k's with FINISH_LEAN).
struct FinishWalk {
  float *dq, *ks, *gs, *ak, *ag;
  const float *dm, *dl, *bs;
  int i;
  template <int R, class Shares, class Q>
  __device__ __forceinline__ void rows(int t, Shares shares, Q q_of, float& aq_next, float& da_next,
                                       float& q_next) const {
    float q[R], k[R], g[R], b[R], aq[R], da[R], akk[R], r[R];
#pragma unroll
    for (int a = 0; a < R; ++a) {
      const int u = t - a;
      q[a] = FINISH_LEAN && a == 0 ? q_next : q_of(u);
      k[a] = ks[u * kDp + i];
      g[a] = gs[u * kDp + i];
      b[a] = bs[u];
      aq[a] = a == 0 ? aq_next : shares(u, i);
      da[a] = a == 0 ? da_next : shares(u, 2 * kK + i);
      r[a] = 0.f;
    }
    if (t - R >= 0) {
      aq_next = shares(t - R, i);
      da_next = shares(t - R, 2 * kK + i);
      if constexpr (FINISH_LEAN) q_next = q_of(t - R);
    }
    // The group's own pairs (u_a, u_b), b > a: their terms on column u_b now, on row u_a's sums
    // after its other pairs.
    constexpr int P = R * (R - 1) / 2 > 0 ? R * (R - 1) / 2 : 1;
    float pm[P], pl[P], pkj[P], pv[P];
    akk[0] = ak[t * kDp + i];
#pragma unroll
    for (int bb = 1; bb < R; ++bb) {
      const int ub = t - bb;
      float col_k = ak[ub * kDp + i], col_v = ag[ub * kDp + i];
#pragma unroll
      for (int a = 0; a < bb; ++a) {
        const int x = bb * (bb - 1) / 2 + a;
        const float e = exp_r(g[a] - g[bb]), kj = k[bb] * e;
        const float m = dm[(t - a) * kCp + ub], l = b[a] * dl[(t - a) * kCp + ub];
        const float w = fmaf(l, k[a], m * q[a]);
        col_k = fmaf(w, e, col_k);
        col_v = fmaf(w, kj, col_v);
        pm[x] = m;
        pl[x] = l;
        pkj[x] = kj;
        pv[x] = col_v;
      }
      akk[bb] = col_k;
    }
    for (int j = 0; j <= t - R; ++j) {
      const float gj = gs[j * kDp + i], kj0 = ks[j * kDp + i];
      float col_k = ak[j * kDp + i], col_v = ag[j * kDp + i];
#pragma unroll
      for (int a = 0; a < R; ++a) {
        const float e = exp_r(g[a] - gj), kj = kj0 * e;
        const float m = dm[(t - a) * kCp + j], l = b[a] * dl[(t - a) * kCp + j];
        aq[a] = fmaf(m, kj, aq[a]);
        akk[a] = fmaf(l, kj, akk[a]);
        const float w = fmaf(l, k[a], m * q[a]);  // dp k_i + dm q_i
        col_k = fmaf(w, e, col_k);
        col_v = fmaf(w, kj, col_v);  // V_j, now over rows >= u_a
        r[a] += col_v;
      }
      ak[j * kDp + i] = col_k;
      ag[j * kDp + i] = col_v;
    }
#pragma unroll
    for (int a = 0; a < R; ++a) {
#pragma unroll
      for (int bb = R - 1; bb > a; --bb) {  // columns u_b ascending
        const int x = bb * (bb - 1) / 2 + a;
        aq[a] = fmaf(pm[x], pkj[x], aq[a]);
        akk[a] = fmaf(pl[x], pkj[x], akk[a]);
        r[a] += pv[x];
      }
      const int u = t - a;
      const float md = dm[u * kCp + u];  // the diagonal of M (e^0 = 1; its G terms cancel)
      dq[u * kDp + i] = fmaf(md, k[a], aq[a]);
      ak[u * kDp + i] = fmaf(md, q[a], akk[a]);
      ag[u * kDp + i] = da[a] + r[a];
    }
  }
};

// ---- kda_bwd_chunk_finish ----
// Chunk (n, c) of head h: the slices' shares summed in slice order, then (thread d, key channel d)
// the terms through P_ij = sum_d k_id k_jd e^(G_id - G_jd) and M_ij = scale sum_d q_id k_jd
// e^(G_id - G_jd), from the last token to the first, so each token's gradients are complete when
// it is reached; each token then goes back through the pre-processing (docs/kda.md 7.2) as in
// kda_bwd_finish. Writes the chunk's sums of the ddt_bias and dA_log terms (zeros for a chunk past
// its sequence's end).
// A pair (i, j < i)'s term T_ij depends on a_m for j < m <= i: da_m gets R_m = sum over i >= m,
// j < m of T_ij, summed as the column sums V_j = sum_{i >= m} T_ij (kept where dG was) over j < m.
// No term is added and taken away again, as a reverse cumulative sum of +T_ij at i and -T_ij at j
// would: that cancellation lost the small gradients of saturated gates.
// Shared: q, k, G, dk, V [kC][kDp]; dM, dL, P [kC][kCp]; b, dbeta's shares [kC]; the reduction's
// scratch. FINISH_LEAN: no q (the walk reads the records; dq goes where k was) and no P (the dbeta
// loop reads the workspace).
__device__ __forceinline__ void chunk_finish_body(const ChunkArgs& p, float* sm) {
  const int h = blockIdx.y, i = threadIdx.x;
  const Chunk ch = chunk_in_slot(p, blockIdx.x);
  float* sums = p.ws + p.sums_off + (ch.slot * p.H + h) * (kK + 1);
  if (ch.count == 0) {
    sums[i] = 0.f;
    if (i == 0) sums[kK] = 0.f;
    return;
  }
  const long long th = token_heads(p);
  constexpr bool kLean = FINISH_LEAN != 0;
  float* qs = sm;  // not with FINISH_LEAN
  float* ks = qs + (kLean ? 0 : kC * kDp);
  float* gs = ks + kC * kDp;
  float* ak = gs + kC * kDp;
  float* ag = ak + kC * kDp;
  float* dm = ag + kC * kDp;
  float* dl = dm + kC * kCp;
  float* ps = dl + kC * kCp;  // not with FINISH_LEAN
  float* bs = ps + (kLean ? 0 : kC * kCp);
  float* dqs = kLean ? ks : qs;  // a token's dq, once its row is walked
  float* dbs = bs + kC;
  float* red = dbs + kC;
#pragma unroll 4
  for (int t = 0; t < ch.count; ++t) {
    const float* rec = record(p, ch.t0 + t, h);
    if constexpr (!kLean) qs[t * kDp + i] = rec[i];
    ks[t * kDp + i] = rec[kK + i];
    gs[t * kDp + i] = rec[2 * kK + i];
    float k = 0.f;
    for (int z = 0; z < kShares; ++z) k += share_of(p, th, z, ch.t0 + t, h)[kK + i];
    ak[t * kDp + i] = k;
    ag[t * kDp + i] = 0.f;
  }
  const float* src = mats(p, h, ch.slot);
  for (int e = i; e < kC * kC; e += kT) {
    const int r = e / kC, c2 = e % kC;
    float m = 0.f, l = 0.f;
    if (r < ch.count) {
      for (int z = 0; z < kShares; ++z) {
        const float* sh = share_of(p, th, z, ch.t0 + r, h);
        if (c2 <= r) m += sh[3 * kK + c2];
        if (c2 < r) l += sh[3 * kK + kC + c2];
      }
    }
    dm[r * kCp + c2] = p.scale * m;
    dl[r * kCp + c2] = l;
    if constexpr (!kLean) ps[r * kCp + c2] = src[2 * kC * kC + e];
  }
  for (int t = i; t < kC; t += kT) {
    float db = 0.f;
    if (t < ch.count) {
      bs[t] = record(p, ch.t0 + t, h)[3 * kK];
      for (int z = 0; z < kShares; ++z) db += share_of(p, th, z, ch.t0 + t, h)[3 * kK + 2 * kC];
    }
    dbs[t] = db;
  }
  __syncthreads();
  // The terms through P and M, thread i = key channel i, tokens from the last: token t's own row
  // (q_t, and its dq, dk, V) is not read again once it is done, so its dq goes where q_t was, its
  // dk stays in ak and the log-decay's gradient replaces V_t in ag.
  {
    // The slices' dq and da shares of a token, summed in slice order; the next token's are loaded
    // while this one's pairs are walked.
    const auto shares = [&](int t, int word) {
      float s = 0.f;
      for (int z = 0; z < kShares; ++z) s += share_of(p, th, z, ch.t0 + t, h)[word];
      return s;
    };
    float aq_next = shares(ch.count - 1, i), da_next = shares(ch.count - 1, 2 * kK + i);
    const auto q_of = [&](int t) {
      if constexpr (kLean) return record(p, ch.t0 + t, h)[i];
      else return qs[t * kDp + i];
    };
    float q_next = kLean ? q_of(ch.count - 1) : 0.f;  // FINISH_LEAN: the next row's q, loaded ahead
#if KDA_BWD_FINISH_REGISTERS
    // Column i's k, G and the running dk and V sums in registers: the walk is unrolled over the
    // chunk's tokens so every index is a constant, the same operations in the same order as below.
    float kc[kC], gc[kC], akc[kC], agc[kC];
#pragma unroll
    for (int t = 0; t < kC; ++t) {
      kc[t] = gc[t] = akc[t] = agc[t] = 0.f;
      if (t < ch.count) {
        kc[t] = ks[t * kDp + i];
        gc[t] = gs[t * kDp + i];
        akc[t] = ak[t * kDp + i];
      }
    }
#pragma unroll
    for (int t = kC - 1; t >= 0; --t) {
      if (t >= ch.count) continue;
      const float qi = kLean ? q_next : q_of(t), ki = kc[t], gi = gc[t], bi = bs[t];
      float aq = aq_next, da = da_next;
      if (t > 0) {
        aq_next = shares(t - 1, i);
        da_next = shares(t - 1, 2 * kK + i);
        if constexpr (kLean) q_next = q_of(t - 1);
      }
      float akk = akc[t], r = 0.f;
#pragma unroll
      for (int j = 0; j < t; ++j) {
        const float e = exp_r(gi - gc[j]), kj = kc[j] * e;
        const float m = dm[t * kCp + j], l = bi * dl[t * kCp + j];
        aq = fmaf(m, kj, aq);
        akk = fmaf(l, kj, akk);
        const float w = fmaf(l, ki, m * qi);
        akc[j] = fmaf(w, e, akc[j]);
        const float v = fmaf(w, kj, agc[j]);
        agc[j] = v;
        r += v;
      }
      const float md = dm[t * kCp + t];
      dqs[t * kDp + i] = fmaf(md, ki, aq);
      ak[t * kDp + i] = fmaf(md, qi, akk);
      ag[t * kDp + i] = da + r;
    }
#elif KDA_BWD_FINISH_ROWS > 1
    // FINISH_ROWS rows (tokens) t, t - 1, ... at a time, then the first count % FINISH_ROWS one at
    // a time.
    constexpr int kRows = KDA_BWD_FINISH_ROWS;
    const FinishWalk wk{dqs, ks, gs, ak, ag, dm, dl, bs, i};
    int t = ch.count - 1;
    for (; t >= kRows - 1; t -= kRows) wk.rows<kRows>(t, shares, q_of, aq_next, da_next, q_next);
    for (; t >= 0; --t) wk.rows<1>(t, shares, q_of, aq_next, da_next, q_next);
#else
    for (int t = ch.count - 1; t >= 0; --t) {
      const float qi = kLean ? q_next : q_of(t), ki = ks[t * kDp + i], gi = gs[t * kDp + i], bi = bs[t];
      float aq = aq_next, da = da_next;
      if (t > 0) {
        aq_next = shares(t - 1, i);
        da_next = shares(t - 1, 2 * kK + i);
        if constexpr (kLean) q_next = q_of(t - 1);
      }
      float akk = ak[t * kDp + i], r = 0.f;
      for (int j = 0; j < t; ++j) {
        const float e = exp_r(gi - gs[j * kDp + i]), kj = ks[j * kDp + i] * e;
        const float m = dm[t * kCp + j], l = bi * dl[t * kCp + j];
        aq = fmaf(m, kj, aq);
        akk = fmaf(l, kj, akk);
        const float w = fmaf(l, ki, m * qi);  // dp k_i + dm q_i
        ak[j * kDp + i] = fmaf(w, e, ak[j * kDp + i]);
        const float v = fmaf(w, kj, ag[j * kDp + i]);  // V_j, now over rows >= t
        ag[j * kDp + i] = v;
        r += v;
      }
      const float md = dm[t * kCp + t];  // the diagonal of M (e^0 = 1; its G terms cancel)
      dqs[t * kDp + i] = fmaf(md, ki, aq);
      ak[t * kDp + i] = fmaf(md, qi, akk);
      ag[t * kDp + i] = da + r;
    }
#endif
  }
  __syncthreads();
  // Back through the pre-processing as kda_bwd_finish does, a token a warp and channels lane + 32 c
  // a lane (warp shuffles, no block barrier per token); per-warp sums of the ddt_bias terms go to
  // `part` (G's place, no longer read), added in warp order below.
  const int warp = i / 32, lane = i % 32;
  const float ea_log = exp_r(p.a_log[h]);
  float* part = gs;
  float dtb_sum[4] = {0.f, 0.f, 0.f, 0.f}, a_sum = 0.f;
  for (int t = warp; t < ch.count; t += kW) {
    const long long e = (ch.t0 + t) * p.H + h;
    const float* rec = record(p, ch.t0 + t, h);
    float q[4], k[4], x[4], sums[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int d = lane + 32 * c;
      q[c] = load_bf16(p.q + e * kK + d);
      k[c] = load_bf16(p.k + e * kK + d);
      x[c] = load_bf16(p.g + e * kK + d) + p.dt_bias[h * kK + d];
      sums[0] = fmaf(q[c], q[c], sums[0]);
      sums[1] = fmaf(k[c], k[c], sums[1]);
      sums[2] = fmaf(rec[d], dqs[t * kDp + d], sums[2]);
      sums[3] = fmaf(rec[kK + d], ak[t * kDp + d], sums[3]);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
      for (int m = 0; m < 4; ++m) sums[m] += shfl_bfly(sums[m], o);
    const float rq = rsqrt_r(sums[0] + 1e-6f), rk = rsqrt_r(sums[1] + 1e-6f);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int d = lane + 32 * c;
      const long long row = e * kK + d;
      p.dq[row] = (dqs[t * kDp + d] - rec[d] * sums[2]) * rq;  // y = x / n: dx = (dy - y (y . dy)) / n
      p.dk[row] = (ak[t * kDp + d] - rec[kK + d] * sums[3]) * rk;
      const float da = ag[t * kDp + d];
#if KDA_GATE_SOFTPLUS
      const float dgv = da * -ea_log * (x[c] > 20.f ? 1.f : sigmoid(x[c]));
      a_sum += da * -ea_log * softplus(x[c]);  // d a / d A_log = a
#else
      const float dgv = times_sigmoid_slope(da * p.lower_bound * ea_log, ea_log * x[c]);
      a_sum += dgv * x[c];  // d a / d A_log = (d a / d x) x
#endif
      p.dg[row] = dgv;
      dtb_sum[c] += dgv;
    }
    if (lane == 0) {
      float db = dbs[t];
      for (int j = 0; j < t; ++j) db = fmaf(dl[t * kCp + j], kLean ? src[2 * kC * kC + t * kC + j] : ps[t * kCp + j], db);
      p.dbeta[e] = times_sigmoid_slope(db, load_bf16(p.beta + e));
    }
  }
#pragma unroll
  for (int c = 0; c < 4; ++c) part[warp * kK + lane + 32 * c] = dtb_sum[c];
  float a[1] = {a_sum};
  block_sum<1>(a, red);  // its barriers also order the writes to part before the reads below
  float dtb = 0.f;
  for (int w = 0; w < kW; ++w) dtb += part[w * kK + i];
  sums[i] = dtb;
  if (i == 0) sums[kK] = a[0];
}
