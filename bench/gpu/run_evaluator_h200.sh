#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with the bundle of scripts/pack_gpu_bundle.sh
# in .gpu/: evaluator unit tests, the GPU evaluator tests (seed, known-bad suite, faults, hang),
# `ptxevo eval` on the RMSNorm seed, and the build benchmark. Everything lands in $OUT.
# Usage: bench/gpu/run_evaluator_h200.sh COMMIT [MAX_BENCHMARK_SHAPES]
set -uo pipefail
commit="${1:-unknown}"
maxb="${2:--1}"
out="${OUT:-/tmp/ptxevo-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Open MPI from the bundle only where the image has none (scripts/pack_gpu_bundle.sh).
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_SOURCE_DIR="$PWD" PTXEVO_BIN="$PWD/.gpu/ptxevo" PTXEVO_RESULTS_DIR="$out" PTXEVO_CACHE_DIR=/tmp/ptxevo-cache
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  /usr/local/cuda/bin/nvcc --version | tail -2
  uname -r
} > "$out/env.txt" 2>&1
cat "$out/env.txt"
step() { echo "== $1"; shift; "$@"; echo "rc=$?"; }
step "unit tests" bash -c '.gpu/ptxevo_evaluator_tests --gtest_brief=1 > "$0/unit_evaluator.log" 2>&1; rc1=$?; .gpu/ptxevo_kernels_tests --gtest_brief=1 > "$0/unit_kernels.log" 2>&1; rc2=$?; tail -n 3 "$0/unit_evaluator.log" "$0/unit_kernels.log"; exit $((rc1 + rc2))' "$out"
step "gpu tests" bash -c '.gpu/ptxevo_gpu_tests > "$0/gpu_tests.log" 2>&1; rc=$?; grep -E "^\[ *(OK|FAILED|SKIPPED|PASSED) *\]|verdict|Failure" "$0/gpu_tests.log" | head -60; exit $rc' "$out"
step "eval seed" bash -c 'timeout 300 .gpu/ptxevo eval kernels/rmsnorm/rmsnorm_fwd.spec --max-benchmark-shapes "$1" --json-out "$0/eval_seed.json" 2>&1 | tee "$0/eval_seed.txt"' "$out" "$maxb"
step "build bench" bash -c '.gpu/build_bench --benchmark_min_time=2 > "$0/build_bench.txt" 2>&1; tail -6 "$0/build_bench.txt"' "$out"
