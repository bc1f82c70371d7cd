#!/usr/bin/env bash
# Issue 4, RMSNorm backward against PyTorch on the H200, in one GPU call of under 4 minutes: builds
# the rmsnorm_bwd seed at its defaults with `.gpu/ptxevo build` (the bundle of
# scripts/pack_gpu_bundle.sh in .gpu/; the launch plan is in that binary), then times it with
# bench/rmsnorm/torch_bench.py next to the explicit fp32 torch formula (eager), torch.compile of it
# (QuACK's baseline) and torch.autograd.grad through F.rms_norm (backward only), on the four
# backward shapes of docs/targets.md, in CUDA-graph mode (both kernels of the plan captured), same
# inputs (a pool over 2x L2, real rstd), same timer, interleaved rounds. Prints the table.
# Results: $OUT/bwd_torch/results.{md,json} (written after every shape), $OUT/bwd_torch.log,
# $OUT/builds/bwd_seed/launch.json, $OUT/env.txt.
# Usage: bench/gpu/run_rmsnorm_bwd_torch_h200.sh [COMMIT] [TORCH_BENCH_OPTIONS ...]
#   e.g. bench/gpu/run_rmsnorm_bwd_torch_h200.sh abc1234 --shapes M=32768,N=16384
set -uo pipefail
commit=unknown
case "${1:-}" in ""|-*) ;; *) commit="$1"; shift ;; esac
[ "$commit" = unknown ] && [ -f .gpu/commit.txt ] && commit="$(cat .gpu/commit.txt)"
out="${OUT:-/tmp/ptxevo-out}"; mkdir -p "$out/builds"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Open MPI from the bundle only where the image has none (scripts/pack_gpu_bundle.sh).
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_SOURCE_DIR="$PWD" PTXEVO_CACHE_DIR=/tmp/ptxevo-cache
bin="$PWD/.gpu/ptxevo"; spec=kernels/rmsnorm/rmsnorm_bwd.spec
t0=$(date +%s); budget=225  # seconds for everything; the lead's limit is 240
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit (.gpu/commit.txt: $(cat .gpu/commit.txt 2>/dev/null || echo unknown))"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
} > "$out/env.txt" 2>&1
cat "$out/env.txt"
if ! grep -q rmsnorm_bwd_ring_cluster "$bin"; then
  echo "stale .gpu/ptxevo: its rmsnorm_bwd op has no ring entries; repack .gpu from this commit" | tee -a "$out/env.txt"
  exit 2
fi

seed="$out/builds/bwd_seed"
timeout 90 "$bin" build "$spec" --out "$seed" > "$out/builds/bwd_seed.txt" 2>&1
rc=$?
echo "build rc=$rc $(( $(date +%s) - t0 )) s"
cat "$out/builds/bwd_seed.txt"
[ $rc -eq 0 ] || exit 2
rm -f "$seed/kernel.ptx"

left=$(( budget - ($(date +%s) - t0) ))
echo "== torch_bench --graph --autograd ($left s left)"
timeout "$left" python3 -u bench/rmsnorm/torch_bench.py --op rmsnorm_bwd --commit "$commit" \
  --candidate "seed=$seed" --graph --autograd --out "$out/bwd_torch" "$@" > "$out/bwd_torch.log" 2>&1
rc=$?
echo "torch_bench rc=$rc $(( $(date +%s) - t0 )) s"
# The per-shape lines (times, checks), then the table (results.md is rewritten after every
# shape, so a run cut short by the timeout still shows its finished rows).
grep -E '^(==|  )' "$out/bwd_torch.log" | head -60
[ $rc -eq 0 ] || tail -25 "$out/bwd_torch.log"
[ -f "$out/bwd_torch/results.md" ] && cat "$out/bwd_torch/results.md"
exit "$rc"
