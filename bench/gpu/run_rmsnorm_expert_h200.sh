#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with the bundle of scripts/pack_gpu_bundle.sh
# in .gpu/, packed with PTXEVO_EXPERT_RMSNORM (the expert's checkout in .gpu/anchors/RMSNorm-H100):
# the RMSNorm seeds beside the expert kernel, torch eager and torch.compile, in one process per
# table, same inputs, same timer, interleaved (bench/rmsnorm/torch_bench.py).
#   decode      rmsnorm_fwd_decode.spec's inference shapes, CUDA-graph replays
#   decode_fp16 the same shapes in fp16 (rmsnorm_fwd_decode_fp16.spec), CUDA-graph replays
#   fwd_graph   rmsnorm_fwd.spec's goal shapes, CUDA-graph replays
#   residual    rmsnorm_fwd_decode_residual.spec (the residual add fused), CUDA-graph replays
#   bwd_stream  rmsnorm_bwd.spec's shapes, stream launches (the expert's backward caches a TMA
#               descriptor per pointer pair, so graph replays over rotating inputs skip its path)
#   fwd_stream  the goal shapes again, stream launches
# The seeds are built here with `.gpu/ptxevo build` at their defaults; CANDIDATES_<table> (a
# space-separated list of LABEL=DIR build dirs made by `ptxevo build`) replaces them; VARIANTS_<table>
# (LABEL=KNOBS ..., e.g. "wide=WIDE_ROWS=128,ITEMS=2") adds builds of the table's spec at those
# knobs beside the seed, each gated first (`ptxevo eval`, no timing; a failing one is left out).
# SHAPES_<table> ("M=32768,N=256 M=32768,N=512") times only those benchmark shapes. EXTRA_<table>
# (LABEL=DIR ...) adds build dirs made elsewhere, e.g. by bench/gpu/build_parent.sh (an earlier
# commit's templates, to time a template change against its parent in one run); their code must
# have passed the gate before (it is checked against fp64 on the timed shapes here, not gated).
# The goal-shape tables' variants (VARIANTS_fwd_graph, also timed by fwd_stream) are built from
# rmsnorm_fwd.spec's shapes with rmsnorm_fwd_decode.spec's knobs and defaults (the latency paths:
# SPREAD_CTAS, WEIGHT_EARLY, EARLY_LAUNCH, PERSISTENT_CTAS, WIDE_ROWS), written next to them as
# kernels/rmsnorm/rmsnorm_fwd_all_knobs.spec on the GPU machine only. Each table has a time budget
# within the 10-minute call; what finished is kept. Everything lands in $OUT as one archive plus a
# summary. DECODE_S, DECODE_FP16_S, RESIDUAL_S, FWD_GRAPH_S, BWD_STREAM_S, FWD_STREAM_S: the tables' time
# budgets. EXPORT_<table>=SPEC (decode, fwd_graph, fwd_stream: no residual) also times `ptxevo export
# SPEC --format torch` (the spec at its defaults) as provider `export`, in the same process and
# graphs as the build it came from (torch_bench.py --export).
# WITH_EXPERT=0 leaves the expert out (no extension build): knob A/B runs against the seed and torch.
# Usage: [TABLES="decode decode_fp16 fwd_graph residual bwd_stream fwd_stream"] bench/gpu/run_rmsnorm_expert_h200.sh
set -uo pipefail
tables=" ${TABLES:-decode decode_fp16 fwd_graph residual bwd_stream fwd_stream} "
out="${OUT:-/tmp/ptxevo-out}"
work=/tmp/rmsnorm-expert; rm -rf "$work"; mkdir -p "$work/builds" "$out"
expert="$PWD/.gpu/anchors/RMSNorm-H100"
with_expert="${WITH_EXPERT:-1}"
[ "$with_expert" = 0 ] || [ -f "$expert/rmsnorm/__init__.py" ] ||
  { echo "no expert checkout in .gpu/anchors: pack with PTXEVO_EXPERT_RMSNORM=<checkout> scripts/pack_gpu_bundle.sh" >&2; exit 2; }
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
ldd .gpu/ptxevo 2>/dev/null | grep -q "libmpi.*not found" && export LD_LIBRARY_PATH="$PWD/.gpu/lib/mpi:$LD_LIBRARY_PATH"
export PTXEVO_SOURCE_DIR="$PWD" PTXEVO_CACHE_DIR=/tmp/ptxevo-cache PYTHONUNBUFFERED=1
export TORCH_EXTENSIONS_DIR=/tmp/torch-ext MAX_JOBS=16
commit="$(cat .gpu/commit.txt 2>/dev/null || echo unknown)"
t0=$(date +%s); budget="${BUDGET_S:-570}"
left() { echo $(( budget - ($(date +%s) - t0) )); }
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit"
  echo "expert: Int21-AI/RMSNorm-H100 checkout in .gpu/anchors (commit as packed; see docs/targets.md)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  /usr/local/cuda/bin/nvcc --version | tail -2
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
} > "$work/env.txt" 2>&1
cat "$work/env.txt"

# The expert's extension, built once before any table (torch caches it in TORCH_EXTENSIONS_DIR).
if [ "$with_expert" != 0 ]; then
  (cd "$expert" && timeout 240 python3 -c 'import rmsnorm._extension as e; e.get_extension(); print("expert extension built")') \
    > "$work/expert_build.log" 2>&1
  echo "expert build rc=$? after $(( $(date +%s) - t0 )) s"; tail -3 "$work/expert_build.log"
fi

build() {  # LABEL SPEC [KNOBS]
  timeout 120 .gpu/ptxevo build "$2" ${3:+--knobs "$3"} --out "$work/builds/$1" > "$work/builds/$1.txt" 2>&1 ||
    { echo "build of $2 ${3:-} failed:" >&2; tail -5 "$work/builds/$1.txt" >&2; return 1; }
}
# The seed plus VARIANTS_<table>'s builds that pass the gate, as LABEL=DIR words.
variants() {  # TABLE SPEC
  local table="$1" spec="$2" list="seed=$work/builds/$1" v label knobs
  local var="VARIANTS_$table"
  for v in ${!var:-}; do
    label="${v%%=*}"; knobs="${v#*=}"
    build "$table-$label" "$spec" "$knobs" || continue
    timeout 150 .gpu/ptxevo eval "$spec" --knobs "$knobs" --repeat 1 > "$work/builds/$table-$label.gate.txt" 2>&1
    if grep -q "passed: 1" "$work/builds/$table-$label.gate.txt"; then
      list="$list $label=$work/builds/$table-$label"; echo "$table $label ($knobs): gate pass" >&2
    else
      echo "$table $label ($knobs): gate did not pass, left out:" >&2; tail -4 "$work/builds/$table-$label.gate.txt" >&2
    fi
  done
  echo "$list"
}
expert_arg=(--expert "$expert"); [ "$with_expert" = 0 ] && expert_arg=()
bench() {  # TABLE SECONDS LABEL=DIR... -- OPTIONS
  local table="$1" secs="$2"; shift 2
  local l; l=$(left); [ "$l" -lt 30 ] && { echo "== $table: skipped, $l s left"; return; }
  [ "$secs" -gt "$l" ] && secs="$l"
  local cands=()
  while [ "$1" != "--" ]; do cands+=(--candidate "$1"); shift; done; shift
  local extra_var="EXTRA_$table" c
  for c in ${!extra_var:-}; do cands+=(--candidate "$c"); done
  local export_var="EXPORT_$table"
  if [ -n "${!export_var:-}" ]; then
    if timeout 180 .gpu/ptxevo export "${!export_var}" --format torch --out "$work/export_$table" \
        > "$work/export_$table.txt" 2>&1; then
      cands+=(--export "export=$work/export_$table")
    else
      echo "export of ${!export_var} failed, timed without it:" >&2; tail -5 "$work/export_$table.txt" >&2
    fi
  fi
  local shapes_var="SHAPES_$table" shapes=()
  [ -n "${!shapes_var:-}" ] && shapes=(--shapes ${!shapes_var})
  echo "== $table (up to $secs s)"
  timeout "$secs" python3 bench/rmsnorm/torch_bench.py --commit "$commit" "${cands[@]}" ${expert_arg[@]+"${expert_arg[@]}"} \
    --out "$work/$table" "${shapes[@]}" "$@" > "$work/$table.log" 2>&1
  echo "$table rc=$?"
}
[[ "$tables" == *" fwd_graph "* || "$tables" == *" fwd_stream "* ]] && build fwd kernels/rmsnorm/rmsnorm_fwd.spec
all_knobs=kernels/rmsnorm/rmsnorm_fwd_all_knobs.spec
{ sed '/^\[objective\]/,$d' kernels/rmsnorm/rmsnorm_fwd.spec; sed -n '/^\[objective\]/,$p' kernels/rmsnorm/rmsnorm_fwd_decode.spec; } > "$all_knobs"
fwd_list="seed=$work/builds/fwd"
[[ -n "${VARIANTS_fwd_graph:-}" && -z "${CANDIDATES_fwd_graph:-}" ]] &&
  fwd_list="$(variants fwd_graph "$all_knobs" | sed "s|^seed=$work/builds/fwd_graph|seed=$work/builds/fwd|")"
[[ "$tables" == *" decode "* ]] && build decode kernels/rmsnorm/rmsnorm_fwd_decode.spec
[[ "$tables" == *" decode_fp16 "* ]] && build decode_fp16 kernels/rmsnorm/rmsnorm_fwd_decode_fp16.spec
[[ "$tables" == *" bwd_stream "* ]] && build bwd kernels/rmsnorm/rmsnorm_bwd.spec
[[ "$tables" == *" residual "* ]] && build residual kernels/rmsnorm/rmsnorm_fwd_decode_residual.spec
[[ "$tables" == *" decode "* ]] && bench decode "${DECODE_S:-200}" ${CANDIDATES_decode:-$(variants decode kernels/rmsnorm/rmsnorm_fwd_decode.spec)} -- --graph
[[ "$tables" == *" decode_fp16 "* ]] && bench decode_fp16 "${DECODE_FP16_S:-150}" ${CANDIDATES_decode_fp16:-$(variants decode_fp16 kernels/rmsnorm/rmsnorm_fwd_decode_fp16.spec)} -- --graph
[[ "$tables" == *" fwd_graph "* ]] && bench fwd_graph "${FWD_GRAPH_S:-180}" ${CANDIDATES_fwd_graph:-$fwd_list} -- --graph
[[ "$tables" == *" residual "* ]] && bench residual "${RESIDUAL_S:-150}" ${CANDIDATES_residual:-$(variants residual kernels/rmsnorm/rmsnorm_fwd_decode_residual.spec)} -- --graph
[[ "$tables" == *" bwd_stream "* ]] && bench bwd_stream "${BWD_STREAM_S:-120}" ${CANDIDATES_bwd_stream:-$(variants bwd_stream kernels/rmsnorm/rmsnorm_bwd.spec | sed "s|^seed=$work/builds/bwd_stream|seed=$work/builds/bwd|")} --
[[ "$tables" == *" fwd_stream "* ]] && bench fwd_stream "${FWD_STREAM_S:-150}" ${CANDIDATES_fwd_graph:-$fwd_list} --

tar -C "$work" -czf "$out/rmsnorm_expert.tar.gz" --exclude='*.cubin' . 2>/dev/null
for t in decode decode_fp16 fwd_graph residual bwd_stream fwd_stream; do
  [ -f "$work/$t/results.md" ] && { echo "### $t"; cat "$work/$t/results.md"; echo; }
done > "$out/summary.md"
cp "$work/env.txt" "$out/"
for t in decode decode_fp16 fwd_graph residual bwd_stream fwd_stream; do [ -f "$work/$t.log" ] && tail -25 "$work/$t.log"; done
echo "total $(( $(date +%s) - t0 )) s"
