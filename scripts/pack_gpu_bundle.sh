#!/usr/bin/env bash
# Copies the release binaries and the non-system libraries they need into .gpu/ (ignored by
# git), so a GPU machine with the CUDA 13 toolkit but without Debian's -dev packages can run
# them: LD_LIBRARY_PATH=.gpu/lib:/usr/local/cuda/lib64. Used for runs on the lent H200.
set -euo pipefail
cd "$(dirname "$0")/.."
out=.gpu
rm -rf "$out" && mkdir -p "$out/lib"
bins=(ptxevo ptxevo_gpu_tests ptxevo_kda_gpu_tests ptxevo_evaluator_tests ptxevo_kernels_tests ptxevo_ir_tests build_bench ir_parse_bench)
# PTXEVO_PACK_BINS="ptxevo": only those (a campaign needs the CLI alone; room for a "before" build).
[ -n "${PTXEVO_PACK_BINS:-}" ] && read -r -a bins <<< "$PTXEVO_PACK_BINS"
# scripts/setup.sh builds only the CLI: the rest here (a no-op when they are current).
[ -f build/build.ninja ] || { echo "pack: no build/: run scripts/setup.sh first" >&2; exit 1; }
cmake --build build --parallel "$(nproc)" --target "${bins[@]}"
for b in "${bins[@]}"; do
  [ -x "build/$b" ] || { echo "pack: build/$b missing after the build" >&2; exit 1; }
  cp "build/$b" "$out/"
  # A run carries the tree and .gpu/ in 64 MiB: unstripped, the binaries alone took 35 MB and the
  # call was refused. PTXEVO_PACK_KEEP_SYMBOLS=1 keeps symbols for debugging a crash there.
  [ "${PTXEVO_PACK_KEEP_SYMBOLS:-0}" = 1 ] || strip "$out/$b"
done
# Libraries from Debian that the GPU image lacks (CUDA's own come from its toolkit there).
for b in "${bins[@]}"; do ldd "build/$b"; done | awk '/=> \// {print $3}' | sort -u |
  grep -E 'libtbb|libtomlplusplus|libbenchmark|libcrypto|libfmt|libspdlog|libboost' | while read -r lib; do
    cp -L "$lib" "$out/lib/"
  done
# The commit the binaries were built from: the GPU machine's copy of the tree may carry a stale
# .git, so run scripts read this file rather than asking git there.
# Open MPI is on the GPU machine's image; its libraries come along in lib/mpi only as a fallback
# for an image without them (bench/gpu scripts add lib/mpi when `ldd` finds no libmpi).
mkdir -p "$out/lib/mpi"
ldd build/ptxevo | awk '/=> \// {print $3}' | grep -E 'libmpi|libopen-rte|libopen-pal|libhwloc|libevent' |
  while read -r lib; do cp -L "$lib" "$out/lib/mpi/"; done
# An anchor to measure against (bench/rmsnorm/torch_bench.py --expert): a checkout named by
# PTXEVO_EXPERT_RMSNORM is copied, without its .git, to .gpu/anchors/RMSNorm-H100. Its code only
# travels to be measured; it never enters the repository.
if [ -n "${PTXEVO_EXPERT_RMSNORM:-}" ]; then
  [ -f "$PTXEVO_EXPERT_RMSNORM/rmsnorm/__init__.py" ] ||
    { echo "pack: $PTXEVO_EXPERT_RMSNORM is no checkout of Int21-AI/RMSNorm-H100" >&2; exit 1; }
  mkdir -p "$out/anchors/RMSNorm-H100"
  (cd "$PTXEVO_EXPERT_RMSNORM" && tar --exclude=.git -cf - .) | tar -C "$out/anchors/RMSNorm-H100" -xf -
fi
# The KDA anchor (bench/kda/fla_bench.py --flashkda): a MoonshotAI/FlashKDA checkout named by
# PTXEVO_EXPERT_FLASHKDA whose cutlass/ holds CUTLASS's include, tools/util/include and
# examples/common at the submodule's commit (31 MB), travels as .gpu/anchors/FlashKDA.tgz (3 MB).
# Prepare one with:
#   git --git-dir=<FlashKDA mirror> archive 1ce47ea | tar -x -C DIR && mkdir -p DIR/cutlass &&
#   git --git-dir=<cutlass mirror> archive 5c149f52 include tools/util/include examples/common | tar -x -C DIR/cutlass
if [ -n "${PTXEVO_EXPERT_FLASHKDA:-}" ]; then
  [ -f "$PTXEVO_EXPERT_FLASHKDA/flash_kda/__init__.py" ] && [ -d "$PTXEVO_EXPERT_FLASHKDA/cutlass/include/cute" ] ||
    { echo "pack: $PTXEVO_EXPERT_FLASHKDA is no FlashKDA checkout with CUTLASS in cutlass/" >&2; exit 1; }
  mkdir -p "$out/anchors"
  tar -C "$PTXEVO_EXPERT_FLASHKDA" --exclude=.git --exclude=docs/assets -czf "$out/anchors/FlashKDA.tgz" .
fi
# A "before" build for a before/after pair on one GPU machine (bench/gpu/run_throughput_h200.sh's
# PTXEVO_BIN): PTXEVO_PACK_BEFORE names a worktree of an older commit built with its own
# scripts/setup.sh; its ptxevo (stripped) and its kernels/ (the specs and seed templates that
# binary understands) go to .gpu/before/. Leave the anchors out of such a pack: the carried tree
# has 64 MiB.
if [ -n "${PTXEVO_PACK_BEFORE:-}" ]; then
  [ -x "$PTXEVO_PACK_BEFORE/build/ptxevo" ] || { echo "pack: no $PTXEVO_PACK_BEFORE/build/ptxevo" >&2; exit 1; }
  mkdir -p "$out/before"
  cp "$PTXEVO_PACK_BEFORE/build/ptxevo" "$out/before/ptxevo" && strip "$out/before/ptxevo"
  (cd "$PTXEVO_PACK_BEFORE" && tar --exclude='*.md' -cf - kernels) | tar -C "$out/before" -xf -
  git -C "$PTXEVO_PACK_BEFORE" describe --always --abbrev=7 > "$out/before/commit.txt"
fi
git describe --always --dirty --abbrev=7 > "$out/commit.txt"
du -sh "$out"
