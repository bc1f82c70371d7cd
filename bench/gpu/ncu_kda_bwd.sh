#!/usr/bin/env bash
# Runs on the GPU machine from the repository root: Nsight Compute on the chunked KDA backward's
# kernels (one launch each) at a scenario, to show what limits each: SM and memory throughput
# against peak, achieved occupancy, warp stall reasons, the launch's registers and shared memory.
# Clocks are left alone (--clock-control none). bench/kda/bwd_bench.py drives the build (no FLA,
# one sample); the first launch of every kernel of the plan is profiled.
# Usage: bench/gpu/ncu_kda_bwd.sh [SCENARIO (default 6)] [KNOBS (default: the spec's)]
# Device command (carry [".gpu"]): bench/gpu/ncu_kda_bwd.sh 6 CHUNK=32,BV=16,MMA=1
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
scenario="${1:-6}"
knobs="${2:-}"
out="${OUT:-/tmp/ptxevo-out}"; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PTXEVO_CACHE_DIR=/tmp/ptxevo-cache PYTHONUNBUFFERED=1
bd=/tmp/kda_bwd_ncu; rm -rf "$bd"; mkdir -p "$bd"
k=(); [ -n "$knobs" ] && k=(--knobs "$knobs")
.gpu/ptxevo build kernels/kda/kda_bwd.spec --source kernels/kda/kda_bwd_chunked.cu "${k[@]}" --out "$bd/build" \
  > "$out/ncu_bwd_build.log" 2>&1 || { cat "$out/ncu_bwd_build.log"; exit 1; }
tail -n 7 "$out/ncu_bwd_build.log"
timeout "${KDA_NCU_TIMEOUT:-300}" ncu --clock-control none -k "regex:kda_bwd_chunk" --launch-count 5 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section MemoryWorkloadAnalysis --csv \
  python3 bench/kda/bwd_bench.py --backward "chunked=$bd/build" --no-fla --shapes "$scenario" --samples 1 --warmup 0 \
  --ref-heads 1 --out "$bd/bench" > "$out/ncu_kda_bwd.csv" 2> "$out/ncu_kda_bwd.err"
echo "ncu rc=$?"
# A short table (ncu_table.txt): per kernel, duration, throughputs, occupancy, the limiter rules.
python3 bench/gpu/ncu_table.py "$out/ncu_kda_bwd.csv" > "$out/ncu_table.txt"
cat "$out/ncu_table.txt"
# At most 8 files come back from the device (this may run after another script in one call): the
# table stays, the CSV and logs go into one archive.
(cd "$out" && tar -czf ncu_kda_bwd.tgz ncu_kda_bwd.csv ncu_kda_bwd.err ncu_bwd_build.log &&
  rm -f ncu_kda_bwd.csv ncu_kda_bwd.err ncu_bwd_build.log)
