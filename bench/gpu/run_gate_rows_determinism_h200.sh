#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with the bundle of scripts/pack_gpu_bundle.sh
# in .gpu/: the gate's degenerate rows and its determinism runs.
#  1. The GPU evaluator tests: the known-bad suite (old and new) with their expected reasons,
#     through the built-in and the declared RMSNorm; the seed; the device reference.
#  2. The seeds of the RMSNorm specs through `ptxevo eval` (every shape gated, degenerate rows
#     on every shape; fp16 adds rows of the largest finite values).
#  3. Each new known-bad kernel before and after its loophole was closed: eps_dropped with and
#     without degenerate rows; large_m_shortcut with --max-benchmark-shapes 0 (now gated anyway).
#  4. The escape rate of the planted order-dependent kernel (known_bad/atomic_order_sum.cu):
#     `ptxevo eval --repeat N` (gate only, fresh inputs each time) with 2 determinism runs (the
#     old gate) and with 3 (the third beside occupied SMs).
#  5. The gate's cost, old (2 runs, no degenerate rows) against new, alternated, on the forward
#     seed with every shape gated and none timed.
# Everything lands in $OUT, as one archive. PARTS (default "tests seeds cost escapes") picks the
# steps, so the whole can be split over two calls of the 10-minute limit.
# Usage: [PARTS="..."] bench/gpu/run_gate_rows_determinism_h200.sh [REPEAT] [COST_REPS]
set -uo pipefail
repeat="${1:-100}"
reps="${2:-3}"
parts=" ${PARTS:-tests seeds cost escapes} "
want() { [[ "$parts" == *" $1 "* ]]; }
filter="${GTEST_FILTER_GATE:-GpuEval.KnownBad*:GpuEval.Seed*:DeclaredOpGpu.DeclaredRmsNorm*:DeviceReferenceGpu.*}"
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
ev() { timeout 300 .gpu/ptxevo eval "$@"; }

want tests && step "gpu tests" bash -c 'timeout 360 .gpu/ptxevo_gpu_tests --gtest_filter="$1" > "$0/gpu_tests.log" 2>&1; rc=$?; grep -E "^\[ *(OK|FAILED|SKIPPED|PASSED) *\]|: verdict|Failure" "$0/gpu_tests.log" | head -80; exit $rc' "$out" "$filter"

want seeds && for s in rmsnorm_fwd rmsnorm_bwd rmsnorm_fwd_fp16 rmsnorm_fwd_residual; do
  ev "kernels/rmsnorm/$s.spec" --max-benchmark-shapes 0 --json-out "$out/seed_$s.json" > "$out/seed_$s.txt" 2>&1
  echo "seed $s: $(grep -m1 -E '^verdict' "$out/seed_$s.txt") $(grep -m1 'reason:' "$out/seed_$s.txt" | cut -c1-200)" | tee -a "$out/seeds.txt"
done

want seeds && for mode in with without; do
  flag=(); [ "$mode" = without ] && flag=(--no-degenerate-rows)
  ev kernels/rmsnorm/rmsnorm_fwd.spec --source kernels/rmsnorm/known_bad/eps_dropped.cu --max-benchmark-shapes 0 \
    "${flag[@]}" > "$out/eps_dropped_$mode.txt" 2>&1
  echo "eps_dropped, $mode degenerate rows: $(grep -m1 -E '^verdict' "$out/eps_dropped_$mode.txt") $(grep -m1 'reason:' "$out/eps_dropped_$mode.txt" | cut -c1-200)" | tee -a "$out/before_after.txt"
done
want seeds && ev kernels/rmsnorm/rmsnorm_fwd.spec --source kernels/rmsnorm/known_bad/large_m_shortcut.cu --max-benchmark-shapes 0 \
  > "$out/large_m_shortcut.txt" 2>&1
want seeds && echo "large_m_shortcut, --max-benchmark-shapes 0: $(grep -m1 -E '^verdict' "$out/large_m_shortcut.txt") $(grep -m1 'reason:' "$out/large_m_shortcut.txt" | cut -c1-200)" | tee -a "$out/before_after.txt"

# The gate's cost: old (2 runs, no degenerate rows) and new, alternated, fresh inputs each time.
want cost && for i in $(seq 1 "$reps"); do
  ev kernels/rmsnorm/rmsnorm_fwd.spec --max-benchmark-shapes 0 --determinism-runs 2 --no-degenerate-rows \
    --json-out "$out/cost_old_$i.json" > /dev/null 2>&1
  ev kernels/rmsnorm/rmsnorm_fwd.spec --max-benchmark-shapes 0 --json-out "$out/cost_new_$i.json" > /dev/null 2>&1
done

# Escapes of the order-dependent kernel: 2 runs (old) then 3 (new), the same number of fresh inputs.
want escapes && for runs in 2 3; do
  timeout 270 .gpu/ptxevo eval kernels/rmsnorm/rmsnorm_fwd.spec --source kernels/rmsnorm/known_bad/atomic_order_sum.cu \
    --repeat "$repeat" --determinism-runs "$runs" --json-out "$out/escape_runs$runs.json" > "$out/escape_runs$runs.txt" 2>&1
  echo "atomic_order_sum, $runs determinism runs:"; tail -4 "$out/escape_runs$runs.txt"
done

python3 - "$out" "$reps" <<'PY'
import json, sys, statistics
out, reps = sys.argv[1], int(sys.argv[2])
print("\ngate cost (rmsnorm_fwd seed, every shape gated, none timed; median of runs)")
print("%-5s %8s %8s %5s" % ("gate", "gate s", "eval s", "n"))
rows = {}
for mode in ("old", "new"):
    g, t = [], []
    for i in range(1, reps + 1):
        try:
            r = json.load(open(f"{out}/cost_{mode}_{i}.json"))["report"]
        except Exception as e:
            print(mode, i, "missing:", e); continue
        if r.get("verdict") != "pass": print(mode, i, "verdict", r.get("verdict"), r.get("reasons", [])[:2])
        g.append(r.get("phase_seconds", {}).get("gate", float("nan"))); t.append(r.get("seconds", float("nan")))
    rows[mode] = (statistics.median(g) if g else float("nan"), statistics.median(t) if t else float("nan"), len(g))
    print("%-5s %8.3f %8.3f %5d" % (mode, *rows[mode]))
if rows.get("old", (0,))[0] and rows.get("new"):
    print("gate time new/old: %.2f" % (rows["new"][0] / rows["old"][0]))
print("\nescapes of known_bad/atomic_order_sum.cu (gate only, fresh inputs each evaluation)")
for runs in (2, 3):
    try:
        j = json.load(open(f"{out}/escape_runs{runs}.json"))
        print("determinism runs %d: %d of %d passed (escaped); failed by code %s; %.0f s" %
              (runs, j["passed"], j["repeat"], j["failed_by_code"], j["seconds"]))
    except Exception as e:
        print("determinism runs", runs, "missing:", e)
PY
echo "== seeds and before/after"; cat "$out/seeds.txt" "$out/before_after.txt" 2>/dev/null
name=$(basename "$0" .sh)
tar -C "$out" -czf "/tmp/$name.tar.gz" . && find "$out" -mindepth 1 -delete && mv "/tmp/$name.tar.gz" "$out/"
