# Sourced by the GPU run scripts that call FLA (Triton kernels with autotuning). FLA's first call
# at a shape tunes every config of its kernels (on the H100 more than 200 s at scenario 1, and it
# never finished at H = 64 within a call); Triton keeps each kernel's tuning result on disk
# (FLA_CACHE_RESULTS=1) as <TRITON_CACHE_DIR>/<key>/<kernel>.autotune.json, the key covering
# Triton's version, the GPU target, the kernel's source and its configs. Carrying those files to
# the next machine of the same image lets FLA skip the tuning (it then only compiles the chosen
# configs).
#   autotune_restore   copy the files carried in .triton_autotune/ (git-ignored: unpack a run's
#                      fla_autotune.tgz there and carry the folder) into $TRITON_CACHE_DIR
#   autotune_save OUT  pack $TRITON_CACHE_DIR's *.autotune.json files into OUT/fla_autotune.tgz
#                      (after a timeout too: every kernel tuned so far is there)
autotune_restore() {
  [ -d .triton_autotune ] || return 0
  mkdir -p "$TRITON_CACHE_DIR" && cp -r .triton_autotune/. "$TRITON_CACHE_DIR/"
  echo "triton autotune: $(find .triton_autotune -name '*.autotune.json' | wc -l) tuning results restored into $TRITON_CACHE_DIR"
}
autotune_save() {
  [ -d "$TRITON_CACHE_DIR" ] || return 0
  local n
  n=$(cd "$TRITON_CACHE_DIR" && find . -name '*.autotune.json' | wc -l)
  [ "$n" -gt 0 ] || return 0
  (cd "$TRITON_CACHE_DIR" && find . -name '*.autotune.json' -print0 | tar --null -T - -czf "$1/fla_autotune.tgz")
  echo "triton autotune: $n tuning results saved to $1/fla_autotune.tgz (next time: mkdir .triton_autotune && tar -xzf fla_autotune.tgz -C .triton_autotune, carry it)"
}
