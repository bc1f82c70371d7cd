#!/usr/bin/env bash
# One GPU call for the evaluator and RMSNorm evidence: the evaluator's GPU tests (seed against
# itself, known-bad suite, faults, hang, TMA), `ptxevo eval` of the forward seed on every shape
# and of the backward seed, and the forward seed against torch eager and torch.compile. Each step
# has its own time limit; all logs are packed into $OUT/logs.tar.gz, key results stay beside it.
# Usage: bench/gpu/run_checks_h200.sh COMMIT
set -uo pipefail
commit="${1:?commit}"
out="${OUT:-/tmp/ptxevo-out}"
mkdir -p "$out/logs"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Open MPI from the bundle only where the image has none (scripts/pack_gpu_bundle.sh).
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_SOURCE_DIR="$PWD" PTXEVO_BIN="$PWD/.gpu/ptxevo" PTXEVO_RESULTS_DIR="$out/logs" PTXEVO_CACHE_DIR=/tmp/ptxevo-cache
bin="$PWD/.gpu/ptxevo"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  /usr/local/cuda/bin/nvcc --version | tail -2
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' 2>&1
} > "$out/logs/env.txt" 2>&1
cat "$out/logs/env.txt"
t0=$(date +%s)
echo "== gpu tests"; timeout 240 .gpu/ptxevo_gpu_tests > "$out/logs/gpu_tests.log" 2>&1; echo "rc=$? ($(( $(date +%s) - t0 )) s)"
grep -E "^\[ *(OK|FAILED|SKIPPED|PASSED) *\]" "$out/logs/gpu_tests.log" | head -20
echo "== eval fwd seed (all shapes)"; timeout 200 "$bin" eval kernels/rmsnorm/rmsnorm_fwd.spec --json-out "$out/eval_fwd_seed.json" > "$out/logs/eval_fwd_seed.txt" 2>&1
echo "rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "verdict|benchmark|reason" "$out/logs/eval_fwd_seed.txt" | head -16
echo "== eval bwd seed"; timeout 120 "$bin" eval kernels/rmsnorm/rmsnorm_bwd.spec --json-out "$out/eval_bwd_seed.json" > "$out/logs/eval_bwd_seed.txt" 2>&1
echo "rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "verdict|benchmark|reason" "$out/logs/eval_bwd_seed.txt" | head -10
echo "== torch bench (seed)"
"$bin" build kernels/rmsnorm/rmsnorm_fwd.spec --out /tmp/builds/seed > "$out/logs/build_seed.txt" 2>&1
OUT="$out/logs" timeout 200 bench/gpu/run_rmsnorm_torch_h200.sh "$commit" seed=/tmp/builds/seed > "$out/logs/torch_bench_run.txt" 2>&1
echo "rc=$? ($(( $(date +%s) - t0 )) s)"; tail -n 20 "$out/logs/torch_bench_run.txt"
cp "$out/logs/rmsnorm_torch/"*.md "$out/" 2>/dev/null
(cd "$out" && tar czf logs.tar.gz logs && rm -rf logs)
