#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with the bundle of scripts/pack_gpu_bundle.sh
# in .gpu/: the ops declared in files (examples/ops). The declared-op GPU tests (seeds in every
# dtype, known-bad kernels, bad references), each example's seed through `ptxevo eval` on every
# shape, then a campaign on each example. Everything lands in $OUT (one tar.gz of the logs and
# databases, plus the summary).
# Usage: bench/gpu/run_declared_ops_h200.sh [BUDGET]
set -uo pipefail
budget="${1:-60}"
out="${OUT:-/tmp/ptxevo-out}"
work=/tmp/ptxevo-declared
rm -rf "$work" && mkdir -p "$out" "$work"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Open MPI from the bundle only where the image has none (scripts/pack_gpu_bundle.sh).
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_SOURCE_DIR="$PWD" PTXEVO_BIN="$PWD/.gpu/ptxevo" PTXEVO_RESULTS_DIR="$work" PTXEVO_CACHE_DIR=/tmp/ptxevo-cache
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(cat .gpu/commit.txt)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  /usr/local/cuda/bin/nvcc --version | tail -2
} > "$work/env.txt" 2>&1
cat "$work/env.txt"
step() { echo "== $1"; shift; "$@"; echo "rc=$?"; }
step "declared-op gpu tests" bash -c 'timeout 240 .gpu/ptxevo_gpu_tests --gtest_filter="DeclaredOpGpu.*" > "$0/gpu_tests.log" 2>&1; rc=$?; grep -E "^\[ *(OK|FAILED|SKIPPED|PASSED) *\]|: pass|: fail|: error|Failure" "$0/gpu_tests.log" | head -40; exit $rc' "$work"
for ex in gelu_bias row_argmax; do
  step "eval $ex seed" bash -c 'timeout 200 .gpu/ptxevo eval "examples/ops/$1/$1.spec" --json-out "$0/eval_$1.json" > "$0/eval_$1.txt" 2>&1; rc=$?; grep -E "verdict|reason|speedup|floor" "$0/eval_$1.txt" | head -12; exit $rc' "$work" "$ex"
done
for ex in gelu_bias row_argmax; do
  step "campaign $ex" bash -c 'timeout 300 .gpu/ptxevo "examples/ops/$1/$1.spec" --budget "$2" --db "$0/$1.db" > "$0/campaign_$1.txt" 2>&1; rc=$?; tail -12 "$0/campaign_$1.txt"; exit $rc' "$work" "$ex" "$budget"
done
tar -czf "$out/declared_ops.tar.gz" -C "$work" .
cp "$work/env.txt" "$out/"
