#!/usr/bin/env bash
# plugin_faults.sh AMPX PLUGINS — plugins that take their host down: `ampx backends` lists
# every other plugin when one crashes, hangs, exits or aborts in create() (it opens each in a
# child process with a deadline); `ampx train --backend` gives create() a time limit
# (AMPX_CREATE_TIMEOUT_S); a crash in create() or a buffer call, and exit() or abort() inside
# an op, end the run with one line naming the plugin, its path and the call.
# PLUGINS is the folder of the test plugins (libmisbehave.so: tests/plugins/wrapper.c).
set -uo pipefail
ampx=$1
plugins=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
bad=$plugins/libmisbehave.so
mlp=$(dirname "$0")/../models/mlp.json
[ -n "${AMPX_TEST_INNER_PLUGIN:-}" ] || { echo "AMPX_TEST_INNER_PLUGIN is not set"; exit 1; }

# ---- ampx backends: the bad plugin listed as failing with the reason, cpu still listed
mkdir "$work/path"
cp "$AMPX_TEST_INNER_PLUGIN" "$work/path/libampx-cpu.so"
cp "$bad" "$work/path/libampx-bad.so"
declare -A want=([crash]="SIGSEGV inside backend 'wrapper' \($work/path/libampx-bad.so\) during create"
  [abort]="SIGABRT inside backend 'wrapper' \($work/path/libampx-bad.so\) during create"
  [exit]="backend 'wrapper' \($work/path/libampx-bad.so\) called exit\(\) during create"
  [hang]="libampx-bad.so: opening and describing did not finish within 2 s \(AMPX_PROBE_TIMEOUT_S\)")
for how in crash abort exit hang; do
  start=$(date +%s)
  AMPX_TEST_MISBEHAVE=create:$how AMPX_PROBE_TIMEOUT_S=2 AMPX_PLUGIN_PATH="$work/path" \
    "$ampx" backends >"$work/out" 2>"$work/err"
  rc=$?
  [ $rc -eq 0 ] || fail "backends, create() that does $how: exit $rc ($(head -c 300 "$work/err"))"
  [ $(($(date +%s) - start)) -le 20 ] || fail "backends, create() that does $how: $(($(date +%s) - start)) s"
  grep -A1 "^bad " "$work/out" | grep -Eq "failing: .*${want[$how]}" ||
    fail "backends, create() that does $how: not listed as failing: $(head -c 800 "$work/out")"
  grep -A1 "^cpu " "$work/out" | grep -q "available" ||
    fail "backends, create() that does $how: cpu is not listed as available"
  AMPX_TEST_MISBEHAVE=create:$how AMPX_PROBE_TIMEOUT_S=2 AMPX_PLUGIN_PATH="$work/path" \
    "$ampx" backends --json >"$work/json" 2>"$work/err" || fail "backends --json, $how: exit $?"
  python3 - "$work/json" <<'PY' || fail "backends --json, create() that does $how: $(head -c 600 "$work/json")"
import json, sys
d = {b["name"]: b for b in json.load(open(sys.argv[1]))["backends"]}
assert d["cpu"]["available"] and "ops" in d["cpu"], d["cpu"]
assert not d["bad"]["available"] and d["bad"]["reason"], d["bad"]
PY
done

# ---- ampx train --backend: create() under a deadline
start=$(date +%s)
AMPX_TEST_MISBEHAVE=create:hang AMPX_CREATE_TIMEOUT_S=1 \
  "$ampx" train "$mlp" --steps 2 --quiet --backend "$bad" >"$work/out" 2>"$work/err"
rc=$?
[ $rc -eq 1 ] || fail "train, create() hangs: exit $rc"
[ $(($(date +%s) - start)) -le 10 ] || fail "train, create() hangs: $(($(date +%s) - start)) s"
grep -q "libmisbehave.so: backend 'wrapper' failed to start: create() did not return within 1 s (AMPX_CREATE_TIMEOUT_S)" "$work/err" ||
  fail "train, create() hangs: $(cat "$work/err")"

# ---- a plugin that dies inside a call: one line names the plugin, its path and the call
check() { # CALL:HOW EXPECTED-RC PATTERN
  AMPX_TEST_MISBEHAVE=$1 "$ampx" train "$mlp" --steps 2 --quiet --backend "$bad" >"$work/out" 2>"$work/err"
  local rc=$?
  if [ "$2" = nonzero ]; then [ $rc -ne 0 ] || fail "$1: exit 0"; else [ $rc -eq "$2" ] || fail "$1: exit $rc, expected $2"; fi
  [ "$(grep -c "^ampx: .*backend 'wrapper'" "$work/err")" -eq 1 ] && grep -Eq "^ampx: $3\$" "$work/err" ||
    fail "$1: no line naming the plugin and call: $(head -c 600 "$work/err")"
}
p="'wrapper' \($bad\)"
for call in create buffer_alloc buffer_write buffer_read; do
  check "$call:crash" nonzero "SIGSEGV inside backend $p during $call"
  check "$call:exit" 70 "backend $p called exit\(\) during $call"
done
check gemm:exit 70 "backend $p called exit\(\) during op gemm issued by (self-check|fc1)"
check gemm:abort nonzero "SIGABRT inside backend $p during op gemm issued by (self-check|fc1)"
check buffer_read:abort nonzero "SIGABRT inside backend $p during buffer_read"

[ $fails -eq 0 ] && echo "plugin_faults: all passed"
exit $((fails > 0))
