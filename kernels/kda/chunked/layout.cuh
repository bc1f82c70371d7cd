// A part of kernels/kda/kda_fwd_chunked.cu, expanded into it where it is included (inside
// namespace kda_chunked, after the knobs and the parts before it); not a header of its own.
// The layout of the chunked kernels: compile-time constants (tile sizes, shared-memory and
// workspace offsets) for the fused kernel (FUSED = 1) or the prepare + recurrence pair, with the
// static checks that the knobs fit.

#if FUSED
// Compile-time constants as enumerators (namespace-scope constexpr variables would become .global
// variables in the PTX, and a candidate must have none).
enum : int {
  kD = 128,  // K = V
  kC = CHUNK,
  kBv = BV,
  kWarps = WARPS,
  kThreads = WARPS * 32,
  kRowsPerWarp = kD / WARPS,         // state rows per warp
  kMt = kRowsPerWarp / 16,           // m16 tiles of state rows per warp
  kNt = kBv / 8,                     // n8 tiles of value columns
  kOutTiles = (kC / 16) * kNt,       // 16 x 8 tiles of a chunk's C x BV outputs
  kTilesPerWarp = (kOutTiles + kWarps - 1) / kWarps,
  kLd = kD + 1,                      // fp32 [C][K] rows (odd stride: column walks hit distinct banks)
  kPadK = kD + 8,                    // bf16 [.][K] rows: fragment loads hit 32 distinct banks
  kPadC = kC + 8,                    // bf16 [.][C] rows
  kPairs = kC * (kC + 1) / 2,        // (i, j) pairs with j <= i of L and M
  // Lanes that share one pair's 128-channel dot product (adjacent lanes, combined by shuffles):
  // enough that the pairs fill whole rounds of the CTA's threads.
  kPairLanes = kC == 16 ? 8 : kC == 32 ? 4 : 1,
  kPairRounds = (kPairs * kPairLanes + kThreads - 1) / kThreads,
  kStageSegs = 48 + kBv / 8,         // 16-byte cp.async segments per token: q, k, g rows and v's slice
};

static_assert(kC == 16 || kC == 32 || kC == 64, "CHUNK: 16, 32 or 64");
static_assert(kBv == 16 || kBv == 32 || kBv == 64 || kBv == 128, "BV: 16, 32, 64 or 128");
static_assert(kWarps == 4 || kWarps == 8, "WARPS: 4 or 8");
static_assert(STAGE == 0 || STAGE == 1, "STAGE: 0 or 1");
static_assert(LM_TENSOR_CORES == 0 || LM_TENSOR_CORES == 1, "LM_TENSOR_CORES: 0 or 1");

// Dynamic shared memory, in bytes from the base (every offset a multiple of 16). Region A holds
// the fp32 pre-processed chunk (steps 1-3); region B (steps 4-6) reuses it.
enum : int {
  kOffQ = 0,                                   // fp32 [C][kLd]   q * scale / |q|
  kOffK = kOffQ + ((kC * kLd * 4 + 15) / 16) * 16,  // fp32 [C][kLd] k / |k|
  kOffG = kOffK + ((kC * kLd * 4 + 15) / 16) * 16,  // fp32 [C][kLd] log2-decays, then their cumsum
  kRegionA = kOffG + ((kC * kLd * 4 + 15) / 16) * 16,
  kOffU = 0,                                   // fp32 [C][BV]    U' then U              (region B)
  kOffUhi = kOffU + kC * kBv * 4,              // bf16 [BV][kPadC] U^T, high bf16 term    (region B)
  kOffUlo = kOffUhi + kBv * kPadC * 2,         // bf16 [BV][kPadC] U^T - high term        (region B)
  kRegionB = kOffUlo + kBv * kPadC * 2,
  kOffV = kRegionA,                            // fp32 [C][BV]    this CTA's value columns
  kOffBeta = kOffV + kC * kBv * 4,             // fp32 [C]
  kOffDec = kOffBeta + ((kC * 4 + 15) / 16) * 16,  // fp32 [K]  2^Gtot
  kOffKd = kOffDec + kD * 4,                   // bf16 [C][kPadK]
  kOffQd = kOffKd + kC * kPadK * 2,            // bf16 [C][kPadK]
  kOffKrT = kOffQd + kC * kPadK * 2,           // bf16 [K][kPadC]
  kOffShi = kOffKrT + kD * kPadC * 2,          // bf16 [BV][kPadK] S^T, high term
  kOffSlo = kOffShi + kBv * kPadK * 2,         // bf16 [BV][kPadK] S^T - high term
  kOffL = kOffSlo + kBv * kPadK * 2,           // fp32 [C][C]
  kOffMhi = kOffL + kC * kC * 4,               // bf16 [C][kPadC] M, high term
  kOffMlo = kOffMhi + kC * kPadC * 2,          // bf16 [C][kPadC] M - high term
  kOffRq = kOffMlo + kC * kPadC * 2,           // bf16 [C][K]  staged raw q      (STAGE = 1)
  kOffRk = kOffRq + kC * kD * 2,               // bf16 [C][K]  staged raw k
  kOffRg = kOffRk + kC * kD * 2,               // bf16 [C][K]  staged raw g
  kOffRv = kOffRg + kC * kD * 2,               // bf16 [C][BV] staged v slice
  kSmemBytes = STAGE ? kOffRv + kC * kBv * 2 : kOffRq,
};
static_assert(kRegionB <= kRegionA, "region B must fit in region A");
// The tensor-core L and M's partial sums (LM_TENSOR_CORES; 4 channel quarters x 2 x 16 x 16 fp32)
// use the S^T area before 3c.
static_assert(!KDA_LM_TC || 4 * 2 * 16 * 16 * 4 <= 2 * kBv * kPadK * 2,
              "LM_TENSOR_CORES scratch must fit the S^T area");
static_assert(kSmemBytes <= 232448, "at most 227 KB of shared memory per CTA");

#else
// FUSED = 0: the prepare + recurrence pair (header comment, "FUSED = 0"). kda_fwd_prepare runs
// with WARPS * 32 threads, kda_fwd_recurrence with BV / 16 warps (one warp per 16 value columns).
enum : int {
  kD = 128,  // K = V
  kC = CHUNK,
  kBv = BV,
  kNb = kC / 16,                   // 16-token blocks of a chunk
  kPThreads = WARPS * 32,          // prepare
  kPWarps = WARPS,
  kKs = KSPLIT,                    // recurrence warps a 16-column group (key channels split)
  kDw = kD / KSPLIT,               // key channels a recurrence warp holds
  kRWarps = BV / 16 * KSPLIT,      // recurrence
  kRThreads = kRWarps * 32,
  kLd = kD + 4,                    // fp32 [C][K] rows of the prepare (16-byte aligned: vector accesses)
  kPadK = kD + 8,                  // bf16 [.][K] rows in shared memory
  // Channels a round of the prepare's L / M factors holds: CHUNK 16 writes and multiplies them in
  // two rounds of 64 (half the factor area: five CTAs a SM instead of four), larger chunks in one.
  kFk = kC == 16 ? 64 : kD,
  kPadF = kFk + 8,                 // bf16 factor rows (stride 36 words: conflict-free fragments)
  kNtC = kC / 8,                   // n8 tiles over a chunk's tokens
  kKsC = kC / 16,                  // k16 steps over a chunk's tokens
  // The workspace of one (head, chunk slot), in bytes (every offset a multiple of 16); Qd, W0,
  // Kr^T and M in fragment order (swzf), U0^T with 16-byte chunks swizzled (swz).
  kWsQd = 0,                       // bf16 [C][K]  Qd = scale q 2^G
  kWsW = kWsQd + kC * kD * 2,      // bf16 [C][K]  W0 = (I + L)^-1 diag(beta) Kd
  kWsKrT = kWsW + kC * kD * 2,     // bf16 [K][C]  Kr^T = (k 2^(Gtot - G))^T
  kWsMhi = kWsKrT + kD * kC * 2,   // bf16 [C][C]  M (zero above the diagonal), high term
  kWsMlo = kWsMhi + kC * kC * 2,   // bf16 [C][C]  M - high term
  // WY_IN_RECURRENCE 1 and 2: kWsW holds -Kd = -k 2^G instead of W0, and there is no U0^T;
  // WY_IN_RECURRENCE 1: T' = (I + L)^-1 diag(beta) follows M (hi + lo, zero above the diagonal,
  // fragment order as M); WY_IN_RECURRENCE 2: kWsKrT holds (T'^T Kr)^T and kWsMhi / kWsMlo
  // M T' (T' folded in).
  kWsThi = kWsMlo + kC * kC * 2,   // bf16 [C][C]  T' (WY_IN_RECURRENCE 1), high term
  kWsTlo = kWsThi + kC * kC * 2,   // bf16 [C][C]  T' - high term
  kWsDec = WY_IN_RECURRENCE == 1 ? kWsTlo + kC * kC * 2 : kWsMlo + kC * kC * 2,  // fp32 [K]     2^Gtot
  kUBytes = U0_BITS / 8,           // U0^T elements: fp32 (U0_BITS 32) or bf16 (U0_BITS 16)
  kWsU = kWsDec + kD * 4,          // [V][C]  U0^T = ((I + L)^-1 diag(beta) V)^T
  kWsChunkBytes = kWsU + (WY_IN_RECURRENCE ? 0 : kD * kC * kUBytes),
  kWyInRecurrence = WY_IN_RECURRENCE,
  // Prepare shared memory (bytes).
  kPOffQ = 0,                                    // fp32 [C][kLd] scale q / |q|
  kPOffK = kPOffQ + (KDA_Q_REGS ? 0 : ((kC * kLd * 4 + 15) / 16) * 16),  // fp32 [C][kLd] k / |k|
  kPOffG = kPOffK + ((kC * kLd * 4 + 15) / 16) * 16,   // fp32 [C][kLd] log2-decays, then G
  kPOffBeta = kPOffG + ((kC * kLd * 4 + 15) / 16) * 16,  // fp32 [C]
  kPOffL = kPOffBeta + ((kC * 4 + 15) / 16) * 16,  // fp32 [C][C] L (beta folded in)
  kPOffXh = kPOffL + kC * kC * 4,                // bf16 [16][kPadF] left factors of one block, k
  kPOffXl = kPOffXh + 16 * kPadF * 2,
  kPOffQh = kPOffXl + 16 * kPadF * 2,            // bf16 [16][kPadF] left factors, q
  kPOffQl = kPOffQh + 16 * kPadF * 2,
  kPOffYh = kPOffQl + 16 * kPadF * 2,            // bf16 [C][kPadF] right factors
  kPOffYl = kPOffYh + kC * kPadF * 2,
  kPOffV = kPOffYl + kC * kPadF * 2,             // bf16 [C][K] raw v rows (step 5), copied in step 0
  // WY_IN_RECURRENCE 2 (step 5): M and T' in fp32 and T' as hi + lo bf16 [C][kLdT] after the factor
  // area, where v's rows were (the recurrence reads v).
  kPOffMf = kPOffV,
  kPOffTf = kPOffMf + kC * kC * 4,
  kPOffFTh = kPOffTf + kC * kC * 4,
  kPOffFTl = kPOffFTh + kC * (kC + 8) * 2,
  kPSmemBytes = kPOffV + (WY_IN_RECURRENCE == 1   ? 0
                          : WY_IN_RECURRENCE == 2 ? 2 * kC * kC * 4 + 2 * kC * (kC + 8) * 2
                                                  : kC * kD * 2),
  // WY_TENSOR_CORES = 1, step 5: T' = (I + L)^-1 diag(beta) as hi + lo bf16 [C][kLdT] over q's rows
  // (dead after step 4), Kd^T as hi + lo bf16 [K][kLdKd] over the factor area (free after step 4).
  // The pads keep the fragment loads conflict-free.
  kLdT = kC + 8,
  kLdKd = kC + 8,
  kPOffTh = kPOffQ,
  kPOffTl = kPOffTh + kC * kLdT * 2,
  kPOffKdh = kPOffXh,
  kPOffKdl = kPOffKdh + kD * kLdKd * 2,
  // The prepare's CTAs a SM as its shared memory allows (228 KB less 1 KB a CTA for the system),
  // asked of ptxas as __launch_bounds__'s minimum so that registers do not lower it further;
  // capped at 102 registers a thread (640 / threads CTAs: five of 128 threads; sm_90a's ptxas needs
  // 96) so that nothing spills; for sm_100a (compiled only, never run) at 128, where the 102 cap
  // spilled 64 bytes.
  kPSmemCtas = 233472 / (kPSmemBytes + 1024),
  kPCtaCap = KDA_ARCH_SM100 ? 512 / kPThreads : (KDA_Q_REGS ? 768 : 640) / kPThreads,
  // The softplus gate's diagonal blocks (one ex2 a term) need more: there the bound is left to ptxas.
  kPMinBlocks = KDA_GATE_SOFTPLUS || kPSmemCtas < 1 ? 1 : (kPSmemCtas < kPCtaCap ? kPSmemCtas : kPCtaCap),
  // Recurrence shared memory: STAGE ? 2 : 1 buffers of one chunk's operands, each the
  // workspace's own dense (swizzled, see swz) layout of Qd, W0, Kr^T, M and 2^Gtot, then this
  // CTA's BV rows of U0^T: two linear copies a chunk.
  kROffQd = kWsQd,
  kROffW = kWsW,
  kROffKrT = kWsKrT,
  kROffMhi = kWsMhi,
  kROffMlo = kWsMlo,
  kROffDec = kWsDec,
  kROffU = kWsU,
  // WY_IN_RECURRENCE: in U0^T's place the slice's C rows of v (bf16, BV values a row padded by 16
  // bytes, so that ldmatrix's eight rows of a phase hit distinct banks), copied from the input by
  // cp.async.
  kVRow = kBv * 2 + 16,
  kROffV = kWsU,
  kRStageBytes = kWsU + (WY_IN_RECURRENCE ? kC * kVRow : kBv * kC * kUBytes),
  kRBuffers = STAGE + 1,           // chunks in flight: STAGE ahead of the one computed
  kRSmemBytes = kRBuffers * kRStageBytes,
  kSegShared = kWsU / 16,             // 16-byte segments of Qd .. 2^Gtot
  kSegU = WY_IN_RECURRENCE ? 0 : kBv * kC * kUBytes / 16,  // and of the slice's U0^T rows
  // KSPLIT > 1: each warp's partial W^T and Qs^T (2 x C / 8 tiles of 4 floats a lane), two
  // buffers by chunk parity, after the stage buffers.
  kXFloats = 2 * (kC / 8) * 4,
  kROffX = kRSmemBytes,
  // out^T staging (CHUNK 16, KDA_OUT_STAGED): two buffers (by chunk parity) of C token rows of
  // the slice's BV bf16 values, each row padded by 16 bytes so that stmatrix's eight rows of a
  // phase hit distinct banks; a chunk's rows leave as 16-byte stores during the next chunk.
  kORow = kBv * 2 + 16,
  kOBufBytes = KDA_OUT_STAGED ? kC * kORow : 0,
  kROffO = kRSmemBytes + (KSPLIT > 1 ? 2 * kRWarps * 32 * kXFloats * 4 : 0),
  // BULK = 1: one mbarrier a stage buffer (8 bytes each, 32 reserved) after everything else.
  kROffBar = kROffO + 2 * kOBufBytes,
  kRSmemTotal = kROffBar + (BULK ? 32 : 0),
  // The recurrence's CTAs a SM that its registers must allow (CHUNK 16): at 168 registers (the
  // most that keep three 128-thread CTAs within the 64K register file) scenarios 3 and 6 run three
  // CTAs a SM; above it (the chunk loop unrolled by buffer: 170) only two. Larger chunks need
  // more registers than that cap leaves (they spill under it).
  kRMinBlocks = kC == 16 && 65536 / (kRThreads * 168) > 0 ? 65536 / (kRThreads * 168) : 1,
};
static_assert(kC == 16 || kC == 32 || kC == 64, "CHUNK: 16, 32 or 64");
static_assert(kBv == 16 || kBv == 32 || kBv == 64 || kBv == 128, "BV: 16, 32, 64 or 128");
static_assert(WARPS == 4 || WARPS == 8, "WARPS: 4 or 8");
static_assert(STAGE >= 0 && STAGE <= 3, "STAGE: 0 to 3 (the recurrence's chunks in flight ahead)");
static_assert(PREFETCH_CHUNKS == 0 || PREFETCH_CHUNKS == 2 || PREFETCH_CHUNKS == 4 || PREFETCH_CHUNKS == 8,
              "PREFETCH_CHUNKS: 0, 2, 4 or 8");
static_assert(LM_TENSOR_CORES == 0 || LM_TENSOR_CORES == 1, "LM_TENSOR_CORES: 0 or 1");
static_assert(U0_BITS == 16 || U0_BITS == 32, "U0_BITS: 16 or 32");
static_assert(KSPLIT == 1 || KSPLIT == 2 || KSPLIT == 4, "KSPLIT: 1, 2 or 4");
static_assert(WY_TENSOR_CORES == 0 || WY_TENSOR_CORES == 1, "WY_TENSOR_CORES: 0 or 1");
static_assert(STATE_HI_LO == 0 || STATE_HI_LO == 1, "STATE_HI_LO: 0 or 1");
static_assert(BULK == 0 || BULK == 1, "BULK: 0 or 1");
static_assert(U_HI_LO == 0 || U_HI_LO == 1, "U_HI_LO: 0 or 1");
static_assert(PREPARE_CTAS == 0 || BULK == 1,
              "PREPARE_CTAS > 0 needs BULK = 1 (the one issuing thread waits on each chunk's flag)");
static_assert(kRBuffers * 8 <= 32, "BULK: the mbarriers' reserved bytes");
static_assert(kPSmemBytes <= 232448 && kRSmemTotal <= 232448, "at most 227 KB of shared memory per CTA");
static_assert(3 * kC * kD * 2 <= kPOffV - kPOffXh, "the prepare's raw q, k, g rows must fit the factor area");
static_assert((kC * 64) % kPThreads == 0 && (16 * kD / 2) % kPThreads == 0 && kPThreads % 64 == 0,
              "the prepare's unrolled loops");
static_assert(!WY_TENSOR_CORES || 2 * kC * kLdT * 2 <= kPOffK - kPOffQ,
              "WY_TENSOR_CORES: T's two terms must fit q's rows");
static_assert((8 * kNb) % kPWarps == 0, "WY_TENSOR_CORES: whole W0 jobs a warp");
static_assert(kPOffKdl + kD * kLdKd * 2 <= kPOffV, "WY_TENSOR_CORES: Kd^T's two terms must fit the factor area");
static_assert(!KDA_WY_FOLD || kPOffKdl + kD * kLdKd * 2 <= kPOffV,
              "WY_IN_RECURRENCE 2: Kr^T's two terms must fit the factor area");
#endif  // FUSED
