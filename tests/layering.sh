#!/usr/bin/env bash
# layering.sh SRC — the stages of core/src include only earlier stages (and the public
# headers): the order below is docs/ARCHITECTURE.md's. A new folder must be placed in it.
set -uo pipefail
src=$1/core/src
order=(base config graph backend obs dist train conformance)
fails=0
rank() { for i in "${!order[@]}"; do [ "${order[$i]}" = "$1" ] && { echo "$i"; return; }; done; echo -1; }
for dir in "$src"/*/; do
  d=$(basename "$dir")
  r=$(rank "$d")
  if [ "$r" -lt 0 ]; then
    echo "FAIL: core/src/$d is not in the stage order of tests/layering.sh"
    fails=$((fails + 1))
    continue
  fi
  while IFS=: read -r file inc; do
    to=${inc#*\"}
    to=${to%%/*}
    [ "$to" = ampx ] && continue # the public headers
    t=$(rank "$to")
    if [ "$t" -lt 0 ] || [ "$t" -gt "$r" ] || { [ "$d" = conformance ] && [ "$to" != conformance ]; }; then
      echo "FAIL: ${file#"$src"/} includes $to/, a later stage than $d/"
      fails=$((fails + 1))
    fi
  done < <(grep -HoE '#include "[a-z_]+/' "$dir"*.c "$dir"*.h 2>/dev/null)
done
echo "layering: ${#order[@]} stages, $fails failure(s)"
exit $((fails > 0))
