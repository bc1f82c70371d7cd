// The CUDA machine on the CPU itself (kda_host_emulation.hpp), in whichever form the build uses
// (fibers, or ucontext under AddressSanitizer): a barrier orders every thread's writes before any
// thread's reads after it; a barrier that not every thread reaches is reported as a deadlock; and a
// CTA run after a deadlocked one, on the same threads' stacks, runs normally.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/tests/kda_host_emulation.hpp"

// Named by the form, so that scripts/test.sh runs the fibers in the release build and ucontext in
// the sanitized one.
#if KDA_HOST_UCONTEXT
#define KDA_HOST_EMULATION_SUITE KdaHostEmulationUcontext
#else
#define KDA_HOST_EMULATION_SUITE KdaHostEmulationFibers
#endif

namespace {

TEST(KDA_HOST_EMULATION_SUITE, ABarrierOrdersWritesBeforeReads) {
  kda_host::g_cta.fault.clear();
  std::vector<int> slots(128, -1), seen(128, -1);
  kda_host::run_cta(128, {0, 0, 0}, 0, [&] {
    const int t = kda_host::g_cta.current;
    slots[static_cast<std::size_t>(t)] = t;
    kda_host::syncthreads();
    seen[static_cast<std::size_t>(t)] = slots[static_cast<std::size_t>((t + 37) % 128)];
  });
  EXPECT_EQ(kda_host::g_cta.fault, "");
  for (int t = 0; t < 128; ++t) EXPECT_EQ(seen[static_cast<std::size_t>(t)], (t + 37) % 128) << t;
}

TEST(KDA_HOST_EMULATION_SUITE, ABarrierSomeThreadsSkipIsADeadlockAndTheNextCtaRuns) {
  kda_host::g_cta.fault.clear();
  int past_barrier = 0;
  kda_host::run_cta(64, {0, 0, 0}, 0, [&] {
    if (kda_host::g_cta.current < 32) {
      kda_host::syncthreads();
      ++past_barrier;
    }
  });
  EXPECT_NE(kda_host::g_cta.fault.find("deadlock"), std::string::npos) << kda_host::g_cta.fault;
  EXPECT_EQ(past_barrier, 0);
  // The 32 threads left waiting are discarded when their stacks are reused.
  kda_host::g_cta.fault.clear();
  int ran = 0;
  kda_host::run_cta(64, {1, 0, 0}, 0, [&] {
    kda_host::syncthreads();
    kda_host::syncwarp();
    ++ran;
  });
  EXPECT_EQ(kda_host::g_cta.fault, "");
  EXPECT_EQ(ran, 64);
}

}  // namespace
