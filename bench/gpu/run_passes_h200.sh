#!/usr/bin/env bash
# Issue "Mutators" evidence: every PTX pass applied alone to the RMSNorm forward seed (at its
# default knobs), each result gated and timed against the seed with `ptxevo eval --ptx`.
# A pass that refuses the seed is listed as refused with its reason. Runs on the GPU machine
# from the repository root with the bundle of scripts/pack_gpu_bundle.sh in .gpu/.
# Usage: bench/gpu/run_passes_h200.sh COMMIT [MAX_BENCHMARK_SHAPES]   (results in $OUT)
set -uo pipefail
commit="${1:?commit}"; maxb="${2:-4}"
out="${OUT:-/tmp/ptxevo-out}"
mkdir -p "$out/passes"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Open MPI from the bundle only where the image has none (scripts/pack_gpu_bundle.sh).
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_CACHE_DIR=/tmp/ptxevo-cache
bin="$PWD/.gpu/ptxevo"
spec=kernels/rmsnorm/rmsnorm_fwd.spec
"$bin" build "$spec" --out /tmp/seed > "$out/passes/build_seed.txt" 2>&1 || { cat "$out/passes/build_seed.txt"; exit 1; }
echo "| pass | result | fitness vs seed | per-shape speedups |" > "$out/passes.md"
echo "|---|---|---|---|" >> "$out/passes.md"
for pass in $("$bin" mutate --list); do
  if ! "$bin" mutate /tmp/seed/kernel.ptx --pass "$pass" > "/tmp/$pass.ptx" 2> "$out/passes/$pass.refusal.txt"; then
    echo "| $pass | refused: $(head -c 200 "$out/passes/$pass.refusal.txt" | tr '\n|' '  ') | | |" >> "$out/passes.md"
    continue
  fi
  timeout 150 "$bin" eval "$spec" --ptx "/tmp/$pass.ptx" --max-benchmark-shapes "$maxb" \
    --json-out "$out/passes/$pass.json" > "$out/passes/$pass.txt" 2>&1
  python3 - "$pass" "$out/passes/$pass.json" >> "$out/passes.md" <<'PY'
import json, sys
name, path = sys.argv[1], sys.argv[2]
try:
    r = json.load(open(path))["report"]
except Exception as e:
    print(f"| {name} | no report ({e}) | | |"); sys.exit()
sp = [f"{s['shape']['N']}: {s['speedup']['ratio']:.3f} [{s['speedup']['ci_low']:.3f}, {s['speedup']['ci_high']:.3f}]"
      for s in r["shapes"] if s.get("speedup")]
fit = r.get("fitness")
print(f"| {name} | {r['verdict']}{': ' + r['reasons'][0][:120] if r['reasons'] else ''} | "
      f"{'' if fit is None else f'{fit:.3f}'} | {'; '.join(sp)} |")
PY
done
echo "commit $commit, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" >> "$out/passes.md"
cat "$out/passes.md"
(cd "$out" && tar czf passes.tar.gz passes && rm -rf passes)
