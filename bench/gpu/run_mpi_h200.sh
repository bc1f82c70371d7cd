#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with the bundle of scripts/pack_gpu_bundle.sh
# in .gpu/: the same RMSNorm-forward campaign for MINUTES twice in one call, first as one process
# (2 GPU workers, builds on every core through TBB), then under mpirun with rank 0 searching, two
# measuring ranks taking turns on the GPU (as --workers-per-gpu 2) and the other ranks building
# one candidate each. Prints candidates per GPU-hour, GPU busy and builds for both; logs in $OUT.
# Usage: bench/gpu/run_mpi_h200.sh MINUTES [RANKS (default: cores + 1)]
set -uo pipefail
minutes="${1:?minutes}"
ranks="${2:-$(( $(nproc) + 1 ))}"
commit="$(cat .gpu/commit.txt 2>/dev/null || git describe --always --dirty --abbrev=7)"
out="${OUT:-/tmp/ptxevo-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
if ldd .gpu/ptxevo | grep -q "libmpi.*not found"; then
  echo "no libmpi on this image: using the bundle's copy" | tee "$out/mpi_fallback.txt"
  export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
fi
command -v mpirun > /dev/null || { echo "no mpirun on this machine: nothing to compare" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bin="$PWD/.gpu/ptxevo"
spec=kernels/rmsnorm/rmsnorm_fwd.spec
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
  /usr/local/cuda/bin/nvcc --version | tail -2
  mpirun --version | head -1
  echo "cores: $(nproc); ranks: $ranks"
} > "$out/env.txt" 2>&1
cat "$out/env.txt"
# Each run starts from an empty build cache: the second must not link what the first linked.
echo "== one process ($minutes min)"
PTXEVO_CACHE_DIR=/tmp/ptxevo-cache-one timeout $(( minutes * 60 + 240 )) "$bin" --arch sm_90a "$spec" --db "$out/one/campaign.db" --minutes "$minutes" \
  --no-final > "$out/one.txt" 2>&1
echo "rc=$?"; tail -n 6 "$out/one.txt"
echo "== mpirun -np $ranks ($minutes min)"
PTXEVO_CACHE_DIR=/tmp/ptxevo-cache-mpi timeout $(( minutes * 60 + 240 )) mpirun --oversubscribe --enable-recovery \
  -x PTXEVO_CACHE_DIR -x LD_LIBRARY_PATH -np "$ranks" "$bin" --arch sm_90a "$spec" --db "$out/mpi/campaign.db" \
  --minutes "$minutes" --no-final > "$out/mpi.txt" 2>&1
echo "rc=$?"; grep -E "^MPI:" "$out/mpi.txt"; tail -n 6 "$out/mpi.txt"
python3 - "$out" <<'PY'
import re, sys
out = sys.argv[1]
print(f"{'run':<6} {'evaluations':>11} {'built':>6} {'wall s':>7} {'GPU busy':>8} {'cand/GPU-h':>10} {'best':>7}")
for name in ("one", "mpi"):
    t = open(f"{out}/{name}.txt").read()
    ev = re.search(r"stopped: \w+; (\d+) candidate evaluations.*?(\d+) built", t)
    busy = re.search(r"GPU busy (\d+)% of (\d+) s wall time.*?(\d+) candidates per GPU-hour", t)
    best = re.search(r"best: candidate \d+, fitness ([\d.]+)", t)
    print(f"{name:<6} {ev.group(1) if ev else '?':>11} {ev.group(2) if ev else '?':>6} "
          f"{busy.group(2) if busy else '?':>7} {(busy.group(1) + '%') if busy else '?':>8} "
          f"{busy.group(3) if busy else '?':>10} {best.group(1) if best else '?':>7}")
PY
