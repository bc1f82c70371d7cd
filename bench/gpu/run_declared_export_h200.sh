#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with the bundle of scripts/pack_gpu_bundle.sh
# in .gpu/ (torch present, no network): for each example op declared in a file (examples/ops),
#   1. a campaign (BUDGET evaluations);
#   2. `ptxevo export` of its winner as ptx, cuda (verified against the candidate's PTX with nvcc)
#      and torch, and of the seed as torch;
#   3. `ptxevo eval` of the candidate's PTX and of the exported .cu through NVRTC: both must pass
#      the gate, and the export's times must lie within the candidate's noise;
#   4. bench/declared/compare_torch.py: the exported torch modules (custom op eager, under
#      torch.compile, in a CUDA graph) beside torch eager and torch.compile in one process.
# Everything lands in $OUT: results*.md, summary.txt, and one tar.gz of logs and databases.
# Usage: bench/gpu/run_declared_export_h200.sh [BUDGET]
set -uo pipefail
budget="${1:-80}"
out="${OUT:-/tmp/ptxevo-out}"
work=/tmp/ptxevo-declared-export
rm -rf "$work" && mkdir -p "$out" "$work"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Open MPI from the bundle only where the image has none (scripts/pack_gpu_bundle.sh).
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_CACHE_DIR=/tmp/ptxevo-cache TORCH_EXTENSIONS_DIR=/tmp/torch-ext
bin="$PWD/.gpu/ptxevo"
commit="$(cat .gpu/commit.txt)"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "commit: $commit"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  /usr/local/cuda/bin/nvcc --version | tail -2
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} > "$work/env.txt" 2>&1
cat "$work/env.txt"
t0=$(date +%s)
step() { echo "== $1 ($(( $(date +%s) - t0 )) s)"; }
for ex in gelu_bias row_argmax; do
  spec="examples/ops/$ex/$ex.spec"
  step "$ex: campaign"
  timeout 240 "$bin" "$spec" --budget "$budget" --db "$work/$ex.db" > "$work/campaign_$ex.txt" 2>&1
  echo "rc=$?"; grep -E "^best:|^  [A-Z]|winner re-measured" "$work/campaign_$ex.txt" | head -4
  step "$ex: export"
  for fmt in ptx cuda torch; do
    timeout 120 "$bin" export --db "$work/$ex.db" --format "$fmt" --out "$work/${ex}_$fmt" > "$work/export_${ex}_$fmt.txt" 2>&1
    echo "$fmt rc=$?"; grep -E "verified|error" "$work/export_${ex}_$fmt.txt"
  done
  timeout 120 "$bin" export "$spec" --format torch --out "$work/${ex}_seed_torch" > "$work/export_${ex}_seed.txt" 2>&1
  echo "seed torch rc=$?"
  step "$ex: eval candidate PTX and exported .cu"
  # The winner's knobs: its launch plan (grid, block) depends on them.
  knobs=$(python3 -c 'import json,sys; k=json.load(open(sys.argv[1]))["knobs"]; print(",".join(f"{a}={b}" for a,b in k.items()))' \
    "$work/${ex}_cuda/export.json")
  echo "winner knobs: $knobs"
  timeout 150 "$bin" eval "$spec" --ptx "$work/${ex}_ptx/kernel.ptx" --knobs "$knobs" --seed 7 --json-out "$work/eval_${ex}_candidate.json" \
    > "$work/eval_${ex}_candidate.txt" 2>&1; echo "candidate rc=$?"
  timeout 150 "$bin" eval "$spec" --source "$work/${ex}_cuda/ptxevo_$ex.cu" --knobs "$knobs" --seed 7 --json-out "$work/eval_${ex}_export.json" \
    > "$work/eval_${ex}_export.txt" 2>&1; echo "export rc=$?"
  step "$ex: torch side by side"
  timeout 240 python3 bench/declared/compare_torch.py --op "$ex" --export winner="$work/${ex}_torch" \
    --export seed="$work/${ex}_seed_torch" --out "$work/torch_$ex" --commit "$commit" > "$work/torch_$ex.txt" 2>&1
  echo "rc=$?"; tail -n 20 "$work/torch_$ex.txt"
  cp "$work/torch_$ex/results.md" "$out/results_$ex.md" 2>/dev/null
done
python3 - "$work" <<'PY' | tee "$out/summary.txt"
import json, os, sys
w = sys.argv[1]
for ex in ("gelu_bias", "row_argmax"):
    try:
        c = json.load(open(os.path.join(w, f"eval_{ex}_candidate.json")))["report"]
        e = json.load(open(os.path.join(w, f"eval_{ex}_export.json")))["report"]
    except Exception as err:
        print(ex, "missing evaluation:", err); continue
    print(f"{ex}: candidate PTX {c.get('verdict')} fitness {c.get('fitness')}; exported .cu {e.get('verdict')} fitness {e.get('fitness')}")
    for sc, se in zip(c.get("shapes", []), e.get("shapes", [])):
        a, b = sc.get("candidate_ms"), se.get("candidate_ms")
        if not a or not b:
            continue
        inside = a["ci_low"] * 0.98 <= b["median"] <= a["ci_high"] * 1.02
        print(f"  {sc['shape']}: candidate {a['median']:.5f} [{a['ci_low']:.5f}, {a['ci_high']:.5f}] ms, "
              f"export {b['median']:.5f} ms {'within noise' if inside else 'OUTSIDE the candidate CI (+-2%)'}")
PY
cp "$work/env.txt" "$out/"
tar -czf "$out/declared_export.tar.gz" -C "$work" --exclude='*_torch/build' .
