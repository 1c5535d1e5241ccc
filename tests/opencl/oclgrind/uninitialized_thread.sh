#!/usr/bin/env bash
# uninitialized_thread.sh AMPX — `oclgrind --uninitialized` on ampx: Oclgrind 21.10 crashes
# when a thread other than the one that created the cl_context makes the queue run (its
# Uninitialized plugin's thread-local pool; plugins/opencl/quirks.c). With the plugin's
# workaround a conformance op must pass under --data-races --uninitialized, with nothing
# reported; without it (AMPX_OPENCL_QUIRKS=off) Oclgrind 21.10 must still crash, else the
# workaround's note is out of date ("fixed" on another version is only reported).
# Exit 77 (a skip) without oclgrind.
set -uo pipefail
ampx=${1:?usage: uninitialized_thread.sh AMPX}
if ! command -v oclgrind >/dev/null; then
  echo "SKIP: oclgrind not installed (Debian: apt-get install oclgrind)"
  exit 77
fi
version=$(oclgrind --version 2>&1 | sed -n 's/^Oclgrind \([0-9.]*\).*/\1/p' | head -1)
export AMPX_OPENCL_CACHE_DIR=off
log=$(mktemp) olog=$(mktemp)
trap 'rm -f "$log" "$olog"' EXIT
status=0
# Oclgrind's reports go to its --log file: anything there is a finding
oclgrind --log "$olog" --data-races --uninitialized "$ampx" conformance --backend opencl --quick \
  --op scale >"$log" 2>&1
rc=$?
if [ $rc -ne 0 ] || [ -s "$olog" ]; then
  echo "FAIL: with the workaround, rc $rc:"
  tail -20 "$log" "$olog"
  status=1
else
  echo "ok: scale passes under oclgrind --data-races --uninitialized, nothing reported"
fi
# (in a subshell whose stderr is dropped: bash's own "Segmentation fault" line)
(AMPX_OPENCL_QUIRKS=off oclgrind --uninitialized "$ampx" conformance --backend opencl --quick \
  --op scale >"$log" 2>&1; exit $?) 2>/dev/null
rc=$?
if grep -q "SIGSEGV" "$log"; then
  echo "ok: without the workaround Oclgrind $version still crashes (the workaround is needed)"
elif [ "$version" = "21.10" ]; then
  echo "FAIL: without the workaround Oclgrind 21.10 did not crash (rc $rc); the documented cause is wrong"
  tail -5 "$log"
  status=1
else
  echo "fixed: Oclgrind $version no longer crashes without the workaround (rc $rc); quirks.c's note can go"
fi
exit $status
