#!/usr/bin/env bash
# Two small checks in one GPU call: (1) the exported torch module's autograd against torch's
# (bench/rmsnorm/export_check.py with a random upstream gradient) for the seed and the campaign
# winner; (2) where an evaluation's GPU time goes: `ptxevo eval` of the forward seed with 0, 4
# and 11 benchmark shapes timed (the correctness and held-out shapes always run).
# Usage: bench/gpu/run_autograd_and_phases_h200.sh COMMIT        (results in $OUT)
set -uo pipefail
commit="${1:?commit}"
out="${OUT:-/tmp/ptxevo-out}"; mkdir -p "$out/logs"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Open MPI from the bundle only where the image has none (scripts/pack_gpu_bundle.sh).
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_CACHE_DIR=/tmp/ptxevo-cache TORCH_EXTENSIONS_DIR=/tmp/torch-ext
bin="$PWD/.gpu/ptxevo"; spec=kernels/rmsnorm/rmsnorm_fwd.spec; ex=/tmp/exports
{ date -u +%FT%TZ; echo "commit: $commit"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$out/env.txt"
gunzip -c data/campaigns/rmsnorm_fwd_h200_136c0be.db.gz > /tmp/campaign.db
"$bin" export "$spec" --format torch --out "$ex/seed_torch" > "$out/logs/export_seed.txt" 2>&1; echo "export seed rc=$?"
"$bin" export "$spec" --db /tmp/campaign.db --format torch --out "$ex/winner_torch" > "$out/logs/export_winner.txt" 2>&1
echo "export winner rc=$?"
timeout 240 python3 bench/rmsnorm/export_check.py "$ex/seed_torch" "$ex/winner_torch" > "$out/export_check.jsonl" 2> "$out/logs/export_check.err"
echo "export_check rc=$?"
python3 -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line); print(r["export"], "errors:", r["errors"] or "none", "autograd rel_l2:", r["backward_rel_l2"])
' "$out/export_check.jsonl"
for k in 0 4 11; do
  s=$(date +%s.%N)
  "$bin" eval "$spec" --max-benchmark-shapes "$k" --json-out "$out/logs/eval_$k.json" > "$out/logs/eval_$k.txt" 2>&1
  python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["report"]
print(f"benchmark shapes timed: {sys.argv[2]:>2}  verdict {r[\"verdict\"]}  seconds {r[\"seconds\"]:.2f}  prep {r[\"prep_seconds\"]:.2f}  gpu {r[\"gpu_seconds\"]:.2f}")
' "$out/logs/eval_$k.json" "$k" | tee -a "$out/phases.txt"
done
(cd "$out" && tar czf logs.tar.gz logs && rm -rf logs)
