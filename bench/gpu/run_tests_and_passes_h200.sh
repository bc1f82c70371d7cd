set -uo pipefail
out="$OUT"; mkdir -p "$out/logs"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Open MPI from the bundle only where the image has none (scripts/pack_gpu_bundle.sh).
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_SOURCE_DIR="$PWD" PTXEVO_BIN="$PWD/.gpu/ptxevo" PTXEVO_RESULTS_DIR="$out/logs" PTXEVO_CACHE_DIR=/tmp/ptxevo-cache
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; /usr/local/cuda/bin/nvcc --version | tail -2; } > "$out/logs/env.txt" 2>&1
t0=$(date +%s)
timeout 230 .gpu/ptxevo_gpu_tests > "$out/logs/gpu_tests.log" 2>&1; echo "gpu tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[ *(OK|FAILED|SKIPPED|PASSED) *\]" "$out/logs/gpu_tests.log" | head -20
OUT="$out" timeout 300 bench/gpu/run_passes_h200.sh "$1" 4 > "$out/logs/passes_run.txt" 2>&1; echo "passes rc=$? $(( $(date +%s)-t0 ))s"
(cd "$out" && tar czf logs.tar.gz logs && rm -rf logs)
cat "$out/passes.md"
