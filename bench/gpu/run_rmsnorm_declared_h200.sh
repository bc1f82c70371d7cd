#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with the bundle of scripts/pack_gpu_bundle.sh
# in .gpu/: the RMSNorm forward declared in a file (kernels/rmsnorm/rmsnorm_fwd.op.toml) beside
# the op compiled into ptxevo. The known-bad kernels through both (same verdicts and reason codes,
# the GPU test DeclaredOpGpu.DeclaredRmsNormRejectsTheKnownBadKernelsLikeTheBuiltIn), then the
# seed through `ptxevo eval` on both specs, alternated REPEATS times with the same input seed:
# per-shape times side by side. Everything lands in $OUT.
# Usage: bench/gpu/run_rmsnorm_declared_h200.sh [REPEATS] [OPS]   (OPS: "rmsnorm_fwd rmsnorm_bwd", the
# default; the known-bad kernels are forward kernels and run with rmsnorm_fwd)
set -uo pipefail
reps="${1:-3}"
ops="${2:-rmsnorm_fwd rmsnorm_bwd}"
out="${OUT:-/tmp/ptxevo-out}"
work=/tmp/ptxevo-rmsnorm-declared
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
if [[ " $ops " == *" rmsnorm_fwd "* ]]; then
  echo "== known-bad kernels, built-in and declared"
  timeout 300 .gpu/ptxevo_gpu_tests --gtest_filter="DeclaredOpGpu.DeclaredRmsNorm*" > "$work/known_bad.log" 2>&1
  echo "rc=$?"; grep -E "^\[ *(OK|FAILED|PASSED) *\]|Failure" "$work/known_bad.log" | head
fi
specs=""
for op in $ops; do specs="$specs $op ${op}_declared"; done
for i in $(seq 1 "$reps"); do
  for s in $specs; do
    timeout 200 .gpu/ptxevo eval "kernels/rmsnorm/$s.spec" --seed 7 --json-out "$work/eval_${s}_$i.json" > "$work/eval_${s}_$i.txt" 2>&1
    echo "$s run $i rc=$? $(grep -m1 '^verdict' "$work/eval_${s}_$i.txt")"
  done
done
python3 - "$work" "$reps" $ops <<'PY' | tee "$out/summary.txt"
import json, os, statistics, sys
w, reps, ops = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
for op in ops:
  times = {}
  for s in (op, op + "_declared"):
    for i in range(1, reps + 1):
      try:
        r = json.load(open(os.path.join(w, f"eval_{s}_{i}.json")))["report"]
      except Exception as e:
        print(s, i, "missing:", e); continue
      print(f"{s} run {i}: verdict {r['verdict']}, reference: {r.get('environment', {}).get('benchmark_reference', '?')[:60]}")
      for sh in r.get("shapes", []):
        c = sh.get("candidate_ms")
        if c:
          times.setdefault(json.dumps(sh["shape"], sort_keys=True), {}).setdefault(s, []).append(c["median"])
  print(f"{'shape':28} {'built-in ms (median of runs)':>30} {'declared ms':>12} {'ratio':>7}")
  ratios = []
  for k, v in times.items():
    a, b = statistics.median(v.get(op, [float("nan")])), statistics.median(v.get(op + "_declared", [float("nan")]))
    ratios.append(b / a)
    print(f"{k:28} {a:30.5f} {b:12.5f} {b / a:7.3f}")
  if ratios:
    print(f"{op}: declared / built-in: median {statistics.median(ratios):.3f}, range [{min(ratios):.3f}, {max(ratios):.3f}] over {len(ratios)} shapes")
PY
cp "$work/env.txt" "$out/"
tar -czf "$out/rmsnorm_declared.tar.gz" -C "$work" .
