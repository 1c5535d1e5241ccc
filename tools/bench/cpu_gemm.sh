#!/usr/bin/env bash
# cpu_gemm.sh [--quick] [--rounds R] — the CPU GEMM table of docs/BENCHMARKS.md: ampx's CPU
# backend (bf16, f16, f32) beside oneDNN's matmul (bf16, f32) and OpenBLAS sgemm, measured
# side by side in one run, alternating, median of R rounds per shape.
#
# Installs the peers' Debian packages (libdnnl-dev, libopenblas-dev) when missing and builds
# the peer programs into build/bench-peers/. They serve this benchmark only: ampx never
# links them and the test suite never needs them. Builds ampx (tools/build.sh) first.
set -euo pipefail
cd "$(dirname "$0")/../.."
pkgs=(libdnnl-dev libopenblas-dev gcc python3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "installing benchmark peers: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
bash tools/build.sh
out=build/bench-peers
mkdir -p "$out"
gcc -O2 -o "$out/peer_onednn" tools/bench/peer_onednn.c -ldnnl
gcc -O2 -o "$out/peer_openblas" tools/bench/peer_openblas.c \
  $(pkg-config --cflags --libs openblas 2>/dev/null || echo -lopenblas)
exec python3 tools/bench/cpu_gemm.py --ampx build/bin/ampx --peers "$out" "$@"
