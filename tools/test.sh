#!/usr/bin/env bash
# test.sh — installs what is missing, builds ampx with its tests, and runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh --tests
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
