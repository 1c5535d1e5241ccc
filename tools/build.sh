#!/usr/bin/env bash
# build.sh [--tests] — configures (when needed) and builds ampx into build/, warnings as
# errors. Without --tests an existing build keeps its tests; a new one builds none.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh "${1:-}"
if [ "${1:-}" = "--tests" ]; then
  grep -qs "AMPX_BUILD_TESTS:BOOL=ON" build/CMakeCache.txt ||
    cmake -S . -B build -DAMPX_WERROR=ON -DAMPX_BUILD_TESTS=ON >/dev/null
elif [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build -DAMPX_WERROR=ON -DAMPX_BUILD_TESTS=OFF >/dev/null
fi
cmake --build build -j "$(nproc)" >/dev/null
