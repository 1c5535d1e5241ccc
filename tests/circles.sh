#!/usr/bin/env bash
# circles.sh SRC_DIR OBJ_DIR — no two files of core/src call each other. From the object
# files of libampx's sources (SRC_DIR: core/src; OBJ_DIR: build/core/CMakeFiles/ampx.dir/src;
# objects of sources no longer in SRC_DIR are left out), each file's defined and undefined
# global symbols give which file calls which; a pair of files that reference each other's
# symbols is a circle, and fails. (A longer cycle through three files is allowed: the stage
# order of tests/layering.sh already bounds those to one folder.)
set -uo pipefail
src=$1 dir=$2
[ -d "$dir" ] || { echo "circles: no object folder $dir"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
while IFS= read -r o; do
  f=${o#"$dir"/}
  f=${f%.o}
  nm -g --defined-only "$o" | awk -v f="$f" 'NF >= 3 { print $3 "\t" f }' >>"$tmp/def"
  nm -g --undefined-only "$o" | awk -v f="$f" '{ print $NF "\t" f }' >>"$tmp/use"
done < <(find "$src" -name '*.c' | sort | while IFS= read -r c; do
  o=$dir/${c#"$src"/}.o
  [ -f "$o" ] && echo "$o"
done)
n_files=$(cut -f2 "$tmp/def" | sort -u | wc -l)
[ -s "$tmp/def" ] && [ "$n_files" -gt 0 ] || { echo "circles: no object files under $dir"; exit 1; }
sort -k1,1 "$tmp/def" >"$tmp/def.s"
sort -k1,1 "$tmp/use" >"$tmp/use.s"
# caller -> callee edges between different files
join -t $'\t' -1 1 -2 1 "$tmp/use.s" "$tmp/def.s" | awk -F'\t' '$2 != $3 { print $2 "\t" $3 }' |
  sort -u >"$tmp/edges"
awk -F'\t' 'NR == FNR { e[$1 "\t" $2] = 1; next } ($2 "\t" $1) in e && $1 < $2 { print }' \
  "$tmp/edges" "$tmp/edges" >"$tmp/circles"
fails=$(wc -l <"$tmp/circles")
while IFS=$'\t' read -r a b; do
  echo "FAIL: $a and $b call each other"
done <"$tmp/circles"
echo "circles: $n_files files, $(wc -l <"$tmp/edges") calls between files, $fails circle(s)"
exit $((fails > 0))
