#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with the bundle of scripts/pack_gpu_bundle.sh
# in .gpu/: campaigns under --minutes (they must end within 10% of it, what was in flight
# abandoned and kept), and the KDA chunked seed through the gate with guard pages (TMA and bulk
# copies on 16-byte aligned tensors flush against unmapped pages). Everything lands in $OUT.
# Usage: bench/gpu/run_deadline_h200.sh [KDA_MINUTES] [RMSNORM_MINUTES]
set -uo pipefail
kda_min="${1:-2}"
rms_min="${2:-1}"
out="${OUT:-/tmp/ptxevo-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Open MPI from the bundle only where the image has none (scripts/pack_gpu_bundle.sh).
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_SOURCE_DIR="$PWD" PTXEVO_BIN="$PWD/.gpu/ptxevo" PTXEVO_RESULTS_DIR="$out" PTXEVO_CACHE_DIR=/tmp/ptxevo-cache
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(cat .gpu/commit.txt)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
} > "$out/env.txt" 2>&1
cat "$out/env.txt"
step() { echo "== $1"; shift; "$@"; echo "rc=$?"; }
step "kda gpu tests" bash -c 'timeout 150 .gpu/ptxevo_kda_gpu_tests --gtest_filter="KdaGpu.ChunkedSeedPassesTheGateOnEveryOtherSpec:KdaGpu.SeedPassesTheGateWithTheSoftplusGate" > "$0/kda_gpu_tests.log" 2>&1; rc=$?; grep -E "^\[ *(OK|FAILED|SKIPPED|PASSED) *\]|Failure" "$0/kda_gpu_tests.log" | head -20; exit $rc' "$out"
run_campaign() {  # NAME SPEC MINUTES
  local t0 t1
  t0=$(date +%s.%N)
  timeout 900 .gpu/ptxevo "$2" --minutes "$3" --db "$out/$1.db" > "$out/$1.txt" 2>&1
  local rc=$?
  t1=$(date +%s.%N)
  python3 -c "import sys; w=float(sys.argv[2])-float(sys.argv[1]); m=float(sys.argv[3])*60; print('%s: --minutes %s, wall %.1f s (%.3f of the limit), rc %s' % (sys.argv[4], sys.argv[3], w, w/m, sys.argv[5]))" "$t0" "$t1" "$3" "$1" "$rc" | tee -a "$out/deadline.txt"
  grep -E "stopped:|abandon|deadline|GPU busy|final check" "$out/$1.txt" | head -6
}
echo "== campaigns under --minutes"
run_campaign kda_campaign kernels/kda/kda_fwd.spec "$kda_min"
run_campaign rmsnorm_campaign kernels/rmsnorm/rmsnorm_fwd.spec "$rms_min"
for db in "$out"/*.db; do gzip -f "$db"; rm -f "$db-wal" "$db-shm"; done
echo "== summary"
cat "$out/deadline.txt"
# One archive back (the device returns at most 8 files).
name=$(basename "$0" .sh)
tar -C "$out" -czf "/tmp/$name.tar.gz" . && find "$out" -mindepth 1 -delete && mv "/tmp/$name.tar.gz" "$out/"
