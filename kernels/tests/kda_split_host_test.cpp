// kda_fwd_chunked.cu's prepare + recurrence pair (FUSED = 0) run on the CPU through the emulation
// of kda_host_emulation.hpp: both kernels in order through a NaN-poisoned workspace, over KSPLIT,
// STAGE, PREFETCH_CHUNKS, U0_BITS, WY_TENSOR_CORES, STATE_HI_LO, BULK, U_HI_LO, LMTERMS,
// MMA (sync / wgmma), PREPARE_CTAS, WY_IN_RECURRENCE and SEQSPLIT.

#include <gtest/gtest.h>

#include "kernels/tests/kda_host_emulation.hpp"


#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-variable"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wpedantic"

// The sanitized build (scripts/test.sh) runs only configuration S3 of this file; the others run
// in the release build. Compiling them under ASan cost ~100 s of CI's two cores.
#if defined(PTXEVO_SANITIZED)
#define PTXEVO_SANITIZED_SKIP 1
#else
#define PTXEVO_SANITIZED_SKIP 0
#endif

// Configuration S0: the main spec's defaults (FUSED 0, CHUNK 16, BV 64, WARPS 4, STAGE 2,
// LM_TENSOR_CORES 1, U0_BITS 16, WY_TENSOR_CORES 0, STATE_HI_LO 0, BULK 1, U_HI_LO 0, LMTERMS 1),
// both states.
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 16
#define BV 64
#define WARPS 4
#define STAGE 2
#undef BULK
#define BULK 1
#define LM_TENSOR_CORES 1
#undef FUSED
#define FUSED 0
#undef KSPLIT
#define KSPLIT 1
#undef PREFETCH_CHUNKS
#define PREFETCH_CHUNKS 0
#undef WY_TENSOR_CORES  // the .cu default (0) of an earlier include
#define WY_TENSOR_CORES 0
#undef STATE_HI_LO
#define STATE_HI_LO 0
#undef U0_BITS
#define U0_BITS 16
#undef U_HI_LO
#define U_HI_LO 0
#undef LMTERMS
#define LMTERMS 1
#if !PTXEVO_SANITIZED_SKIP
#define KDA_HOST_NS split0
#include "kernels/tests/kda_host_instance.inc"
#endif
#undef LMTERMS
#undef U_HI_LO
#undef BULK
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

// Configuration S1: softplus gate (diagonal blocks term by term), CHUNK 16, BV 16 (one-warp recurrence), WARPS 4, STAGE 0.
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 16
#define BV 16
#define WARPS 4
#define STAGE 0
#define LM_TENSOR_CORES 1
#undef FUSED  // the fused configurations left the .cu default (1) defined
#define FUSED 0
#undef KSPLIT  // an earlier include left the .cu default (1) defined
#define KSPLIT 2
#undef PREFETCH_CHUNKS
#define PREFETCH_CHUNKS 0
#undef WY_TENSOR_CORES  // the .cu default (0) of an earlier include
#define WY_TENSOR_CORES 1
#undef STATE_HI_LO  // the .cu default (1) of an earlier include
#define STATE_HI_LO 0
#undef BULK  // the .cu default (0) of an earlier include
#define BULK 1
#if !PTXEVO_SANITIZED_SKIP
#define KDA_HOST_NS split1
#include "kernels/tests/kda_host_instance.inc"
#endif
#undef BULK
#undef KDA_GATE_SOFTPLUS
#undef HAS_INITIAL_STATE
#undef HAS_FINAL_STATE
#undef CHUNK
#undef BV
#undef WARPS
#undef STAGE
#undef LM_TENSOR_CORES
#undef FUSED

// Configuration S2: lower-bound gate with LM_TENSOR_CORES 0, initial state only, CHUNK 64, BV 128
// (the largest recurrence layout, 213 KB), WARPS 4, STAGE 1.
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 0
#define CHUNK 64
#define BV 128
#define WARPS 4
#define STAGE 1
#define LM_TENSOR_CORES 0
#undef FUSED  // the fused configurations left the .cu default (1) defined
#define FUSED 0
#undef KSPLIT  // an earlier include left the .cu default (1) defined
#define KSPLIT 1
#undef PREFETCH_CHUNKS
#define PREFETCH_CHUNKS 0
#undef WY_TENSOR_CORES  // the .cu default (0) of an earlier include
#define WY_TENSOR_CORES 1
#undef STATE_HI_LO  // the .cu default (1) of an earlier include
#define STATE_HI_LO 1
#if !PTXEVO_SANITIZED_SKIP
#define KDA_HOST_NS split2
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
#undef FUSED

// Configuration S3: lower-bound gate, final state only, CHUNK 16, BV 32, WARPS 8, STAGE 3,
// LM_TENSOR_CORES 1, KSPLIT 4, PREFETCH_CHUNKS 4, BULK 1, LMTERMS 1 (the sanitized build's split
// configuration: its one-pass prepare with idle warps in the L / M products and M's exact diagonal
// reduced by eight warps, and the mbarrier / bulk-copy emulation under ASan).
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 0
#define HAS_FINAL_STATE 1
#define CHUNK 16
#define BV 32
#define WARPS 8
#define STAGE 3
#define LM_TENSOR_CORES 1
#undef FUSED  // the fused configurations left the .cu default (1) defined
#define FUSED 0
#undef KSPLIT  // an earlier include left the .cu default (1) defined
#define KSPLIT 4
#undef PREFETCH_CHUNKS
#define PREFETCH_CHUNKS 4
#undef WY_TENSOR_CORES  // the .cu default (0) of an earlier include
#define WY_TENSOR_CORES 0
#undef STATE_HI_LO  // the .cu default (1) of an earlier include
#define STATE_HI_LO 0
#undef BULK  // the .cu default (0) of an earlier include
#define BULK 1
#undef LMTERMS  // the .cu default (3) of an earlier include
#define LMTERMS 1
#define KDA_HOST_NS split3
#include "kernels/tests/kda_host_instance.inc"
#undef LMTERMS
#undef BULK
#undef KDA_GATE_SOFTPLUS
#undef HAS_INITIAL_STATE
#undef HAS_FINAL_STATE
#undef CHUNK
#undef BV
#undef WARPS
#undef STAGE
#undef LM_TENSOR_CORES
#undef FUSED

// Configuration S4: softplus gate, no states, CHUNK 64, BV 32, WARPS 8, STAGE 0.
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 0
#define HAS_FINAL_STATE 0
#define CHUNK 64
#define BV 32
#define WARPS 8
#define STAGE 0
#define LM_TENSOR_CORES 0
#undef FUSED  // the fused configurations left the .cu default (1) defined
#define FUSED 0
#undef KSPLIT  // an earlier include left the .cu default (1) defined
#define KSPLIT 1
#undef PREFETCH_CHUNKS
#define PREFETCH_CHUNKS 0
#undef WY_TENSOR_CORES  // the .cu default (0) of an earlier include
#define WY_TENSOR_CORES 1
#undef STATE_HI_LO  // the .cu default (1) of an earlier include
#define STATE_HI_LO 1
#if !PTXEVO_SANITIZED_SKIP
#define KDA_HOST_NS split4
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
#undef FUSED

// Configuration S5: U0 in fp32 (U0_BITS 32), lower-bound gate, both states, CHUNK 32, BV 32,
// WARPS 4, U^T as one bf16 term (U_HI_LO 0).
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 32
#define WARPS 4
#define STAGE 2
#define LM_TENSOR_CORES 1
#undef FUSED  // the fused configurations left the .cu default (1) defined
#define FUSED 0
#undef KSPLIT  // an earlier include left the .cu default (1) defined
#define KSPLIT 2
#undef PREFETCH_CHUNKS
#define PREFETCH_CHUNKS 2
#undef WY_TENSOR_CORES  // the .cu default (0) of an earlier include
#define WY_TENSOR_CORES 1
#undef STATE_HI_LO  // the .cu default (1) of an earlier include
#define STATE_HI_LO 0
#undef U0_BITS  // likewise U0_BITS (32)
#define U0_BITS 32
#undef U_HI_LO  // the .cu default (1) of an earlier include
#define U_HI_LO 0
#if !PTXEVO_SANITIZED_SKIP
#define KDA_HOST_NS split5
#include "kernels/tests/kda_host_instance.inc"
#endif
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

// Configuration W0: the main spec's split defaults with MMA = wgmma (the recurrence's state
// products on warpgroup MMAs, the workspace's B operands in wgmma's core-matrix layout; LMTERMS 3,
// which wgmma needs).
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 16
#define BV 64
#define WARPS 4
#define STAGE 2
#define LM_TENSOR_CORES 1
#define FUSED 0
#undef KSPLIT
#define KSPLIT 1
#undef PREFETCH_CHUNKS
#define PREFETCH_CHUNKS 0
#undef WY_TENSOR_CORES
#define WY_TENSOR_CORES 0
#undef STATE_HI_LO
#define STATE_HI_LO 0
#define U0_BITS 16
#undef MMA  // the .cu default (sync) of an earlier include
#define MMA wgmma
#undef BULK
#define BULK 1
#undef U_HI_LO
#define U_HI_LO 0
#undef LMTERMS  // the .cu default (3) of an earlier include
#define LMTERMS 3
#if !PTXEVO_SANITIZED_SKIP
#define KDA_HOST_NS wg0
#include "kernels/tests/kda_host_instance.inc"
#endif
#undef LMTERMS
#undef U_HI_LO
#undef BULK
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

// Configuration W1: MMA = wgmma with two warpgroups (BV 128), CHUNK 32 (m64n32 products, two
// 16-token steps), softplus gate, initial state only, STAGE 1, the substitution's WY form, fp32 U0,
// U^T as one bf16 term (U_HI_LO 0).
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 0
#define CHUNK 32
#define BV 128
#define WARPS 8
#define STAGE 1
#define LM_TENSOR_CORES 0
#define FUSED 0
#undef WY_TENSOR_CORES
#define WY_TENSOR_CORES 0
#define U0_BITS 32
#undef U_HI_LO
#define U_HI_LO 0
#if !PTXEVO_SANITIZED_SKIP
#define KDA_HOST_NS wg1
#include "kernels/tests/kda_host_instance.inc"
#endif
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
#undef MMA

// Configuration O0: the main spec's split defaults with PREPARE_CTAS 3 (three persistent prepare
// CTAs striding over the items, chunk flags between the prepare and the recurrence), STAGE 1 (the
// recurrence's chunk loop unrolled by its two buffers), LMTERMS 2 (the prepare's right factor as
// one bf16 term) and WY_IN_RECURRENCE 1 (the defaults': U = T' (V - Kd S) in the recurrence).
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 16
#define BV 64
#define WARPS 4
#define STAGE 1
#define LM_TENSOR_CORES 1
#define FUSED 0
#define U0_BITS 16
#undef WY_TENSOR_CORES
#define WY_TENSOR_CORES 0
#undef STATE_HI_LO
#define STATE_HI_LO 0
#undef BULK
#define BULK 1
#undef PREPARE_CTAS
#define PREPARE_CTAS 3
#undef U_HI_LO
#define U_HI_LO 0
#undef LMTERMS  // the .cu default (3) of an earlier include
#define LMTERMS 2
#undef WY_IN_RECURRENCE
#define WY_IN_RECURRENCE 1
#if !PTXEVO_SANITIZED_SKIP
#define KDA_HOST_NS ov0
#include "kernels/tests/kda_host_instance.inc"
#endif
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

// Configuration R0: the main spec's split defaults with WY_IN_RECURRENCE 1 (the prepare writes Kd
// and T', the recurrence forms U = T' (V - Kd S) from v's rows, copied by cp.async beside the bulk
// copy) and SEQSPLIT 16 (where a shape's chains are few the recurrence runs pass 1 (each segment
// from zero, its transition from the identity), the combine and pass 3).
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 16
#define BV 64
#define WARPS 4
#define STAGE 2
#define LM_TENSOR_CORES 1
#define FUSED 0
#define U0_BITS 16
#define PREPARE_CTAS 0
#define U_HI_LO 0
#define LMTERMS 1
#undef WY_IN_RECURRENCE  // the .cu default (0) of an earlier include
#define WY_IN_RECURRENCE 1
#undef SEQSPLIT  // the .cu default (1) of an earlier include
#define SEQSPLIT 16
#if !PTXEVO_SANITIZED_SKIP
#define KDA_HOST_NS wr0
#include "kernels/tests/kda_host_instance.inc"
#endif
#undef SEQSPLIT
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

// Configuration R1: WY_IN_RECURRENCE 1 with the softplus gate (the unfactored prepare), final state
// only, CHUNK 32 (two 16-token steps of V^T and T'), BV 32, WARPS 8, STAGE 1, per-thread copies
// (BULK 0), S and U as hi + lo terms (STATE_HI_LO 1, U_HI_LO 1), PREFETCH_CHUNKS 2.
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 0
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 32
#define WARPS 8
#define STAGE 1
#define LM_TENSOR_CORES 0
#define FUSED 0
#define U0_BITS 16
#define PREPARE_CTAS 0
#undef PREFETCH_CHUNKS
#define PREFETCH_CHUNKS 2
#undef STATE_HI_LO
#define STATE_HI_LO 1
#undef BULK
#define BULK 0
#define U_HI_LO 1
#define LMTERMS 3
#if !PTXEVO_SANITIZED_SKIP
#define KDA_HOST_NS wr1
#include "kernels/tests/kda_host_instance.inc"
#endif
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

// Configuration R2: the main spec's split defaults with WY_IN_RECURRENCE 2 (the prepare folds T'
// into Kr2 = T'^T Kr and M2 = M T'; the recurrence's updates take V - Kd S as it is).
#define KDA_GATE_SOFTPLUS 0
#define HAS_INITIAL_STATE 1
#define HAS_FINAL_STATE 1
#define CHUNK 16
#define BV 64
#define WARPS 4
#define STAGE 2
#define LM_TENSOR_CORES 1
#define FUSED 0
#define U0_BITS 16
#define PREPARE_CTAS 0
#undef PREFETCH_CHUNKS
#define PREFETCH_CHUNKS 0
#undef STATE_HI_LO
#define STATE_HI_LO 0
#undef BULK
#define BULK 1
#define U_HI_LO 0
#define LMTERMS 1
#undef WY_IN_RECURRENCE
#define WY_IN_RECURRENCE 2
#if !PTXEVO_SANITIZED_SKIP
#define KDA_HOST_NS wr2
#include "kernels/tests/kda_host_instance.inc"
#endif
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

// Configuration R3: WY_IN_RECURRENCE 2 with the softplus gate (M's diagonal block term by term into
// the fp32 M of the fold), final state only, BV 32, WARPS 8, STAGE 1, per-thread copies (BULK 0), S
// and U as hi + lo terms (STATE_HI_LO 1, U_HI_LO 1).
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 0
#define HAS_FINAL_STATE 1
#define CHUNK 16
#define BV 32
#define WARPS 8
#define STAGE 1
#define LM_TENSOR_CORES 1
#define FUSED 0
#define U0_BITS 16
#define PREPARE_CTAS 0
#undef STATE_HI_LO
#define STATE_HI_LO 1
#undef BULK
#define BULK 0
#define U_HI_LO 1
#define LMTERMS 3
#if !PTXEVO_SANITIZED_SKIP
#define KDA_HOST_NS wr3
#include "kernels/tests/kda_host_instance.inc"
#endif
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

// Configuration Q1: the sequence split (SEQSPLIT 4) with the softplus gate, final state only (pass
// 1's segment 0 from zero), CHUNK 32 (out stored from the accumulators: no staging), BV 32, WARPS 8,
// STAGE 1, per-thread copies (BULK 0), S and U as hi + lo terms (STATE_HI_LO 1, U_HI_LO 1).
#define KDA_GATE_SOFTPLUS 1
#define HAS_INITIAL_STATE 0
#define HAS_FINAL_STATE 1
#define CHUNK 32
#define BV 32
#define WARPS 8
#define STAGE 1
#define LM_TENSOR_CORES 0
#define FUSED 0
#define U0_BITS 16
#define PREPARE_CTAS 0
#undef STATE_HI_LO
#define STATE_HI_LO 1
#undef BULK
#define BULK 0
#define U_HI_LO 1
#define LMTERMS 3
#define WY_IN_RECURRENCE 1
#undef SEQSPLIT
#define SEQSPLIT 4
#if !PTXEVO_SANITIZED_SKIP
#define KDA_HOST_NS ss1
#include "kernels/tests/kda_host_instance.inc"
#endif
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

Knobs split_knobs(I chunk, I bv, I warps, I stage, I lm_tensor_cores, I u0_bits = 32, I ksplit = 1,
                  I prefetch_chunks = 0, I wy_tensor_cores = 0, I state_hi_lo = 1, I bulk = 0, I u_hi_lo = 1) {
  return {{"CHUNK", chunk},       {"BV", bv},           {"WARPS", warps},
          {"STAGE", stage},       {"LM_TENSOR_CORES", lm_tensor_cores},
          {"FUSED", I{0}},        {"U0_BITS", u0_bits}, {"KSPLIT", ksplit},
          {"PREFETCH_CHUNKS", prefetch_chunks},         {"WY_TENSOR_CORES", wy_tensor_cores},
          {"STATE_HI_LO", state_hi_lo},                 {"MMA", std::string("sync")},
          {"BULK", bulk},         {"PREPARE_CTAS", I{0}}, {"U_HI_LO", u_hi_lo}};
}

// The sequence split (SEQSPLIT > 1) on `shapes` alone, each checked to split.
template <typename Args>
void check_seq_split(const SplitConfig<Args>& c, std::int64_t split, const std::vector<Shape>& shapes) {
  for (const Shape& sh : shapes)
    EXPECT_GT(KdaFwdOp::seq_segments(ptxevo::kernels::kda_dims(sh), c.chunk, split), 1)
        << ptxevo::evaluator::shape_to_string(sh);
  check_split(c, shapes, true);
}

#if !PTXEVO_SANITIZED_SKIP
TEST(KdaSplitOnHost, MainSpecDefaults) {
  // (The held-out batched rows of 333 tokens, 4 x 3 heads, would split into 10 segments: the other
  // defaults' tests take them unsplit; the emulated combine makes them slow here.)
  Knobs defaults = split_knobs(16, 64, 4, 2, 1, 16, 1, 0, 0, 0, 1, 0);
  defaults["LMTERMS"] = I{1};
  defaults["WY_IN_RECURRENCE"] = I{1};
  defaults["SEQSPLIT"] = I{16};
  EXPECT_EQ(KdaFwdOp::chunked_knob_defaults(), defaults);
  const auto c = KDA_SPLIT_CONFIG(wr0, OpConfig{}, KdaFwdOp::chunked_knob_defaults());
  check_split(c);
  // The sequence split (SEQSPLIT 16): of the shapes above, 1 x 65 splits into 5 segments of one
  // chunk, 2 heads x {17, 33, 65} into 5, 4 heads x {1, 15, .., 65} into 4 (the short sequences'
  // last ones empty: S0 = 0, A = I); and (checked to split) two rows of 300 tokens and 2 heads into
  // 16 segments of 2 chunks, the last one empty.
  check_seq_split(c, 16, {shape(2, 300, 2, 2)});
}

// The defaults with W0 and U0 from the prepare (WY_IN_RECURRENCE 0).
TEST(KdaSplitOnHost, MainSpecDefaultsWyInPrepare) {
  Knobs k = KdaFwdOp::chunked_knob_defaults();
  k["SEQSPLIT"] = I{1};  // needs WY_IN_RECURRENCE 1, PREPARE_CTAS 0 and MMA sync
  k["WY_IN_RECURRENCE"] = I{0};
  check_split(KDA_SPLIT_CONFIG(split0, OpConfig{}, k), {shape(4, 333, 3, 4)});
}

// One token, one head: out is M_00 v alone, so its relative error is M_00's. With single bf16
// factors (LMTERMS 1) and no exact diagonal, a small q . k made that error large (H200: 8.3e-3;
// about one draw in ten would pass the op's 1e-2): 64 draws of it here.
TEST(KdaSplitOnHost, MainSpecDefaultsSingleTokenDiagonal) {
  const auto c = KDA_SPLIT_CONFIG(wr0, OpConfig{}, KdaFwdOp::chunked_knob_defaults());
  double worst = 0;
  for (std::uint64_t seed = 1; seed <= 64; ++seed) {
    const Outcome o = run_split(c, shape(1, 1, 1, 1), ptxevo::evaluator::all_distributions()[seed % 2], 7000 + seed);
    ASSERT_EQ(o.fault, "") << seed;
    worst = std::max(worst, o.out);
  }
  std::printf("wr0 at T = 1, 64 draws: worst out rel_l2 %.3g\n", worst);
  EXPECT_LT(worst, 5e-3);
}
#endif

#if !PTXEVO_SANITIZED_SKIP
TEST(KdaSplitOnHost, SoftplusChunk16Bv16UnstagedKsplit2WyTensorCoresStateBf16Bulk) {
  check_split(KDA_SPLIT_CONFIG(split1, (OpConfig{{"gate", "softplus"}}), split_knobs(16, 16, 4, 0, 1, 32, 2, 0, 1, 0, 1)));
}
#endif

#if !PTXEVO_SANITIZED_SKIP
TEST(KdaSplitOnHost, InitialStateOnlyChunk64Bv128NoLmTensorCoresWyTensorCores) {
  check_split(KDA_SPLIT_CONFIG(split2, (OpConfig{{"final_state", "false"}, {"lower_bound", "-2.5"}, {"scale", "0.125"}}),
                               split_knobs(64, 128, 4, 1, 0, 32, 1, 0, 1)),
              {shape(1, 300, 2, 1)});
}
#endif

TEST(KdaSplitOnHost, FinalStateOnlyChunk16Bv32Ksplit4Stage3Prefetch4StateBf16Bulk) {
  Knobs k = split_knobs(16, 32, 8, 3, 1, 32, 4, 4, 0, 0, 1);
  k["LMTERMS"] = I{1};
  check_split(KDA_SPLIT_CONFIG(split3, (OpConfig{{"initial_state", "false"}}), k));
}

#if !PTXEVO_SANITIZED_SKIP
TEST(KdaSplitOnHost, Fp32U0Chunk32Bv32Ksplit2Stage2Prefetch2WyTensorCoresStateBf16UBf16) {
  Knobs k = split_knobs(32, 32, 4, 2, 1, 32, 2, 2, 1, 0);
  k["U_HI_LO"] = I{0};
  check_split(KDA_SPLIT_CONFIG(split5, OpConfig{}, k));
}
#endif

#if !PTXEVO_SANITIZED_SKIP
TEST(KdaSplitOnHost, MainSpecDefaultsOverlappedThreePrepareCtas) {
  // Three persistent prepare CTAs stride over every (slot, head) item; the recurrence's waits are
  // checked against the flags (each released chunk once a value slice, nothing else).
  Knobs k = KdaFwdOp::chunked_knob_defaults();
  k["SEQSPLIT"] = I{1};  // needs WY_IN_RECURRENCE 1, PREPARE_CTAS 0 and MMA sync
  k["PREPARE_CTAS"] = I{3};
  k["STAGE"] = I{1};
  k["LMTERMS"] = I{2};
  check_split(KDA_SPLIT_CONFIG(ov0, OpConfig{}, k), {shape(4, 333, 3, 4)});
}
#endif

#if !PTXEVO_SANITIZED_SKIP
TEST(KdaSplitOnHost, MainSpecDefaultsWgmmaBulk) {
  Knobs k = KdaFwdOp::chunked_knob_defaults();
  k["SEQSPLIT"] = I{1};  // needs WY_IN_RECURRENCE 1, PREPARE_CTAS 0 and MMA sync
  k["MMA"] = std::string("wgmma");
  k["BULK"] = I{1};
  k["LMTERMS"] = I{3};
  k["WY_IN_RECURRENCE"] = I{0};
  check_split(KDA_SPLIT_CONFIG(wg0, OpConfig{}, k), {shape(4, 333, 3, 4)});
}
#endif

#if !PTXEVO_SANITIZED_SKIP
TEST(KdaSplitOnHost, WgmmaSoftplusInitialStateOnlyChunk32Bv128UBf16) {
  Knobs k = split_knobs(32, 128, 8, 1, 0, 32, 1, 0, 0, 0);
  k["MMA"] = std::string("wgmma");
  k["U_HI_LO"] = I{0};
  check_split(KDA_SPLIT_CONFIG(wg1, (OpConfig{{"gate", "softplus"}, {"final_state", "false"}}), k));
}
#endif

#if !PTXEVO_SANITIZED_SKIP
// The sequence split at CHUNK 32, down to 4 segments of one chunk (one head of 100 tokens).
TEST(KdaSplitOnHost, SequenceSplit4SoftplusFinalStateOnlyChunk32Bv32Unbulked) {
  Knobs k = split_knobs(32, 32, 8, 1, 0, 16, 1, 0, 0, 1, 0);
  k["WY_IN_RECURRENCE"] = I{1};
  k["SEQSPLIT"] = I{4};
  check_seq_split(KDA_SPLIT_CONFIG(ss1, (OpConfig{{"gate", "softplus"}, {"initial_state", "false"}}), k), 4,
                  {shape(1, 100, 1, 1), shape(2, 160, 2, 2)});
}
#endif

#if !PTXEVO_SANITIZED_SKIP
TEST(KdaSplitOnHost, MainSpecDefaultsWyFolded) {
  Knobs k = KdaFwdOp::chunked_knob_defaults();
  k["SEQSPLIT"] = I{1};  // needs WY_IN_RECURRENCE 1, PREPARE_CTAS 0 and MMA sync
  k["WY_IN_RECURRENCE"] = I{2};
  const auto c = KDA_SPLIT_CONFIG(wr2, OpConfig{}, k);
  check_split(c, {shape(4, 333, 3, 4)});
  double worst = 0;  // T = 1: out = M2_00 v, with M's exact diagonal folded
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    const Outcome o = run_split(c, shape(1, 1, 1, 1), ptxevo::evaluator::all_distributions()[seed % 2], 7100 + seed);
    ASSERT_EQ(o.fault, "") << seed;
    worst = std::max(worst, o.out);
  }
  EXPECT_LT(worst, 5e-3);
}

TEST(KdaSplitOnHost, WyFoldedSoftplusFinalStateOnlyBv32EightWarpsUnbulked) {
  Knobs k = split_knobs(16, 32, 8, 1, 1, 16, 1, 0, 0, 1, 0, 1);
  k["WY_IN_RECURRENCE"] = I{2};
  check_split(KDA_SPLIT_CONFIG(wr3, (OpConfig{{"gate", "softplus"}, {"initial_state", "false"}}), k));
}

TEST(KdaSplitOnHost, WyInRecurrenceSoftplusFinalStateOnlyChunk32Bv32Prefetch2) {
  Knobs k = split_knobs(32, 32, 8, 1, 0, 16, 1, 2, 0, 1, 0, 1);
  k["WY_IN_RECURRENCE"] = I{1};
  check_split(KDA_SPLIT_CONFIG(wr1, (OpConfig{{"gate", "softplus"}, {"initial_state", "false"}}), k));
}
#endif

#if !PTXEVO_SANITIZED_SKIP
TEST(KdaSplitOnHost, SoftplusNoStatesChunk64Bv32WyTensorCores) {
  check_split(KDA_SPLIT_CONFIG(split4, (OpConfig{{"gate", "softplus"}, {"initial_state", "false"}, {"final_state", "false"}}),
                               split_knobs(64, 32, 8, 0, 0, 32, 1, 0, 1)));
}
#endif


}  // namespace
