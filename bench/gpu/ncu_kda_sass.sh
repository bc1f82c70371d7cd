#!/usr/bin/env bash
# Runs on the GPU machine from the repository root: per-SASS-instruction Nsight Compute counters
# (stall sampling, executed instructions) of one KDA kernel of the chunked seed's defaults at
# scenario 1, as CSV (ncu --page source --print-source sass), for bench/kda/sass_summary.py.
# Usage: bench/gpu/ncu_kda_sass.sh [ENTRY_REGEX (default kda_fwd_recurrence)] [KNOBS]
# Device command (carry [".gpu"]): bench/gpu/ncu_kda_sass.sh kda_fwd_prepare
set -uo pipefail
entry="${1:-kda_fwd_recurrence}"
knobs="${2:-}"
out="${OUT:-/tmp/ptxevo-out}"; mkdir -p "$out"
ld="$PWD/.gpu/lib:/usr/local/cuda/lib64"
bd=/tmp/kda_sass; mkdir -p "$bd"
python3 bench/kda/derive_spec.py kernels/kda/kda_fwd.spec kda_fwd_chunked_seed "$bd/c.spec" > /dev/null || exit 1
k=(); [ -n "$knobs" ] && k=(--knobs "$knobs")
LD_LIBRARY_PATH=$ld .gpu/ptxevo build "$bd/c.spec" "${k[@]}" --out "$bd/def" > "$out/build_$entry.log" 2>&1 ||
  { cat "$out/build_$entry.log"; exit 1; }
timeout 200 ncu --clock-control none -k "regex:$entry" --launch-count 1 --section SourceCounters \
  --section WarpStateStats --section InstructionStats --page source --print-source sass --csv \
  python3 bench/kda/phase_times.py --candidate "def=$bd/def" --shapes 1 --reps 1 --rounds 1 > "$out/sass_$entry.csv" \
  2> "$out/ncu_$entry.err"
echo "ncu rc=$? ($entry)"
