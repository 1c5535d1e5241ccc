#!/usr/bin/env bash
# circles.sh [--root DIR] SRC_DIR OBJ_DIR [SRC_DIR OBJ_DIR ...] — no files call each other
# in a circle, of any length. Each SRC_DIR OBJ_DIR pair is one library or executable, checked
# on its own: SRC_DIR is the folder its sources are named from (core/src, plugins/cpu,
# tools), OBJ_DIR the folder of its object files (build/core/CMakeFiles/ampx.dir/src,
# build/plugins/cpu/CMakeFiles/ampx-cpu.dir). An object's source is its path under OBJ_DIR
# less the .o, under SRC_DIR, with CMake's __/ read as ../ (kernels/cuda/*.cu of the CUDA
# plugin); objects whose source is not there (deleted sources, generated ones in the build
# folder) are left out and named. File A calls file B when a global symbol A's object leaves
# undefined is defined in B's (functions and data alike). Every strongly connected component
# of that graph with more than one file is a circle, of two files or of twenty, and fails:
#   FAIL: a.c -> b.c -> c.c -> a.c
# a closed walk through all of its files in which each arrow is a call (a file is named
# again when no single loop visits them all), then each call inside the circle with the
# symbols it uses. Files are named relative to --root (default: each SRC_DIR). Exit 1 on any
# circle or a missing object folder, 2 on a usage error.
set -uo pipefail
root=""
if [ "${1:-}" = "--root" ]; then
  root=$2
  shift 2
fi
if [ $# -lt 2 ] || [ $(($# % 2)) -ne 0 ]; then
  echo "usage: circles.sh [--root DIR] SRC_DIR OBJ_DIR [SRC_DIR OBJ_DIR ...]" >&2
  exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LC_ALL=C

# Strongly connected components of the graph in $tmp/edges (caller, callee, symbol; sorted)
# over the files of $tmp/files (sorted): each file's reach by breadth-first search, two files
# in one component when each reaches the other; then, per component of two or more, a closed
# walk from its first file that goes to the nearest file not yet named, by shortest paths
# inside the component, and back.
# shellcheck disable=SC2016 # awk's $1, not the shell's
scc_awk='
function bfs(s, within,   q, h, t, u, k, v) { # dist[] and par[] from s
  split("", dist); split("", par)
  q[1] = s; dist[s] = 0; h = 1; t = 1
  while (h <= t) {
    u = q[h++]
    for (k = 1; k <= deg[u]; k++) {
      v = adj[u, k]
      if (v in dist || (within && comp[v] != within)) continue
      dist[v] = dist[u] + 1; par[v] = u; q[++t] = v
    }
  }
}
function path(s, v,   p, r) { # the files after s on the way to v, each followed by " -> "
  r = ""
  for (p = v; p != s; p = par[p]) r = name[p] (r == "" ? "" : " -> ") r
  return r
}
FNR == 1 { part++ }
part == 1 { n++; name[n] = $0; id[$0] = n; next }
{
  u = id[$1]; v = id[$2]
  if (!((u, v) in syms)) { adj[u, ++deg[u]] = v; syms[u, v] = $3; ns[u, v] = 1; next }
  if (++ns[u, v] <= 4) syms[u, v] = syms[u, v] " " $3
  else if (ns[u, v] == 5) syms[u, v] = syms[u, v] " ..."
}
END {
  for (s = 1; s <= n; s++) {
    bfs(s, 0)
    for (v in dist) reach[s, v] = 1
  }
  for (v = 1; v <= n; v++)
    for (s = 1; s <= v; s++)
      if (reach[s, v] && reach[v, s]) { comp[v] = s; size[s]++; break }
  cycles = 0
  for (s = 1; s <= n; s++) {
    if (size[s] < 2) continue
    cycles++
    split("", seen); seen[s] = 1; named = 1; cur = s; walk = name[s]
    while (named < size[s]) {
      bfs(cur, s); best = 0
      for (v = 1; v <= n; v++)
        if (comp[v] == s && !(v in seen) && (!best || dist[v] < dist[best])) best = v
      walk = walk " -> " path(cur, best)
      for (p = best; p != cur; p = par[p]) if (!(p in seen)) { seen[p] = 1; named++ }
      cur = best
    }
    bfs(cur, s)
    walk = walk " -> " path(cur, s)
    print "FAIL: " walk
    for (u = 1; u <= n; u++)
      for (k = 1; k <= deg[u]; k++) {
        v = adj[u, k]
        if (comp[u] == s && comp[v] == s) print "  " name[u] " -> " name[v] ": " syms[u, v]
      }
  }
  print cycles > count
}'

fails=0
while [ $# -ge 2 ]; do
  src=${1%/} dir=${2%/}
  shift 2
  base=${root:-$src} label=$src
  [ -z "$root" ] || label=$(realpath -ms --relative-to="$root" "$src")
  if [ ! -d "$dir" ]; then
    echo "circles: $label: no object folder $dir"
    fails=$((fails + 1))
    continue
  fi
  : >"$tmp/def"
  : >"$tmp/use"
  : >"$tmp/files"
  left_out=()
  while IFS= read -r o; do
    rel=${o#"$dir"/}
    rel=${rel%.o}
    up=""
    while [[ $rel == __/* ]]; do
      rel=${rel#__/}
      up+=../
    done
    c=$src/$up$rel
    if [ ! -f "$c" ]; then
      left_out+=("$up$rel")
      continue
    fi
    f=$(realpath -ms --relative-to="$base" "$c")
    echo "$f" >>"$tmp/files"
    nm -g --defined-only "$o" | awk -v f="$f" 'NF >= 3 { print $3 "\t" f }' >>"$tmp/def"
    nm -g --undefined-only "$o" | awk -v f="$f" '{ print $NF "\t" f }' >>"$tmp/use"
  done < <(find "$dir" -name '*.o' | sort)
  n_files=$(sort -u "$tmp/files" | tee "$tmp/files.s" | wc -l)
  if [ "$n_files" -eq 0 ]; then
    echo "circles: $label: no object files of $src under $dir"
    fails=$((fails + 1))
    continue
  fi
  sort -k1,1 "$tmp/def" >"$tmp/def.s"
  sort -k1,1 "$tmp/use" >"$tmp/use.s"
  # caller, callee, symbol: one line per symbol a file uses from another
  join -t $'\t' -1 1 -2 1 "$tmp/use.s" "$tmp/def.s" |
    awk -F'\t' '$2 != $3 { print $2 "\t" $3 "\t" $1 }' | sort -u >"$tmp/edges"
  n_calls=$(cut -f1,2 "$tmp/edges" | sort -u | wc -l)
  awk -F'\t' -v count="$tmp/n" "$scc_awk" "$tmp/files.s" "$tmp/edges" || exit 2
  n=$(cat "$tmp/n")
  [ ${#left_out[@]} -eq 0 ] ||
    echo "circles: $label: left out, no source in $label: ${left_out[*]}"
  echo "circles: $label: $n_files files, $n_calls calls between files, $n circle(s)"
  fails=$((fails + n))
done
exit $((fails > 0))
