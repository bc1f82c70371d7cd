#!/usr/bin/env bash
# The RMSNorm backward seed on the H200, in one GPU call of under 8 minutes: the device-reference
# GPU tests of the backward; `ptxevo eval` on every shape of rmsnorm_bwd.spec at the defaults (the
# shared-memory ring, clusters for N >= 32K), at the first template's paths (STAGES=0, BLOCKS=264:
# the previous defaults, the `before`), optionally a previous template file as a candidate, and at
# alternatives; then, with the time left, compute-sanitizer memcheck / racecheck / synccheck of the
# defaults on the correctness and held-out shapes. Builds nothing: .gpu/ must be packed
# (scripts/pack_gpu_bundle.sh) from a build that has the ring (the op's launch plan is in the
# binary). Results: $OUT/bwd.md (table), $OUT/evals/*.json, $OUT/logs/.
# Usage: bench/gpu/run_bwd_h200.sh COMMIT [PREVIOUS_TEMPLATE.cu]
set -uo pipefail
commit="${1:?commit}"; before="${2:-}"
out="${OUT:-/tmp/ptxevo-out}"; mkdir -p "$out/evals" "$out/logs"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Open MPI from the bundle only where the image has none (scripts/pack_gpu_bundle.sh).
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_SOURCE_DIR="$PWD" PTXEVO_CACHE_DIR=/tmp/ptxevo-cache
bin="$PWD/.gpu/ptxevo"; spec=kernels/rmsnorm/rmsnorm_bwd.spec
t0=$(date +%s); budget=455  # seconds for everything but the table
left() { echo $(( budget - ($(date +%s) - t0) )); }
{ date -u +%FT%TZ; echo "commit: $commit (.gpu/commit.txt: $(cat .gpu/commit.txt 2>/dev/null || echo unknown))"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader; } > "$out/env.txt" 2>&1
cat "$out/env.txt"
if ! grep -q rmsnorm_bwd_ring_cluster "$bin"; then
  echo "stale .gpu/ptxevo: its rmsnorm_bwd op has no ring entries; repack .gpu from this commit" | tee -a "$out/env.txt"
  exit 2
fi
timeout 60 .gpu/ptxevo_gpu_tests --gtest_filter='DeviceReferenceGpu.Backward*' > "$out/logs/gpu_tests.log" 2>&1
echo "gpu tests rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[ *(OK|FAILED|SKIPPED|PASSED) *\]" "$out/logs/gpu_tests.log"
# How many clusters of each size fit at once at one CTA per SM (the ring's defaults): decides
# CBLOCKS (a group that does not fit runs its rows in a second wave). A few seconds of nvcc.
cat > /tmp/bwd_occupancy.cu <<'CU'
// How many clusters of 1..16 one-CTA-per-SM CTAs (512 threads, 192 KB of dynamic shared memory,
// as the backward ring's defaults) the GPU holds at once.
#include <cstdio>
#include <cuda_runtime.h>
__global__ void __launch_bounds__(512, 1) probe(int* p) { if (p) p[threadIdx.x] = 0; }
int main() {
  const int smem = 196608 + 1024;
  cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaFuncSetAttribute(probe, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  printf("SMs %d; clusters of c resident at once (512 threads, %d B shared each):", sms, smem);
  for (int c = 1; c <= 16; c *= 2) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = c;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    cfg.gridDim = dim3(c * 64);
    cfg.blockDim = dim3(512);
    cfg.dynamicSmemBytes = smem;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int n = -1;
    cudaError_t e = cudaOccupancyMaxActiveClusters(&n, probe, &cfg);
    printf(" c=%d: %d%s", c, n, e == cudaSuccess ? "" : cudaGetErrorString(e));
  }
  printf("\n");
  return 0;
}
CU
/usr/local/cuda/bin/nvcc -arch=sm_90a -o /tmp/bwd_occupancy /tmp/bwd_occupancy.cu > "$out/logs/occupancy_build.txt" 2>&1 &&
  timeout 30 /tmp/bwd_occupancy | tee "$out/occupancy.txt"
ev() {  # label [eval options]; skipped when under 50 s are left
  local label="$1"; shift
  local lim=$(( $(left) < 80 ? $(left) : 80 )) s=$(date +%s)
  if [ "$lim" -lt 50 ]; then echo "$label skipped (time)"; return; fi
  timeout "$lim" "$bin" eval "$spec" --timeout $(( lim - 10 )) --json-out "$out/evals/$label.json" "$@" \
    > "$out/logs/eval_$label.txt" 2>&1
  echo "$label rc=$? $(( $(date +%s) - s ))s"
}
san() {  # tool
  local lim=$(( $(left) < 100 ? $(left) : 100 )) s=$(date +%s)
  if [ "$lim" -lt 30 ]; then echo "$1 skipped (time)"; return; fi
  timeout "$lim" /usr/local/cuda/bin/compute-sanitizer --tool "$1" --target-processes all \
    "$bin" eval "$spec" --max-benchmark-shapes 0 > "$out/logs/sanitizer_$1.txt" 2>&1
  echo "$1 rc=$? $(( $(date +%s) - s ))s: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$out/logs/sanitizer_$1.txt" | sort | uniq -c | tr '\n' ' ')"
  grep -E "^verdict" "$out/logs/sanitizer_$1.txt" | head -2
}
ev defaults
grep -E "^(verdict|candidate|  rmsnorm|correctness|heldout|benchmark)" "$out/logs/eval_defaults.txt" | cut -c1-150
# A failing gate at the defaults: the sanitizers first, they say more than the alternatives.
if ! grep -qE "^verdict: pass" "$out/logs/eval_defaults.txt" 2>/dev/null; then
  echo "defaults did not pass: sanitizers first"; san memcheck; san racecheck
fi
ev old_paths --knobs STAGES=0,BLOCKS=264
[ -n "$before" ] && ev before --source "$before" --knobs STAGES=0,BLOCKS=264
# Clustered groups: 128 CTAs (every SM of 16-SM GPC portions; a second wave if one GPC has fewer)
# and 512 (four or more waves of groups, 4x the dw partial rows).
ev cblocks128 --knobs CBLOCKS=128
ev cblocks512 --knobs CBLOCKS=512
# Two 256-thread CTAs per SM (96 KB of stages each): N = 16K on 2-CTA clusters; 256K does not fit
# a 16-CTA cluster's slices and runs the first template's paths.
ev two_per_sm --knobs THREADS=256,SMEM_KB=96,MIN_BLOCKS=2,BLOCKS=264,CBLOCKS=256
ev t256_i8 --knobs THREADS=256,ITEMS=8
ev t1024_i2 --knobs THREADS=1024,ITEMS=2
# Two 512-thread CTAs per SM with 8K-element slices (16K on 2-CTA clusters; 256K falls back).
ev i2_two_per_sm --knobs ITEMS=2,SMEM_KB=96,MIN_BLOCKS=2,BLOCKS=264,CBLOCKS=256
ev wreg0 --knobs WREG=0
ev stages2 --knobs STAGES=2
san racecheck
san memcheck
san synccheck
python3 - "$out/evals" > "$out/bwd.md" <<'PY'
import json, os, sys
d = sys.argv[1]
print("| eval | verdict | fitness vs defaults | s | per-shape ms (N: candidate, fraction of floor) |\n|---|---|---|---|---|")
for f in sorted(x for x in os.listdir(d) if x.endswith(".json")):
    try:
        r = json.load(open(os.path.join(d, f)))["report"]
    except Exception as e:
        print(f"| {f[:-5]} | unreadable: {e} | | | |")
        continue
    sh = [f"{s['shape']['N']}: {s['candidate_ms']['median']:.4f} ({s.get('fraction_of_floor', 0):.2f})"
          for s in r["shapes"] if s.get("candidate_ms")]
    fit = r.get("fitness")
    print(f"| {f[:-5]} | {r['verdict']}{': ' + r['reasons'][0][:140] if r['reasons'] else ''} | "
          f"{'' if fit is None else f'{fit:.3f}'} | {r.get('seconds', 0):.0f} | {'; '.join(sh)} |")
PY
cat "$out/bwd.md"
grep -hE "registers" "$out/logs/eval_defaults.txt" 2>/dev/null | sort -u
echo "total $(( $(date +%s) - t0 ))s"
