#!/usr/bin/env bash
# circles_selftest.sh — circles.sh fails on two planted files that call each other and passes
# when the calls go one way.
set -uo pipefail
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/x" "$tmp/obj/x"
plant() { # NAME BODY
  printf '%s\n' "$2" >"$tmp/src/x/$1.c"
  cc -c -o "$tmp/obj/x/$1.c.o" "$tmp/src/x/$1.c" || exit 1
}
fails=0
plant a 'int b(void); int a(void) { return b() + 1; }'
plant b 'int a(void); int b(void) { return a() - 1; }'
out=$(bash "$here/circles.sh" "$tmp/src" "$tmp/obj")
rc=$?
if [ $rc -ne 0 ] && grep -q 'x/a.c and x/b.c call each other' <<<"$out"; then
  echo "ok: a circle is found"
else
  echo "FAIL: circles.sh missed a.c <-> b.c"
  fails=$((fails + 1))
fi
plant b 'int b(void) { return 1; }'
if bash "$here/circles.sh" "$tmp/src" "$tmp/obj" >/dev/null; then
  echo "ok: one-way calls pass"
else
  echo "FAIL: circles.sh failed on a.c -> b.c alone"
  fails=$((fails + 1))
fi
echo "circles_selftest: $fails failure(s)"
exit $((fails > 0))
