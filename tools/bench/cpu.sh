#!/usr/bin/env bash
# cpu.sh [--quick] [--rounds R] [--sections gemm,ops,steps,attention,memory] [--steps-models M,...]
#        [--threads N] [--llmc DIR] [--out FILE|-] — the CPU benchmark of docs/BENCHMARKS.md in
# one run (tools/bench/cpu_bench.py): GEMM against OpenBLAS and oneDNN (and, on AVX-512 CPUs,
# both capped to AVX2), the memory-bound ops against a 2-thread copy, the fused attention
# against its composite (tools/bench/attention.sh), the planned memory of gpt.json at T=1024,
# and the training steps of mlp_wide, gpt.json (T=128, and T=1024 at
# B=4) and the GPT-2 124M shape against PyTorch (plain, SDPA attention), JAX and, with
# --llmc DIR (a checkout of karpathy/llm.c), llm.c's train_gpt2.c; alternating, medians of R
# rounds (default 5; 2 for the steps of --quick), peak RSS per process. --steps-models picks
# among mlp_wide,gpt,gpt2_124m,gpt_t1024 (all by default; leave out gpt_t1024 to skip the long
# runs). A 0.1 s FMA probe runs between rounds; a round with the probe below 90% of the
# machine's peak on either side ran while another tenant held the cores and is run again
# (cpu_bench.py, Probe; not in the steps of --quick). The Markdown is printed and replaces the
# cpu block of --out (default docs/BENCHMARKS.md; - for none).
#
# Installs what it needs and uses it for this benchmark only (ampx never links the peers and
# the test suite never needs them): the Debian packages libdnnl-dev and libopenblas-dev, the
# peer programs built into build/bench-peers/, and torch, jax and optax from PyPI in a virtual
# environment ($AMPX_BENCH_VENV, default build/bench-venv; PyTorch's wheel is large). Builds
# ampx (build/, and a Release build in build-rel/ for the training steps) and fetches the
# Shakespeare corpus for gpt.json (tools/data/shakespeare.sh).
set -euo pipefail
export AMPX_BENCH_CWD=$PWD # --llmc DIR may be relative to where cpu.sh was started
cd "$(dirname "$0")/../.."
pkgs=(libdnnl-dev libopenblas-dev gcc python3 python3-venv)
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
cmake -S . -B build-rel -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-rel -j2 >/dev/null
bash tools/data/shakespeare.sh >/dev/null
out=build/bench-peers
mkdir -p "$out"
gcc -O2 -o "$out/peer_onednn" tools/bench/peer_onednn.c -ldnnl
gcc -O2 -o "$out/peer_openblas" tools/bench/peer_openblas.c \
  $(pkg-config --cflags --libs openblas 2>/dev/null || echo -lopenblas)
gcc -O2 -pthread -o "$out/peer_peak" tools/bench/peer_peak.c
venv=${AMPX_BENCH_VENV:-$PWD/build/bench-venv}
if ! "$venv/bin/python" -c "import torch, jax, optax" 2>/dev/null; then
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch jax optax numpy
fi
exec python3 tools/bench/cpu_bench.py --ampx build/bin/ampx --ampx-rel build-rel/bin/ampx \
  --peers "$out" --python "$venv/bin/python" "$@"
