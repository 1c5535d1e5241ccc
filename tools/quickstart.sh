#!/usr/bin/env bash
# quickstart.sh — installs what is missing, builds ampx, and runs the main job on the CPU
# backend: list the backends, then check the CPU backend against the reference.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
./build/bin/ampx backends
./build/bin/ampx conformance --backend cpu
