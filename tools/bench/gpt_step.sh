#!/usr/bin/env bash
# gpt_step.sh [STEPS] [ROUNDS] — the training step of models/gpt.json: ampx (CPU backend, f32
# and mixed_bf16) against PyTorch on the CPU (f32 and autocast bf16, 2 threads) side by side,
# alternating, ROUNDS rounds (default 5) of STEPS steps (default 30); medians and ratios go
# into docs/BENCHMARKS.md between the gpt-step markers. PyTorch comes from PyPI into a
# virtual environment (benchmark only): $AMPX_BENCH_VENV, default build/bench-venv.
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${1:-30}
rounds=${2:-5}
venv=${AMPX_BENCH_VENV:-$PWD/build/bench-venv}
bash tools/data/shakespeare.sh >/dev/null
[ -x build-rel/bin/ampx ] || { cmake -S . -B build-rel -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build-rel -j2 >/dev/null; }
ampx=./build-rel/bin/ampx
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch numpy
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo '{"policy": "f32", "scaler": "none"}' >"$tmp/f32.json"
echo '{"policy": "mixed_bf16", "scaler": "dynamic"}' >"$tmp/bf16.json"
ampx_ms() { # POLICY -> median ms/step of the steps after the first interval (host time per step)
  "$ampx" train models/gpt.json --policy "$tmp/$1.json" --steps "$((steps + 5))" --log-every 5 \
    --eval-every 0 --quiet --metrics "$tmp/m.jsonl" >/dev/null
  python3 -c 'import json,statistics,sys; r=[json.loads(l) for l in open(sys.argv[1]) if "time_ms" in l][5:]; print("%.3f" % statistics.median(x["time_ms"] for x in r))' "$tmp/m.jsonl"
}
load0=$(cut -d' ' -f1 /proc/loadavg)
for r in $(seq 1 "$rounds"); do
  for p in f32 bf16; do
    echo "ampx $p $(ampx_ms $p)" >>"$tmp/times"
    echo "torch $p $("$venv/bin/python" tools/bench/gpt_torch.py $p "$steps")" >>"$tmp/times"
  done
done
load1=$(cut -d' ' -f1 /proc/loadavg)
tv=$("$venv/bin/python" -c "import torch; print(torch.__version__)")
python3 - "$tmp/times" "$steps" "$rounds" "$load0" "$load1" "$tv" <<'PY'
import datetime, re, statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
steps, rounds, load0, load1, tv = sys.argv[2:7]
med = {}
for who, p, ms in rows:
    med.setdefault((who, p), []).append(float(ms))
med = {k: statistics.median(v) for k, v in med.items()}
out = ["<!-- gpt-step:begin -->",
       "## Training step of models/gpt.json: ampx against PyTorch (CPU)",
       "",
       "Command: `bash tools/bench/gpt_step.sh %s %s` (%s). Machine: AMD EPYC, 2 cores (AVX2+FMA). "
       "ampx: `ampx train models/gpt.json --policy P`, CPU backend, Release build, the median of the per-step "
       "host times (`time_ms` in the metrics, 5-step intervals, the first interval dropped). PyTorch %s from PyPI "
       "(tools/bench/gpt_torch.py: the same network, optimizer and batch, 2 threads), the median step after 5 "
       "warm-up steps. %s rounds, ampx and PyTorch alternating; the table holds the medians over rounds. "
       "Load average (1 min): %s at the start, %s at the end (the machine is shared)."
       % (steps, rounds, datetime.date.today(), tv, rounds, load0, load1),
       "",
       "| policy | ampx ms/step | PyTorch ms/step | PyTorch / ampx (speed-up) |",
       "|---|---|---|---|"]
for p, name in (("f32", "f32"), ("bf16", "mixed_bf16 (PyTorch: autocast bf16)")):
    a, t = med[("ampx", p)], med[("torch", p)]
    out.append("| %s | %.1f | %.1f | %.2f |" % (name, a, t, t / a))
out += ["", "Against PyTorch f32: ampx f32 %.2fx, ampx mixed_bf16 %.2fx."
        % (med[("torch", "f32")] / med[("ampx", "f32")], med[("torch", "f32")] / med[("ampx", "bf16")]),
        "<!-- gpt-step:end -->"]
doc = open("docs/BENCHMARKS.md").read()
block = "\n".join(out) + "\n"
if "<!-- gpt-step:begin -->" in doc:
    doc = re.sub(r"<!-- gpt-step:begin -->.*?<!-- gpt-step:end -->\n", lambda _: block, doc, flags=re.S)
else:
    doc = doc.rstrip("\n") + "\n\n" + block
open("docs/BENCHMARKS.md", "w").write(doc)
print(block)
PY
