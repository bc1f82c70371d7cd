// corpus: archs=sm_80,sm_90a opts=-O0,-O2,-O2 -g
// Exercises (LLVM NVPTX): Ampere cp.async builtins (ca/cg 4/8/16 B, commit_group, wait_group, wait_all, mbarrier arrive), mbarrier builtins, wmma (warp-matrix) load/mma/store builtins for f16 m16n16k16 with f32 accumulate and bf16 m16n16k16, ldmatrix/mma.sync via inline asm.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define AS3 __attribute__((address_space(3)))
#define AS1 __attribute__((address_space(1)))

extern "C" __global__ void cp_async_stage(const float *__restrict__ src, float *__restrict__ dst, int n) {
  __shared__ __attribute__((aligned(16))) float buf[2][512];
  __shared__ long bar;
  int t = __nvvm_read_ptx_sreg_tid_x();
  if (t == 0) __nvvm_mbarrier_init_shared((AS3 long *)&bar, 128);
  __syncthreads();
  const float *g = src + __nvvm_read_ptx_sreg_ctaid_x() * 1024;
  __nvvm_cp_async_cg_shared_global_16((AS3 void *)&buf[0][t * 4], (AS1 const void *)(g + t * 4));
  __nvvm_cp_async_commit_group();
  __nvvm_cp_async_ca_shared_global_8((AS3 void *)&buf[1][t * 2], (AS1 const void *)(g + 512 + t * 2));
  __nvvm_cp_async_ca_shared_global_4((AS3 void *)&buf[1][256 + t], (AS1 const void *)(g + 768 + t));
  __nvvm_cp_async_commit_group();
  __nvvm_cp_async_wait_group(1);
  __syncthreads();
  float a = buf[0][(t * 4 + 5) & 511];
  __nvvm_cp_async_wait_all();
  __nvvm_cp_async_mbarrier_arrive_shared((AS3 long *)&bar);
  long state = __nvvm_mbarrier_arrive_shared((AS3 long *)&bar);
  while (!__nvvm_mbarrier_test_wait_shared((AS3 long *)&bar, state)) {
  }
  dst[__nvvm_read_ptx_sreg_ctaid_x() * 128 + t] = a + buf[1][t] + buf[1][256 + t];
}

// One warp computes a 16x16 tile with wmma (A, B row/col major fp16 in memory, f32 accumulate).
extern "C" __global__ void wmma_f16_tile(const unsigned short *__restrict__ A, const unsigned short *__restrict__ B,
                                         float *__restrict__ C, int lda, int ldb, int ldc, int K) {
  typedef int v8i __attribute__((ext_vector_type(8)));
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int k = 0; k < K; k += 16) {
    int a[8], b[8];
    __hmma_m16n16k16_ld_a(a, (const int *)(A + k), lda, 0);
    __hmma_m16n16k16_ld_b(b, (const int *)(B + k), ldb, 1);
    __hmma_m16n16k16_mma_f32f32(acc, a, b, acc, 0, 0);
  }
  __hmma_m16n16k16_st_c_f32(C, acc, ldc, 0);
}

extern "C" __global__ void wmma_bf16_tile(const unsigned short *__restrict__ A, const unsigned short *__restrict__ B,
                                          float *__restrict__ C) {
  int a[4], b[4];
  float acc[8];
  __mma_bf16_m16n16k16_ld_a(a, (const int *)A, 16, 0);
  __mma_bf16_m16n16k16_ld_b(b, (const int *)B, 16, 0);
  __hmma_m16n16k16_ld_c_f32(acc, C, 16, 0);
  __mma_bf16_m16n16k16_mma_f32(acc, a, b, acc, 0, 0);
  __hmma_m16n16k16_st_c_f32(C, acc, 16, 0);
}

extern "C" __global__ void ldmatrix_mma_asm(const unsigned *__restrict__ in, float *__restrict__ out) {
  __shared__ __attribute__((aligned(16))) unsigned short tile[16 * 16];
  int lane = __nvvm_read_ptx_sreg_tid_x() & 31;
  for (int i = lane; i < 128; i += 32) ((unsigned *)tile)[i] = in[i];
  __nvvm_bar_warp_sync(0xffffffffu);
  unsigned addr = (unsigned)(unsigned long)(AS3 unsigned short *)&tile[(lane & 15) * 16 + (lane >> 4) * 8];
  unsigned a0, a1, a2, a3;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(addr));
  float c0 = 0.f, c1 = 0.f, c2 = 0.f, c3 = 0.f;
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(a1), "r"(a3));
  out[lane * 4 + 0] = c0;
  out[lane * 4 + 1] = c1;
  out[lane * 4 + 2] = c2;
  out[lane * 4 + 3] = c3;
}
