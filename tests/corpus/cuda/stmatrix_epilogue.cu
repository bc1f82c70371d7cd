// corpus: archs=sm_90a,sm_100a
// Exercises: stmatrix.sync.aligned.m8n8.x4 (+ .trans, .x2) for Hopper epilogues: mma.sync accumulators -> bf16 -> shared via stmatrix -> coalesced 128-bit global stores; ldmatrix round trip.
#include <cuda_bf16.h>

__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<unsigned *>(&v);
}

// Each warp owns a 16x16 output tile held as two m16n8 f32 accumulators (8 floats per thread).
extern "C" __global__ void __launch_bounds__(128) epilogue_stmatrix(const float *__restrict__ acc_in,
                                                                   __nv_bfloat16 *__restrict__ out, int ldo) {
  __shared__ __align__(128) __nv_bfloat16 tile[4][16 * 16];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float *a = acc_in + (blockIdx.x * 128 + threadIdx.x) * 8;
  unsigned r[4];
  r[0] = pack_bf16x2(a[0], a[1]);  // rows 0-7,  cols 0-7
  r[1] = pack_bf16x2(a[2], a[3]);  // rows 8-15, cols 0-7
  r[2] = pack_bf16x2(a[4], a[5]);  // rows 0-7,  cols 8-15
  r[3] = pack_bf16x2(a[6], a[7]);  // rows 8-15, cols 8-15
  unsigned base = (unsigned)__cvta_generic_to_shared(&tile[warp][0]);
  // lane l supplies the address of row (l & 15), column block (l >> 4)
  unsigned addr = base + ((lane & 15) * 16 + (lane >> 4) * 8) * 2;
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3])
               : "memory");
  __syncwarp();
  // 16 rows x 32 bytes = 32 x 16-byte chunks: one per lane.
  int row = lane >> 1, ch = lane & 1;
  uint4 v = *reinterpret_cast<const uint4 *>(&tile[warp][row * 16 + ch * 8]);
  __nv_bfloat16 *dst = out + (size_t)(blockIdx.x * 64 + warp * 16 + row) * ldo + ch * 8;
  *reinterpret_cast<uint4 *>(dst) = v;
}

// Transposed store of the same fragments (column-major output) and x2 variant.
extern "C" __global__ void epilogue_stmatrix_trans(const unsigned *__restrict__ frags, unsigned *__restrict__ out) {
  __shared__ __align__(128) unsigned short tile[16 * 16];
  const int lane = threadIdx.x & 31;
  unsigned r0 = frags[lane], r1 = frags[32 + lane], r2 = frags[64 + lane], r3 = frags[96 + lane];
  unsigned base = (unsigned)__cvta_generic_to_shared(tile);
  unsigned addr = base + ((lane & 15) * 16 + (lane >> 4) * 8) * 2;
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
  __syncwarp();
  unsigned l0, l1, l2, l3;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(l0), "=r"(l1), "=r"(l2), "=r"(l3) : "r"(addr));
  __syncwarp();
  asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};" ::"r"(base + (lane & 15) * 32), "r"(l0 ^ l3),
               "r"(l1 ^ l2)
               : "memory");
  asm volatile("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};" ::"r"(base + 256 + (lane & 7) * 16), "r"(l2)
               : "memory");
  __syncwarp();
  out[lane] = reinterpret_cast<unsigned *>(tile)[lane] + reinterpret_cast<unsigned *>(tile)[lane + 64];
}
