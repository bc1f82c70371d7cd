#!/usr/bin/env bash
# Builds a spec with an earlier commit's templates (kernels/), here, with this checkout's ptxevo,
# into .gpu/parent/LABEL: a template change is then timed against its parent in one run on the
# GPU machine (run_rmsnorm_expert_h200.sh's EXTRA_<table>="LABEL=.gpu/parent/LABEL"). The spec
# comes from the same commit, so its defaults are the parent's; KNOBS (optional) overrides them.
# Run it after scripts/pack_gpu_bundle.sh, which recreates .gpu/.
# Usage: bench/gpu/build_parent.sh COMMIT SPEC LABEL [KNOBS]
#   bench/gpu/build_parent.sh b2eba65 kernels/rmsnorm/rmsnorm_fwd.spec old
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 3 ] || { sed -n '2,8p' "$0" >&2; exit 2; }
commit="$1" spec="$2" label="$3" knobs="${4:-}"
[ -x build/ptxevo ] || { echo "build_parent: no build/ptxevo: run scripts/setup.sh first" >&2; exit 1; }
[ -d .gpu ] || { echo "build_parent: no .gpu/: run scripts/pack_gpu_bundle.sh first" >&2; exit 1; }
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
git archive "$commit" kernels | tar -x -C "$tree"
out=".gpu/parent/$label"
rm -rf "$out" && mkdir -p "$(dirname "$out")"
build/ptxevo build "$tree/$spec" ${knobs:+--knobs "$knobs"} --out "$out" --no-cache > "$tree/build.log" 2>&1 ||
  { tail -5 "$tree/build.log" >&2; exit 1; }
rm -f "$out/kernel.ptx"  # the cubin is what runs; the PTX would only take room in the carry
echo "$commit $spec${knobs:+ $knobs} -> $out"
