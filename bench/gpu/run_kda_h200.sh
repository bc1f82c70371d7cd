#!/usr/bin/env bash
# Runs on the GPU machine from the repository root: the KDA forward seeds (kernels/kda/) through
# their GPU gate test, then side by side with flash-linear-attention's chunk_kda on the six
# docs/targets.md scenarios (bench/kda/fla_bench.py): the chunked seed's prepare + recurrence pair
# (FUSED = 0, its defaults) at a few tiles against the fused kernel (FUSED = 1) and FLA. One call,
# under 9 minutes (KDA_TOTAL_S bounds the whole script). Needs the binaries of scripts/pack_gpu_bundle.sh
# in .gpu/ and the wheels of bench/kda/README.md in .whl/ (flash-linear-attention's fla-core,
# einops, packaging; torch and triton come with the machine). Every step has its own timeout, so
# one hang cannot eat the call; everything lands in $OUT.
#
# Usage: bench/gpu/run_kda_h200.sh COMMIT [LABEL=BUILD_DIR ...]
#   COMMIT     the commit the binaries were built from; "auto" reads .gpu/commit.txt (never git: the
#              GPU machine's copy of .git may be stale)
#   LABEL=DIR  more candidates, built elsewhere by `ptxevo build kernels/kda/kda_fwd.spec ... --out DIR`
# Environment (defaults in brackets): KDA_GTEST_FILTER [the split defaults on every shape of the
#   main spec, then the split and the fused defaults on every other spec (each a serial NVRTC
#   build in the test: ~10 s); the split's 27-assignment covering set
#   KdaGpu.ChunkedSplitPassesTheGateOnACoveringSetOfKnobs (~5 min) and the fused sweep
#   ...AtEveryAdmittedKnobAssignment (passed before) only when named here],
#   KDA_GTEST_TIMEOUT [200], KDA_TOTAL_S [510: the fla_bench step gets what is left of it, at
#   least 60 s], KDA_FLA_TIMEOUT [none: a cap on that step],
#   KDA_VARIANTS [the fused kernel's defaults and FUSED = 0 at other tiles: see below; the label
#   "chunked" is the spec's defaults, FUSED = 0, CHUNK 16, BV 64, STAGE 2, BULK 1,
#   WY_IN_RECURRENCE 1 (v read by the recurrence), WY_TENSOR_CORES 0, STATE_HI_LO 0, MMA sync],
#   KDA_RECURRENT [0: 1 also builds and times the recurrent seed],
#   KDA_BENCH_ARGS (more fla_bench.py options, e.g. "--fla-safe-gate"),
#   KDA_NO_FLASHKDA [0: with .gpu/anchors/FlashKDA.tgz (scripts/pack_gpu_bundle.sh,
#   PTXEVO_EXPERT_FLASHKDA) FlashKDA is built and timed live beside the candidates; 1 leaves it out].
# The device command, with the carry list [".gpu", ".whl"]:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
#     && export PYTHONPATH=/tmp/site && bench/gpu/run_kda_h200.sh auto
set -uo pipefail
t_start=$SECONDS
cd "$(dirname "$0")/../.." || exit 2
if [ $# -lt 1 ]; then
  echo "usage: $0 COMMIT|auto [LABEL=BUILD_DIR ...]" >&2
  exit 2
fi
commit="$1"; shift
gpu_commit="$(cat .gpu/commit.txt 2>/dev/null || echo unknown)"
[ "$commit" = auto ] && commit="$gpu_commit"
extra=()
for a in "$@"; do
  case "$a" in
    *=*) d="${a#*=}"
         if [ -f "$d/launch.json" ] && [ -f "$d/kernel.cubin" ]; then extra+=("$a")
         else echo "$0: $d has no launch.json and kernel.cubin; left out" >&2; fi ;;
    *) echo "$0: expected LABEL=BUILD_DIR, got '$a'" >&2; exit 2 ;;
  esac
done
out="${OUT:-/tmp/ptxevo-out}"
mkdir -p "$out"
# For the ptxevo binaries only: Python (torch, triton, FLA) keeps the machine's own libraries.
ptxevo_ld="$PWD/.gpu/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-/tmp/ptxevo-triton-cache}"  # shared by fla_bench's two processes
. bench/gpu/triton_autotune.sh && autotune_restore
export PTXEVO_CACHE_DIR="${PTXEVO_CACHE_DIR:-/tmp/ptxevo-cache}"
export FLA_FLASH_KDA=0 FLA_CACHE_RESULTS=1 TRITON_PRINT_AUTOTUNING=1
export PYTHONUNBUFFERED=1
steps=()

# ---- the wheels, unless the command already installed them
if ! timeout 60 python3 -c 'import fla' >/dev/null 2>&1 && ls .whl/*.whl >/dev/null 2>&1; then
  timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl > "$out/pip.log" 2>&1
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi

# ---- (a) environment
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit (.gpu/commit.txt: $gpu_commit)"
  timeout 30 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,memory.used --format=csv
  timeout 60 python3 - <<'EOF'
import sys
print("python", sys.version.split()[0])
for m in ("torch", "triton", "fla", "einops", "packaging"):
    try:
        mod = __import__(m)
        print(m, getattr(mod, "__version__", "?"), getattr(mod, "__file__", ""))
    except Exception as e:  # noqa: BLE001
        print(m, "NOT IMPORTABLE:", type(e).__name__, e)
try:
    import torch
    print("torch cuda", torch.version.cuda, "device", torch.cuda.get_device_name(0))
except Exception as e:  # noqa: BLE001
    print("torch cuda: ", e)
EOF
  echo "cores: $(nproc)"
  uname -r
  echo "PYTHONPATH=${PYTHONPATH:-} TRITON_CACHE_DIR=$TRITON_CACHE_DIR"
} > "$out/env.txt" 2>&1
cat "$out/env.txt"

# ---- (b) the chunked seed through the GPU gate (kda_gpu_results.json is written only if it ends)
gt_timeout="${KDA_GTEST_TIMEOUT:-200}"
gt_filter="${KDA_GTEST_FILTER:-KdaGpu.ChunkedSeedPassesTheGateOnTheMainSpec:KdaGpu.ChunkedSeedPassesTheGateOnEveryOtherSpec}"
if [ -x .gpu/ptxevo_kda_gpu_tests ]; then
  echo "== gate test $gt_filter (timeout ${gt_timeout} s)"
  LD_LIBRARY_PATH="$ptxevo_ld" PTXEVO_SOURCE_DIR="$PWD" PTXEVO_BIN="$PWD/.gpu/ptxevo" PTXEVO_RESULTS_DIR="$out" \
    timeout -k 10 "$gt_timeout" .gpu/ptxevo_kda_gpu_tests --gtest_filter="$gt_filter" \
    > "$out/kda_gpu_tests.log" 2>&1
  rc=$?
  grep -E "^\[ *(OK|FAILED|RUN) *\]|verdict|FAILED$" "$out/kda_gpu_tests.log" | tail -n 40
  steps+=("gate test rc=$rc$([ $rc -eq 124 ] && echo ' (timed out)')")
else
  steps+=("gate test: .gpu/ptxevo_kda_gpu_tests missing")
fi

# ---- (c) builds: the chunked seed at its defaults and at a few knob settings (and, with
# KDA_RECURRENT=1, the recurrent seed), all at once (NVRTC is single-threaded; the machine has 16
# cores), each with its own log, collected in order afterwards
bd=/tmp/kda_bench_builds
rm -rf "$bd" && mkdir -p "$bd"
cands=()
labels=()
build_bg() {  # LABEL SPEC KNOBS
  local label="$1" spec="$2" knobs="$3"
  local k=()
  [ -n "$knobs" ] && k=(--knobs "$knobs")
  labels+=("$label")
  ( echo "== build $label ${knobs:-(defaults)}"
    LD_LIBRARY_PATH="$ptxevo_ld" timeout 150 .gpu/ptxevo build "$spec" "${k[@]}" --out "$bd/$label" 2>&1
    echo "rc=$?" ) > "$bd/$label.log" 2>&1 &
}
if timeout 60 python3 bench/kda/derive_spec.py kernels/kda/kda_fwd.spec kda_fwd_chunked_seed "$bd/kda_fwd_chunked.spec" \
    >> "$out/builds.log" 2>&1; then
  build_bg chunked "$bd/kda_fwd_chunked.spec" ""
  # FUSED = 1 at its own defaults (the seed before the split), then the split at other tiles.
  for v in ${KDA_VARIANTS:-fused:FUSED=1,CHUNK=16,BV=32,WARPS=4,STAGE=1,LM_TENSOR_CORES=1,U0_BITS=32,KSPLIT=1,PREFETCH_CHUNKS=0,WY_TENSOR_CORES=0,STATE_HI_LO=1,BULK=0,LMTERMS=3,WY_IN_RECURRENCE=0,SEQSPLIT=1 wy1:WY_TENSOR_CORES=1,WY_IN_RECURRENCE=0,SEQSPLIT=1 nobulk:BULK=0,STAGE=2 wgmma:MMA=wgmma,LMTERMS=3,WY_IN_RECURRENCE=0,SEQSPLIT=1}; do
    build_bg "${v%%:*}" "$bd/kda_fwd_chunked.spec" "${v#*:}"
  done
else
  echo "derive_spec.py failed (builds.log): no chunked candidates"
  steps+=("derive_spec FAILED")
fi
[ "${KDA_RECURRENT:-0}" = 1 ] && build_bg recurrent kernels/kda/kda_fwd.spec ""
wait
for label in "${labels[@]}"; do
  cat "$bd/$label.log" >> "$out/builds.log"
  if tail -n 1 "$bd/$label.log" | grep -qx "rc=0" && [ -f "$bd/$label/launch.json" ]; then
    cands+=(--candidate "$label=$bd/$label")
    mkdir -p "$out/builds/$label" && cp "$bd/$label/launch.json" "$bd/$label/resources.json" "$out/builds/$label/"
  else
    echo "build $label failed (builds.log)"
    steps+=("build $label FAILED")
  fi
done
for a in "${extra[@]}"; do cands+=(--candidate "$a"); done
steps+=("builds: $(( ${#cands[@]} / 2 )) candidates")
tail -n 30 "$out/builds.log" | grep -E "^==|registers|error" || true

# ---- (d) side by side with flash-linear-attention
if [ ${#cands[@]} -eq 0 ]; then
  echo "no candidates to benchmark"
  steps+=("fla_bench: no candidates")
else
  fla_timeout=$(( ${KDA_TOTAL_S:-510} - (SECONDS - t_start) - 5 ))
  [ -n "${KDA_FLA_TIMEOUT:-}" ] && [ "$KDA_FLA_TIMEOUT" -lt "$fla_timeout" ] && fla_timeout="$KDA_FLA_TIMEOUT"
  [ "$fla_timeout" -lt 60 ] && fla_timeout=60
  flashkda_args=()
  if [ "${KDA_NO_FLASHKDA:-0}" != 1 ] && [ -f .gpu/anchors/FlashKDA.tgz ]; then
    mkdir -p /tmp/flashkda && tar -C /tmp/flashkda -xzf .gpu/anchors/FlashKDA.tgz && flashkda_args=(--flashkda /tmp/flashkda)
  fi
  [ ${#flashkda_args[@]} -eq 0 ] && steps+=("FlashKDA not in the bundle: no FlashKDA/ours column")
  echo "== fla_bench.py (timeout ${fla_timeout} s)"
  # The whole output goes to kda_fla.log; the console leaves out Triton's autotuning lines.
  # shellcheck disable=SC2086
  timeout -k 15 "$fla_timeout" python3 bench/kda/fla_bench.py --commit "$commit" "${cands[@]}" \
    --out "$out/kda_fla" --budget-s $(( fla_timeout - 15 )) "${flashkda_args[@]}" ${KDA_BENCH_ARGS:-} 2>&1 | tee "$out/kda_fla.log" |
    grep --line-buffered -v -E "^ *\[preflight\] (Triton autotuning for|with key as|finished after|best config selected)"
  rc=${PIPESTATUS[0]}
  steps+=("fla_bench rc=$rc (0 ok, 1 a candidate failed or an error, 3 FLA missing somewhere, 124 timed out)")
fi

echo
echo "== $(( SECONDS - t_start )) s; steps:"
printf '  %s\n' "${steps[@]}"
autotune_save "$out"
echo "== gate test summary"
grep -E "verdict|^\[ *(OK|FAILED) *\]" "$out/kda_gpu_tests.log" 2>/dev/null | tail -n 12
echo "== KDA forward, ms (FLA/ours, FlashKDA/ours: > 1 means ours is faster)"
cat "$out/kda_fla/summary.txt" 2>/dev/null || echo "(no fla_bench results)"
exit 0
