#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with the bundle of scripts/pack_gpu_bundle.sh
# in .gpu/: a real campaign on the H200 (SPEC, default the RMSNorm forward) from the seed defaults
# for MINUTES, to
# measure candidates per GPU-hour and the GPU-busy fraction with the campaign's default timing
# (sequential stopping per shape). Then the cost of stopping early: the five best candidates are
# measured again by `ptxevo eval` with every one of the 30 paired samples on every shape, and
# their campaign fitness is printed beside the full one. Everything lands in $OUT.
# Usage: bench/gpu/run_throughput_h200.sh COMMIT MINUTES [extra campaign options]
# Env: BEST_EVALS (default 5) candidates re-measured with every sample at the end (0: none);
#      OUT_SUB: a sub-folder of $OUT for this run (several runs in one call);
#      SPEC (default kernels/rmsnorm/rmsnorm_fwd.spec): the campaign's spec;
#      PTXEVO_BIN (default .gpu/ptxevo): another build of ptxevo, e.g. an older commit's carried
#      beside the bundle, for a before/after pair on one machine (its commit: PTXEVO_BIN_COMMIT).
set -uo pipefail
commit="${1:?commit}"; minutes="${2:?minutes}"; shift 2
[ -f .gpu/commit.txt ] && commit="$(cat .gpu/commit.txt)"  # what the bundle was built from
[ -n "${PTXEVO_BIN:-}" ] && commit="${PTXEVO_BIN_COMMIT:-unknown (PTXEVO_BIN=$PTXEVO_BIN)}"
out="${OUT:-/tmp/ptxevo-out}${OUT_SUB:+/$OUT_SUB}"
mkdir -p "$out/logs"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Open MPI from the bundle only where the image has none (scripts/pack_gpu_bundle.sh).
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_CACHE_DIR=/tmp/ptxevo-cache
bin="$(realpath "${PTXEVO_BIN:-.gpu/ptxevo}")"
spec="${SPEC:-kernels/rmsnorm/rmsnorm_fwd.spec}"
db="$out/campaign.db"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit"
  echo "spec: $spec"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  /usr/local/cuda/bin/nvcc --version | tail -2
  echo "cores: $(nproc)"
} > "$out/env.txt" 2>&1
cat "$out/env.txt"
echo "== campaign ($minutes min)"
"$bin" --arch sm_90a "$spec" --db "$db" --minutes "$minutes" "$@" > "$out/campaign.txt" 2>&1
echo "rc=$?"; tail -n 8 "$out/campaign.txt"
"$bin" report --db "$db" --html "$out/report.html" > "$out/report.txt" 2>&1; echo "report rc=$?"
python3 - "$db" "$bin" "$spec" "$out" <<'PY'
# The figures of this run from its database (python3's sqlite3: the GPU image has no sqlite3 CLI).
import json, re, sqlite3, subprocess, sys
db, exe, spec, out = sys.argv[1:5]
c = sqlite3.connect(db)
n, gpu, timing, gate = c.execute("""SELECT count(*), avg(json_extract(report_json,'$.gpu_seconds')),
  avg(json_extract(report_json,'$.phase_seconds.timing')), avg(json_extract(report_json,'$.phase_seconds.gate'))
  FROM evaluations WHERE purpose='candidate' AND mode='gpu'""").fetchone()
f = lambda x: "-" if x is None else f"{x:.3f}"
print(f"== {n} candidate evaluations; GPU seconds each: {f(gpu)} (timing {f(timing)}, gate {f(gate)})")
phases = {}
for (rj,) in c.execute("SELECT report_json FROM evaluations WHERE purpose='candidate' AND mode='gpu'"):
    for k, v in json.loads(rj).get("phase_seconds", {}).items():
        phases.setdefault(k, []).append(v)
print("== wall seconds by phase, mean per evaluation: " +
      ", ".join(f"{k} {sum(v) / len(v):.3f}" for k, v in sorted(phases.items())))
print("== benchmark shapes: mean paired samples, mean CI width of the speedup (%)")
for shape, k, w in c.execute("""SELECT shape_json, avg(json_extract(timing_json,'$.speedup.n')),
    avg((speedup_ci_high-speedup_ci_low)/speedup)*100 FROM shape_results WHERE speedup IS NOT NULL GROUP BY 1 ORDER BY 1"""):
    print(f"{shape}: {k:5.1f} samples, CI {w:.2f}%")
print("== the five best again with every sample (ptxevo eval) against their campaign figure")
import os
rows = c.execute("""SELECT candidate_id, fitness, fitness_low, fitness_high FROM evaluations
  WHERE purpose='candidate' AND fitness IS NOT NULL ORDER BY fitness DESC LIMIT ?""",
  (int(os.environ.get("BEST_EVALS", "5")),)).fetchall()
for cid, f, lo, hi in rows:
    js = f"{out}/logs/eval_{cid}.json"
    subprocess.run(["timeout", "120", exe, "eval", spec, "--db", db, "--candidate", str(cid), "--json-out", js],
                   stdout=open(f"{out}/logs/eval_{cid}.txt", "w"), stderr=subprocess.STDOUT)
    try:
        r = json.load(open(js))["report"]
        full = r.get("fitness")
        shapes = [s for s in r.get("shapes", []) if s.get("speedup")]
        lo2 = 1.0; hi2 = 1.0
        import math
        if shapes:
            lo2 = math.exp(sum(math.log(s["speedup"]["ci_low"]) for s in shapes) / len(shapes))
            hi2 = math.exp(sum(math.log(s["speedup"]["ci_high"]) for s in shapes) / len(shapes))
        print(f"candidate {cid}: campaign {f:.4f} [{lo:.4f}, {hi:.4f}]  full 30 samples {full:.4f} [{lo2:.4f}, {hi2:.4f}] "
              f"verdict {r.get('verdict')}")
    except Exception as e:
        print(f"candidate {cid}: eval failed: {e}")
PY
(cd "$out" && gzip -k campaign.db && rm -f campaign.db campaign.db-wal campaign.db-shm && tar czf logs.tar.gz logs && rm -rf logs)
