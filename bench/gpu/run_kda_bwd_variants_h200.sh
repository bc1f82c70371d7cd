#!/usr/bin/env bash
# Runs on the GPU machine from the repository root: builds of the chunked KDA backward seed at the
# given knobs, timed side by side (bench/kda/bwd_bench.py, one process, same inputs, CUDA events,
# each kernel alone too) and each checked against fp64 - the lean call for knob A/B tests, without
# exports (bench/gpu/run_kda_bwd_h200.sh does those); FLA and the gate on request.
# Usage: bench/gpu/run_kda_bwd_variants_h200.sh "LABEL=KNOBS ..." [SCENARIOS...]
#   The first LABEL is the baseline (ratios are baseline time / variant time); KNOBS go over the
#   chunked seed's defaults, or KNOBS = @DIR names a build made elsewhere (bench/gpu/build_parent.sh
#   .gpu/parent/LABEL: an earlier commit's templates). SCENARIOS: bwd_bench --shapes (default 1).
# Env: KDA_BWD_PER_KERNEL (samples of each kernel alone, default 3), KDA_BWD_BENCH_S (default 240),
#   KDA_BWD_GATE_KNOBS (also gate the chunked seed at these knobs: `ptxevo eval`, timed against
#   its defaults), KDA_BWD_GATE_S (default 240), KDA_BWD_FLA=1 (FLA's chunk_kda backward beside
#   them: its wheels from .whl/, its Triton tuning from .triton_autotune/ when carried, warmed alone
#   first for at most KDA_BWD_FLA_WARM_S, default 240).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
[ $# -ge 1 ] || { echo "usage: $0 \"LABEL=KNOBS ...\" [SCENARIOS...]" >&2; exit 2; }
specs="$1"; shift
out="${OUT:-/tmp/ptxevo-out}"
work=/tmp/kda-bwd-variants
rm -rf "$work" && mkdir -p "$work" "$out"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_CACHE_DIR=/tmp/ptxevo-cache PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/ptxevo-triton-cache FLA_FLASH_KDA=0 FLA_CACHE_RESULTS=1
commit="$(cat .gpu/commit.txt 2>/dev/null || echo unknown)"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu --format=csv
  /usr/local/cuda/bin/nvcc --version | tail -2
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
} > "$out/env.txt" 2>&1
cat "$out/env.txt"
python3 bench/kda/derive_spec.py kernels/kda/kda_bwd.spec kda_bwd_chunked_seed "$work/chunked.spec" > "$work/derive.txt" 2>&1 ||
  { cat "$work/derive.txt"; exit 1; }
args=()
for v in $specs; do
  label="${v%%=*}" dir="$work/${v%%=*}"
  if [[ "${v#*=}" == @* ]]; then
    dir="${v#*=@}"  # a build made elsewhere (bench/gpu/build_parent.sh: an earlier commit's templates)
    grep -h "registers" "$dir/build.log" > "$out/build_$label.txt" 2>/dev/null
  else
    ( .gpu/ptxevo build "$work/chunked.spec" --knobs "${v#*=}" --out "$dir" > "$out/build_$label.txt" 2>&1 ||
        { echo "$label (${v#*=}) build failed:"; tail -3 "$out/build_$label.txt"; } ) &
  fi
  if [ ${#args[@]} -eq 0 ]; then args=(--backward "$label=$dir"); else args+=(--also "$label=$dir"); fi
done
wait
for v in $specs; do
  label="${v%%=*}"
  dir="$work/$label"; [[ "${v#*=}" == @* ]] && dir="${v#*=@}"
  [ -f "$dir/kernel.cubin" ] && echo "$label (${v#*=}): $(grep -cE 'registers' "$out/build_$label.txt") kernels," \
    "$(grep -E 'spill stores' "$out/build_$label.txt" | grep -vc ' 0 B spill stores') spilling"
done
fla=(--no-fla)
if [ "${KDA_BWD_FLA:-0}" = 1 ]; then
  fla=()
  . bench/gpu/triton_autotune.sh && autotune_restore
  if ! timeout 60 python3 -c 'import fla' >/dev/null 2>&1 && ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
  fi
  timeout "${KDA_BWD_FLA_WARM_S:-240}" python3 bench/kda/bwd_bench.py "${args[@]:0:2}" --fla-warmup-only \
    --out "$out/fla_warmup" --commit "$commit" --shapes "${@:-1}" > "$out/fla_warmup.log" 2>&1
  echo "FLA warm-up rc=$?"; autotune_save "$out"
fi
timeout "${KDA_BWD_BENCH_S:-240}" python3 bench/kda/bwd_bench.py "${args[@]}" "${fla[@]}" \
  --per-kernel "${KDA_BWD_PER_KERNEL:-3}" --out "$out/bwd_bench" --commit "$commit" --shapes "${@:-1}" \
  > "$out/bwd_bench.log" 2>&1
echo "bwd_bench rc=$?"
if [ -n "${KDA_BWD_GATE_KNOBS:-}" ]; then
  timeout "${KDA_BWD_GATE_S:-240}" .gpu/ptxevo eval "$work/chunked.spec" --knobs "$KDA_BWD_GATE_KNOBS" \
    --json-out "$out/gate.json" > "$out/gate.txt" 2>&1
  echo "gate rc=$?"; tail -n 12 "$out/gate.txt"
fi
if [ -f "$out/bwd_bench/results.md" ]; then cat "$out/bwd_bench/results.md"; else tail -n 30 "$out/bwd_bench.log"; fi
