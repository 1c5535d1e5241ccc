#!/usr/bin/env bash
# cli.sh AMPX — `ampx` with the CUDA backend. On a machine where the backend is unavailable
# (no driver, no device), `ampx backends` must list it as unavailable with the reason and
# every command that needs it must exit non-zero with that one line. Where it is available,
# the conformance suite runs against it instead (and a training run, once `ampx train`
# exists) and must pass.
set -u
ampx=$1
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # check NAME CONDITION...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}

"$ampx" backends >"$tmp/backends"; rc=$?
check "backends exits 0" test $rc -eq 0
check "backends lists cuda" grep -qE '^cuda ' "$tmp/backends"
"$ampx" backends --json >"$tmp/json"
check "backends --json names cuda" grep -q '"name":[[:space:]]*"cuda"' "$tmp/json"

if grep -A1 -E '^cuda ' "$tmp/backends" | grep 'ABI 1\.0, available' >/dev/null; then
  echo "cuda is available here: running conformance on it"
  check "cuda shows its device and compute capability" grep -q 'compute capability' "$tmp/backends"
  "$ampx" conformance --backend cuda >"$tmp/conf" 2>&1; rc=$?
  tail -5 "$tmp/conf"
  check "conformance --backend cuda exits 0 (got $rc)" test $rc -eq 0
  if "$ampx" train --help >/dev/null 2>&1 && [ -f "$(dirname "$0")/../../models/mlp.json" ]; then
    "$ampx" train "$(dirname "$0")/../../models/mlp.json" --backend cuda >"$tmp/train" 2>&1; rc=$?
    check "train models/mlp.json --backend cuda exits 0 (got $rc)" test $rc -eq 0
  fi
else
  line=$(grep -A1 -E '^cuda ' "$tmp/backends" | tail -1)
  echo "cuda is unavailable here:${line#*unavailable}"
  check "backends says why cuda is unavailable" grep -qE "unavailable: .*backend 'cuda' unavailable: .+" "$tmp/backends"
  for cmd in "conformance --backend cuda" "conformance --backend cuda --op gemm --quick"; do
    # shellcheck disable=SC2086
    "$ampx" $cmd >"$tmp/out" 2>"$tmp/err"; rc=$?
    lines=$(wc -l <"$tmp/err")
    check "$cmd: exits 1 (got $rc)" test $rc -eq 1
    check "$cmd: one line on stderr (got $lines)" test "$lines" -eq 1
    check "$cmd: names the reason" grep -qE "backend 'cuda' unavailable: (no NVIDIA driver|NVIDIA driver too old|no CUDA device|cuInit failed|cuDeviceGetCount failed)" "$tmp/err"
  done
  if "$ampx" train --help >/dev/null 2>&1 && [ -f "$(dirname "$0")/../../models/mlp.json" ]; then
    "$ampx" train "$(dirname "$0")/../../models/mlp.json" --backend cuda >"$tmp/out" 2>"$tmp/err"; rc=$?
    lines=$(wc -l <"$tmp/err")
    check "train --backend cuda: exits non-zero (got $rc)" test $rc -ne 0
    check "train --backend cuda: one line on stderr (got $lines)" test "$lines" -eq 1
    check "train --backend cuda: names the reason" grep -q "backend 'cuda' unavailable" "$tmp/err"
  fi
fi

[ $fails -eq 0 ] && echo "all passed" || echo "$fails failed"
[ $fails -eq 0 ]
