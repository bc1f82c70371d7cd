#!/usr/bin/env bash
# Runs on the GPU machine from the repository root: the KDA split with the prepare and the
# recurrence overlapped (knob PREPARE_CTAS: persistent prepare CTAs, a programmatic recurrence
# waiting on chunk flags). First `ptxevo eval` of the named
# assignments on the main spec (the gate on every correctness shape with fresh inputs, then the
# timer on the first benchmark shape against the chunked seed's defaults), then the sweep side by
# side through run_kda_h200.sh (fla_bench.py; FLA only if KDA_BENCH_ARGS drops --no-fla).
# Needs .gpu/ (scripts/pack_gpu_bundle.sh) and, for FLA, .whl/; carry [".gpu", ".whl"].
# Environment: KDA_EVAL_KNOBS [PREPARE_CTAS=396,SEQSPLIT=1] (space-separated assignments to gate),
#   KDA_EVAL_TIMEOUT [200], KDA_EXTRA_SOURCES (below), KDA_VARIANTS / KDA_BENCH_ARGS / KDA_TOTAL_S
#   as run_kda_h200.sh.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
out="${OUT:-/tmp/ptxevo-out}"
mkdir -p "$out"
ptxevo_ld="$PWD/.gpu/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PTXEVO_CACHE_DIR="${PTXEVO_CACHE_DIR:-/tmp/ptxevo-cache}"
t0=$SECONDS
spec=/tmp/kda_overlap_chunked.spec
timeout 60 python3 bench/kda/derive_spec.py kernels/kda/kda_fwd.spec kda_fwd_chunked_seed "$spec" || exit 2
evals=()
for k in ${KDA_EVAL_KNOBS:-PREPARE_CTAS=396,SEQSPLIT=1}; do
  tag="${k//[=,]/_}"
  LD_LIBRARY_PATH="$ptxevo_ld" timeout -k 10 "${KDA_EVAL_TIMEOUT:-200}" .gpu/ptxevo eval "$spec" --knobs "$k" \
    --max-benchmark-shapes 1 --json-out "$out/eval_$tag.json" > "$out/eval_$tag.log" 2>&1
  rc=$?
  evals+=("eval $k rc=$rc: $(grep -m1 -E 'verdict|gate' "$out/eval_$tag.log")")
done
echo "== evals ($(( SECONDS - t0 )) s)"
printf '  %s\n' "${evals[@]}"
# Candidates from another kernel source (an A/B against an earlier form of the template):
# KDA_EXTRA_SOURCES="LABEL:PATH ..." (built with the spec's defaults).
extra=()
for e in ${KDA_EXTRA_SOURCES:-}; do
  label="${e%%:*}" src="${e#*:}"
  if LD_LIBRARY_PATH="$ptxevo_ld" timeout 150 .gpu/ptxevo build "$spec" --source "$src" --out "/tmp/kda_extra_$label" \
      > "$out/build_extra_$label.log" 2>&1; then
    extra+=("$label=/tmp/kda_extra_$label")
  else
    echo "build of $label from $src failed ($out/build_extra_$label.log)"
  fi
done
KDA_TOTAL_S=$(( ${KDA_TOTAL_S:-540} - (SECONDS - t0) )) KDA_GTEST_FILTER="${KDA_GTEST_FILTER:-None.Skip}" \
  KDA_BENCH_ARGS="${KDA_BENCH_ARGS---no-fla}" bench/gpu/run_kda_h200.sh auto "${extra[@]}"
echo "== evals"
printf '  %s\n' "${evals[@]}"
# The device tool returns a limited number of files: the builds' launch.json / resources.json as one archive.
if [ -d "$out/builds" ]; then tar -C "$out" -czf "$out/builds.tgz" builds && rm -rf "$out/builds"; fi
