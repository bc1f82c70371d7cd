// corpus: archs=sm_90a,sm_100a
// Exercises: TMA: CUtensorMap passed as const __grid_constant__ param (64-byte aligned 128-byte opaque struct), prefetch.tensormap, cp.async.bulk.tensor.{2d,3d,5d} loads (tile, L2::cache_hint), 4-D im2col load, tensor stores and cp.reduce.async.bulk.tensor (add/max) with bulk_group, cp.async.bulk.prefetch.tensor, fence.proxy.tensormap::generic, tensormap.replace on a shared-memory copy.

struct alignas(64) CUtensorMap_ {
  unsigned long long opaque[16];
};

__device__ __forceinline__ unsigned smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ unsigned long long gaddr(const void *p) { return reinterpret_cast<unsigned long long>(p); }

__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned phase) {
  asm volatile(
      "{\n\t"
      ".reg .pred P1;\n\t"
      "TMA_WAIT:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n\t"
      "@!P1 bra TMA_WAIT;\n\t"
      "}" ::"r"(bar),
      "r"(phase)
      : "memory");
}

__device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap_ *map, int x, int y, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          smem_addr(dst)),
      "l"(gaddr(map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}

__device__ __forceinline__ void tma_load_3d_hint(void *dst, const CUtensorMap_ *map, int x, int y, int z, unsigned bar,
                                                 unsigned long long pol) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, "
      "%3, %4}], [%5], %6;" ::"r"(smem_addr(dst)),
      "l"(gaddr(map)), "r"(x), "r"(y), "r"(z), "r"(bar), "l"(pol)
      : "memory");
}

__device__ __forceinline__ void tma_store_2d(const CUtensorMap_ *map, int x, int y, const void *src) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(gaddr(map)), "r"(x),
               "r"(y), "r"(smem_addr(src))
               : "memory");
}

// Tiled copy-with-scale: load 64x64 bf16 tiles of A via 2-D TMA, scale in smem, store via TMA, accumulate into C via reduce.
extern "C" __global__ void __launch_bounds__(128) tma_tile_scale(const __grid_constant__ CUtensorMap_ tmap_in,
                                                                 const __grid_constant__ CUtensorMap_ tmap_out,
                                                                 const __grid_constant__ CUtensorMap_ tmap_acc,
                                                                 float scale) {
  __shared__ __align__(1024) unsigned short tile[64 * 64];
  __shared__ __align__(128) float ftile[32 * 32];
  __shared__ __align__(8) unsigned long long bar;
  const unsigned b = smem_addr(&bar);
  const int x0 = blockIdx.x * 64, y0 = blockIdx.y * 64;
  if (threadIdx.x == 0) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(gaddr(&tmap_in)) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(gaddr(&tmap_out)) : "memory");
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b) : "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(64 * 64 * 2) : "memory");
    tma_load_2d(tile, &tmap_in, x0, y0, b);
    asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];" ::"l"(gaddr(&tmap_in)), "r"(x0 + 64),
                 "r"(y0)
                 : "memory");
  }
  mbar_wait(b, 0);
  for (int i = threadIdx.x; i < 64 * 64; i += 128) {
    float f = __uint_as_float((unsigned)tile[i] << 16) * scale;
    tile[i] = (unsigned short)(__float_as_uint(f) >> 16);
  }
  for (int i = threadIdx.x; i < 32 * 32; i += 128) ftile[i] = __uint_as_float((unsigned)tile[i * 2] << 16);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    tma_store_2d(&tmap_out, x0, y0, tile);
    asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                     gaddr(&tmap_acc)),
                 "r"(blockIdx.x * 32), "r"(blockIdx.y * 32), "r"(smem_addr(ftile))
                 : "memory");
    asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.max.tile.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                     gaddr(&tmap_acc)),
                 "r"(blockIdx.x * 32 + 4096), "r"(blockIdx.y * 32), "r"(smem_addr(ftile))
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
  }
  __syncthreads();
}

// 3-D (batch, row, col) loads with cache hints, a 5-D tile load and a 4-D im2col load (conv input patches).
extern "C" __global__ void __launch_bounds__(128) tma_multi_dim(const __grid_constant__ CUtensorMap_ tmap3,
                                                                const __grid_constant__ CUtensorMap_ tmap5,
                                                                const __grid_constant__ CUtensorMap_ tmap_im2col,
                                                                float *__restrict__ out) {
  __shared__ __align__(1024) float buf3[2][32 * 32];
  __shared__ __align__(1024) float buf5[16 * 16];
  __shared__ __align__(1024) unsigned short patch[64 * 64];
  __shared__ __align__(8) unsigned long long bars[3];
  if (threadIdx.x < 3) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bars[threadIdx.x])) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long pol;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(&bars[0])), "r"(2 * 32 * 32 * 4)
                 : "memory");
    tma_load_3d_hint(buf3[0], &tmap3, 0, blockIdx.x * 32, blockIdx.y, smem_addr(&bars[0]), pol);
    tma_load_3d_hint(buf3[1], &tmap3, 32, blockIdx.x * 32, blockIdx.y, smem_addr(&bars[0]), pol);

    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(&bars[1])), "r"(16 * 16 * 4)
                 : "memory");
    asm volatile(
        "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, "
        "%6}], [%7];" ::"r"(smem_addr(buf5)),
        "l"(gaddr(&tmap5)), "r"(0), "r"(0), "r"((int)blockIdx.x), "r"((int)blockIdx.y), "r"(0), "r"(smem_addr(&bars[1]))
        : "memory");

    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(&bars[2])), "r"(64 * 64 * 2)
                 : "memory");
    unsigned short off_w = 1, off_h = 2;
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
        "%5}], [%6], {%7, %8};" ::"r"(smem_addr(patch)),
        "l"(gaddr(&tmap_im2col)), "r"(0), "r"((int)blockIdx.x * 4), "r"((int)blockIdx.y * 4), "r"(0),
        "r"(smem_addr(&bars[2])), "h"(off_w), "h"(off_h)
        : "memory");
  }
  mbar_wait(smem_addr(&bars[0]), 0);
  mbar_wait(smem_addr(&bars[1]), 0);
  mbar_wait(smem_addr(&bars[2]), 0);
  float s = 0.f;
  for (int i = threadIdx.x; i < 32 * 32; i += 128) s += buf3[0][i] - buf3[1][i];
  for (int i = threadIdx.x; i < 16 * 16; i += 128) s += buf5[i];
  for (int i = threadIdx.x; i < 64 * 64; i += 128) s += __uint_as_float((unsigned)patch[i] << 16);
  for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out + blockIdx.y * gridDim.x + blockIdx.x, s);
}

// Device-side tensor map update: copy the map to shared memory, replace the global address and a dimension,
// publish it to global memory and fence the tensormap proxy before use (sm_90a tensormap.replace).
extern "C" __global__ void tensormap_update(const __grid_constant__ CUtensorMap_ tmpl, CUtensorMap_ *__restrict__ out_map,
                                            const float *__restrict__ new_base, int new_dim0) {
  __shared__ __align__(128) CUtensorMap_ smap;
  if (threadIdx.x < 16) smap.opaque[threadIdx.x] = tmpl.opaque[threadIdx.x];
  __syncwarp();
  if (threadIdx.x == 0) {
    asm volatile("tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;" ::"r"(smem_addr(&smap)),
                 "l"(gaddr(new_base))
                 : "memory");
    asm volatile("tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 0, %1;" ::"r"(smem_addr(&smap)),
                 "r"(new_dim0)
                 : "memory");
    asm volatile("tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%0], 0, %1;" ::"r"(smem_addr(&smap)),
                 "l"((unsigned long long)new_dim0 * 4)
                 : "memory");
  }
  __syncwarp();
  if (threadIdx.x < 16) out_map->opaque[threadIdx.x] = smap.opaque[threadIdx.x];
  __syncwarp();
  if (threadIdx.x == 0) {
    asm volatile("fence.proxy.tensormap::generic.release.gpu;" ::: "memory");
    asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(gaddr(out_map)) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(gaddr(out_map)) : "memory");
  }
}
