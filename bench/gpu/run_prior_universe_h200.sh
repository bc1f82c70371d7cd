#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with the bundle of scripts/pack_gpu_bundle.sh
# in .gpu/: the learned prior's larger universe (docs/prior_study.md, section 1): VEC 4/8 x TPR
# 8/16 x CLUSTER 2/4/8 x LOAD_HINT 0/2, each with every subset of the four PTX edits the H200
# campaigns found gains in (384 members, about 1.1 s of GPU each), then the replay study on it
# (CPU, seconds). The file is rewritten after every measured batch: with UNIVERSE_IN=path (a
# partial file returned by an earlier call) the same command measures only what is left.
# Usage: bench/gpu/run_prior_universe_h200.sh COMMIT [MINUTES]
set -uo pipefail
commit="${1:?commit}"; minutes="${2:-8}"
[ -f .gpu/commit.txt ] && commit="$(cat .gpu/commit.txt)"
out="${OUT:-/tmp/ptxevo-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Open MPI from the bundle only where the image has none (scripts/pack_gpu_bundle.sh).
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_CACHE_DIR=/tmp/ptxevo-cache
bin="$PWD/.gpu/ptxevo"
file="$out/rmsnorm_fwd.wide.universe.json"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
  "$bin" --version 2>/dev/null | head -3
} > "$out/env.txt" 2>&1
cat "$out/env.txt"
[ -n "${UNIVERSE_IN:-}" ] && cp "$UNIVERSE_IN" "$file"
s=$(date +%s)
timeout $(( ${minutes%.*} * 60 + 90 )) "$bin" universe kernels/rmsnorm/rmsnorm_fwd.spec --out "$file" \
  --vary VEC=4,8 --vary TPR=8,16 --vary CLUSTER=2,4,8 --vary LOAD_HINT=0,2 \
  --edits l2_evict_hint:priority=evict_last --edits store_streaming --edits fast_math \
  --edits hoist_global_loads:distance=16 --minutes "$minutes" --commit "$commit" > "$out/universe.txt" 2>&1
echo "universe rc=$? $(( $(date +%s) - s )) s"
tail -n 12 "$out/universe.txt"
"$bin" prior-study --universe "$file" > "$out/study.txt" 2>&1
echo "prior-study rc=$?"
tail -n 30 "$out/study.txt"
