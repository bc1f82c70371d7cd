// A part of kernels/kda/kda_fwd_chunked.cu, expanded into it where it is included (inside
// namespace kda_chunked, after the knobs and the parts before it); not a header of its own.
// kda_fwd_seg_combine (SEQSPLIT > 1): the states entering each segment of a split sequence.

// kda_fwd_seg_combine (SEQSPLIT > 1, between the recurrence's passes 1 and 3): per (sequence, head)
// and 8 value columns (a CTA of 256 threads, grid (N, H, 16)), the states entering the segments in
// order, E_1 = S0_0 (segment 0 ran from the initial state) and E_(j+1)^T = E_j^T X_j + S0_j^T, each
// written over S0_j^T in segment j's block, where pass 3's segment j + 1 reads it. The chain of
// P - 2 steps is serial, so each step's X_j (64 KB) is copied into shared memory with cp.async
// during the step before (two buffers); a step is then 128 x 4 fp32 FMA a thread from shared
// memory (H200: with X read from global memory in the loop, 11 us a step, 0.34 ms at 32 segments).
#define KDA_COMBINE_THREADS 256
enum : int {
  kCombineRows = 8,                                   // E^T rows (value columns) a CTA
  kCombineSmem = 2 * kD * kD * 4 + kCombineRows * kD * 4  // dynamic shared memory (KdaFwdOp's plan gives it)
};
__device__ __forceinline__ void kda_seg_combine_body(const Args& a, unsigned char* __restrict__ ws, int nseq, int nseg) {
  extern __shared__ __align__(16) unsigned char smem[];
  if (dynamic_smem_bytes() < (unsigned int)kCombineSmem) trap_now();
  const float* sx = reinterpret_cast<const float*>(smem);                        // X: two buffers
  float(*se)[kD] = reinterpret_cast<float(*)[kD]>(smem + 2 * kD * kD * 4);       // E_j^T's rows
  const int tid = threadIdx.x, row = tid / 32, c4 = (tid % 32) * 4;  // a warp a row: E broadcasts
  const long long chain = (long long)blockIdx.x * a.H + blockIdx.y;
  const int r0 = blockIdx.z * kCombineRows;
  float* const blocks = ws_seg(a, ws, nseq) + chain * (nseg - 1) * (long long)kSegRows * kD;
  const SmemAddr sx0 = smem_at(smem);
  // X_j into buffer j & 1: 16-byte copies, 16 a thread; one commit group a step (empty past the end).
  auto load_x = [&](int j) {
    if (j + 1 < nseg) {
      const float* x = blocks + (long long)j * kSegRows * kD + (long long)kD * kD;
#pragma unroll
      for (int i = 0; i < kD * kD / 4 / KDA_COMBINE_THREADS; ++i) {
        const int idx = tid + i * KDA_COMBINE_THREADS;
        cp_async16_at(sx0 + (j & 1) * (kD * kD * 4) + idx * 16, x + idx * 4);
      }
    }
    cp_async_commit();
  };
  load_x(1);
  // E_1 = S0_0: this thread's four values.
#pragma unroll
  for (int i = 0; i < 4; ++i) se[row][c4 + i] = blocks[(long long)(r0 + row) * kD + c4 + i];
  for (int j = 1; j + 1 < nseg; ++j) {
    load_x(j + 1);  // its buffer was last read in step j - 1, before that step's second barrier
    float* const dst = blocks + (long long)j * kSegRows * kD + (long long)(r0 + row) * kD + c4;
    float acc[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[i] = dst[i];  // S0_j^T
    cp_async_wait_group<1>();  // this thread's copies of X_j
    __syncthreads();           // everyone's, and E_j^T complete
    const float* x = sx + (j & 1) * kD * kD + c4;
#pragma unroll 8
    for (int m = 0; m < kD; ++m) {
      const float e = se[row][m];
      const float4 xv = *reinterpret_cast<const float4*>(x + m * kD);
      acc[0] += e * xv.x;
      acc[1] += e * xv.y;
      acc[2] += e * xv.z;
      acc[3] += e * xv.w;
    }
    __syncthreads();  // every read of E_j^T and of X_j's buffer is done
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      se[row][c4 + i] = acc[i];
      dst[i] = acc[i];  // E_(j+1)^T
    }
  }
  cp_async_wait_group<0>();
}
