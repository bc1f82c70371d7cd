#!/usr/bin/env bash
# The RMSNorm backward seed on the H200: `ptxevo eval` at its defaults and at alternative knobs,
# and the previous template (FILE, scalar accesses, THREADS 256) as a candidate against it, on
# every shape of rmsnorm_bwd.spec. Results in $OUT/bwd.md and $OUT/evals/.
# Usage: bench/gpu/run_bwd_h200.sh COMMIT PREVIOUS_TEMPLATE.cu
set -uo pipefail
commit="${1:?commit}"; before="${2:?previous template}"
out="${OUT:-/tmp/ptxevo-out}"; mkdir -p "$out/evals"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PTXEVO_CACHE_DIR=/tmp/ptxevo-cache
bin="$PWD/.gpu/ptxevo"; spec=kernels/rmsnorm/rmsnorm_bwd.spec
{ date -u +%FT%TZ; echo "commit: $commit"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$out/env.txt"
ev() { local label="$1"; shift; timeout 90 "$bin" eval "$spec" --json-out "$out/evals/$label.json" "$@" > "$out/evals/$label.txt" 2>&1; echo "$label rc=$?"; }
ev defaults
ev before --source "$before" --knobs THREADS=256
ev t256_i8 --knobs THREADS=256,ITEMS=8
ev t1024_i2 --knobs THREADS=1024,ITEMS=2
ev t256_i4_b528 --knobs THREADS=256,ITEMS=4,BLOCKS=528
ev b132 --knobs BLOCKS=132
python3 - "$out/evals" > "$out/bwd.md" <<'PY'
import json, os, sys
d = sys.argv[1]
print("| eval | verdict | fitness vs defaults | per-shape ms (N: candidate, fraction of floor) |\n|---|---|---|---|")
for f in sorted(x for x in os.listdir(d) if x.endswith(".json")):
    r = json.load(open(os.path.join(d, f)))["report"]
    sh = [f"{s['shape']['N']}: {s['candidate_ms']['median']:.4f} ({s.get('fraction_of_floor', 0):.2f})"
          for s in r["shapes"] if s.get("candidate_ms")]
    fit = r.get("fitness")
    print(f"| {f[:-5]} | {r['verdict']}{': ' + r['reasons'][0][:140] if r['reasons'] else ''} | "
          f"{'' if fit is None else f'{fit:.3f}'} | {'; '.join(sh)} |")
PY
cat "$out/bwd.md"
