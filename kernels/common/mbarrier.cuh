// Hopper's (sm_90+) mbarrier and bulk-copy primitives, shared by the seed templates (the KDA
// chunked recurrence, the RMSNorm backward ring). A part, not a header: ptxevo expands it where a
// template includes it (evaluator/template_source.hpp), so it has no include guard and defines
// only functions (a template may include it inside its own namespace). Shared-memory operands are
// 32-bit shared-window addresses (__cvta_generic_to_shared). PTX ISA: "mbarrier",
// "cp.async.bulk".

// One arrival a phase (the issuing thread's expect_tx).
__device__ __forceinline__ void mbar_init(unsigned int bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
}
// The initialised barriers, visible to the copies' complete_tx (the async proxy).
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n\tfence.proxy.async.shared::cta;" ::: "memory");
}
// The arrive comes first, so the phase cannot complete before the byte count is set; a phase
// that expects 0 bytes completes by the arrive alone.
__device__ __forceinline__ void mbar_expect_tx(unsigned int bar, unsigned int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// `bytes` (a multiple of 16, both addresses 16-byte aligned) from global memory into shared
// memory on the copy engine; completion counted in bytes on `bar`.
__device__ __forceinline__ void bulk_copy(unsigned int dst, const void* src, unsigned int bytes, unsigned int bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
// Spins until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(unsigned int bar, unsigned int parity) {
  unsigned int done = 0;
  do {
    asm volatile(
        "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
