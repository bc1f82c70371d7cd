// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: warp-level tensor-core GEMM: mma.sync.aligned.m16n8k16 (bf16->f32 and f16->f16), ldmatrix.sync.aligned.m8n8.x4 (+ .trans for a row-major B), XOR-swizzled shared tiles, 128-bit global->shared staging, fp32 epilogue with bf16 packing.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define BM 64
#define BN 64
#define BK 32

__device__ __forceinline__ unsigned smem_u32(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void ldmatrix_x4(unsigned &r0, unsigned &r1, unsigned &r2, unsigned &r3, unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned &r0, unsigned &r1, unsigned &r2, unsigned &r3, unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

__device__ __forceinline__ void mma_bf16_16816(float c[4], const unsigned a[4], const unsigned b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void mma_f16_16816(unsigned c[2], const unsigned a[4], const unsigned b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%0, %1};"
      : "+r"(c[0]), "+r"(c[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Swizzle 16-byte chunks within a 64-byte row (BK=32 bf16) to avoid ldmatrix bank conflicts.
__device__ __forceinline__ int swz_a(int row, int chunk) { return row * 4 + (chunk ^ ((row >> 1) & 3)); }
// B tile is K x N row-major with 128-byte rows (8 chunks).
__device__ __forceinline__ int swz_b(int row, int chunk) { return row * 8 + (chunk ^ (row & 7)); }

// C[M,N] (bf16) = A[M,K] (bf16, row-major) x B[K,N] (bf16, row-major); 4 warps, each 32x32.
extern "C" __global__ void __launch_bounds__(128) gemm_bf16_mma_sync(const __nv_bfloat16 *__restrict__ A,
                                                                     const __nv_bfloat16 *__restrict__ B,
                                                                     __nv_bfloat16 *__restrict__ C, int M, int N, int K) {
  __shared__ __align__(128) uint4 sA[BM * BK / 8];
  __shared__ __align__(128) uint4 sB[BK * BN / 8];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = (warp >> 1) * 32, wn = (warp & 1) * 32;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int k = 0; k < 4; ++k) acc[i][j][k] = 0.f;

  for (int k0 = 0; k0 < K; k0 += BK) {
    // A: 64 rows x 4 chunks = 256 chunks, 2 per thread.  B: 32 rows x 8 chunks = 256 chunks.
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      int c = tid + t * 128;
      int ar = c >> 2, ac = c & 3;
      sA[swz_a(ar, ac)] = *reinterpret_cast<const uint4 *>(A + (size_t)(m0 + ar) * K + k0 + ac * 8);
      int br = c >> 3, bc = c & 7;
      sB[swz_b(br, bc)] = *reinterpret_cast<const uint4 *>(B + (size_t)(k0 + br) * N + n0 + bc * 8);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned af[2][4], bfr[4][2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        int r = wm + i * 16 + (lane & 15);
        int ch = (kk >> 3) + (lane >> 4);
        ldmatrix_x4(af[i][0], af[i][1], af[i][2], af[i][3], smem_u32(&sA[swz_a(r, ch)]));
      }
#pragma unroll
      for (int j = 0; j < 4; j += 2) {
        int r = kk + (lane & 15);
        int ch = ((wn + j * 8) >> 3) + (lane >> 4);
        ldmatrix_x4_trans(bfr[j][0], bfr[j][1], bfr[j + 1][0], bfr[j + 1][1], smem_u32(&sB[swz_b(r, ch)]));
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_bf16_16816(acc[i][j], af[i], bfr[j]);
    }
    __syncthreads();
  }
  // Epilogue: each thread owns rows (lane/4, lane/4+8), cols 2*(lane%4)+{0,1} per 16x8 tile.
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int r = m0 + wm + i * 16 + (lane >> 2);
      int c = n0 + wn + j * 8 + 2 * (lane & 3);
      if (r < M && c < N) {
        *reinterpret_cast<__nv_bfloat162 *>(C + (size_t)r * N + c) = __floats2bfloat162_rn(acc[i][j][0], acc[i][j][1]);
      }
      if (r + 8 < M && c < N) {
        *reinterpret_cast<__nv_bfloat162 *>(C + (size_t)(r + 8) * N + c) =
            __floats2bfloat162_rn(acc[i][j][2], acc[i][j][3]);
      }
    }
}

// fp16 GEMM with fp16 accumulation; B given as N x K (col-major for the MMA) so no .trans needed.
extern "C" __global__ void __launch_bounds__(32) gemm_f16_acc16_warp(const __half *__restrict__ A,
                                                                    const __half *__restrict__ Bt,
                                                                    __half *__restrict__ C, int N, int K) {
  __shared__ __align__(16) __half sA[16 * 16];
  __shared__ __align__(16) __half sB[16 * 16];
  const int lane = threadIdx.x;
  const int m0 = blockIdx.y * 16, n0 = blockIdx.x * 16;
  unsigned acc[2][2] = {{0u, 0u}, {0u, 0u}};
  for (int k0 = 0; k0 < K; k0 += 16) {
    // 16x16 halves = 32 chunks of 8
    int r = lane >> 1, ch = lane & 1;
    *reinterpret_cast<uint4 *>(&sA[r * 16 + ch * 8]) = *reinterpret_cast<const uint4 *>(A + (size_t)(m0 + r) * K + k0 + ch * 8);
    *reinterpret_cast<uint4 *>(&sB[r * 16 + ch * 8]) = *reinterpret_cast<const uint4 *>(Bt + (size_t)(n0 + r) * K + k0 + ch * 8);
    __syncwarp();
    unsigned a[4], b[4];
    ldmatrix_x4(a[0], a[1], a[2], a[3], smem_u32(&sA[(lane & 15) * 16 + (lane >> 4) * 8]));
    // B: matrices (n0-7,k0-7), (n0-7,k8-15), (n8-15,k0-7), (n8-15,k8-15)
    ldmatrix_x4(b[0], b[1], b[2], b[3], smem_u32(&sB[((lane & 7) + ((lane >> 4) << 3)) * 16 + ((lane >> 3) & 1) * 8]));
    mma_f16_16816(acc[0], a, &b[0]);
    mma_f16_16816(acc[1], a, &b[2]);
    __syncwarp();
  }
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    int r = m0 + (lane >> 2), c = n0 + j * 8 + 2 * (lane & 3);
    *reinterpret_cast<unsigned *>(C + (size_t)r * N + c) = acc[j][0];
    *reinterpret_cast<unsigned *>(C + (size_t)(r + 8) * N + c) = acc[j][1];
  }
}
