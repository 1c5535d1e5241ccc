#!/usr/bin/env bash
# opencl_impls.sh [--install] [--budget SECONDS] [--ops "OP ..."] [--item-ops "OP ..."] AMPX
#
# The OpenCL kernels on an implementation beside PoCL: Oclgrind (Debian `oclgrind`, a strict
# OpenCL 1.2 simulator that lists as a GPU), with its race, bounds and uninitialized-value
# checks on. Runs, each op in its own process:
#   1. the minimal kernels of the Oclgrind bugs the plugin works around
#      (tests/opencl/oclgrind/known_bugs.sh), the planted missing barrier
#      (planted_barrier.sh) and the threads of --uninitialized (uninitialized_thread.sh);
#   2. `ampx conformance --backend opencl --quick --op OP` under
#      `oclgrind --data-races --uninitialized` for a subset of ops, on the work-group paths
#      (what Oclgrind, a GPU, takes by default), then a smaller subset with paths=item (the
#      CPU devices' layout) under --data-races alone: Oclgrind 21.10's uninitialized-value
#      check itself crashes (SIGSEGV in Uninitialized::instructionExecuted) on those kernels.
#      A failed case, a crash, or anything Oclgrind reports fails the run.
# Oclgrind interprets every work item, so the whole quick suite (3.5 min on the CPU layout,
# 8.3 min on the work-group one, one process) is too slow for CI; the subset is the ops whose
# kernels reduce across work items or decode f16 special values: the reductions, the AMP ops,
# a row kernel, the casts (docs/OPENCL.md, "Other implementations").
#
# --install: install oclgrind with apt-get when missing (root only; CI=true implies it).
# --budget: seconds for the whole run (default 240); an op that would start past it is
# skipped and named, and the run fails. Exit 77 (ctest's skip) when oclgrind is missing and
# cannot be installed, or AMPX is built with a sanitizer (Oclgrind's runtime is preloaded,
# which ASan refuses).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
install=0 budget=240
[ "${CI:-}" = "true" ] && install=1
ops="cast abs_max dropout permute fp8_quantize grad_stats sum_squares unscale_check amp_pass softmax_fwd"
item_ops="grad_stats amp_pass"
while [ $# -gt 1 ]; do
  case $1 in
    --install) install=1; shift ;;
    --budget) budget=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    --item-ops) item_ops=$2; shift 2 ;;
    *) echo "opencl_impls.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
ampx=${1:?usage: opencl_impls.sh [--install] [--budget S] [--ops "..."] [--item-ops "..."] AMPX}
start=$(date +%s)

if grep -qa "__asan_init\|__tsan_init" "$ampx" ||
  { command -v ldd >/dev/null && ldd "$ampx" 2>/dev/null | grep -q "libasan\|libtsan"; }; then
  echo "SKIP: $ampx is built with a sanitizer; Oclgrind's preloaded runtime cannot run it"
  exit 77
fi
if ! command -v oclgrind >/dev/null; then
  if [ $install = 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing oclgrind (apt-get)"
    { timeout 60 apt-get install -y --no-install-recommends oclgrind ||
      { timeout 60 apt-get update && timeout 60 apt-get install -y --no-install-recommends oclgrind; }; } \
      >/dev/null 2>&1
  fi
  if ! command -v oclgrind >/dev/null; then
    echo "SKIP: oclgrind is not installed (Debian: apt-get install oclgrind; this script installs it with --install as root)"
    exit 77
  fi
fi
version=$(oclgrind --version 2>&1 | sed -n 's/^Oclgrind \([0-9.]*\).*/\1/p' | head -1)
echo "Oclgrind $version; budget ${budget} s"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export AMPX_OPENCL_CACHE_DIR=off # no binaries: Oclgrind compiles each program in ms
status=0
failed=""

for t in known_bugs planted_barrier; do
  if ! bash "$root/tests/opencl/oclgrind/$t.sh"; then status=1 failed="$failed $t"; fi
done
if ! bash "$root/tests/opencl/oclgrind/uninitialized_thread.sh" "$ampx"; then
  status=1 failed="$failed uninitialized_thread"
fi

# conformance OP PATHS CHECKS...: one op, one layout, those Oclgrind checks on
conformance() {
  local op=$1 paths=$2 left t0 rc
  shift 2
  left=$((budget - ($(date +%s) - start)))
  if [ $left -le 0 ]; then
    echo "FAIL $op ($paths): not run, the budget of ${budget} s is spent"
    status=1 failed="$failed $op/$paths"
    return
  fi
  t0=$(date +%s.%N)
  : >"$tmp/olog"
  timeout "$left" oclgrind --log "$tmp/olog" "$@" "$ampx" conformance \
    --backend opencl --backend-opt "paths=$paths" --quick --op "$op" >"$tmp/out" 2>&1
  rc=$?
  local secs
  [ $rc -eq 124 ] && echo "(timed out: the budget of ${budget} s is spent)"
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  if [ $rc -eq 0 ] && [ ! -s "$tmp/olog" ]; then
    echo "ok $op ($paths): $(tail -1 "$tmp/out") ${secs} s"
  else
    echo "FAIL $op ($paths): exit $rc after ${secs} s"
    grep -v "^ *[a-z_0-9]* *[a-z0-9,]* *[0-9]* *0 " "$tmp/out" | tail -25
    [ -s "$tmp/olog" ] && { echo "Oclgrind reported:"; head -40 "$tmp/olog"; }
    status=1 failed="$failed $op/$paths"
  fi
}

for op in $ops; do conformance "$op" workgroup --data-races --uninitialized; done
for op in $item_ops; do conformance "$op" item --data-races; done

echo "opencl_impls: $(($(date +%s) - start)) s${failed:+; failed:$failed}"
exit $status
