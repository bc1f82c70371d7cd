#!/usr/bin/env bash
# `ptxevo eval` of the RMSNorm forward seed for the spec variants (residual + bias + rstd, fp16,
# fp32) and of the backward seed, on every shape of each spec, inputs and references made on the
# GPU. Results in $OUT/variants (JSON) and $OUT/variants.md.
# Usage: bench/gpu/run_rmsnorm_variants_h200.sh COMMIT
set -uo pipefail
commit="${1:?commit}"
out="${OUT:-/tmp/ptxevo-out}"; mkdir -p "$out/variants"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Open MPI from the bundle only where the image has none (scripts/pack_gpu_bundle.sh).
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_CACHE_DIR=/tmp/ptxevo-cache
bin="$PWD/.gpu/ptxevo"
for spec in rmsnorm_fwd_residual rmsnorm_fwd_fp16 rmsnorm_fwd_fp32 rmsnorm_bwd; do
  s=$(date +%s)
  timeout 120 "$bin" eval "kernels/rmsnorm/$spec.spec" --json-out "$out/variants/$spec.json" > "$out/variants/$spec.txt" 2>&1
  echo "$spec rc=$? $(( $(date +%s) - s )) s"
done
python3 - "$out/variants" "$commit" > "$out/variants.md" <<'PY'
import json, os, sys
d, commit = sys.argv[1], sys.argv[2]
print(f"commit {commit}\n\n| spec | verdict | worst rel_l2 | per-shape ms (N: candidate, fraction of floor) |\n|---|---|---|---|")
for f in sorted(x for x in os.listdir(d) if x.endswith(".json")):
    r = json.load(open(os.path.join(d, f)))["report"]
    worst = max((v for s in r["shapes"] for v in s.get("rel_l2", {}).values()), default=0)
    sh = [f"{s['shape']['N']}: {s['candidate_ms']['median']:.4f} ({s.get('fraction_of_floor', 0):.2f})"
          for s in r["shapes"] if s.get("candidate_ms")]
    print(f"| {f[:-5]} | {r['verdict']}{': ' + r['reasons'][0][:120] if r['reasons'] else ''} | {worst:.2e} | {'; '.join(sh)} |")
PY
cat "$out/variants.md"
