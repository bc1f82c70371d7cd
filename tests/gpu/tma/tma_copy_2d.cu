// out = x through the bulk tensor copy engine: one 32x32 f32 tile per CTA, loaded with
// cp.async.bulk.tensor.2d into shared memory (completion on an mbarrier), stored with plain stores.
// The tensor map arrives as a 128-byte __grid_constant__ parameter built by the engine.
struct alignas(64) TensorMapBytes {
  unsigned long long words[16];
};

extern "C" __global__ void __launch_bounds__(THREADS) tma_copy_2d(const __grid_constant__ TensorMapBytes tmap,
                                                                  float* out, long long M, long long N) {
  __shared__ alignas(128) float tile[32 * 32];
  __shared__ alignas(8) unsigned long long bar;
  const int x0 = blockIdx.x * 32, y0 = blockIdx.y * 32;
  const unsigned bar_addr = static_cast<unsigned>(__cvta_generic_to_shared(&bar));
  const unsigned tile_addr = static_cast<unsigned>(__cvta_generic_to_shared(tile));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar_addr) : "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar_addr), "r"(32 * 32 * 4) : "memory");
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
            tile_addr),
        "l"(reinterpret_cast<unsigned long long>(&tmap)), "r"(x0), "r"(y0), "r"(bar_addr)
        : "memory");
  }
  unsigned done = 0;
  while (!done) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\tselp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(bar_addr)
        : "memory");
  }
  for (int i = threadIdx.x; i < 32 * 32; i += blockDim.x) {
    const int r = i / 32, c = i % 32;
    if (y0 + r < M && x0 + c < N) out[(y0 + r) * N + x0 + c] = tile[i];
  }
}
