#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with the bundle of scripts/pack_gpu_bundle.sh
# in .gpu/: the gate's loophole checks. The GPU evaluator tests (the known-bad suite, old and
# new, with their expected reasons; the seed; faults; the watchdog; the device reference), the
# seeds of the RMSNorm forward and backward specs through `ptxevo eval` (every shape gated), and
# the guard pages' cost: the forward seed's gate time (--max-benchmark-shapes 0: every shape gated,
# none timed) with and without guard pages, alternated. Everything lands in $OUT.
# Usage: bench/gpu/run_gate_h200.sh [REPEATS]
set -uo pipefail
reps="${1:-3}"
filter="${GTEST_FILTER_GATE:-*}"  # a subset of the GPU tests, when device time is short
out="${OUT:-/tmp/ptxevo-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Open MPI from the bundle only where the image has none (scripts/pack_gpu_bundle.sh).
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_SOURCE_DIR="$PWD" PTXEVO_BIN="$PWD/.gpu/ptxevo" PTXEVO_RESULTS_DIR="$out" PTXEVO_CACHE_DIR=/tmp/ptxevo-cache
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(cat .gpu/commit.txt)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  /usr/local/cuda/bin/nvcc --version | tail -2
} > "$out/env.txt" 2>&1
cat "$out/env.txt"
step() { echo "== $1"; shift; "$@"; echo "rc=$?"; }
step "gpu tests" bash -c 'timeout 420 .gpu/ptxevo_gpu_tests --gtest_filter="$1" > "$0/gpu_tests.log" 2>&1; rc=$?; grep -E "^\[ *(OK|FAILED|SKIPPED|PASSED) *\]|verdict|Failure" "$0/gpu_tests.log" | head -60; exit $rc' "$out" "$filter"
for s in rmsnorm_fwd rmsnorm_bwd; do
  step "eval $s seed" bash -c 'timeout 300 .gpu/ptxevo eval "kernels/rmsnorm/$1.spec" --json-out "$0/eval_$1.json" > "$0/eval_$1.txt" 2>&1; rc=$?; grep -E "verdict|reason|FAIL" "$0/eval_$1.txt" | head -8; exit $rc' "$out" "$s"
done
# The out-of-bounds readers with and without guard pages: the loophole before, closed after.
for k in oob_read_end oob_read_start; do
  for mode in guard noguard; do
    flag=(); [ "$mode" = noguard ] && flag=(--no-guard-pages)
    timeout 300 .gpu/ptxevo eval kernels/rmsnorm/rmsnorm_fwd.spec --source "kernels/rmsnorm/known_bad/$k.cu" \
      --max-benchmark-shapes 0 "${flag[@]}" > "$out/oob_${k}_$mode.txt" 2>&1
    echo "$k $mode: $(grep -m1 -E '^verdict' "$out/oob_${k}_$mode.txt") $(grep -m1 'reason:' "$out/oob_${k}_$mode.txt" | cut -c1-160)" | tee -a "$out/oob_before_after.txt"
  done
done
# The guard pages' cost on the gate: same spec, fresh inputs each run, alternated.
for i in $(seq 1 "$reps"); do
  for mode in guard noguard; do
    flag=(); [ "$mode" = noguard ] && flag=(--no-guard-pages)
    timeout 300 .gpu/ptxevo eval kernels/rmsnorm/rmsnorm_fwd.spec --max-benchmark-shapes 0 "${flag[@]}" \
      --json-out "$out/cost_${mode}_$i.json" > /dev/null 2>&1
  done
done
python3 - "$out" "$reps" <<'PY'
import json, sys, statistics
out, reps = sys.argv[1], int(sys.argv[2])
rows = {}
for mode in ("guard", "noguard"):
    g, t = [], []
    for i in range(1, reps + 1):
        try:
            r = json.load(open(f"{out}/cost_{mode}_{i}.json"))["report"]
        except Exception as e:
            print(mode, i, "missing:", e); continue
        g.append(r.get("phase_seconds", {}).get("gate", float("nan")))
        print(mode, i, "guard_pages:", r.get("environment", {}).get("guard_pages", "?"))
        t.append(r.get("seconds", float("nan")))
        if r.get("verdict") != "pass": print(mode, i, "verdict", r.get("verdict"), r.get("reasons", [])[:2])
    rows[mode] = (statistics.median(g) if g else float("nan"), statistics.median(t) if t else float("nan"), len(g))
print("\nguard pages' cost (rmsnorm_fwd seed, every shape gated, none timed; median of %d)" % reps)
print("%-8s %10s %10s" % ("mode", "gate s", "eval s"))
for m, (g, t, n) in rows.items(): print("%-8s %10.3f %10.3f" % (m, g, t))
if "guard" in rows and "noguard" in rows and rows["noguard"][0] > 0:
    print("gate time ratio guard/noguard: %.3f" % (rows["guard"][0] / rows["noguard"][0]))
json.dump({m: {"gate_s": v[0], "eval_s": v[1], "runs": v[2]} for m, v in rows.items()}, open(f"{out}/guard_cost.json", "w"), indent=1)
PY
echo "== known-bad table"
python3 - "$out" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1] + "/gpu_eval_results.json"))
except Exception:
    import glob; fs = glob.glob(sys.argv[1] + "/*.json"); r = {}
    for f in fs:
        try:
            j = json.load(open(f))
            if isinstance(j, dict) and "known_bad" in j: r = j
        except Exception: pass
for k in r.get("known_bad", []):
    print("%-28s %-6s matched=%s %s" % (k["kernel"], k["verdict"], k["matched"], (k["reasons"] or [""])[0][:110]))
PY
# One archive back (the device returns at most 8 files).
name=$(basename "$0" .sh)
tar -C "$out" -czf "/tmp/$name.tar.gz" . && find "$out" -mindepth 1 -delete && mv "/tmp/$name.tar.gz" "$out/"
