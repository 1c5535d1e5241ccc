#!/usr/bin/env bash
# quickstart.sh — installs what is missing, builds ampx, and runs the main job on the CPU
# backend: list the backends, check the CPU backend against the reference, train the
# default model (mixed bf16 with dynamic loss scaling) on its embedded data, then train a
# small GPT on the embedded text task (about a minute) and sample a line from it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
./build/bin/ampx backends
./build/bin/ampx conformance --backend cpu --quick
./build/bin/ampx train models/mlp.json
./build/bin/ampx train models/gpt_tiny.json --checkpoint build/gpt_tiny.safetensors
./build/bin/ampx generate models/gpt_tiny.json --checkpoint build/gpt_tiny.safetensors \
  --prompt "ada has a" --tokens 120 --temperature 0.6
