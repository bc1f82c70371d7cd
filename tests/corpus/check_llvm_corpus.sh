#!/usr/bin/env bash
# Build every tests/corpus/llvm source to PTX with LLVM 19's NVPTX back end and assemble
# each PTX file with ptxas for the same arch.
#
#   *.cu : clang-19 -x cuda --cuda-device-only -S -nocudainc -nocudalib
#          -Wno-unknown-cuda-version --offload-arch=<arch> <opts>
#   *.ll : llc-19 -march=nvptx64 -mcpu=<arch> <opts>
#
# Header (first line of each source):
#   // corpus: archs=sm_80,sm_90a opts=-O0,-O2,-O2 -g      (.cu)
#   ; corpus: archs=sm_80,sm_90a opts=-O0,-O2               (.ll)
# archs: comma-separated; opts: comma-separated option strings (each may hold
# several space-separated flags); opts defaults to -O2 when absent.
#
# Usage: check_llvm_corpus.sh [OUT_DIR]   (default: a temporary dir, removed at exit)
# Env:   CLANG, LLC, PTXAS override the tool paths; VERBOSE=1 prints every file.
# Output file names: <source-base>.<arch>.<opts-slug>.ptx, e.g. reduce_shuffle.sm_80.O2_g.ptx
# Exit status 0 only when every combination compiles and assembles.
set -u

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC_DIR="$HERE/llvm"
CLANG="${CLANG:-clang-19}"
LLC="${LLC:-llc-19}"
PTXAS="${PTXAS:-/usr/local/cuda/bin/ptxas}"

if [ $# -ge 1 ]; then
  OUT="$1"
  mkdir -p "$OUT"
else
  OUT="$(mktemp -d -t llvm_corpus_XXXXXX)"
  trap 'rm -rf "$OUT"' EXIT
fi

passed=0
failed=0
failures=()

slug() {  # "-O2 -g" -> "O2_g"
  local s="$1"
  s="${s//-/}"
  s="${s// /_}"
  s="${s//=/_}"
  printf '%s' "$s"
}

header_field() {  # header_field FILE KEY -> value (rest of line for opts)
  local line
  line="$(head -n 1 "$1")"
  case "$2" in
    archs) printf '%s' "$line" | sed -n 's/.*corpus:.*archs=\([A-Za-z0-9_,]*\).*/\1/p' ;;
    opts) printf '%s' "$line" | sed -n 's/.*corpus:.* opts=\(.*\)$/\1/p' ;;
  esac
}

for src in "$SRC_DIR"/*.cu "$SRC_DIR"/*.ll; do
  [ -e "$src" ] || continue
  base="$(basename "$src")"
  stem="${base%.*}"
  ext="${base##*.}"
  archs="$(header_field "$src" archs)"
  opts="$(header_field "$src" opts)"
  if [ -z "$archs" ]; then
    echo "FAIL header $base: missing 'corpus: archs=' header"
    failed=$((failed + 1))
    failures+=("$base (header)")
    continue
  fi
  [ -n "$opts" ] || opts="-O2"
  IFS=',' read -r -a arch_list <<<"$archs"
  IFS=',' read -r -a opt_list <<<"$opts"
  for arch in "${arch_list[@]}"; do
    for opt in "${opt_list[@]}"; do
      out="$OUT/$stem.$arch.$(slug "$opt").ptx"
      tag="$base [$arch, $opt]"
      # shellcheck disable=SC2086  # $opt holds several flags on purpose
      if [ "$ext" = "cu" ]; then
        log="$("$CLANG" -x cuda --cuda-device-only -S -nocudainc -nocudalib -Wno-unknown-cuda-version \
          --offload-arch="$arch" $opt "$src" -o "$out" 2>&1)"
      else
        log="$("$LLC" -march=nvptx64 -mcpu="$arch" $opt "$src" -o "$out" 2>&1)"
      fi
      rc=$?
      if [ $rc -ne 0 ] || [ ! -s "$out" ]; then
        echo "FAIL compile $tag"
        echo "$log"
        failed=$((failed + 1))
        failures+=("$tag (compile)")
        continue
      fi
      if ! plog="$("$PTXAS" -arch="$arch" "$out" -o /dev/null 2>&1)"; then
        echo "FAIL ptxas $tag ($out)"
        echo "$plog"
        failed=$((failed + 1))
        failures+=("$tag (ptxas)")
        continue
      fi
      passed=$((passed + 1))
      if [ "${VERBOSE:-0}" = "1" ]; then
        echo "ok   $tag -> $(basename "$out")"
        [ -n "$log" ] && echo "     $log"
      fi
    done
  done
done

nfiles="$(find "$OUT" -maxdepth 1 -name '*.ptx' | wc -l)"
echo "PTX files produced: $nfiles (in $OUT)"
if [ $failed -ne 0 ]; then
  printf 'failed: %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
