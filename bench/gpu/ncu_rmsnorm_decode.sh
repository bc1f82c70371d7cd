#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with the bundle of scripts/pack_gpu_bundle.sh
# packed with PTXEVO_EXPERT_RMSNORM (the expert's checkout in .gpu/anchors/RMSNorm-H100): Nsight
# Compute on the RMSNorm decode seed and the expert kernel at one shape, for the rows of issue 38
# that still lose (512 x 8192, 1024 x 8192, 16384 x 7168): launch shape, occupancy, memory
# throughput and stalls side by side. bench/rmsnorm/torch_bench.py drives both (stream launches);
# the first launches whose kernel name has "rmsnorm" are profiled (its correctness checks run each
# provider first). Clocks are left alone (--clock-control none).
# Usage: bench/gpu/ncu_rmsnorm_decode.sh [SHAPE (default M=512,N=8192)] [KNOBS (default: the spec's)]
# Device command (carry [".gpu"]): bench/gpu/ncu_rmsnorm_decode.sh M=1024,N=8192
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
shape="${1:-M=512,N=8192}"
knobs="${2:-}"
out="${OUT:-/tmp/ptxevo-out}"; mkdir -p "$out"
expert="$PWD/.gpu/anchors/RMSNorm-H100"
[ -f "$expert/rmsnorm/__init__.py" ] ||
  { echo "no expert checkout in .gpu/anchors: pack with PTXEVO_EXPERT_RMSNORM=<checkout> scripts/pack_gpu_bundle.sh" >&2; exit 2; }
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PTXEVO_SOURCE_DIR="$PWD" PTXEVO_CACHE_DIR=/tmp/ptxevo-cache PYTHONUNBUFFERED=1
export TORCH_EXTENSIONS_DIR=/tmp/torch-ext MAX_JOBS=16
bd=/tmp/rmsnorm_ncu; rm -rf "$bd"; mkdir -p "$bd"
k=(); [ -n "$knobs" ] && k=(--knobs "$knobs")
.gpu/ptxevo build kernels/rmsnorm/rmsnorm_fwd_decode.spec "${k[@]}" --out "$bd/build" \
  > "$bd/build.log" 2>&1 || { cat "$bd/build.log"; exit 1; }
tail -n 4 "$bd/build.log"
# The expert's extension first (its first call builds it, about a minute), outside the profiler.
(cd "$expert" && timeout 240 python3 -c 'import rmsnorm._extension as e; e.get_extension()') > "$bd/expert_build.log" 2>&1 ||
  { tail -n 20 "$bd/expert_build.log"; exit 1; }
timeout "${RMSNORM_NCU_TIMEOUT:-300}" ncu --clock-control none -k "regex:rmsnorm" --launch-count "${RMSNORM_NCU_LAUNCHES:-6}" \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section MemoryWorkloadAnalysis --csv \
  python3 bench/rmsnorm/torch_bench.py --candidate "seed=$bd/build" --expert "$expert" --shapes "$shape" \
  --samples 30 --warmup 1 --skip-compile --out "$bd/bench" > "$bd/ncu.csv" 2> "$bd/ncu.err"
echo "ncu rc=$?"
python3 bench/gpu/ncu_table.py "$bd/ncu.csv" > "$out/ncu_rmsnorm_table.txt"
cat "$out/ncu_rmsnorm_table.txt"
# At most 8 files come back from the device: the table, and the rest in one archive.
tar -C "$bd" -czf "$out/ncu_rmsnorm.tgz" build.log expert_build.log ncu.csv ncu.err build/launch.json build/resources.json
