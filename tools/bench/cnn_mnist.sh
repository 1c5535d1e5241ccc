#!/usr/bin/env bash
# cnn_mnist.sh [--python PY] [--rounds N] [--steps S] [--isa I] [--no-accuracy] — models/cnn_mnist.json
# on MNIST (tools/data/mnist.sh fetches it): the full run's held-out accuracy and time, then
# the training step against the same network in PyTorch (tools/bench/step_torch.py cnn,
# torch.autocast for bf16), f32 and mixed bf16, rounds alternated between ampx and PyTorch.
# Each cell is the median over rounds of a run's median step time: ampx's `time_ms` of
# 5-step intervals (the first dropped) over S steps, PyTorch's per-step times over S steps
# after 5 warm-up steps. PY is a python with torch (default build/bench-venv/bin/python;
# without it only the ampx columns are measured). Run from a Release build (AMPX, default
# build-rel/bin/ampx). --isa caps ampx's CPU path (--backend-opt isa=I, e.g. avx2); PyTorch
# keeps its own.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=build/bench-venv/bin/python rounds=5 steps=40 accuracy=1 isa=
ampx=${AMPX:-build-rel/bin/ampx}
while [ $# -gt 0 ]; do
  case $1 in
    --python) py=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --no-accuracy) accuracy=0; shift ;;
    --isa) isa=$2; shift 2 ;;
    *) echo "cnn_mnist.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -x "$ampx" ] || { echo "cnn_mnist.sh: $ampx is not built (set AMPX)" >&2; exit 2; }
bash tools/data/mnist.sh
# the full MNIST, as models/README.md says (the model file as shipped reads the subset)
full=(--set 'data={"source": "mnist", "train_images": "$DATA/mnist/train-images-idx3-ubyte", "train_labels": "$DATA/mnist/train-labels-idx1-ubyte", "test_images": "$DATA/mnist/t10k-images-idx3-ubyte", "test_labels": "$DATA/mnist/t10k-labels-idx1-ubyte"}')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo '{"policy": "f32", "scaler": "none"}' >"$tmp/f32.json"
echo '{"policy": "mixed_bf16", "scaler": "dynamic"}' >"$tmp/bf16.json"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores;" \
  "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ $accuracy = 1 ]; then
  /usr/bin/time -f "%e s wall" "$ampx" train models/cnn_mnist.json "${full[@]}" --set train.steps=2800 \
    --backend-opt threads=2 --log-every 400 2>&1 | grep -E '^(done|held-out)|s wall'
fi
ampx_ms() { # POLICY -> median time_ms
  "$ampx" train models/cnn_mnist.json "${full[@]}" --policy "$tmp/$1.json" --steps "$steps" --log-every 5 \
    --eval-every 0 --backend-opt threads=2 ${isa:+--backend-opt isa=$isa} --quiet \
    --metrics "$tmp/m.jsonl" >/dev/null
  python3 -c 'import json,statistics,sys
r=[json.loads(l)["time_ms"] for l in open(sys.argv[1]) if "time_ms" in l][1:]
print(statistics.median(r))' "$tmp/m.jsonl"
}
has_torch=0
"$py" -c 'import torch' 2>/dev/null && has_torch=1
for mode in f32 bf16; do
  : >"$tmp/a.$mode" && : >"$tmp/t.$mode"
  for ((r = 0; r < rounds; r++)); do
    ampx_ms "$mode" >>"$tmp/a.$mode"
    [ $has_torch = 1 ] && "$py" tools/bench/step_torch.py cnn "$mode" "$steps" --threads 2 >>"$tmp/t.$mode"
  done
done
python3 - "$tmp" "$has_torch" <<'PY'
import statistics, sys
tmp, torch = sys.argv[1], sys.argv[2] == "1"
med = lambda f: statistics.median(float(x) for x in open(f"{tmp}/{f}") if x.strip())
print("| policy | ampx ms/step | PyTorch ms/step | ampx / PyTorch steps/s |\n|---|---|---|---|")
for mode, name in (("f32", "f32"), ("bf16", "mixed bf16 (PyTorch: autocast)")):
    a = med(f"a.{mode}")
    t = med(f"t.{mode}") if torch else None
    print(f"| {name} | {a:.1f} | {t:.1f} | {t / a:.2f}x |" if t else f"| {name} | {a:.1f} | - | - |")
print(f"ampx bf16 / f32 steps/s: {med('a.f32') / med('a.bf16'):.2f}x")
PY
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
