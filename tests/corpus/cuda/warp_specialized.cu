// corpus: archs=sm_90a,sm_100a
// Exercises: warp-specialized producer/consumer kernel: setmaxnreg.dec/inc, elect.sync (predicate and elected-lane outputs), named barriers per role with a register barrier id, mbarrier full/empty ring with parity tracking, cp.async.bulk producer, griddepcontrol.wait/launch_dependents, shfl/cvta/red written as inline PTX.
// All helpers are macros (no calls, not even CUDA intrinsics): at --Ofast-compile=max NVRTC does not inline, and
// ptxas cannot allocate registers for a kernel that both calls functions and uses setmaxnreg.

#define STAGES 3
#define TILE 4096  // floats per stage (16 KiB)

#define SMEM_ADDR(out, ptr) \
  asm volatile("{\n\t.reg .u64 t;\n\tcvta.to.shared.u64 t, %1;\n\tcvt.u32.u64 %0, t;\n\t}" : "=r"(out) : "l"(ptr))

#define ELECT_ONE(out)                                                                                        \
  asm volatile("{\n\t.reg .b32 %%rx;\n\t.reg .pred %%px;\n\telect.sync %%rx|%%px, %1;\n\t@%%px mov.s32 %0, 1;\n\t}" \
               : "+r"(out)                                                                                    \
               : "r"(0xffffffffu))

#define ELECT_LANE(out) asm volatile("{\n\t.reg .pred p;\n\telect.sync %0|p, 0xffffffff;\n\t}" : "=r"(out))

#define MBAR_WAIT(bar, phase)                               \
  asm volatile(                                             \
      "{\n\t"                                               \
      ".reg .pred P1;\n\t"                                  \
      "LAB_WAIT:\n\t"                                       \
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n\t" \
      "@P1 bra DONE;\n\t"                                   \
      "bra LAB_WAIT;\n\t"                                   \
      "DONE:\n\t"                                           \
      "}" ::"r"(bar),                                       \
      "r"(phase)                                            \
      : "memory")

// 1 producer warpgroup (registers given away) + 2 consumer warpgroups (registers taken).
extern "C" __global__ void __launch_bounds__(384, 1) ws_producer_consumer(const float *__restrict__ x, float *__restrict__ y,
                                                                          float *__restrict__ partial, int ntiles) {
  extern __shared__ __align__(128) float ring[];  // STAGES * TILE floats
  __shared__ __align__(8) unsigned long long full_bar[STAGES], empty_bar[STAGES];
  unsigned full_a[STAGES], empty_a[STAGES], ring_a;
#pragma unroll
  for (int s = 0; s < STAGES; ++s) {
    SMEM_ADDR(full_a[s], &full_bar[s]);
    SMEM_ADDR(empty_a[s], &empty_bar[s]);
  }
  SMEM_ADDR(ring_a, ring);
  int warp_idx;  // canonical (warp-uniform) warp index
  asm volatile("shfl.sync.idx.b32 %0, %1, 0, 0x1f, 0xffffffff;" : "=r"(warp_idx) : "r"((int)(threadIdx.x / 32)));
  const int wg = warp_idx / 4;
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(full_a[s]) : "memory");
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 2;" ::"r"(empty_a[s]) : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  asm volatile("bar.sync 0;" ::: "memory");
  // Wait for the previous kernel in the stream (programmatic dependent launch) before reading x.
  asm volatile("griddepcontrol.wait;" ::: "memory");

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;" ::: "memory");
    unsigned elected = 0;
    if (warp_idx == 0) ELECT_ONE(elected);
    if (elected) {
      for (int t = 0; t < ntiles; ++t) {
        const int s = t % STAGES;
        if (t >= STAGES) MBAR_WAIT(empty_a[s], ((t / STAGES) - 1) & 1);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(full_a[s]), "r"(TILE * 4) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                         ring_a + s * TILE * 4),
                     "l"(x + ((size_t)blockIdx.x * ntiles + t) * TILE), "r"(TILE * 4), "r"(full_a[s])
                     : "memory");
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;" ::: "memory");
    const int ctid = threadIdx.x - 128;  // 0..255
    float acc = 0.f;
    for (int t = 0; t < ntiles; ++t) {
      const int s = t % STAGES;
      MBAR_WAIT(full_a[s], (t / STAGES) & 1);
      const float4 *src = reinterpret_cast<const float4 *>(ring + s * TILE);
      float4 *dst = reinterpret_cast<float4 *>(y + ((size_t)blockIdx.x * ntiles + t) * TILE);
#pragma unroll
      for (int i = ctid; i < TILE / 4; i += 256) {
        float4 v = src[i];
        v.x = v.x > 0.f ? v.x : 0.f;
        v.y = v.y > 0.f ? v.y : 0.f;
        v.z = v.z > 0.f ? v.z : 0.f;
        v.w = v.w > 0.f ? v.w : 0.f;
        acc += v.x + v.y + v.z + v.w;
        dst[i] = v;
      }
      // consumers of this warpgroup are done with the stage -> one arrival per warpgroup
      asm volatile("bar.sync %0, 128;" ::"r"(wg) : "memory");
      if ((ctid & 127) == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(empty_a[s]) : "memory");
    }
#pragma unroll
    for (int o = 16; o; o >>= 1) {
      float t;
      asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(t) : "f"(acc), "r"(o));
      acc += t;
    }
    unsigned leader;
    ELECT_LANE(leader);
    if ((threadIdx.x & 31) == leader)
      asm volatile("red.global.add.f32 [%0], %1;" ::"l"(partial + blockIdx.x), "f"(acc) : "memory");
  }
  // Allow the dependent grid to start its prologue.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
