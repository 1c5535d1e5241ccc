#!/usr/bin/env bash
# backends_probe.sh AMPX — `ampx backends` describes the OpenCL backend without compiling a
# program: with an empty program cache it lists opencl as available and leaves the cache
# empty. (The main program used to be built at create(): 13-19 s on a cold PoCL and over 10 s
# on Intel's CPU runtime, past the loader's 10 s deadline, so the backend listed as failing
# and, abandoned before it could store the binary, failed again the next time.)
set -uo pipefail
ampx=${1:?usage: backends_probe.sh AMPX}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$(AMPX_OPENCL_CACHE_DIR="$tmp/cache" "$ampx" backends 2>&1)
block=$(awk '/^opencl /{on=1} on && /^$/{exit} on' <<<"$out")
if ! grep -q "available" <<<"$block"; then
  if grep -q "no OpenCL platform\|no OpenCL device\|no usable OpenCL device" <<<"$block"; then
    echo "SKIP: no OpenCL device: $block"
    exit 77
  fi
  echo "FAIL: opencl is not listed as available:"
  echo "$block"
  exit 1
fi
if [ -n "$(ls -A "$tmp/cache" 2>/dev/null)" ]; then
  echo "FAIL: ampx backends compiled and stored programs: $(ls "$tmp/cache")"
  exit 1
fi
echo "ok: opencl available, no program compiled"
