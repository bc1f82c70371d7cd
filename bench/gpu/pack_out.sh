# shellcheck shell=bash
# Sourced by the GPU run scripts: the device machine returns at most 8 files from $OUT (no deeper
# than two folders), and a run that writes more loses the rest.
#   pack_out OUT ARCHIVE KEEP...   every file under OUT except the KEEP paths (relative to OUT)
#                                  goes into OUT/ARCHIVE, then is removed
pack_out() {
  local out="$1" archive="$2" f
  shift 2
  local keep=" $* " list=()
  while IFS= read -r -d '' f; do
    f="${f#./}"
    [[ "$keep" == *" $f "* || "$f" == "$archive" ]] && continue
    list+=("$f")
  done < <(cd "$out" && find . -type f -print0 | sort -z)
  [ ${#list[@]} -gt 0 ] || return 0
  (cd "$out" && tar -czf "$archive" "${list[@]}" && rm -f "${list[@]}") || return 1
  find "$out" -mindepth 1 -type d -empty -delete
  echo "pack_out: ${#list[@]} files into $archive; left beside it: $*"
}
