#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with the bundle of scripts/pack_gpu_bundle.sh
# packed with PTXEVO_EXPERT_RMSNORM (the expert's checkout in .gpu/anchors/RMSNorm-H100): Nsight
# Compute on an RMSNorm seed (forward or backward spec) and the expert kernel at one of the spec's
# benchmark shapes: launch shape, occupancy, memory throughput and stalls side by side.
# bench/rmsnorm/torch_bench.py drives both (stream launches); the first launches whose kernel name
# has "rmsnorm" are profiled (its correctness checks run each provider first). Clocks are left
# alone (--clock-control none). Several calls in one device command: set RMSNORM_NCU_TAG per call
# (the output files carry it).
# Usage: bench/gpu/ncu_rmsnorm.sh [SPEC (default kernels/rmsnorm/rmsnorm_fwd_decode.spec)]
#          [SHAPE (default M=512,N=8192)] [KNOBS (default: the spec's)]
# Device command (carry [".gpu"]):
#   bench/gpu/ncu_rmsnorm.sh kernels/rmsnorm/rmsnorm_bwd.spec M=32768,N=65536
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
spec="${1:-kernels/rmsnorm/rmsnorm_fwd_decode.spec}"
shape="${2:-M=512,N=8192}"
knobs="${3:-}"
tag="${RMSNORM_NCU_TAG:-}"
out="${OUT:-/tmp/ptxevo-out}"; mkdir -p "$out"
expert="$PWD/.gpu/anchors/RMSNorm-H100"
[ -f "$expert/rmsnorm/__init__.py" ] ||
  { echo "no expert checkout in .gpu/anchors: pack with PTXEVO_EXPERT_RMSNORM=<checkout> scripts/pack_gpu_bundle.sh" >&2; exit 2; }
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PTXEVO_SOURCE_DIR="$PWD" PTXEVO_CACHE_DIR=/tmp/ptxevo-cache PYTHONUNBUFFERED=1
export TORCH_EXTENSIONS_DIR=/tmp/torch-ext MAX_JOBS=16
bd=/tmp/rmsnorm_ncu$tag; rm -rf "$bd"; mkdir -p "$bd"
k=(); [ -n "$knobs" ] && k=(--knobs "$knobs")
.gpu/ptxevo build "$spec" "${k[@]}" --out "$bd/build" \
  > "$bd/build.log" 2>&1 || { cat "$bd/build.log"; exit 1; }
tail -n 4 "$bd/build.log"
# The expert's extension first (its first call builds it, about a minute), outside the profiler.
(cd "$expert" && timeout 240 python3 -c 'import rmsnorm._extension as e; e.get_extension()') > "$bd/expert_build.log" 2>&1 ||
  { tail -n 20 "$bd/expert_build.log"; exit 1; }
timeout "${RMSNORM_NCU_TIMEOUT:-300}" ncu --clock-control none -k "regex:rmsnorm" --launch-count "${RMSNORM_NCU_LAUNCHES:-6}" \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section MemoryWorkloadAnalysis --csv \
  python3 bench/rmsnorm/torch_bench.py --candidate "seed=$bd/build" --expert "$expert" --shapes "$shape" \
  --samples 30 --warmup 1 --skip-compile --check-rows 256 --out "$bd/bench" > "$bd/ncu.csv" 2> "$bd/ncu.err"
echo "ncu rc=$?"
python3 bench/gpu/ncu_table.py "$bd/ncu.csv" > "$out/ncu_rmsnorm${tag}_table.txt"
cat "$out/ncu_rmsnorm${tag}_table.txt"
# At most 8 files come back from the device: the table, and the rest in one archive.
tar -C "$bd" -czf "$out/ncu_rmsnorm$tag.tgz" build.log expert_build.log ncu.csv ncu.err build/launch.json build/resources.json
