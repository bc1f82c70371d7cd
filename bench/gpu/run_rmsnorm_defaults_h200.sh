#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with the bundle of scripts/pack_gpu_bundle.sh
# in .gpu/ (issue "RMSNorm", one call, about 8 minutes):
#  1. the residual + bias + rstd spec's register-tile and cluster knobs measured as a closed grid
#     (`ptxevo universe`, every member paired against the spec's defaults), so its defaults can be
#     set from measurements instead of carried over from the first forward defaults;
#  2. torch eager and torch.compile against the forward seed at its defaults and a campaign winner,
#     in CUDA-graph mode (no Python launch gaps), same inputs, same timer, interleaved.
# Usage: bench/gpu/run_rmsnorm_defaults_h200.sh COMMIT [WINNER_DB.gz WINNER_ID]
set -uo pipefail
commit="${1:?commit}"
[ -f .gpu/commit.txt ] && commit="$(cat .gpu/commit.txt)"
out="${OUT:-/tmp/ptxevo-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Open MPI from the bundle only where the image has none (scripts/pack_gpu_bundle.sh).
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_CACHE_DIR=/tmp/ptxevo-cache
bin="$PWD/.gpu/ptxevo"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
  /usr/local/cuda/bin/nvcc --version | tail -2
} > "$out/env.txt" 2>&1
cat "$out/env.txt"

echo "== residual spec: ITEMS x CLUSTER x THREADS grid against its defaults"
s=$(date +%s)
timeout 300 "$bin" universe kernels/rmsnorm/rmsnorm_fwd_residual.spec --out "$out/residual.universe.json" \
  --vary ITEMS=1,2,4,8 --vary CLUSTER=2,4,8,16 --vary THREADS=256,512,1024 --minutes 3.2 --commit "$commit" \
  > "$out/residual.universe.txt" 2>&1
echo "universe rc=$? $(( $(date +%s) - s )) s"
tail -3 "$out/residual.universe.txt"
python3 - "$out/residual.universe.json" > "$out/residual.md" <<'PY'
import json, sys
u = json.load(open(sys.argv[1]))
rows = []
for m in u["members"]:
    e = m.get("eval")
    if not e or e.get("fitness") is None:
        continue
    k = m["genome"]["knobs"]
    per = "; ".join(f"{s['shape']['N']}: {s['speedup'][0]:.3f} ({s.get('fraction_of_floor', 0):.2f})"
                    for s in e.get("shapes", []) if s.get("speedup"))
    verdict = "pass" if not e.get("reasons") else "fail: " + e["reasons"][0][:60]
    rows.append((e["fitness"], f"| ITEMS {k.get('ITEMS')} CLUSTER {k.get('CLUSTER')} THREADS {k.get('THREADS')} "
                               f"| {verdict} | {e['fitness']:.4f} | {per} |"))
rows.sort(key=lambda r: -r[0])
print("| knobs | verdict | fitness vs defaults | per N: speedup (fraction of floor) |\n|---|---|---|---|")
for _, r in rows:
    print(r)
PY
head -12 "$out/residual.md"

echo "== torch eager / torch.compile against the forward seed (and a winner), CUDA graphs"
mkdir -p "$out/builds"
"$bin" build kernels/rmsnorm/rmsnorm_fwd.spec --out "$out/builds/seed" > "$out/builds/seed.txt" 2>&1 || echo "seed build failed"
cands=(--candidate "seed=$out/builds/seed")
if [ $# -ge 3 ]; then
  gunzip -c "$2" > /tmp/winner.db
  "$bin" build kernels/rmsnorm/rmsnorm_fwd.spec --db /tmp/winner.db --candidate "$3" --out "$out/builds/winner" \
    > "$out/builds/winner.txt" 2>&1 && cands+=(--candidate "winner=$out/builds/winner") || echo "winner build failed"
fi
rm -f "$out"/builds/*/kernel.ptx
timeout 330 python3 bench/rmsnorm/torch_bench.py --commit "$commit" "${cands[@]}" --graph --out "$out/torch_graph" \
  > "$out/torch_graph.log" 2>&1
echo "torch_bench rc=$?"
tail -25 "$out/torch_graph.log"
