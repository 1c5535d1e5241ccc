#!/usr/bin/env bash
# layering.sh SRC — the stages of core/src include only earlier stages (and the public
# headers): the order below is docs/ARCHITECTURE.md's. A new folder must be placed in it.
# Every include of a file under core/src counts, whatever its spelling: "stage/x.h",
# <stage/x.h>, "../stage/x.h", "#  include", and files in folders nested in a stage. A
# quoted include without a folder ("x.h") is a file of the includer's own folder.
# tests/layering_selftest.sh plants each form in a copy of the tree and sees it fail.
set -uo pipefail
src=$(realpath "$1/core/src") || exit 2
order=(base config text graph passes backend obs dist data exec watch formats infer train conformance)
fails=0
declare -A rank
for i in "${!order[@]}"; do rank[${order[$i]}]=$i; done
# Sets REPLY to path $1 with its . and .. parts resolved (no file system access).
norm() {
  local IFS=/ part out=()
  set -f
  for part in $1; do
    case $part in
    '' | .) ;;
    ..) [ ${#out[@]} -gt 0 ] && unset 'out[-1]' ;;
    *) out+=("$part") ;;
    esac
  done
  set +f
  REPLY="/${out[*]}"
}
# Sets to= the stage an include names: the first folder under core/src of the file it resolves
# to (a quoted name beside the includer first, as the compiler looks); empty for a header
# outside core/src's folders (a system header, the public ampx/ headers).
target() {
  local file=$1 inc=$2 name first
  name=${inc#*[\"<]}
  name=${name%%[\">]*}
  to=
  if [[ $inc == *'"'* ]] && [[ $name == ./* || $name == ../* || -e ${file%/*}/$name ]]; then
    norm "${file%/*}/$name"
  else
    norm "$src/$name" # the include path: core/src
  fi
  [[ $REPLY == "$src"/*/* ]] || return 0
  first=${REPLY#"$src"/}
  first=${first%%/*}
  if [ -d "$src/$first" ]; then to=$first; fi
}
for dir in "$src"/*/; do
  d=$(basename "$dir")
  r=${rank[$d]:--1}
  if [ "$r" -lt 0 ]; then
    echo "FAIL: core/src/$d is not in the stage order of tests/layering.sh"
    fails=$((fails + 1))
    continue
  fi
  while IFS= read -r hit; do
    file=${hit%%:*}
    inc=${hit#*:}
    target "$file" "$inc"
    [ -z "$to" ] && continue
    t=${rank[$to]:--1}
    if [ "$t" -lt 0 ] || [ "$t" -gt "$r" ] || { [ "$d" = conformance ] && [ "$to" != conformance ]; }; then
      echo "FAIL: ${file#"$src"/} includes $to/, a later stage than $d/: $inc"
      fails=$((fails + 1))
    fi
  done < <(find "$dir" -type f \( -name '*.c' -o -name '*.h' \) \
    -exec grep -HE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' /dev/null {} +)
done
echo "layering: ${#order[@]} stages, $fails failure(s)"
exit $((fails > 0))
