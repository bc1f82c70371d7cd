#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with the bundle of scripts/pack_gpu_bundle.sh
# in .gpu/: the GPU confirmation of the learned prior's replay study (docs/prior_study.md,
# section 4). An "earlier" campaign on shape set A (bench/prior/rmsnorm_fwd_set_a.spec) fills a
# database; then, per seed, a cold campaign on set B (an empty database) and a warm one (a copy
# of the earlier database: its operator evidence, cost rows and best genomes carry over), at equal
# budgets, cold and warm back to back so drift hits both. The figures are the campaigns' own noisy
# measurements (the replay study scores stored medians): evaluations each needed to reach the
# cold run's best and 95% of its gain, from the evaluation order in the databases.
# Usage: bench/gpu/run_prior_confirm_h200.sh COMMIT BUDGET SEED [SEED ...]
#   A campaign of budget 96 takes about 2.5-3 minutes on the H200: the earlier one plus one seed
#   fits one 10-minute call. For more seeds, keep earlier.db from the returned campaigns.tar.gz and run again with
#   EARLIER_DB=path/to/earlier.db (it is copied, never changed; a .gz is unpacked first).
#   SPEC_B=path picks the cold/warm campaigns' spec (e.g. kernels/rmsnorm/rmsnorm_fwd_fp16.spec with
#   the bf16 campaign of bench/results/2026-11-30-h200-throughput-7b02051/run-5min as EARLIER_DB).
set -uo pipefail
commit="${1:?commit}"; budget="${2:?budget}"; shift 2
[ $# -ge 1 ] || { echo "give at least one seed" >&2; exit 2; }
[ -f .gpu/commit.txt ] && commit="$(cat .gpu/commit.txt)"
out="${OUT:-/tmp/ptxevo-out}${OUT_SUB:+/$OUT_SUB}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Open MPI from the bundle only where the image has none (scripts/pack_gpu_bundle.sh).
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_CACHE_DIR=/tmp/ptxevo-cache
bin="$PWD/.gpu/ptxevo"
spec_a=bench/prior/rmsnorm_fwd_set_a.spec
spec_b="${SPEC_B:-bench/prior/rmsnorm_fwd_set_b.spec}"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit"
  echo "budget: $budget; seeds: $*"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
} > "$out/env.txt" 2>&1
cat "$out/env.txt"

earlier="$out/earlier.db"
if [ -n "${EARLIER_DB:-}" ]; then
  case "$EARLIER_DB" in *.gz) gunzip -c "$EARLIER_DB" > /tmp/earlier_unpacked.db && EARLIER_DB=/tmp/earlier_unpacked.db ;; esac
  python3 -c "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d)" \
    "$EARLIER_DB" "$earlier" || exit 1
  echo "== earlier campaign (set A) from $EARLIER_DB"
else
  echo "== earlier campaign on set A (budget $budget, seed 1000)"
  "$bin" --arch sm_90a "$spec_a" --db "$earlier" --budget "$budget" --seed 1000 --no-final > "$out/earlier.txt" 2>&1
  echo "rc=$?"; tail -n 4 "$out/earlier.txt"
fi
for s in "$@"; do
  echo "== seed $s: cold on set B"
  "$bin" --arch sm_90a "$spec_b" --db "$out/cold_$s.db" --budget "$budget" --seed "$s" --no-final > "$out/cold_$s.txt" 2>&1
  echo "rc=$?"; tail -n 3 "$out/cold_$s.txt"
  echo "== seed $s: warm on set B (a copy of the earlier database)"
  python3 -c "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d)" \
    "$earlier" "$out/warm_$s.db"
  "$bin" --arch sm_90a "$spec_b" --db "$out/warm_$s.db" --budget "$budget" --seed "$s" --no-final > "$out/warm_$s.txt" 2>&1
  echo "rc=$?"; tail -n 3 "$out/warm_$s.txt"
done

python3 - "$out" "$(basename "$spec_b")" "$@" <<'PY' | tee "$out/confirm.txt"
# Best-so-far by evaluation, from each database (python3's sqlite3: the GPU image has no sqlite3 CLI).
import math, sqlite3, sys
out, spec_name, seeds = sys.argv[1], sys.argv[2], sys.argv[3:]
def curve(db, spec_name):
    c = sqlite3.connect(db)
    (cid,) = c.execute("SELECT id FROM campaigns WHERE spec_path LIKE ? ORDER BY id DESC LIMIT 1",
                       (spec_name + "#%",)).fetchone()
    best, out_curve = 0.0, []
    for (f,) in c.execute("""SELECT e.fitness FROM evaluations e JOIN candidates k ON k.id = e.candidate_id
                             WHERE k.campaign_id = ? AND e.purpose = 'candidate' ORDER BY e.id""", (cid,)):
        if f is not None: best = max(best, f)
        out_curve.append(best)
    return out_curve
def reach(curve, target):
    for i, b in enumerate(curve):
        if b >= target * (1 - 1e-12): return i + 1
    return math.inf
print("seed  cold best  E100 cold  E100 warm  ratio   E95 cold  E95 warm  ratio   warm best")
for s in seeds:
    cold = curve(f"{out}/cold_{s}.db", spec_name)
    warm = curve(f"{out}/warm_{s}.db", spec_name)
    f = cold[-1] if cold else 0
    t95 = math.exp(0.95 * math.log(f)) if f > 1 else f
    c100, w100, c95, w95 = reach(cold, f), reach(warm, f), reach(cold, t95), reach(warm, t95)
    print(f"{s:>4}  {f:9.4f}  {c100:9}  {w100:9}  {w100 / c100:5.2f}   {c95:8}  {w95:8}  {w95 / c95:5.2f}   "
          f"{(warm[-1] if warm else 0):9.4f}")
print("(measured fitness, noisy: a run's best is its best single measurement; the replay study scores stored medians)")
PY
# One archive of the databases and logs: the device tool returns only a few files a call (the
# 2026-12-01 run lost its warm databases that way). earlier.db is the EARLIER_DB copy or the
# earlier campaign; keep it only when this call ran that campaign.
(cd "$out" && rm -f ./*.db-wal ./*.db-shm && { [ -z "${EARLIER_DB:-}" ] || rm -f earlier.db; } &&
  tar czf campaigns.tar.gz --remove-files ./*.db ./*_*.txt $( [ -f earlier.txt ] && echo earlier.txt ))
