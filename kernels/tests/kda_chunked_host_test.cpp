// kda_fwd_chunked.cu's fused kernel (FUSED = 1) run on the CPU through the emulation of
// kda_host_emulation.hpp (what it catches is described there): six configurations covering both
// gates, every state combination, CHUNK 16/32/64, BV 16-128, WARPS 4/8, STAGE 0-1 and
// LM_TENSOR_CORES.

#include <gtest/gtest.h>

#include "kernels/tests/kda_host_emulation.hpp"


#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-variable"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wpedantic"

// The sanitized build (scripts/test.sh) runs only configuration 3 of this file; the others run
// in the release build. Compiling them under ASan cost ~100 s of CI's two cores.
#if defined(PTXEVO_SANITIZED)
#define PTXEVO_SANITIZED_SKIP 1
#else
#define PTXEVO_SANITIZED_SKIP 0
#endif

// Configuration 0: the main spec's defaults (lower-bound gate, both states, CHUNK 16, BV 32,
// WARPS 4, STAGE 1, LM_TENSOR_CORES 1).
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 16
#define BV 32
#define WARPS 4
#define STAGE 1
#define LM_TENSOR_CORES 1
#if !PTXEVO_SANITIZED_SKIP
#define KDA_HOST_NS cfg0
#include "kernels/tests/kda_host_instance.inc"
#endif
#undef KDA_GATE_SOFTPLUS
#undef HAS_INITIAL_STATE
#undef HAS_FINAL_STATE
#undef CHUNK
#undef BV
#undef WARPS
#undef STAGE
#undef LM_TENSOR_CORES

// Configuration 1: softplus gate (direct L and M), both states, CHUNK 32, BV 16, WARPS 4, STAGE 1.
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 16
#define WARPS 4
#define STAGE 1
#define LM_TENSOR_CORES 0
#if !PTXEVO_SANITIZED_SKIP
#define KDA_HOST_NS cfg1
#include "kernels/tests/kda_host_instance.inc"
#endif
#undef KDA_GATE_SOFTPLUS
#undef HAS_INITIAL_STATE
#undef HAS_FINAL_STATE
#undef CHUNK
#undef BV
#undef WARPS
#undef STAGE
#undef LM_TENSOR_CORES

// Configuration 2: lower-bound gate, initial state only, CHUNK 64, BV 32, WARPS 8, STAGE 0.
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 0
#define CHUNK 64
#define BV 32
#define WARPS 8
#define STAGE 0
#define LM_TENSOR_CORES 0
#if !PTXEVO_SANITIZED_SKIP
#define KDA_HOST_NS cfg2
#include "kernels/tests/kda_host_instance.inc"
#endif
#undef KDA_GATE_SOFTPLUS
#undef HAS_INITIAL_STATE
#undef HAS_FINAL_STATE
#undef CHUNK
#undef BV
#undef WARPS
#undef STAGE
#undef LM_TENSOR_CORES

// Configuration 3: softplus gate, final state only, CHUNK 16, BV 128, WARPS 8, STAGE 0.
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 0
#define HAS_FINAL_STATE 1
#define CHUNK 16
#define BV 128
#define WARPS 8
#define STAGE 0
#define LM_TENSOR_CORES 1
#define KDA_HOST_NS cfg3
#include "kernels/tests/kda_host_instance.inc"
#undef KDA_GATE_SOFTPLUS
#undef HAS_INITIAL_STATE
#undef HAS_FINAL_STATE
#undef CHUNK
#undef BV
#undef WARPS
#undef STAGE
#undef LM_TENSOR_CORES

// Configuration 4: lower-bound gate, no states, CHUNK 16, BV 64, WARPS 8, STAGE 1,
// LM_TENSOR_CORES 1.
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 0
#define HAS_FINAL_STATE 0
#define CHUNK 16
#define BV 64
#define WARPS 8
#define STAGE 1
#define LM_TENSOR_CORES 1
#if !PTXEVO_SANITIZED_SKIP
#define KDA_HOST_NS cfg4
#include "kernels/tests/kda_host_instance.inc"
#endif
#undef KDA_GATE_SOFTPLUS
#undef HAS_INITIAL_STATE
#undef HAS_FINAL_STATE
#undef CHUNK
#undef BV
#undef WARPS
#undef STAGE
#undef LM_TENSOR_CORES

// Configuration 5: the largest layout the spec admits with staging (CHUNK 32, BV 128, WARPS 8,
// STAGE 1: 201 KB), lower-bound gate without LM_TENSOR_CORES, both states.
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 128
#define WARPS 8
#define STAGE 1
#define LM_TENSOR_CORES 0
#if !PTXEVO_SANITIZED_SKIP
#define KDA_HOST_NS cfg5
#include "kernels/tests/kda_host_instance.inc"
#endif
#undef KDA_GATE_SOFTPLUS
#undef HAS_INITIAL_STATE
#undef HAS_FINAL_STATE
#undef CHUNK
#undef BV
#undef WARPS
#undef STAGE
#undef LM_TENSOR_CORES

#undef LMTERMS
#undef U_HI_LO
#undef KDA_GATE_SOFTPLUS
#undef HAS_INITIAL_STATE
#undef HAS_FINAL_STATE
#undef CHUNK
#undef BV
#undef WARPS
#undef STAGE
#undef LM_TENSOR_CORES
#undef FUSED
#undef U0_BITS
#undef PREPARE_CTAS
#undef WY_IN_RECURRENCE
#undef SEQSPLIT

#pragma GCC diagnostic pop
#undef __syncthreads
#undef threadIdx
#undef blockIdx
#undef gridDim

#include "kernels/tests/kda_host_harness.hpp"

namespace {

using namespace kda_host_test;

#if !PTXEVO_SANITIZED_SKIP
TEST(KdaChunkedOnHost, MainSpecDefaults) {
  // Plus the held-out batched rows of 333 tokens (20 full chunks and a partial one per row).
  check(KDA_CONFIG(cfg0, OpConfig{}, KdaFwdOp::chunked_fused_knob_defaults()), {shape(4, 333, 3, 4)});
}
#endif

#if !PTXEVO_SANITIZED_SKIP
TEST(KdaChunkedOnHost, SoftplusChunk32Bv16Staged) {
  check(KDA_CONFIG(
      cfg1, (OpConfig{{"gate", "softplus"}}),
      (Knobs{{"CHUNK", I{32}}, {"BV", I{16}}, {"WARPS", I{4}}, {"STAGE", I{1}}, {"LM_TENSOR_CORES", I{0}}})));
}
#endif

#if !PTXEVO_SANITIZED_SKIP
TEST(KdaChunkedOnHost, InitialStateOnlyChunk64EightWarps) {
  check(KDA_CONFIG(
      cfg2, (OpConfig{{"final_state", "false"}, {"lower_bound", "-2.5"}, {"scale", "0.125"}}),
      (Knobs{{"CHUNK", I{64}}, {"BV", I{32}}, {"WARPS", I{8}}, {"STAGE", I{0}}, {"LM_TENSOR_CORES", I{0}}})));
}
#endif

TEST(KdaChunkedOnHost, SoftplusFinalStateOnlyBv128) {
  // LM_TENSOR_CORES = 1 with the softplus gate: the kernel takes the direct path.
  check(KDA_CONFIG(
      cfg3, (OpConfig{{"gate", "softplus"}, {"initial_state", "false"}}),
      (Knobs{{"CHUNK", I{16}}, {"BV", I{128}}, {"WARPS", I{8}}, {"STAGE", I{0}}, {"LM_TENSOR_CORES", I{1}}})));
}

#if !PTXEVO_SANITIZED_SKIP
TEST(KdaChunkedOnHost, LargestStagedLayoutChunk32Bv128) {
  check(KDA_CONFIG(
      cfg5, OpConfig{},
      (Knobs{{"CHUNK", I{32}}, {"BV", I{128}}, {"WARPS", I{8}}, {"STAGE", I{1}}, {"LM_TENSOR_CORES", I{0}}})));
}
#endif

#if !PTXEVO_SANITIZED_SKIP
TEST(KdaChunkedOnHost, NoStatesBv64EightWarps) {
  check(KDA_CONFIG(
      cfg4, (OpConfig{{"initial_state", "false"}, {"final_state", "false"}}),
      (Knobs{{"CHUNK", I{16}}, {"BV", I{64}}, {"WARPS", I{8}}, {"STAGE", I{1}}, {"LM_TENSOR_CORES", I{1}}})));
}
#endif


}  // namespace
