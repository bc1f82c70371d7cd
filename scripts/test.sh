#!/usr/bin/env bash
# Runs the test suite: every test (unit, PTX corpus round trip, fuzzing) in a clang build with
# AddressSanitizer and UBSan, except the compile- and arithmetic-bound ones named in $heavy below
# and the ptxas-bound corpus tests (label corpus), which run in the release build instead. Each test runs once: the whole unit suite in both builds
# took CI past 30 minutes on two cores (34.6 at 9f2cfc3). The sanitized run checks the same code
# more strictly; the release build (gcc, warnings as errors) still compiles all of it.
set -euo pipefail
cd "$(dirname "$0")/.."
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
export PATH="$CUDA_HOME/bin:$PATH"
jobs="$(nproc)"
# How long each phase took, for keeping CI under its time limit (printed at the end, and as it goes).
phases=()
phase_start=$SECONDS
phase() {
  phases+=("$(printf '%5d s  %s' $((SECONDS - phase_start)) "$1")")
  echo "test.sh: ${phases[-1]}"
  phase_start=$SECONDS
}

# Tests that only drive NVRTC, nvJitLink and ptxas over many knob combinations (7 minutes under
# ASan for RMSNorm; the KDA chunked and tcgen05 sweeps; the known-bad kernels' builds), and the
# fp64/fp32 models of the KDA chunked algorithm (minutes of pure arithmetic): sanitizing our side of
# them adds little. The fused KDA kernel's own source run on the host (KdaChunkedOnHost) stays
# sanitized at BV 128 (the widest global indexing; its shared memory has the emulation's own guard
# bytes in either build); its other five configurations (up to minutes each under ASan) are here. Of the prepare + recurrence
# pair's (KdaSplitOnHost), the CHUNK 16 / BV 32 one (KSPLIT 4, STAGE 3, PREFETCH_CHUNKS 4: the
# exchange and the deep staging) stays sanitized; the others are here (a namespace each, compiled out of the sanitized build). The prior's replay study (PriorStudy:
# hundreds of simulated campaigns) likewise, and the two pure-arithmetic sweeps that took 4-7
# minutes at the sanitized build's -O0 (RMSNorm's admitted knob space against its launch plans,
# the KDA op's plausible bugs against the fp64 reference). Also the other NVRTC-bound builds and
# arithmetic sweeps of the kernel and KDA executables, the cost model's sixteen campaigns and the CLI's
# LLM campaign (each 3-100x slower under ASan at -O0: 650 s of the sanitized run's 1,340 test-seconds
# in the fresh-clone CI of 0a228ac, 110 s here; that CI took 32.9 minutes, 30.4 after), and the
# CLI's six runs that build candidates through NVRTC (campaign, universe, eval, build, old knob names: 143 s under
# ASan, ~36 s here); the CLI's option and error paths stay sanitized. The campaigns under mpirun
# (MpiCampaign: the release binary on 1, 3 and 4 ranks, and with a rank killed) run here too, and
# the KDA backward's seed builds and its kernel on the host (KdaBwdOnHost: 4-7 s a configuration
# here, a minute or more under ASan) but for its short-shape case, which stays sanitized; of the
# chunked backward (KdaBwdChunkedOnHost), the tensor-core configurations (the emulated mma: 1-12 s
# each here; the defaults, SLICE_LOOP's, CHAIN_PREFETCH's and FINISH_IN_SLICES' among them) and the
# spec's long shapes (12 s). The kernels run on the host switch between their CUDA threads by
# fibers here and by ucontext under ASan (kernels/tests/kda_host_emulation.hpp): 5-10x slower there;
# the emulator's own tests run in both forms (KdaHostEmulationFibers here, ...Ucontext sanitized).
# No new parenthesised group in $heavy: CMake's regular expressions take at most nine (with more,
# ctest -R matched 2 tests and -E excluded none, so every heavy test ran sanitized).
heavy='^(KdaHostEmulationFibers\..*|RmsNormDeclared\..*|RmsNormBwdDeclared\..*|RmsNormFwdBuild\.(SeedBuildsForKnobAndDtypeCombinations|ASampleOfTheAdmittedKnobSpaceBuilds|KnownBadKernelsHaveHeadersAndBuild|SeedBuildsForHopperAndBlackwellWithDefaults|EveryPlannedEntryIsInTheModuleAndTheCubin|SmallStageCopiesTheRowsInBulkWithoutSpills|SmallWeightPrefetchPrefetchesBeforeTheReduction)|RmsNormFwdSpec\.ConstraintsImplyAValidPlan|RmsNormBwdSpec\.ConstraintsImplyAValidPlan|RmsNormBwdBuild\.ASampleOfTheAdmittedKnobSpaceBuilds|RmsNormFwdSeedEmulation\..*|KdaFwdOp\.(PlausibleBugsFailTheTolerance|FillRangesForGateInputs|ReferenceOnFilledInputsAgreesWithTheChunkedOne)|KdaFwdBuild\.ASampleOfTheAdmittedKnobSpaceBuilds|KdaFwdChunkedBuild\.(EveryAdmittedKnobAssignmentBuilds|CompilesForSm100a|SeedBuildsForEveryOptionCombination)|KdaFwdTcgen05Build\.CompilesAndPassesPtxasForSm100a|KdaBwdBuild\..*|KdaBwdDeviceReference\..*|KdaBwdOnHost\.SeedDefaultsLowerBoundGateBothStates|KdaBwdOnHost\.OutputsDoNotDependOnTheOrderOfTheCtas|KdaBwdOnHost\.DeviceReferenceAgreesWithTheHostsBackward|KdaBwdOnHost\.SmallestSlicesSoftplusGateNoStates|KdaBwdOnHost\.WidestSlicesLongSegmentsInitialStateOnly|KdaBwdOnHost\.SoftplusGateFinalStateGradientOnly|KdaBwdChunkedOnHost\.TensorCores.*|KdaBwdChunkedOnHost\.DefaultsLowerBoundGateBothStates|KdaBwdChunkedOnHost\.SliceLoop.*|KdaBwdChunkedOnHost\.ChainPrefetch.*|KdaBwdChunkedOnHost\.MmaBlock.*|KdaBwdChunkedOnHost\.FinishRegisters.*|KdaBwdChunkedOnHost\.ChainThreads.*|KdaBwdChunkedOnHost\.FinishInSlices.*|KdaBwdChunkedOnHost\.LatePrefetch.*|KdaBwdChunkedOnHost\.FinishTwoRows.*|KdaBwdChunkedOnHost\.FinishLean.*|KdaBwdChunkedOnHost\.OneBf16TermPerProductStaysWithinTheGatesTolerance|KdaBwdChunkedOnHost\.Chunk64OnTheSpecsLongestAndHeldOutShapes|KdaChunkedEmulation\..*|KdaDeviceReferenceOnHost\..*|KdaChunkedOnHost\.(MainSpecDefaults|SoftplusChunk32Bv16Staged|InitialStateOnlyChunk64EightWarps|NoStatesBv64EightWarps|LargestStagedLayoutChunk32Bv128)|KdaSplitOnHost\.(MainSpecDefaults|MainSpecDefaultsWyInPrepare|MainSpecDefaultsWyFolded|WyFoldedSoftplusFinalStateOnlyBv32EightWarpsUnbulked|WyInRecurrenceSoftplusFinalStateOnlyChunk32Bv32Prefetch2|MainSpecDefaultsSingleTokenDiagonal|MainSpecDefaultsOverlappedThreePrepareCtas|SoftplusChunk16Bv16UnstagedKsplit2WyTensorCoresStateBf16Bulk|MainSpecDefaultsWgmmaBulk|WgmmaSoftplusInitialStateOnlyChunk32Bv128UBf16|InitialStateOnlyChunk64Bv128NoLmTensorCoresWyTensorCores|SoftplusNoStatesChunk64Bv32WyTensorCores|Fp32U0Chunk32Bv32Ksplit2Stage2Prefetch2WyTensorCoresStateBf16UBf16)|PriorStudy\..*|CostModelTest\.ChoosingWithTheModelIsNoWorseThanProposalOrder|CliAgents\.(CampaignWithALocalServer|ModelLikeAnswersAreAllAccountedFor)|Cli\.EvalWithoutGpuBuildsAndSaysNothingRan|CliCampaign\.SaysWhichModeItRunsIn|CliUniverse\.WithoutAGpuBuildsOnlyAndTheStudyRefusesIt|CliBuild\.(WritesALaunchableCandidate|SelectsShapeClassesAndKnobs|TakesOldKnobNamesAsAliases)|CliFirstRun\.(EvalAndBuildTakeArch|ReplayDemoScoresEveryBuildAndTheDatabaseStandsAlone)|MpiCampaign\..*)$'

# The release build makes only the executables these tests live in (the sanitized build below
# compiles everything, with clang and warnings as errors); the check after the sanitized build
# fails if a heavy test lives anywhere else.
release_targets=(ptxevo ptxevo_kda_tests ptxevo_kda_bwd_tests ptxevo_kda_reference_tests ptxevo_kernels_tests ptxevo_prior_study_tests ptxevo_corpus_tests
  ptxevo_mutators_corpus_tests ptxevo_structural_passes_corpus_tests ptxevo_cost_model_tests ptxevo_cli_tests)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUDAToolkit_ROOT="$CUDA_HOME" >/dev/null
cmake --build build --parallel "$jobs" --target "${release_targets[@]}"
phase "release build"
ctest --test-dir build -L unit --output-on-failure --parallel "$jobs" -R "$heavy"
phase "release tests (heavy)"
# The PTX corpus round trip and the passes over the corpus (label corpus) also run here: they are
# ptxas-bound (121 s and 71 s under ASan, 84 s for all three here) and the parser stays under the
# sanitizers through the fuzzer and the IR unit tests.
ctest --test-dir build -L corpus --output-on-failure --parallel "$jobs"
phase "corpus tests"

# Line tables (not full debug info) are all a sanitizer report needs for file:line, and halve the
# objects; lld links the many sanitized test executables in a fraction of ld.bfd's time. -O0 with
# precompiled headers (CMakeLists.txt, PTXEVO_PCH) builds in half the CPU time of -O1 (795 s
# against 1,607 s here); the tests that then ran 3-8x slower are in $heavy or, for the KDA kernel on
# the host, compiled at -O1 (kernels/tests/CMakeLists.txt). The fuzzer runs 30 s here
# (PTXEVO_FUZZ_SECONDS): a regression check, not a fuzzing campaign.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
  -DCMAKE_CXX_FLAGS_DEBUG="-O0 -gline-tables-only" -DCMAKE_EXE_LINKER_FLAGS="-fuse-ld=lld" \
  -DPTXEVO_SANITIZE=ON -DPTXEVO_FUZZ=ON -DPTXEVO_FUZZ_SECONDS=30 -DPTXEVO_BUILD_BENCH=OFF \
  -DCUDAToolkit_ROOT="$CUDA_HOME" >/dev/null
cmake --build build-asan --parallel "$jobs"
phase "sanitized build"
# Every heavy or corpus test the sanitized build has (it builds every executable; some host
# configurations are compiled out there) must exist in the release build, or it would run nowhere.
list_tests() { ctest --test-dir "$1" -N "${@:2}" | sed -n 's/^ *Test *#[0-9]*: //p' | sort -u; }
missing="$(comm -23 <( (list_tests build-asan -R "$heavy" -L unit; list_tests build-asan -L corpus) | sort -u) \
  <( (list_tests build -R "$heavy" -L unit; list_tests build -L corpus) | sort -u))"
if [ -n "$missing" ]; then
  echo "test.sh: heavy or corpus tests outside the release targets (add their executable to release_targets):" >&2
  echo "$missing" >&2
  exit 1
fi
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# Everything else, sanitized.
ctest --test-dir build-asan --output-on-failure --parallel "$jobs" -E "$heavy" -LE corpus
phase "sanitized tests"
printf 'test.sh: %s\n' "${phases[@]}"
