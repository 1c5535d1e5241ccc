#!/usr/bin/env bash
# planted_barrier.sh — Oclgrind's race check finds a missing barrier in our reductions.
# kernels/opencl/abs_max.cl (a work-group reduction through common.cl's wg_max_i) runs
# under `oclgrind-kernel --data-races` as it is, where it must give the right maximum with
# nothing reported, and with the barrier inside wg_max_i's tree loop removed, where Oclgrind
# must report a data race: so a barrier missing from the work-group paths fails
# tools/ci/opencl_impls.sh, which runs conformance with the same check.
# Exit 77 (a skip) without oclgrind-kernel.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$here/../../../kernels/opencl
if ! command -v oclgrind-kernel >/dev/null; then
  echo "SKIP: oclgrind-kernel not installed (Debian: apt-get install oclgrind)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$here/abs_max.sim" "$tmp/"
status=0
run() { # run COMMON_CL: Oclgrind's report in $tmp/log, the output in $tmp/out
  cat "$1" "$src/abs_max.cl" >"$tmp/abs_max_prog.cl"
  (cd "$tmp" && oclgrind-kernel --data-races --log "$tmp/log" --build-options "-DWG=64" \
    abs_max.sim >"$tmp/out" 2>&1)
}
: >"$tmp/log"
run "$src/common.cl"
if ! grep -q "out_p\[0\] = 1148846080" "$tmp/out" || [ -s "$tmp/log" ]; then
  echo "FAIL: abs_max as it is: wrong result or a report"
  cat "$tmp/out" "$tmp/log"
  status=1
else
  echo "ok: abs_max as it is: right, no race reported"
fi
# the barrier after the tree step `red[lid] = max(red[lid], red[lid + s])`, and only it
sed '/red\[lid\] = max(red\[lid\], red\[lid + s\]);/{n;/barrier/d}' "$src/common.cl" >"$tmp/common.cl"
if [ "$(diff "$src/common.cl" "$tmp/common.cl" | grep -c '^<.*barrier')" != 1 ]; then
  echo "FAIL: could not plant the missing barrier (wg_max_i changed?)"
  exit 1
fi
: >"$tmp/log"
run "$tmp/common.cl"
if grep -q "data race" "$tmp/log"; then
  echo "ok: with wg_max_i's barrier removed Oclgrind reports: $(grep -m1 'data race' "$tmp/log")"
else
  echo "FAIL: with wg_max_i's barrier removed Oclgrind reported no race"
  cat "$tmp/out" "$tmp/log"
  status=1
fi
exit $status
