#!/usr/bin/env bash
# Runs on the GPU machine from the repository root: RMSNorm candidates that `ptxevo build` made
# (on any machine; kernel.cubin + launch.json per directory, e.g. under .gpu/builds/ of the
# bundle of scripts/pack_gpu_bundle.sh) against torch eager and torch.compile, through
# bench/rmsnorm/torch_bench.py. Builds nothing. Everything lands in $OUT.
# Usage: bench/gpu/run_rmsnorm_torch_h200.sh COMMIT LABEL=DIR [LABEL=DIR ...] [-- TORCH_BENCH_OPTIONS]
#   e.g. bench/gpu/run_rmsnorm_torch_h200.sh abc1234 seed=.gpu/builds/seed best=.gpu/builds/best -- --graph
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 COMMIT LABEL=DIR [LABEL=DIR ...] [-- TORCH_BENCH_OPTIONS]" >&2
  exit 2
fi
commit="$1"; shift
cands=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in *=*) ;; *) echo "$0: expected LABEL=DIR, got '$1'" >&2; exit 2 ;; esac
  dir="${1#*=}"
  [ -f "$dir/launch.json" ] && [ -f "$dir/kernel.cubin" ] ||
    { echo "$0: $dir has no launch.json and kernel.cubin: make it with 'ptxevo build SPEC --out $dir'" >&2; exit 2; }
  cands+=(--candidate "$1"); shift
done
[ "${1:-}" = "--" ] && shift
out="${OUT:-/tmp/ptxevo-out}"
mkdir -p "$out"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
  uname -r
} > "$out/env.txt" 2>&1
cat "$out/env.txt"
for ((i = 1; i < ${#cands[@]}; i += 2)); do
  d="${cands[i]#*=}"; l="${cands[i]%%=*}"
  mkdir -p "$out/builds/$l" && cp "$d/launch.json" "$d/resources.json" "$out/builds/$l/" 2>/dev/null
done
python3 bench/rmsnorm/torch_bench.py --commit "$commit" "${cands[@]}" --out "$out/rmsnorm_torch" "$@" 2>&1 |
  tee "$out/rmsnorm_torch.log"
rc=${PIPESTATUS[0]}
echo "rc=$rc"
exit "$rc"
