#!/usr/bin/env bash
# Runs on the GPU machine from the repository root: kda_fwd exported for its users (issue "KDA for
# its users", item 2). The chunked seed's defaults (kernels/kda/kda_fwd.spec) are exported as CUDA
# source (verified against the candidate's PTX by nvcc) and as a PyTorch module; the module is
# checked by bench/kda/export_check.py (random packed batches against fp64, bf16 and absent states,
# torch.compile, a CUDA graph, FLA's backend dispatch, FLA's Triton error beside ours) and timed by
# bench/kda/fla_bench.py beside the candidate built from the same spec (cubin through the driver)
# and, when its wheels are in .whl/, FLA's chunk_kda, on the docs/targets.md scenarios.
# Needs the binaries of scripts/pack_gpu_bundle.sh in .gpu/. Everything lands in $OUT.
# With .gpu/anchors/FlashKDA.tgz (scripts/pack_gpu_bundle.sh, PTXEVO_EXPERT_FLASHKDA) FlashKDA is
# built there (minutes) and timed live beside them.
# Usage: bench/gpu/run_kda_export_h200.sh [SHAPES...]   (fla_bench --shapes: scenario numbers;
#   default: all six). Env: KDA_EXPORT_BUDGET_S (fla_bench's budget, default 240), KDA_NO_FLA=1,
#   KDA_NO_FLASHKDA=1, KDA_SKIP_CHECK=1 (no export_check.py).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
out="${OUT:-/tmp/ptxevo-out}"
work=/tmp/kda-export
rm -rf "$work" && mkdir -p "$work" "$out"
ptxevo_ld="$PWD/.gpu/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PTXEVO_CACHE_DIR=/tmp/ptxevo-cache TORCH_EXTENSIONS_DIR=/tmp/torch-ext PYTHONUNBUFFERED=1
export TRITON_CACHE_DIR=/tmp/ptxevo-triton-cache FLA_FLASH_KDA=0 FLA_CACHE_RESULTS=1 MAX_JOBS=16
. bench/gpu/triton_autotune.sh && autotune_restore
commit="$(cat .gpu/commit.txt 2>/dev/null || echo unknown)"
t0=$(date +%s)
step() { echo "== $1 ($(( $(date +%s) - t0 )) s)"; }
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu --format=csv
  /usr/local/cuda/bin/nvcc --version | tail -2
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
} > "$out/env.txt" 2>&1
cat "$out/env.txt"
if ! timeout 60 python3 -c 'import fla' >/dev/null 2>&1 && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi

step "export (cuda and torch) and the candidate's build"
for fmt in cuda torch; do
  LD_LIBRARY_PATH="$ptxevo_ld" timeout 300 .gpu/ptxevo export kernels/kda/kda_fwd.spec --seed-name kda_fwd_chunked_seed \
    --format "$fmt" --out "$work/$fmt" > "$work/export_$fmt.txt" 2>&1
  echo "export $fmt rc=$?"; grep -E "verified|error" "$work/export_$fmt.txt"
done
timeout 60 python3 bench/kda/derive_spec.py kernels/kda/kda_fwd.spec kda_fwd_chunked_seed "$work/kda_fwd_chunked.spec" \
  > "$work/derive.txt" 2>&1 || cat "$work/derive.txt"
LD_LIBRARY_PATH="$ptxevo_ld" timeout 200 .gpu/ptxevo build "$work/kda_fwd_chunked.spec" --out "$work/candidate" \
  > "$work/build.txt" 2>&1; echo "build rc=$?"

if [ "${KDA_SKIP_CHECK:-0}" != 1 ]; then
  step "export_check.py (correctness, compile, graph, FLA dispatch)"
  timeout 240 python3 bench/kda/export_check.py "$work/torch" > "$out/export_check.jsonl" 2> "$work/export_check.err"
  echo "rc=$?"; tail -c 2000 "$work/export_check.err"
  python3 - "$out/export_check.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    extra = {k: v for k, v in r.items() if k not in ("check", "ok", "config")}
    print(r.get("check", "summary"), "ok" if r.get("ok", r.get("summary") == "ok") else "FAILED", json.dumps(extra)[:300])
PY
fi
flashkda_args=()
if [ "${KDA_NO_FLASHKDA:-0}" != 1 ] && [ -f .gpu/anchors/FlashKDA.tgz ]; then
  mkdir -p /tmp/flashkda && tar -C /tmp/flashkda -xzf .gpu/anchors/FlashKDA.tgz && flashkda_args=(--flashkda /tmp/flashkda)
fi

step "fla_bench.py: candidate, export and FLA side by side"
shapes=("$@")
fla_args=()
[ "${KDA_NO_FLA:-0}" = 1 ] && fla_args=(--no-fla)
timeout $(( ${KDA_EXPORT_BUDGET_S:-240} + 30 )) python3 bench/kda/fla_bench.py --candidate "chunked=$work/candidate" \
  --export "exported=$work/torch" --out "$work/bench" --commit "$commit" --budget-s "${KDA_EXPORT_BUDGET_S:-240}" \
  ${shapes[@]:+--shapes "${shapes[@]}"} "${fla_args[@]}" "${flashkda_args[@]}" > "$work/fla_bench.log" 2>&1
echo "rc=$?"
[ -f "$work/bench/summary.txt" ] && cat "$work/bench/summary.txt" || tail -n 30 "$work/fla_bench.log"
cp "$work/bench/results.md" "$out/fla_bench_results.md" 2>/dev/null
tar -C "$work" -czf "$out/kda_export.tgz" --exclude='*.cubin' --exclude='*.so' --exclude='*.o' . 2>/dev/null
autotune_save "$out"
step "done"
