#!/usr/bin/env bash
# Issue 8 evidence on the H200 (run from the repository root; binaries in .gpu/ from
# scripts/pack_gpu_bundle.sh; torch present, no network). For the RMSNorm-forward seed and the
# winner of the H200 campaign in bench/results/2026-11-30-h200-campaign-136c0be (its database,
# exported with --db: fast_math + l2_evict_hint + store_streaming + hoist_global_loads):
#   1. `ptxevo export` as cuda (verified against the candidate's PTX with nvcc), torch and ptx;
#   2. the torch extension built with torch.utils.cpp_extension.load and checked against an fp64
#      reference, F.rms_norm and torch autograd (bench/rmsnorm/export_check.py);
#   3. `ptxevo eval` of the candidate's PTX and of the export's PTX (nvcc -ptx of the .cu, which
#      ptxevo links with the same nvJitLink) and of the .cu itself through NVRTC: all must pass the
#      gate, and the export's per-shape times must lie within the candidate's noise;
#   4. torch_bench.py: the candidates' cubins, the exported torch modules, torch eager and
#      torch.compile side by side in one process.
# Usage: bench/gpu/run_export_h200.sh COMMIT        (results and logs in $OUT)
set -uo pipefail
commit="${1:?commit}"
out="${OUT:-/tmp/ptxevo-out}"
mkdir -p "$out/logs"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Open MPI from the bundle only where the image has none (scripts/pack_gpu_bundle.sh).
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_CACHE_DIR=/tmp/ptxevo-cache TORCH_EXTENSIONS_DIR=/tmp/torch-ext
bin="$PWD/.gpu/ptxevo"
spec=kernels/rmsnorm/rmsnorm_fwd.spec
ex=/tmp/exports
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "commit: $commit"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  /usr/local/cuda/bin/nvcc --version | tail -2
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  # torch.utils.cpp_extension.load needs ninja; without it step 2 and the --export timings fail.
  python3 -c 'import torch.utils.cpp_extension as c; c.verify_ninja_availability(); print("ninja: ok")' ||
    echo "ninja: MISSING (torch.utils.cpp_extension.load cannot build the extension)"
} > "$out/logs/env.txt" 2>&1
cat "$out/logs/env.txt"
t0=$(date +%s)
step() { echo "== $1 ($(( $(date +%s) - t0 )) s)"; }

step "export"
gunzip -c data/campaigns/rmsnorm_fwd_h200_136c0be.db.gz > /tmp/campaign.db
for name in seed edited; do
  edits=(); [ "$name" = edited ] && edits=(--db /tmp/campaign.db)
  for fmt in cuda torch ptx; do
    timeout 300 "$bin" export "$spec" "${edits[@]}" --format "$fmt" --out "$ex/${name}_$fmt" \
      > "$out/logs/export_${name}_$fmt.txt" 2>&1
    echo "$name $fmt rc=$?"; grep -E "verified|error" "$out/logs/export_${name}_$fmt.txt"
  done
  /usr/local/cuda/bin/nvcc -arch=sm_90a -ptx -o "$ex/${name}_cuda/export.ptx" "$ex/${name}_cuda/ptxevo_rmsnorm_fwd.cu" \
    > "$out/logs/nvcc_$name.txt" 2>&1; echo "$name nvcc -ptx rc=$?"
  cp "$ex/${name}_cuda/ptxevo_rmsnorm_fwd.cu" "$out/${name}_ptxevo_rmsnorm_fwd.cu"
done

step "torch extension: correctness, autograd, validation, quick timing"
timeout 240 python3 bench/rmsnorm/export_check.py "$ex/seed_torch" "$ex/edited_torch" > "$out/export_check.jsonl" \
  2> "$out/logs/export_check.err"; echo "rc=$?"; tail -c 3000 "$out/logs/export_check.err"
python3 - "$out/export_check.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(r["export"], "errors:", r["errors"] or "none", "backward:", r["backward_rel_l2"])
    for s in r["shapes"]:
        t = f"  export {s['export_ms']:.4f} ms, eager {s['torch_eager_ms']:.4f} ms" if "export_ms" in s else ""
        print(f"  M={s['M']} N={s['N']} rel_l2 {s['rel_l2_vs_fp64']:.2e} (torch {s['rel_l2_torch_vs_fp64']:.2e}){t}")
PY

step "ptxevo eval: candidate PTX vs export (nvcc PTX and NVRTC of the .cu)"
for name in seed edited; do
  timeout 300 "$bin" eval "$spec" --ptx "$ex/${name}_ptx/kernel.ptx" --seed 7 --json-out "$out/eval_${name}_candidate.json" \
    > "$out/logs/eval_${name}_candidate.txt" 2>&1; echo "$name candidate rc=$?"
  timeout 300 "$bin" eval "$spec" --ptx "$ex/${name}_cuda/export.ptx" --seed 7 --json-out "$out/eval_${name}_export.json" \
    > "$out/logs/eval_${name}_export.txt" 2>&1; echo "$name export (nvcc PTX) rc=$?"
  timeout 300 "$bin" eval "$spec" --source "$ex/${name}_cuda/ptxevo_rmsnorm_fwd.cu" --seed 7 \
    --json-out "$out/eval_${name}_export_nvrtc.json" > "$out/logs/eval_${name}_export_nvrtc.txt" 2>&1
  echo "$name export (.cu through NVRTC) rc=$?"
done
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
for name in ("seed", "edited"):
    try:
        c = json.load(open(os.path.join(out, f"eval_{name}_candidate.json")))["report"]
    except Exception as e:
        print(name, "no candidate evaluation:", e); continue
    for kind in ("export", "export_nvrtc"):
        try:
            e = json.load(open(os.path.join(out, f"eval_{name}_{kind}.json")))["report"]
        except Exception as err:
            print(name, kind, "missing:", err); continue
        print(f"{name} {kind}: verdict {e.get('verdict')} fitness {e.get('fitness')} (candidate {c.get('verdict')} {c.get('fitness')})")
        for sc, se in zip(c.get("shapes", []), e.get("shapes", [])):
            a, b = sc.get("candidate_ms"), se.get("candidate_ms")
            if not a or not b:
                continue
            inside = a["ci_low"] * 0.98 <= b["median"] <= a["ci_high"] * 1.02
            print(f"  {sc['shape']}: candidate {a['median']:.5f} [{a['ci_low']:.5f}, {a['ci_high']:.5f}] ms, "
                  f"export {b['median']:.5f} ms {'within noise' if inside else 'OUTSIDE the candidate CI (+-2%)'}")
PY

step "torch_bench: cubins, exported modules, eager, compile"
OUT="$out/logs" timeout 200 bench/gpu/run_rmsnorm_torch_h200.sh "$commit" seed="$ex/seed_ptx" edited="$ex/edited_ptx" -- \
  --export seed_export="$ex/seed_torch" --export edited_export="$ex/edited_torch" \
  > "$out/logs/torch_bench_run.txt" 2>&1
echo "rc=$?"; tail -n 25 "$out/logs/torch_bench_run.txt"
cp "$out/logs/rmsnorm_torch/"*.md "$out/" 2>/dev/null
step "done"
(cd "$out" && tar czf logs.tar.gz logs && rm -rf logs)
