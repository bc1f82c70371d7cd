#!/usr/bin/env bash
# Runs on the GPU machine from the repository root: the KDA backward (issue "KDA backward").
# (1) The gate on kernels/kda/kda_bwd.spec's seed defaults (`ptxevo eval`: every correctness,
# held-out and benchmark shape on fresh inputs of several distributions against the fp64
# reference (on the GPU once it agreed with the host's), guard pages, three runs that must agree
# bit for bit, then timing). (2) bench/kda/bwd_bench.py: the same build and its PREP=1 variant
# beside FLA's chunk_kda backward (and, with the chunked forward's build, the training step), the
# exported module and its autograd function, one process, same inputs and CUDA events, every
# gradient against fp64 on the first heads. Needs .gpu/ (scripts/pack_gpu_bundle.sh) and, for FLA, its wheels in .whl/.
# Usage: bench/gpu/run_kda_bwd_h200.sh [SCENARIOS...]   (bwd_bench --shapes; default all six)
# The chunked seed (kda_bwd_chunked.cu) is gated at its defaults and timed at CHUNK,BV,MMA = 64,32,0,
# 64,32,1, 32,32,1, 32,64,1 and 32,16,1 beside the recurrent seed (BV 64 made the chunk-serial
# kernels slower than BV 32 on the H100; BV 16 doubles their CTAs), and 32,32,1 with MMA_TERMS 1
# and with SLICE_LOOP 0.
# Env: KDA_BWD_SKIP_GATE=1, KDA_BWD_SKIP_EXPORT=1 (no exports, no export timing), KDA_BWD_GATE_H=64 (gate only those benchmark shapes), KDA_BWD_EXPORT_SHAPES
# (default 6), KDA_BWD_EXPORT_S (default 150), KDA_BWD_GATE_RECURRENT=1 (gate the recurrent seed too),
# KDA_BWD_EXPORT=recurrent (export that seed instead of the chunked one), KDA_BWD_GATE_S
# (default 300 per gate), KDA_BWD_BENCH_S (default 300), KDA_NO_FLA=1, KDA_BWD_PER_KERNEL (samples of
# each kernel timed alone, default 5; 0: none), KDA_BWD_FLA_WARM_S (FLA's autotuning alone, default 240),
# KDA_BWD_VARIANTS ("LABEL=KNOBS ...": more builds of the chunked seed, timed beside the others),
# KDA_BWD_GATE_KNOBS (gate the chunked seed at these knobs instead of its defaults).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
out="${OUT:-/tmp/ptxevo-out}"
work=/tmp/kda-bwd
rm -rf "$work" && mkdir -p "$work" "$out"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_CACHE_DIR=/tmp/ptxevo-cache PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/ptxevo-triton-cache FLA_FLASH_KDA=0 FLA_CACHE_RESULTS=1
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
if [ "${KDA_NO_FLA:-0}" != 1 ] && ! timeout 60 python3 -c 'import fla' >/dev/null 2>&1 && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi

# The chunked seed as the baseline of a spec of its own, so that `ptxevo eval` gates it.
timeout 60 python3 bench/kda/derive_spec.py kernels/kda/kda_bwd.spec kda_bwd_chunked_seed "$work/kda_bwd_chunked.spec" \
  > "$work/derive_bwd.txt" 2>&1 || cat "$work/derive_bwd.txt"
step "builds: kda_bwd seed defaults and PREP=1, kda_fwd chunked seed defaults"
.gpu/ptxevo build kernels/kda/kda_bwd.spec --out "$work/bwd" > "$work/build_bwd.txt" 2>&1; echo "bwd build rc=$?"
.gpu/ptxevo build kernels/kda/kda_bwd.spec --knobs PREP=1 --out "$work/bwd_prep" > "$work/build_bwd_prep.txt" 2>&1
echo "bwd PREP=1 build rc=$?"
# CHUNK_BV_MMA[_MMA_TERMS[_SLICE_LOOP]], built side by side; 32_32_1 is the defaults (SLICE_LOOP 1).
# KDA_BWD_VARIANTS adds others, e.g. "pf=CHUNK=32,CHAIN_PREFETCH=1 fis=CHUNK=32,FINISH_IN_SLICES=1
# pairs=CHUNK=32,PREPARE_PAIRS=1" (the knobs not named take the spec's defaults).
for ck in 64_32_0 64_32_1 32_32_1 32_64_1 32_16_1 32_32_1_1 32_32_1_3_0; do
  IFS=_ read -r c bv mma terms sl <<< "$ck"
  ( .gpu/ptxevo build kernels/kda/kda_bwd.spec --source kernels/kda/kda_bwd_chunked.cu \
      --knobs "CHUNK=$c,BV=$bv,MMA=$mma${terms:+,MMA_TERMS=$terms}${sl:+,SLICE_LOOP=$sl}" \
      --out "$work/bwd_chunk$ck" > "$work/build_bwd_chunk$ck.txt" 2>&1
    echo "bwd chunked CHUNK,BV,MMA=$c,$bv,$mma${terms:+ MMA_TERMS=$terms}${sl:+ SLICE_LOOP=$sl} build rc=$?" ) &
done
variants=()
for v in ${KDA_BWD_VARIANTS:-}; do
  label="${v%%=*}"
  if .gpu/ptxevo build kernels/kda/kda_bwd.spec --source kernels/kda/kda_bwd_chunked.cu --knobs "${v#*=}" \
    --out "$work/bwd_$label" > "$work/build_bwd_$label.txt" 2>&1; then
    echo "bwd chunked $label (${v#*=}) built"; variants+=(--also "$label=$work/bwd_$label")
  else
    echo "bwd chunked $label (${v#*=}) build failed:"; tail -3 "$work/build_bwd_$label.txt"
  fi
done
wait
timeout 60 python3 bench/kda/derive_spec.py kernels/kda/kda_fwd.spec kda_fwd_chunked_seed "$work/kda_fwd_chunked.spec" \
  > "$work/derive.txt" 2>&1 || cat "$work/derive.txt"
.gpu/ptxevo build "$work/kda_fwd_chunked.spec" --out "$work/fwd" > "$work/build_fwd.txt" 2>&1; echo "fwd build rc=$?"

# The backward exported (and paired with the forward into the autograd function): the chunked seed's
# defaults, or with KDA_BWD_EXPORT=recurrent the recurrent seed's; bwd_bench checks it bit for bit
# against that seed's build, the first --backward.
if [ "${KDA_BWD_EXPORT:-chunked}" = recurrent ]; then
  export_seed=(); first="seed=$work/bwd"; second="chunk32_32_1=$work/bwd_chunk32_32_1"
else
  export_seed=(--seed-name kda_bwd_chunked_seed); first="chunk32_32_1=$work/bwd_chunk32_32_1"; second="seed=$work/bwd"
fi
export TORCH_EXTENSIONS_DIR=/tmp/torch-ext MAX_JOBS=16
if [ "${KDA_BWD_SKIP_EXPORT:-0}" != 1 ]; then
  step "exports (torch): kda_bwd ${KDA_BWD_EXPORT:-chunked} seed defaults, kda_fwd chunked seed defaults"
  .gpu/ptxevo export kernels/kda/kda_bwd.spec "${export_seed[@]}" --format torch --out "$work/export_bwd" \
    > "$work/export_bwd.txt" 2>&1
  echo "export bwd rc=$?"; grep -E "verified|error" "$work/export_bwd.txt"
  .gpu/ptxevo export kernels/kda/kda_fwd.spec --seed-name kda_fwd_chunked_seed --format torch --out "$work/export_fwd" \
    > "$work/export_fwd.txt" 2>&1
  echo "export fwd rc=$?"; grep -E "verified|error" "$work/export_fwd.txt"
fi

fla=()
if [ "${KDA_NO_FLA:-0}" = 1 ]; then
  fla=(--no-fla)
else
  # FLA's autotuning alone in a process first (its results cached on disk): twice it did not finish
  # in 200 s when it ran after six builds' buffers in one process.
  step "FLA's first forward + backward per scenario, alone"
  timeout "${KDA_BWD_FLA_WARM_S:-240}" python3 bench/kda/bwd_bench.py --backward "$first" --fla-warmup-only \
    --out "$out/fla_warmup" --commit "$commit" ${1:+--shapes "$@"} > "$out/fla_warmup.log" 2>&1
  echo "rc=$?"; tail -n 8 "$out/fla_warmup.log"
  autotune_save "$out"  # again at the end; this one survives a call that runs out of time later
fi
step "bwd_bench.py: the builds beside FLA's backward and training step"
timeout "${KDA_BWD_BENCH_S:-300}" python3 bench/kda/bwd_bench.py --backward "$first" --also "$second" \
  --also "prep=$work/bwd_prep" --also "chunk64_32_1=$work/bwd_chunk64_32_1" --also "chunk64_32_0=$work/bwd_chunk64_32_0" \
  --also "chunk32_64_1=$work/bwd_chunk32_64_1" --also "chunk32_16_1=$work/bwd_chunk32_16_1" \
  --also "chunk32_32_1_1=$work/bwd_chunk32_32_1_1" --also "slice_loop0=$work/bwd_chunk32_32_1_3_0" "${variants[@]}" --forward "chunked=$work/fwd" --per-kernel "${KDA_BWD_PER_KERNEL:-5}" \
  --out "$out/bwd_bench" --commit "$commit" ${1:+--shapes "$@"} "${fla[@]}" > "$out/bwd_bench.log" 2>&1
echo "rc=$?"
if [ -f "$out/bwd_bench/results.md" ]; then tail -n 12 "$out/bwd_bench/results.md"; else tail -n 30 "$out/bwd_bench.log"; fi

# The exported module and the autograd function in a run of their own: at scenario 1 the first
# autograd step alone took minutes on the H100, which would starve the comparison above.
if [ "${KDA_BWD_SKIP_EXPORT:-0}" != 1 ]; then
  step "bwd_bench.py: the export and the autograd function (scenarios ${KDA_BWD_EXPORT_SHAPES:-6})"
  # shellcheck disable=SC2086
  timeout "${KDA_BWD_EXPORT_S:-150}" python3 bench/kda/bwd_bench.py --backward "$first" --forward "chunked=$work/fwd" \
    --export-bwd "$work/export_bwd" --export-fwd "$work/export_fwd" --no-fla \
    --out "$out/bwd_export" --commit "$commit" --shapes ${KDA_BWD_EXPORT_SHAPES:-6} > "$out/bwd_export.log" 2>&1
  echo "rc=$?"
  if [ -f "$out/bwd_export/results.md" ]; then tail -n 6 "$out/bwd_export/results.md"; else tail -n 20 "$out/bwd_export.log"; fi
fi

# Last: the gate's benchmark shapes hold the largest workspace several times over. On an 80 GB
# H100, KDA_BWD_GATE_H=64 keeps only the H = 64 scenarios in the gated spec (every correctness and
# held-out shape stays).
if [ -n "${KDA_BWD_GATE_H:-}" ]; then
  sed -i -E "/\{ B = 1, T = 8192, H = [0-9]+/{/H = ${KDA_BWD_GATE_H},/!d}" "$work/kda_bwd_chunked.spec"
fi
if [ "${KDA_BWD_SKIP_GATE:-0}" != 1 ]; then
  step "gate: ptxevo eval kernels/kda/kda_bwd.spec (chunked seed, ${KDA_BWD_GATE_KNOBS:-defaults})"
  timeout "${KDA_BWD_GATE_S:-300}" .gpu/ptxevo eval "$work/kda_bwd_chunked.spec" \
    ${KDA_BWD_GATE_KNOBS:+--knobs "$KDA_BWD_GATE_KNOBS"} --json-out "$out/gate_chunked.json" \
    > "$out/gate_chunked.txt" 2>&1
  echo "rc=$?"; tail -n 25 "$out/gate_chunked.txt"
  if [ "${KDA_BWD_GATE_RECURRENT:-0}" = 1 ]; then
    step "gate: ptxevo eval kernels/kda/kda_bwd.spec (recurrent seed defaults)"
    timeout "${KDA_BWD_GATE_S:-300}" .gpu/ptxevo eval kernels/kda/kda_bwd.spec --json-out "$out/gate.json" \
      > "$out/gate.txt" 2>&1
    echo "rc=$?"; tail -n 25 "$out/gate.txt"
  fi
fi

tar -C "$work" -czf "$out/builds.tgz" --exclude='*.cubin' --exclude='*.so' build_bwd.txt build_fwd.txt export_bwd.txt \
  export_fwd.txt bwd/launch.json bwd/resources.json bwd_chunk32_32_1/launch.json bwd_chunk32_32_1/resources.json \
  export_bwd 2>/dev/null
autotune_save "$out"
# At most 8 files come back from the device: the summaries and FLA's tuning stay, the rest (logs,
# JSON, rows, builds.tgz) goes into kda_bwd_run.tgz; five files, room for ncu_kda_bwd.sh's two.
. bench/gpu/pack_out.sh && pack_out "$out" kda_bwd_run.tgz env.txt bwd_bench/results.md bwd_export/results.md \
  gate_chunked.txt fla_autotune.tgz
step "done"
