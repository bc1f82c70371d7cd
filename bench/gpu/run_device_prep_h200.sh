#!/usr/bin/env bash
# One GPU call: the device-reference tests, `ptxevo eval` of the RMSNorm forward seed at its
# defaults and at a few alternative knob sets (all 11 benchmark shapes, with inputs and fp64
# references made on the GPU), the backward seed on its 4 benchmark shapes, and the torch
# comparison of the forward in CUDA-graph mode. Logs in $OUT/logs.tar.gz, tables in $OUT.
# Usage: bench/gpu/run_device_prep_h200.sh COMMIT
set -uo pipefail
commit="${1:?commit}"
out="${OUT:-/tmp/ptxevo-out}"; mkdir -p "$out/logs" "$out/evals"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Open MPI from the bundle only where the image has none (scripts/pack_gpu_bundle.sh).
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_SOURCE_DIR="$PWD" PTXEVO_BIN="$PWD/.gpu/ptxevo" PTXEVO_RESULTS_DIR="$out/logs" PTXEVO_CACHE_DIR=/tmp/ptxevo-cache
bin="$PWD/.gpu/ptxevo"
{ date -u +%FT%TZ; echo "commit: $commit"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  /usr/local/cuda/bin/nvcc --version | tail -2; } > "$out/env.txt" 2>&1
t0=$(date +%s)
timeout 120 .gpu/ptxevo_gpu_tests --gtest_filter='DeviceReferenceGpu.*:GpuEval.SeedPasses*' > "$out/logs/gpu_tests.log" 2>&1
echo "gpu tests rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^\[ *(OK|FAILED|SKIPPED|PASSED) *\]" "$out/logs/gpu_tests.log"
ev() {  # label spec timeout [eval options]
  local label="$1" spec="$2" lim="$3"; shift 3
  local s=$(date +%s)
  timeout "$lim" "$bin" eval "$spec" --json-out "$out/evals/$label.json" "$@" > "$out/logs/eval_$label.txt" 2>&1
  echo "eval $label rc=$? $(( $(date +%s)-s ))s"
}
f=kernels/rmsnorm/rmsnorm_fwd.spec
ev fwd_seed "$f" 150
ev fwd_cluster4 "$f" 90 --knobs CLUSTER=4
ev fwd_items8_cluster4 "$f" 90 --knobs ITEMS=8,CLUSTER=4
ev fwd_items8_cluster8 "$f" 90 --knobs ITEMS=8,CLUSTER=8
ev fwd_t1024_cluster4 "$f" 90 --knobs THREADS=1024,CLUSTER=4
ev fwd_t1024_items8_cluster4 "$f" 90 --knobs THREADS=1024,ITEMS=8,CLUSTER=4,MIN_BLOCKS=1
ev bwd_seed kernels/rmsnorm/rmsnorm_bwd.spec 150
python3 - "$out/evals" > "$out/evals.md" <<'PY'
import json, os, sys
d = sys.argv[1]
print("| eval | verdict | fitness vs seed | seconds (prep / gpu) | per-shape ms (N: candidate, fraction of floor) | reference |")
print("|---|---|---|---|---|---|")
for f in sorted(os.listdir(d)):
    try:
        r = json.load(open(os.path.join(d, f)))["report"]
    except Exception as e:
        print(f"| {f} | unreadable ({e}) | | | | |"); continue
    sh = [f"{s['shape']['N']}: {s['candidate_ms']['median']:.4f} ({s.get('fraction_of_floor', 0):.2f})"
          for s in r["shapes"] if s.get("candidate_ms")]
    fit = r.get("fitness")
    print(f"| {f[:-5]} | {r['verdict']}{': ' + r['reasons'][0][:100] if r['reasons'] else ''} | "
          f"{'' if fit is None else f'{fit:.3f}'} | {r.get('seconds', 0):.1f} ({r.get('prep_seconds', 0):.1f} / "
          f"{r.get('gpu_seconds', 0):.1f}) | {'; '.join(sh)} | {r['environment'].get('benchmark_reference', '')[:60]} |")
PY
cat "$out/evals.md"
"$bin" build "$f" --out /tmp/builds/seed > "$out/logs/build_seed.txt" 2>&1
OUT="$out/logs/torch" timeout 150 bench/gpu/run_rmsnorm_torch_h200.sh "$commit" seed=/tmp/builds/seed -- --graph > "$out/logs/torch_run.txt" 2>&1
echo "torch rc=$? $(( $(date +%s)-t0 ))s"; tail -n 16 "$out/logs/torch_run.txt"
cp "$out/logs/torch/rmsnorm_torch/"*.md "$out/" 2>/dev/null
(cd "$out" && tar czf logs.tar.gz logs && rm -rf logs)
