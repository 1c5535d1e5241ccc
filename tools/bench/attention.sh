#!/usr/bin/env bash
# attention.sh AMPX [ROUNDS] — fused attention (ATTN_FWD + ATTN_BWD) against its composite
# (permutes, GEMMs, softmax) in training steps of a one-block GPT, alternated run by run.
# Shapes: D=128 with 4 heads (models/gpt.json) and D=768 with 12 heads (GPT-2 small), at
# T=128 (batch 8) and T=1024 (batch 1); mixed_bf16 as the shipped models. Each run trains 3
# steps with --trace; the attention's time is the sum of the device durations of the ops of
# its nodes between the two projections (forward and backward, the qkv gradient's
# accumulation included), over steps 2 and 3. Prints per shape the medians over ROUNDS
# (default 5) and their ratio composite / fused. Backend options come from the environment
# (AMPX_BACKEND_OPTS=isa=avx2 for the AVX2 path).
set -euo pipefail
ampx=$1
rounds=${2:-5}
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

model() { # T D HEADS FUSED OUT
  python3 - "$src/models/gpt_tiny.json" "$@" <<'PY'
import json, sys
src, t, d, h, fused, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1", sys.argv[6]
m = json.load(open(src))
m["inputs"]["tokens"]["shape"] = [t]
m["inputs"]["next"]["shape"] = [t]
keep = []
for n in m["nodes"]:
    if n["name"].startswith("h1."): continue
    n = dict(n)
    if n["op"] == "embedding": n["dim"] = d
    if n["op"] == "attention": n["heads"] = h; n["fused"] = fused
    if n["name"] == "h0.fc": n["units"] = 4 * d
    if n["name"] == "h0.proj": n["units"] = d
    if n["name"] == "ln_f": n["inputs"] = ["h0.res2"]
    keep.append(n)
m["nodes"] = keep
m["train"]["batch"] = 8 if t <= 128 else 1
m["train"]["eval_every"] = 0
json.dump(m, open(out, "w"))
PY
}

attn_ms() { # TRACE: milliseconds of the attention's ops in steps 2 and 3
  python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
tot = 0.0
for e in ev:
    a = e.get("args", {})
    node = a.get("node", "")
    if e.get("ph") != "X" or e.get("cat") != "op" or a.get("step", 0) < 2: continue
    if not node.startswith("h0.attn.") or node.startswith(("h0.attn.qkv", "h0.attn.proj")): continue
    tot += e["dur"]
print("%.3f" % (tot / 1000.0))
PY
}

printf '%-22s %12s %12s %8s\n' shape "composite_ms" "fused_ms" ratio
for shape in "128 128 4" "1024 128 4" "128 768 12" "1024 768 12"; do
  set -- $shape
  model "$1" "$2" "$3" 1 "$work/f.json"
  model "$1" "$2" "$3" 0 "$work/c.json"
  fs=() cs=()
  for r in $(seq "$rounds"); do
    "$ampx" train "$work/c.json" --steps 3 --quiet --trace "$work/c.trace" >/dev/null
    cs+=("$(attn_ms "$work/c.trace")")
    "$ampx" train "$work/f.json" --steps 3 --quiet --trace "$work/f.trace" >/dev/null
    fs+=("$(attn_ms "$work/f.trace")")
  done
  python3 - "T=$1 D=$2 H=$3" "${cs[*]}" "${fs[*]}" <<'PY'
import statistics, sys
c = statistics.median(map(float, sys.argv[2].split()))
f = statistics.median(map(float, sys.argv[3].split()))
print("%-22s %12.2f %12.2f %8.2f" % (sys.argv[1], c, f, c / f))
PY
done
