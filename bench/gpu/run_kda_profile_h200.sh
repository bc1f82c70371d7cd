#!/usr/bin/env bash
# Runs on the GPU machine from the repository root: where the KDA split's time goes. Builds the
# chunked seed (FUSED = 0) at its defaults and at a few knob settings, times each kernel of each
# plan on its own (bench/kda/phase_times.py) on chosen docs/targets.md scenarios, then profiles the
# defaults' two kernels at scenario 1 with Nsight Compute (clocks left alone: METHOD.md). One call,
# under 9 minutes; every step has its own timeout; everything lands in $OUT.
#
# Usage: bench/gpu/run_kda_profile_h200.sh COMMIT|auto
# Environment: KDA_PROFILE_VARIANTS (LABEL:KNOBS words; default below), KDA_PROFILE_SHAPES
#   [1 3 6], KDA_NCU [1: 0 skips Nsight Compute], KDA_NCU_TIMEOUT [150], KDA_PROFILE_GATE [1: the
#   GPU gate test KDA_GATE_FILTER (default: the chunked seed on the main spec) runs first],
#   KDA_GATE_TIMEOUT [200], KDA_NCU_SHAPES [1: the scenarios Nsight Compute profiles, one report each], KDA_PHASE_TIMEOUT [240].
# Device command (carry [".gpu"]): bench/gpu/run_kda_profile_h200.sh auto
set -uo pipefail
t_start=$SECONDS
cd "$(dirname "$0")/../.." || exit 2
commit="${1:-auto}"
gpu_commit="$(cat .gpu/commit.txt 2>/dev/null || echo unknown)"
[ "$commit" = auto ] && commit="$gpu_commit"
out="${OUT:-/tmp/ptxevo-out}"
mkdir -p "$out"
ptxevo_ld="$PWD/.gpu/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PTXEVO_CACHE_DIR="${PTXEVO_CACHE_DIR:-/tmp/ptxevo-cache}" PYTHONUNBUFFERED=1
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit"
  timeout 30 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu --format=csv
  timeout 30 nvcc --version | tail -n 2
} > "$out/env.txt" 2>&1
cat "$out/env.txt"

# The GPU gate on the main spec first (KDA_PROFILE_GATE=1): speed without correctness counts for nothing.
if [ "${KDA_PROFILE_GATE:-1}" = 1 ] && [ -x .gpu/ptxevo_kda_gpu_tests ]; then
  echo "== gate ${KDA_GATE_FILTER:-KdaGpu.ChunkedSeedPassesTheGateOnTheMainSpec}"
  LD_LIBRARY_PATH="$ptxevo_ld" PTXEVO_SOURCE_DIR="$PWD" PTXEVO_BIN="$PWD/.gpu/ptxevo" PTXEVO_RESULTS_DIR="$out" \
    timeout -k 10 "${KDA_GATE_TIMEOUT:-200}" .gpu/ptxevo_kda_gpu_tests \
    --gtest_filter="${KDA_GATE_FILTER:-KdaGpu.ChunkedSeedPassesTheGateOnTheMainSpec}" > "$out/gate.log" 2>&1
  echo "gate rc=$?"
  grep -E "^\[ *(OK|FAILED) *\]|verdict|rel_l2|worst" "$out/gate.log" | tail -n 20
fi

bd=/tmp/kda_profile_builds
rm -rf "$bd" && mkdir -p "$bd"
timeout 60 python3 bench/kda/derive_spec.py kernels/kda/kda_fwd.spec kda_fwd_chunked_seed "$bd/kda_fwd_chunked.spec" \
  > "$out/builds.log" 2>&1 || { echo "derive_spec failed"; cat "$out/builds.log"; exit 1; }
labels=(chunked)
( LD_LIBRARY_PATH="$ptxevo_ld" timeout 150 .gpu/ptxevo build "$bd/kda_fwd_chunked.spec" --out "$bd/chunked" \
    > "$bd/chunked.log" 2>&1; echo "rc=$?" >> "$bd/chunked.log" ) &
for v in ${KDA_PROFILE_VARIANTS:-stage0:STAGE=0 bv16:BV=16 bv64:BV=64 c32:CHUNK=32,BV=64 w8:WARPS=8 lmtc0:LM_TENSOR_CORES=0}; do
  l="${v%%:*}"; labels+=("$l")
  ( LD_LIBRARY_PATH="$ptxevo_ld" timeout 150 .gpu/ptxevo build "$bd/kda_fwd_chunked.spec" --knobs "${v#*:}" \
      --out "$bd/$l" > "$bd/$l.log" 2>&1; echo "rc=$?" >> "$bd/$l.log" ) &
done
wait
cands=()
for l in "${labels[@]}"; do
  { echo "== build $l"; cat "$bd/$l.log"; } >> "$out/builds.log"
  if tail -n 1 "$bd/$l.log" | grep -qx "rc=0"; then
    cands+=(--candidate "$l=$bd/$l")
  else
    echo "build $l failed (builds.log)"
  fi
done
grep -E "^== |registers" "$out/builds.log" | head -n 40

echo "== phase times ($(( SECONDS - t_start )) s)"
timeout -k 10 "${KDA_PHASE_TIMEOUT:-240}" python3 bench/kda/phase_times.py "${cands[@]}" --shapes ${KDA_PROFILE_SHAPES:-1 3 6} \
  --out "$out/phase" > "$out/phase.log" 2>&1
echo "phase_times rc=$?"
grep -v "^|" "$out/phase.log" | tail -n 5

if [ "${KDA_NCU:-1}" = 1 ] && command -v ncu >/dev/null; then
  for ns in ${KDA_NCU_SHAPES:-1}; do
    echo "== ncu scenario $ns ($(( SECONDS - t_start )) s)"
    timeout -k 10 "${KDA_NCU_TIMEOUT:-150}" ncu --clock-control none -k regex:kda_fwd --launch-count 2 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section MemoryWorkloadAnalysis --section SchedulerStats --section ComputeWorkloadAnalysis \
      --section InstructionStats \
      python3 bench/kda/phase_times.py --candidate "chunked=$bd/chunked" --shapes "$ns" --reps 1 --rounds 1 \
      > "$out/ncu_s$ns.txt" 2>&1
    echo "ncu rc=$?"
    # Per-pipe issue shares and instruction totals (a separate pass: a metric this ncu lacks fails only it).
    timeout -k 10 "${KDA_NCU_TIMEOUT:-150}" ncu --clock-control none -k regex:kda_fwd --launch-count 2 \
      --metrics sm__inst_executed.sum,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum \
      python3 bench/kda/phase_times.py --candidate "chunked=$bd/chunked" --shapes "$ns" --reps 1 --rounds 1 \
      > "$out/ncu_pipes_s$ns.txt" 2>&1
    echo "ncu pipes rc=$?"
    grep -E "kda_fwd_(prepare|recurrence)|sm__|smsp__|l1tex__" "$out/ncu_pipes_s$ns.txt" | head -n 30
    grep -E "kda_fwd_(prepare|recurrence)|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc A|L2 Hit|Block Limit" \
      "$out/ncu_s$ns.txt" | head -n 60
  done
fi
echo "== $(( SECONDS - t_start )) s"
cat "$out/phase/phase_times.md" 2>/dev/null || tail -n 20 "$out/phase.log"
