// corpus: archs=sm_80,sm_90a opts=-O0,-O2,-O3,-O2 -g
// Exercises (LLVM NVPTX): shared-memory tiled SGEMM with 2-D thread blocks, register blocking (4x4 per thread), ext_vector_type float4 128-bit loads/stores, #pragma unroll / nounroll, fma contraction.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))

typedef float float4v __attribute__((ext_vector_type(4)));

#define TS 64
#define TK 16

// C = alpha * A[M,K] * B[K,N] + beta * C ; blockDim = (16, 16), each thread computes 4x4.
extern "C" __global__ void __attribute__((launch_bounds(256))) sgemm_tiled(const float *__restrict__ A, const float *__restrict__ B,
                                                                            float *__restrict__ C, int M, int N, int K,
                                                                            float alpha, float beta) {
  __shared__ float sA[TK][TS + 4];
  __shared__ float sB[TK][TS];
  const int tx = __nvvm_read_ptx_sreg_tid_x(), ty = __nvvm_read_ptx_sreg_tid_y();
  const int bx = __nvvm_read_ptx_sreg_ctaid_x(), by = __nvvm_read_ptx_sreg_ctaid_y();
  const int tid = ty * 16 + tx;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += TK) {
    // A tile: 64 rows x 16 cols = 256 float4 (one per thread), stored transposed.
    {
      int r = tid >> 2, c = (tid & 3) * 4;
      float4v v = *(const float4v *)(A + (long)(by * TS + r) * K + k0 + c);
      sA[c + 0][r] = v.x;
      sA[c + 1][r] = v.y;
      sA[c + 2][r] = v.z;
      sA[c + 3][r] = v.w;
    }
    {
      int r = tid >> 4, c = (tid & 15) * 4;
      *(float4v *)&sB[r][c] = *(const float4v *)(B + (long)(k0 + r) * N + bx * TS + c);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < TK; ++kk) {
      float4v a = *(const float4v *)&sA[kk][ty * 4];
      float4v b = *(const float4v *)&sB[kk][tx * 4];
      float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = __builtin_fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma nounroll
  for (int i = 0; i < 4; ++i) {
    int row = by * TS + ty * 4 + i;
    if (row >= M) continue;
    float4v *cp = (float4v *)(C + (long)row * N + bx * TS + tx * 4);
    float4v old = *cp;
    float4v r = {acc[i][0], acc[i][1], acc[i][2], acc[i][3]};
    *cp = alpha * r + beta * old;
  }
}

// Naive transposed GEMV with a runtime-unrolled loop and a remainder.
extern "C" __global__ void sgemv_t(const float *__restrict__ A, const float *__restrict__ x, float *__restrict__ y, int rows,
                                   int cols) {
  int c = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() + __nvvm_read_ptx_sreg_tid_x();
  if (c >= cols) return;
  float s = 0.0f;
#pragma unroll 4
  for (int r = 0; r < rows; ++r) s += A[(long)r * cols + c] * x[r];
  y[c] = s;
}
