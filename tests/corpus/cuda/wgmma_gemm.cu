// corpus: archs=sm_90a
// Exercises: Hopper warpgroup MMA: wgmma.fence / mma_async (m64n64k16, m64n128k16, m64n256k16 bf16->f32 with 32/64/128-register accumulators; f16 accumulate; A-from-registers RS form; e4m3 k32; tf32 k8) with shared-memory matrix descriptors (128B swizzle), commit_group / wait_group, TMA-fed mainloop with mbarriers, wgmma.fence operand fences.

struct alignas(64) CUtensorMap_ {
  unsigned long long opaque[16];
};

__device__ __forceinline__ unsigned smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

// Shared memory matrix descriptor: start>>4 [0,14), LBO>>4 [16,30), SBO>>4 [32,46), swizzle mode [62,64).
__device__ __forceinline__ unsigned long long make_smem_desc(const void *p, unsigned lbo, unsigned sbo, unsigned swz) {
  unsigned long long a = smem_addr(p);
  unsigned long long d = (a & 0x3FFFFull) >> 4;
  d |= (unsigned long long)((lbo >> 4) & 0x3FFF) << 16;
  d |= (unsigned long long)((sbo >> 4) & 0x3FFF) << 32;
  d |= (unsigned long long)swz << 62;
  return d;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator reads/writes across the async MMA.
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

__device__ __forceinline__ void wgmma_m64n64k16_f32_bf16(float (&d)[32], unsigned long long desc_a, unsigned long long desc_b, int scale_d) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %34, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1, 0, 0;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_m64n128k16_f32_bf16(float (&d)[64], unsigned long long desc_a, unsigned long long desc_b, int scale_d) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %66, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, 0, 0;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_m64n256k16_f32_bf16(float (&d)[128], unsigned long long desc_a, unsigned long long desc_b, int scale_d) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %130, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, 0, 0;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_m64n64k16_f16_f16(unsigned (&d)[16], unsigned long long desc_a, unsigned long long desc_b, int scale_d) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %18, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
      "}, %16, %17, p, 1, 1, 0, 0;\n\t}"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]),
        "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_m64n64k16_f32_f16_rs(float (&d)[32], const unsigned (&a)[4], unsigned long long desc_b, int scale_d) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %37, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_m64n64k32_f32_e4m3(float (&d)[32], unsigned long long desc_a, unsigned long long desc_b, int scale_d) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %34, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_m64n32k8_f32_tf32(float (&d)[16], unsigned long long desc_a, unsigned long long desc_b, int scale_d) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %18, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
      "}, %16, %17, p, 1, 1;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned phase) {
  asm volatile(
      "{\n\t"
      ".reg .pred P1;\n\t"
      "LAB_WAIT:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n\t"
      "@P1 bra DONE;\n\t"
      "bra LAB_WAIT;\n\t"
      "DONE:\n\t"
      "}" ::"r"(bar),
      "r"(phase)
      : "memory");
}

// C[128 x 128] tile per CTA (2 consumer warpgroups x m64n128), K loop over 64-wide stages loaded by TMA.
// A tile: 128 x 64 bf16 (K-major, 128B swizzle), B tile: 128 x 64 bf16 (K-major, 128B swizzle).
extern "C" __global__ void __launch_bounds__(256, 1) wgmma_gemm_bf16_tma(const __grid_constant__ CUtensorMap_ tmap_a,
                                                                         const __grid_constant__ CUtensorMap_ tmap_b,
                                                                         float *__restrict__ C, int M, int N, int K) {
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned short *sA = reinterpret_cast<unsigned short *>(smem);                  // 2 stages x 128x64
  unsigned short *sB = reinterpret_cast<unsigned short *>(smem + 2 * 128 * 64 * 2);  // 2 stages x 128x64
  __shared__ __align__(8) unsigned long long full[2];
  const int wg = threadIdx.x >> 7;  // warpgroup 0/1
  const int tid = threadIdx.x & 127;
  const int m0 = blockIdx.y * 128, n0 = blockIdx.x * 128;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&full[0])) : "memory");
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&full[1])) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.f;
  const int ktiles = K / 64;
  auto issue = [&](int kt) {
    int s = kt & 1;
    unsigned bar = smem_addr(&full[s]);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(2 * 128 * 64 * 2) : "memory");
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
            smem_addr(sA + s * 128 * 64)),
        "l"(&tmap_a), "r"(kt * 64), "r"(m0), "r"(bar)
        : "memory");
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
            smem_addr(sB + s * 128 * 64)),
        "l"(&tmap_b), "r"(kt * 64), "r"(n0), "r"(bar)
        : "memory");
  };
  if (threadIdx.x == 0) issue(0);
  for (int kt = 0; kt < ktiles; ++kt) {
    const int s = kt & 1;
    if (threadIdx.x == 0 && kt + 1 < ktiles) issue(kt + 1);
    mbar_wait(smem_addr(&full[s]), (kt >> 1) & 1);
    const unsigned short *a = sA + s * 128 * 64 + wg * 64 * 64;
    const unsigned short *b = sB + s * 128 * 64;
    fence_operands(acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      // 16 K-elements = 32 bytes step inside the 128B swizzle atom; SBO = 8 rows * 128B = 1024.
      unsigned long long da = make_smem_desc(a + kk * 16, 16, 1024, 1);
      unsigned long long db = make_smem_desc(b + kk * 16, 16, 1024, 1);
      wgmma_m64n128k16_f32_bf16(acc, da, db, (kt > 0 || kk > 0) ? 1 : 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(acc);
    __syncthreads();
  }
  // Accumulator layout: for n-block j (8 cols): rows tid/4 (+8), cols 2*(tid%4) (+1); warp w owns rows 16w..16w+15.
  const int warp = tid >> 5, lane = tid & 31;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    int r = m0 + wg * 64 + warp * 16 + (lane >> 2);
    int c = n0 + j * 8 + 2 * (lane & 3);
    if (r < M && c + 1 < N) {
      *reinterpret_cast<float2 *>(C + (size_t)r * N + c) = make_float2(acc[4 * j], acc[4 * j + 1]);
      *reinterpret_cast<float2 *>(C + (size_t)(r + 8) * N + c) = make_float2(acc[4 * j + 2], acc[4 * j + 3]);
    }
  }
}

// One warpgroup, m64n256k16 with 128 accumulator registers; smem filled by plain loads, no swizzle (interleaved).
extern "C" __global__ void __launch_bounds__(128, 1) wgmma_m64n256_bf16(const uint4 *__restrict__ A, const uint4 *__restrict__ B,
                                                                        float *__restrict__ C, int ktiles) {
  __shared__ __align__(128) uint4 sA[64 * 16 / 8];
  __shared__ __align__(128) uint4 sB[256 * 16 / 8];
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.f;
  for (int kt = 0; kt < ktiles; ++kt) {
    for (int i = threadIdx.x; i < 64 * 2; i += 128) sA[i] = A[kt * 128 + i];
    for (int i = threadIdx.x; i < 256 * 2; i += 128) sB[i] = B[kt * 512 + i];
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    // Core matrices are 8 rows x 16 bytes; LBO = distance between the two K halves, SBO = next 8 rows.
    unsigned long long da = make_smem_desc(sA, 64 * 16, 128, 0);
    unsigned long long db = make_smem_desc(sB, 256 * 16, 128, 0);
    fence_operands(acc);
    wgmma_fence();
    wgmma_m64n256k16_f32_bf16(acc, da, db, kt > 0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(acc);
    __syncthreads();
  }
  float *c = C + (size_t)blockIdx.x * 64 * 256;
#pragma unroll
  for (int i = 0; i < 128; ++i) c[threadIdx.x * 128 + i] = acc[i];
}

// Mixed precisions: f16 accumulate (SS), f16 A from registers (RS), e4m3 (k32), tf32 (k8); two groups in flight.
extern "C" __global__ void __launch_bounds__(128) wgmma_precisions(const uint4 *__restrict__ in, float *__restrict__ out,
                                                                   unsigned *__restrict__ out16) {
  __shared__ __align__(1024) uint4 sA[64 * 64 / 8];
  __shared__ __align__(1024) uint4 sB[64 * 64 / 8];
  for (int i = threadIdx.x; i < 64 * 64 / 8; i += 128) {
    sA[i] = in[i];
    sB[i] = in[512 + i];
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  unsigned long long da = make_smem_desc(sA, 16, 1024, 1);
  unsigned long long db = make_smem_desc(sB, 16, 1024, 1);
  unsigned acc16[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) acc16[i] = 0u;
  float acc_rs[32], acc_f8[32], acc_tf[16];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc_rs[i] = acc_f8[i] = 0.f;
#pragma unroll
  for (int i = 0; i < 16; ++i) acc_tf[i] = 0.f;
  const uint4 areg4 = in[1024 + threadIdx.x];
  const unsigned areg[4] = {areg4.x, areg4.y, areg4.z, areg4.w};
  wgmma_fence();
  wgmma_m64n64k16_f16_f16(acc16, da, db, 0);
  wgmma_m64n64k16_f32_f16_rs(acc_rs, areg, db, 0);
  wgmma_commit();
  wgmma_m64n64k32_f32_e4m3(acc_f8, make_smem_desc(sA, 16, 1024, 1), make_smem_desc(sB, 16, 1024, 1), 0);
  wgmma_m64n32k8_f32_tf32(acc_tf, make_smem_desc(sA, 16, 1024, 1), make_smem_desc(sB, 16, 1024, 1), 0);
  wgmma_commit();
  wgmma_wait<1>();
  fence_operands(acc_rs);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 32; ++i) s += acc_rs[i];
  wgmma_wait<0>();
  fence_operands(acc_f8);
  fence_operands(acc_tf);
#pragma unroll
  for (int i = 0; i < 32; ++i) s += acc_f8[i];
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    s += acc_tf[i];
    out16[threadIdx.x * 16 + i] = acc16[i];
  }
  out[threadIdx.x] = s;
}
