// corpus: archs=sm_80,sm_90a,sm_100a
// Exercises: other mma.sync shapes/types: m16n8k8 tf32 (cvt.rna.tf32.f32), m16n8k8 bf16, m16n8k32 s8 (.satfinite), m16n8k16 u8, m8n8k4 f64, m16n8k4 tf32, sparse mma.sp m16n8k32 bf16, ldmatrix .x1/.x2, movmatrix transpose.

__device__ __forceinline__ unsigned to_tf32(float f) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
  return r;
}

extern "C" __global__ void mma_tf32_tile(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C) {
  // One warp: C[16x8] = A[16x8] * B[8x8] in tf32, plus an m16n8k4 step.
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  unsigned a[4] = {to_tf32(A[g * 8 + t]), to_tf32(A[(g + 8) * 8 + t]), to_tf32(A[g * 8 + t + 4]),
                   to_tf32(A[(g + 8) * 8 + t + 4])};
  unsigned b[2] = {to_tf32(B[t * 8 + g]), to_tf32(B[(t + 4) * 8 + g])};
  float c[4] = {0.f, 0.f, 0.f, 0.f};
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  asm volatile("mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(b[0]));
  C[g * 8 + 2 * t] = c[0];
  C[g * 8 + 2 * t + 1] = c[1];
  C[(g + 8) * 8 + 2 * t] = c[2];
  C[(g + 8) * 8 + 2 * t + 1] = c[3];
}

extern "C" __global__ void mma_int8_tile(const int *__restrict__ Apk, const int *__restrict__ Bpk, int *__restrict__ C,
                                         const unsigned *__restrict__ Au8, const unsigned *__restrict__ Bu8) {
  const int lane = threadIdx.x & 31;
  unsigned a[4], b[2];
#pragma unroll
  for (int k = 0; k < 4; ++k) a[k] = (unsigned)Apk[lane * 4 + k];
  b[0] = (unsigned)Bpk[lane * 2];
  b[1] = (unsigned)Bpk[lane * 2 + 1];
  int c[4] = {0, 0, 0, 0};
  asm volatile("mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};"
               : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  unsigned au[2] = {Au8[lane * 2], Au8[lane * 2 + 1]};
  unsigned bu = Bu8[lane];
  asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
               : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
               : "r"(au[0]), "r"(au[1]), "r"(bu));
#pragma unroll
  for (int k = 0; k < 4; ++k) C[lane * 4 + k] = c[k];
}

extern "C" __global__ void mma_f64_tile(const double *__restrict__ A, const double *__restrict__ B, double *__restrict__ C) {
  const int lane = threadIdx.x & 31;
  double a = A[lane], b = B[lane];
  double c0 = C[2 * lane], c1 = C[2 * lane + 1];
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};"
               : "+d"(c0), "+d"(c1)
               : "d"(a), "d"(b));
  C[2 * lane] = c0;
  C[2 * lane + 1] = c1;
}

extern "C" __global__ void mma_bf16_k8_and_sparse(const unsigned *__restrict__ Ap, const unsigned *__restrict__ Bp,
                                                  const unsigned *__restrict__ meta, float *__restrict__ C) {
  __shared__ __align__(16) unsigned short tile[8 * 8 * 2];
  const int lane = threadIdx.x & 31;
  tile[lane] = (unsigned short)Ap[lane];
  tile[lane + 32] = (unsigned short)(Ap[lane] >> 16);
  tile[lane + 64] = (unsigned short)Bp[lane];
  tile[lane + 96] = (unsigned short)(Bp[lane] >> 16);
  __syncwarp();
  unsigned base = (unsigned)__cvta_generic_to_shared(tile);
  unsigned x1, x2a, x2b;
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(x1) : "r"(base + (lane & 7) * 16));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(x2a), "=r"(x2b) : "r"(base + (lane & 15) * 16));
  unsigned mv;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(mv) : "r"(x1));
  float c[4] = {0.f, 0.f, 0.f, 0.f};
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(x2a), "r"(x2b), "r"(mv));
  // 2:4 structured sparse MMA: A holds 16x16 non-zeros of a 16x32 matrix, metadata selects positions.
  unsigned a[4] = {Ap[lane], Ap[lane + 32], Ap[lane + 64], Ap[lane + 96]};
  unsigned b[4] = {Bp[lane], Bp[lane + 32], Bp[lane + 64], Bp[lane + 96]};
  unsigned e = meta[lane];
  asm volatile("mma.sp.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9,%10,%11}, "
               "{%0,%1,%2,%3}, %12, 0x0;"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(e));
#pragma unroll
  for (int k = 0; k < 4; ++k) C[lane * 4 + k] = c[k];
}
