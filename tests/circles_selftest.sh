#!/usr/bin/env bash
# circles_selftest.sh — circles.sh fails on planted files that call each other in a circle of
# three (a.c -> b.c -> c.c -> a.c) or two, names a circle no single loop goes round (a hub
# called back by two files), passes when the calls go one way, checks each SRC_DIR OBJ_DIR
# pair on its own, and leaves out the object of a deleted source.
set -uo pipefail
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
plant() { # TREE NAME BODY: TREE/src/x/NAME.c, compiled to TREE/obj/x/NAME.c.o
  mkdir -p "$tmp/$1/src/x" "$tmp/$1/obj/x"
  printf '%s\n' "$3" >"$tmp/$1/src/x/$2.c"
  cc -c -o "$tmp/$1/obj/x/$2.c.o" "$tmp/$1/src/x/$2.c" || exit 1
}
run() { # TREE...: circles.sh over each TREE's src and obj; rc in $rc, output in $out
  local args=()
  for t in "$@"; do args+=("$tmp/$t/src" "$tmp/$t/obj"); done
  out=$(bash "$here/circles.sh" "${args[@]}")
  rc=$?
}
expect() { # WHAT RC LINE: circles.sh exited RC (0 or 1) and printed LINE
  if [ "$rc" -eq "$2" ] && grep -qxF -- "$3" <<<"$out"; then
    echo "ok: $1"
  else
    echo "FAIL: $1 (exit $rc, expected $2 and the line '$3'):"
    sed 's/^/  | /' <<<"$out"
    fails=$((fails + 1))
  fi
}

plant t a 'int b(void); int a(void) { return b() + 1; }'
plant t b 'int c(void); int b(void) { return c() + 1; }'
plant t c 'int a(void); int c(void) { return a() + 1; }'
run t
expect "a circle of three files is found" 1 "FAIL: x/a.c -> x/b.c -> x/c.c -> x/a.c"
expect "each call of the circle is named" 1 "  x/c.c -> x/a.c: a"

plant t c 'int c(void) { return 3; }'
run t
expect "calls one way (a.c -> b.c -> c.c) pass" 0 \
  "circles: $tmp/t/src: 3 files, 2 calls between files, 0 circle(s)"

plant t b 'int a(void); int c(void); int b(void) { return a() + c(); }'
run t
expect "a pair is found" 1 "FAIL: x/a.c -> x/b.c -> x/a.c"
if grep -q 'FAIL:.*c\.c' <<<"$out"; then
  echo "FAIL: c.c, called by the pair, is named in it"
  fails=$((fails + 1))
fi

plant h h 'int x(void); int y(void); int h(void) { return x() + y(); } int g(void) { return 1; }'
plant h x 'int g(void); int x(void) { return g(); }'
plant h y 'int g(void); int y(void) { return g(); }'
run h
expect "a hub called back by two files is one circle" 1 \
  "FAIL: x/h.c -> x/x.c -> x/h.c -> x/y.c -> x/h.c"
expect "one circle, not two" 1 "circles: $tmp/h/src: 3 files, 4 calls between files, 1 circle(s)"

# u's files call a() and b() of their own; together with t's they would make a circle.
plant u a 'int a(void) { return 1; }'
plant u b 'int a(void); int b(void) { return a(); }'
plant t b 'int b(void) { return 2; }'
run t u
expect "each tree is checked on its own" 0 \
  "circles: $tmp/u/src: 2 files, 1 calls between files, 0 circle(s)"
run u h
expect "a circle in the second tree fails" 1 "FAIL: x/h.c -> x/x.c -> x/h.c -> x/y.c -> x/h.c"

plant t b 'int c(void); int b(void) { return c() + 1; }'
plant t c 'int a(void); int c(void) { return a() + 1; }'
rm "$tmp/t/src/x/c.c"
run t
expect "the object of a deleted source is left out" 0 \
  "circles: $tmp/t/src: left out, no source in $tmp/t/src: x/c.c"

# A source outside SRC_DIR, as CMake names its object (__/ for ../), e.g. kernels/cuda/*.cu
# of the CUDA plugin; files named from --root.
mkdir -p "$tmp/k/src" "$tmp/k/kern" "$tmp/k/obj/__/kern"
printf '%s\n' 'int z(void); int w(void) { return z(); }' >"$tmp/k/src/w.c"
printf '%s\n' 'int w(void); int z(void) { return w(); }' >"$tmp/k/kern/z.c"
cc -c -o "$tmp/k/obj/w.c.o" "$tmp/k/src/w.c" &&
  cc -c -o "$tmp/k/obj/__/kern/z.c.o" "$tmp/k/kern/z.c" || exit 1
out=$(bash "$here/circles.sh" --root "$tmp/k" "$tmp/k/src" "$tmp/k/obj")
rc=$?
expect "a source outside SRC_DIR is in its library's circle" 1 \
  "FAIL: kern/z.c -> src/w.c -> kern/z.c"

out=$(bash "$here/circles.sh" "$tmp/t/src" "$tmp/none")
rc=$?
expect "a missing object folder fails" 1 "circles: $tmp/t/src: no object folder $tmp/none"

echo "circles_selftest: $fails failure(s)"
exit $((fails > 0))
