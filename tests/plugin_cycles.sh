#!/usr/bin/env bash
# plugin_cycles.sh BUILD_DIR PLUGIN... — no cycle of any length between the files of a plugin.
# From each plugin's object files (BUILD_DIR/plugins/<name>/CMakeFiles/ampx-<name>.dir, its
# kernels' objects included), each file's defined and undefined global symbols give which
# file calls which; a strongly connected component of more than one file is a cycle, and
# fails with its files named. A plugin that was not built (cuda without nvcc) is skipped.
# plugin_cycles.sh --selftest plants a three-file cycle and a chain and sees only the cycle
# fail.
set -uo pipefail
scc() { # scc NAME DIR: prints the verdict of DIR's objects; exit 1 on a cycle
  python3 - "$@" <<'PY'
import collections, glob, os, subprocess, sys
name, d = sys.argv[1], sys.argv[2]
objs = sorted(glob.glob(d + "/**/*.o", recursive=True))
if not objs:
    sys.exit("plugin_cycles: %s: no object files under %s" % (name, d))
file_of = lambda o: os.path.relpath(o, d)[:-2]
def syms(o, flag):
    out = subprocess.run(["nm", "-g", flag, o], capture_output=True, text=True, check=True).stdout
    return [l.split()[-1] for l in out.splitlines() if l.split()]
defs = {}
for o in objs:
    for s in syms(o, "--defined-only"):
        defs[s] = file_of(o)
edges = collections.defaultdict(set)
for o in objs:
    for s in syms(o, "--undefined-only"):
        if s in defs and defs[s] != file_of(o):
            edges[file_of(o)].add(defs[s])
# Tarjan's strongly connected components, iteratively
index, low, on, stack, comps, n = {}, {}, set(), [], [], 0
for root in sorted(file_of(o) for o in objs):
    if root in index:
        continue
    work = [(root, iter(sorted(edges[root])))]
    index[root] = low[root] = n; n += 1; stack.append(root); on.add(root)
    while work:
        v, it = work[-1]
        w = next(it, None)
        if w is None:
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop(); on.discard(x); comp.append(x)
                    if x == v:
                        break
                comps.append(sorted(comp))
        elif w not in index:
            index[w] = low[w] = n; n += 1; stack.append(w); on.add(w)
            work.append((w, iter(sorted(edges[w]))))
        elif w in on:
            low[v] = min(low[v], index[w])
cycles = [c for c in comps if len(c) > 1]
for c in cycles:
    print("FAIL: %s: these files call each other in a cycle: %s" % (name, " ".join(c)))
print("plugin_cycles: %s: %d files, %d calls between files, %d cycle(s)"
      % (name, len(objs), sum(len(e) for e in edges.values()), len(cycles)))
sys.exit(1 if cycles else 0)
PY
}

if [ "${1:-}" = "--selftest" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/cycle" "$tmp/chain"
  printf 'void b(void);\nvoid a(void) { b(); }\n' >"$tmp/cycle/a.c"
  printf 'void c(void);\nvoid b(void) { c(); }\n' >"$tmp/cycle/b.c"
  printf 'void a(void);\nvoid c(void) { a(); }\n' >"$tmp/cycle/c.c"
  printf 'void b(void);\nvoid a(void) { b(); }\n' >"$tmp/chain/a.c"
  printf 'void c(void);\nvoid b(void) { c(); }\n' >"$tmp/chain/b.c"
  printf 'void c(void) {}\n' >"$tmp/chain/c.c"
  for f in "$tmp"/*/*.c; do cc -c "$f" -o "${f%.c}.c.o" || exit 1; done
  fails=0
  if scc cycle "$tmp/cycle" >"$tmp/out"; then
    echo "FAIL: a three-file cycle passed"; fails=1
  elif ! grep -q "in a cycle: a.c b.c c.c" "$tmp/out"; then
    echo "FAIL: the cycle's files are not named: $(cat "$tmp/out")"; fails=1
  fi
  scc chain "$tmp/chain" >"$tmp/out" || { echo "FAIL: a chain failed: $(cat "$tmp/out")"; fails=1; }
  echo "plugin_cycles selftest: $fails failure(s)"
  exit $fails
fi

build=$1
shift
fails=0
for p in "$@"; do
  dir=$build/plugins/$p/CMakeFiles/ampx-$p.dir
  if [ ! -d "$dir" ]; then
    echo "plugin_cycles: $p: not built, skipped"
    continue
  fi
  scc "$p" "$dir" || fails=$((fails + 1))
done
exit $((fails > 0))
