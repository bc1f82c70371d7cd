#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with the bundle of scripts/pack_gpu_bundle.sh
# in .gpu/: a real RMSNorm-forward campaign on the H200. It is stopped with SIGINT (as Ctrl-C
# would) after STOP_AFTER seconds, its database is moved away and back, and the same command
# resumes it for the rest of MINUTES. Then the report (text + HTML), the replay data export,
# and a re-evaluation of the winner with `ptxevo eval`. Everything lands in $OUT.
# Usage: bench/gpu/run_campaign_h200.sh COMMIT MINUTES STOP_AFTER_SECONDS [extra campaign options]
set -uo pipefail
commit="${1:?commit}"; minutes="${2:?minutes}"; stop_after="${3:?stop after seconds}"; shift 3
out="${OUT:-/tmp/ptxevo-out}"
mkdir -p "$out/logs"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Open MPI from the bundle only where the image has none (scripts/pack_gpu_bundle.sh).
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_CACHE_DIR=/tmp/ptxevo-cache
bin="$PWD/.gpu/ptxevo"
spec=kernels/rmsnorm/rmsnorm_fwd.spec
db="$out/campaign.db"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  /usr/local/cuda/bin/nvcc --version | tail -2
  nproc
} > "$out/logs/env.txt" 2>&1
cat "$out/logs/env.txt"
echo "== campaign, first part (SIGINT after ${stop_after} s)"
timeout -s INT "$stop_after" "$bin" --arch sm_90a "$spec" --db "$db" --minutes "$minutes" "$@" > "$out/logs/campaign_part1.log" 2>&1
echo "rc=$?"; tail -n 12 "$out/logs/campaign_part1.log"
mv "$db" /tmp/moved.db && mv /tmp/moved.db "$db"
for f in "$db-wal" "$db-shm"; do [ -e "$f" ] && echo "leftover $f"; done
echo "== campaign, resumed"
"$bin" --arch sm_90a "$spec" --db "$db" --minutes "$minutes" "$@" > "$out/logs/campaign_part2.log" 2>&1
echo "rc=$?"; tail -n 30 "$out/logs/campaign_part2.log"
echo "== report"
"$bin" report --db "$db" --html "$out/report.html" > "$out/logs/report.txt" 2>&1; echo "rc=$?"
head -n 60 "$out/logs/report.txt"
echo "== the winner again, through ptxevo eval (fresh inputs, all shapes)"
best=$(grep -m1 '^best ' "$out/logs/report.txt" | sed -n 's/.*candidate \([0-9]*\).*/\1/p')
if [ -n "$best" ]; then
  timeout 120 "$bin" eval "$spec" --db "$db" --candidate "$best" --json-out "$out/winner_eval.json" > "$out/logs/winner_eval.txt" 2>&1
  echo "candidate $best: rc=$?"; grep -E "verdict|fitness|M=" "$out/logs/winner_eval.txt" | tail -n 14
fi
echo "== replay export"
"$bin" replay export "$spec" --db "$db" --out "$out/rmsnorm_fwd.replay.json" --commit "$commit"; echo "rc=$?"
(cd "$out" && tar czf logs.tar.gz logs && rm -rf logs)
