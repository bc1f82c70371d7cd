#!/usr/bin/env bash
# Runs on the GPU machine from the repository root: the KDA sequence split (knob SEQSPLIT) where
# the (sequence, head) chains are few. Builds the chunked seed's defaults at each SEQSPLIT value on
# a copy of kda_fwd.spec whose benchmark shapes are few-chain shapes (one sequence of 8K-64K tokens
# with 4-32 heads, and two batched rows) and whose SEQSPLIT values include 2, 8 and 32, then times
# every kernel of each plan and the whole plan side by side (bench/kda/phase_times.py: same inputs,
# same timer, round-robin), then (KDA_GATE=1, the default) gates SEQSPLIT 16 on every spec
# (tests/gpu/kda_gpu_test.cpp, ChunkedSplitWithSequenceSplitPassesTheGateOnEverySpec).
# Needs .gpu/ (scripts/pack_gpu_bundle.sh); carry [".gpu"].
# Environment: KDA_SPLITS ["1 4 8 16 32"], KDA_SHAPES (TOML inline tables, ";"-separated),
#   KDA_ROUNDS [5], KDA_GATE [1], KDA_GATE_TIMEOUT [330].
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
out="${OUT:-/tmp/ptxevo-out}"
mkdir -p "$out"
ptxevo_ld="$PWD/.gpu/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PTXEVO_CACHE_DIR="${PTXEVO_CACHE_DIR:-/tmp/ptxevo-cache}"
t0=$SECONDS
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(cat .gpu/commit.txt 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1
  /usr/local/cuda/bin/nvcc --version 2>&1 | tail -2
} > "$out/env.txt"
cat "$out/env.txt"
base=/tmp/kda_ss_base.spec spec=/tmp/kda_ss.spec
timeout 60 python3 bench/kda/derive_spec.py kernels/kda/kda_fwd.spec kda_fwd_chunked_seed "$base" || exit 2
# (The default in a variable of its own: a "}" inside ${VAR:-...} would end the expansion.)
default_shapes='{ B = 1, T = 65536, H = 4, N = 1 };{ B = 1, T = 32768, H = 8, N = 1 };{ B = 1, T = 16384, H = 16, N = 1 };{ B = 1, T = 8192, H = 32, N = 1 };{ B = 2, T = 16384, H = 4, N = 2 }'
shapes="${KDA_SHAPES:-$default_shapes}"
KDA_SS_SHAPES="$shapes" python3 - "$base" "$spec" <<'PY' || exit 2
import os, re, sys
text = open(sys.argv[1]).read()
shapes = [s.strip() for s in os.environ["KDA_SS_SHAPES"].split(";") if s.strip()]
new, n = re.subn(r"(?ms)^benchmark = \[\n.*?^\]\n", "benchmark = [\n" + "".join(f"  {s},\n" for s in shapes) + "]\n", text)
assert n == 1, "no benchmark list in the spec"
new, m = re.subn(r"(?m)^SEQSPLIT = \{ values = \[[^\]]*\]", "SEQSPLIT = { values = [1, 2, 4, 8, 16, 32]", new)
assert m == 1, "no SEQSPLIT knob in the spec"
open(sys.argv[2], "w").write(new)
PY
cands=()
for s in ${KDA_SPLITS:-1 4 8 16 32}; do
  if LD_LIBRARY_PATH="$ptxevo_ld" timeout 120 .gpu/ptxevo build "$spec" --knobs "SEQSPLIT=$s" --out "/tmp/kda_ss_$s" \
      > "$out/build_ss$s.log" 2>&1; then
    cands+=(--candidate "ss$s=/tmp/kda_ss_$s")
  else
    echo "build of SEQSPLIT=$s failed ($out/build_ss$s.log)"
  fi
done
echo "== builds ($(( SECONDS - t0 )) s)"
timeout -k 10 "${KDA_BENCH_TIMEOUT:-240}" python3 bench/kda/phase_times.py "${cands[@]}" --rounds "${KDA_ROUNDS:-5}" \
  --out "$out/pt" > "$out/phase_times.log" 2>&1
echo "== phase times rc=$? ($(( SECONDS - t0 )) s)"
if [ "${KDA_GATE:-1}" = 1 ]; then
  LD_LIBRARY_PATH="$ptxevo_ld" PTXEVO_SOURCE_DIR="$PWD" PTXEVO_BIN="$PWD/.gpu/ptxevo" PTXEVO_RESULTS_DIR="$out" \
    timeout -k 10 "${KDA_GATE_TIMEOUT:-330}" .gpu/ptxevo_kda_gpu_tests \
    --gtest_filter="${KDA_GATE_FILTER:-KdaGpu.ChunkedSplitWithSequenceSplitPassesTheGateOnEverySpec}" > "$out/gate.log" 2>&1
  echo "== gate rc=$? ($(( SECONDS - t0 )) s)"
  grep -E "^\[  (PASSED|FAILED) |OK \]|FAILED \]|worst|rel" "$out/gate.log" | tail -30
fi
cat "$out/pt/phase_times.md" 2>/dev/null || tail -20 "$out/phase_times.log"
