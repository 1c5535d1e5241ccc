#!/usr/bin/env bash
# tsan.sh — ThreadSanitizer over what may run on several threads (docs/RELIABILITY.md,
# "Threads and the Python binding"): builds libampx, the cpu plugin, the ampx command and
# tests/train/test_threads with -fsanitize=thread into build-tsan/, then runs
#   - test_threads: four threads, each its own model, backend and trainer, training and
#     exiting (50 runs of a child process), and AMPX_ERR_BUSY for a trainer in use;
#   - the cpu plugin's conformance suite (--quick) with 2 worker threads per op.
# Any report fails the run (halt_on_error). About 2 min on 2 cores from a clean tree.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh --tests
if [ ! -f build-tsan/CMakeCache.txt ]; then
  cmake -S . -B build-tsan -DAMPX_WERROR=OFF -DCMAKE_BUILD_TYPE=Debug -DAMPX_BUILD_TESTS=ON \
    -DCMAKE_C_FLAGS="-O1 -g -fsanitize=thread -fno-omit-frame-pointer" >/dev/null
fi
cmake --build build-tsan -j "$(nproc)" --target test_threads ampx-cpu ampx-cli >/dev/null
export TSAN_OPTIONS="halt_on_error=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
build-tsan/bin/test_threads "${AMPX_TSAN_RUNS:-50}"
plugins=$(dirname "$(find build-tsan -name libampx-cpu.so -print -quit)")
AMPX_PLUGIN_PATH=$plugins build-tsan/bin/ampx conformance --backend cpu --backend-opt threads=2 \
  --quick >build-tsan/conformance.txt || { tail -40 build-tsan/conformance.txt && exit 1; }
tail -1 build-tsan/conformance.txt
echo "tsan: test_threads and the cpu conformance with 2 threads: no report"
