#!/usr/bin/env bash
# quickstart.sh — installs what is missing, builds ampx, and runs the main job on the CPU
# backend: list the backends, check the CPU backend against the reference, and train the
# default model (mixed bf16 with dynamic loss scaling) on its embedded data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
./build/bin/ampx backends
./build/bin/ampx conformance --backend cpu --quick
./build/bin/ampx train models/mlp.json
