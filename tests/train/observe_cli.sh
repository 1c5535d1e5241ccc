#!/usr/bin/env bash
# observe_cli.sh AMPX SRC — the observability commands end to end: a trace of mlp_wide that
# Perfetto opens (valid JSON, required fields, nesting per track, the op count of each step,
# dtypes in names as `ampx policy` resolves them), trace-summary, the monitor on mlp_f16,
# the run-health stops and exit statuses, and ampx plot.
set -uo pipefail
ampx=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# ---- trace
"$ampx" policy "$src/models/mlp_wide.json" >"$work/policy" || fail "policy"
# the cpu backend, and opencl where it is available: both give device timestamps
backends=cpu
"$ampx" backends | grep -A1 -E '^opencl ' | grep 'available$' >/dev/null && backends="cpu opencl"
for b in $backends; do
"$ampx" train "$src/models/mlp_wide.json" --steps 3 --batch 32 --trace "$work/t.json" --backend $b \
  --trace-steps 2:3 --quiet >"$work/out" 2>&1 || fail "train --trace ($b): $(cat "$work/out")"
python3 - "$work/t.json" "$work/policy" <<'PY' || fail "trace checks ($b)"
import json, sys, collections
doc = json.load(open(sys.argv[1]))
ev = doc["traceEvents"]
# the backends record their ops' start and end themselves (ABI 1.2 profile slots)
assert doc["otherData"]["timing"] == "device", doc["otherData"]
xs = [e for e in ev if e["ph"] == "X"]
for e in xs:
    for k in ("name", "ts", "dur", "pid", "tid"):
        assert k in e, (k, e)
    assert e["dur"] >= 0, e
# slices on one track nest: sorted by start (longer first), each ends inside its parent
tracks = collections.defaultdict(list)
for e in xs:
    tracks[(e["pid"], e["tid"])].append(e)
for key, es in tracks.items():
    es.sort(key=lambda e: (e["ts"], -e["dur"]))
    stack = []
    for e in es:
        while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - 1e-6:
            stack.pop()
        if stack:
            p = stack[-1]
            assert e["ts"] + e["dur"] <= p["ts"] + p["dur"] + 1e-6, ("overlap", key, p, e)
        stack.append(e)
# ops of each step == the call layer's count of that step; every op inside a phase and a step
steps = [e for e in xs if e.get("cat") == "step" and e["tid"] == 2]
assert sorted(e["args"]["step"] for e in steps) == [2, 3], steps
ops = [e for e in xs if e.get("cat") == "op"]
for s in steps:
    mine = [e for e in ops if e["args"]["step"] == s["args"]["step"]]
    assert len(mine) == s["args"]["ops"] and len(mine) > 20, (len(mine), s)
phases = {e["name"] for e in xs if e.get("cat") == "phase"}
assert {"forward", "backward", "amp", "optimizer"} <= phases, phases
for e in ops:
    a = e["args"]
    for k in ("node", "phase", "shapes", "dtypes", "bytes", "flops"):
        assert k in a, (k, e)
gemm = [e for e in ops if e["name"].startswith("gemm.")]
assert all(e["args"]["flops"] > 0 and e["args"]["bytes"] > 0 for e in gemm), gemm[:2]
# the dtype in each forward op's name is the one `ampx policy` resolved for its node
pol = {}
for line in open(sys.argv[2]):
    f = line.split()
    if len(f) >= 2 and not line.startswith(" ") and f[1] in ("f32", "bf16", "f16"):
        pol[f[0]] = f[1]
checked = 0
for e in ops:
    a = e["args"]
    if a["phase"] == "forward" and a["node"] in pol:
        assert e["name"].endswith("." + pol[a["node"]]), (e["name"], a["node"], pol[a["node"]])
        checked += 1
names = {e["name"] for e in ops}
assert "gemm.bf16" in names and "gemm.f32" in names and "layernorm_fwd.f32" in names, names
assert checked >= 10, checked
counters = {e["name"] for e in ev if e["ph"] == "C"}
assert {"loss scale", "grad norm", "skipped steps", "lr"} <= counters, counters
PY
[ $b = opencl ] && cp "$work/t.json" "$work/t_opencl.json"
done
"$ampx" trace-summary "$work/t.json" >"$work/sum" || fail "trace-summary"
grep -Eq "^gemm\.bf16 +[0-9]+ " "$work/sum" || fail "trace-summary: no gemm.bf16 row: $(cat "$work/sum")"
grep -Eq "^bf16 .*%" "$work/sum" && grep -Eq "^f32 .*%" "$work/sum" || fail "trace-summary: dtype shares"
echo '{"traceEvents":[' >"$work/cut.json"
"$ampx" trace-summary "$work/cut.json" 2>"$work/err" && fail "a cut trace was accepted"
grep -q "not valid JSON" "$work/err" || fail "cut trace message: $(cat "$work/err")"
"$ampx" train "$src/models/mlp.json" --trace-steps 1:2 2>/dev/null && fail "--trace-steps without --trace"
"$ampx" train "$src/models/mlp.json" --trace "$work/x.json" --trace-steps 3:2 2>/dev/null
[ $? -eq 2 ] || fail "--trace-steps 3:2 is a usage error"

# ---- monitor: per-layer table, per-tensor metrics lines, the first non-finite tensor
"$ampx" train "$src/models/mlp_f16.json" --steps 20 --log-every 10 --monitor 1 \
  --metrics "$work/m.jsonl" >"$work/out" 2>"$work/err" || fail "monitor run: $(cat "$work/err")"
grep -q "^gradient health at step 20" "$work/out" || fail "no health table: $(head "$work/out")"
grep -Eq "^  fc1 +f16 " "$work/out" && grep -Eq "^  logits +f32 " "$work/out" || fail "table rows"
grep -q "first non-finite: " "$work/err" || fail "skipped step without its first non-finite tensor: $(cat "$work/err")"
# overflow forensics: each skipped monitored step names the node that created the first
# non-finite value (a backward node at mlp_f16's 2^24 scale) and the scale it carried, and
# its metrics line says created_by; the first non-finite tensor is that node's output
python3 - "$work/err" "$work/m.jsonl" <<'PY' || fail "overflow origin of mlp_f16's skipped steps"
import json, re, sys
err = open(sys.argv[1]).read().splitlines()
rows = [json.loads(l) for l in open(sys.argv[2]) if '"tensor"' not in l]
skipped = [r for r in rows if r["skipped"]]
assert skipped, "no skipped step"
for r in skipped:
    i = next(k for k, l in enumerate(err) if l.startswith("step %d: skipped" % r["step"]))
    node = re.search(r"first non-finite: \S+ \(backward of node (\S+)\)", err[i]).group(1)
    origin = err[i + 1]
    assert origin.startswith("  non-finite values created by node %s (" % node), (err[i], origin)
    assert ", backward, f16: " in origin and "from finite inputs (largest |x|: " in origin, origin
    assert "f16 holds magnitudes up to 65504" in origin, origin
    carried = float(re.search(r"the gradients carried loss scale ([0-9]+)", origin).group(1))
    if "(cast, backward" in origin:  # a cast's values scale one for one: the bound is exact
        big = float(re.search(r"largest \|x\|: \S+ ([0-9.e+-]+)\)", origin).group(1))
        most = float(re.search(r"at most ([0-9.e+]+) would have kept them finite", origin).group(1))
        assert abs(most - carried * 65504 / big) <= 3e-3 * most and most < carried, (most, origin)
    assert r.get("created_by") == node, (r, node)
assert all("created_by" not in r for r in rows if not r["skipped"])
PY
# a planted forward overflow: a scale node of factor 1e6 after fc1 under f16 makes inf from
# finite inputs; the nodes after it pass the value on
python3 - "$src/models/mlp_f16.json" "$work/boost.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["layers"].insert(1, {"name": "boost", "type": "scale", "factor": 1e6})
json.dump(m, open(sys.argv[2], "w"))
PY
"$ampx" train "$work/boost.json" --steps 2 --monitor 1 --metrics "$work/b.jsonl" >/dev/null 2>"$work/err"
grep -q "^  non-finite values created by node boost (scale, forward, f16: [0-9]* inf, 0 NaN in boost; f16 holds magnitudes up to 65504) from finite inputs (largest |x|: fc1.relu [0-9.e+-]*).*; passed on by fc2" "$work/err" ||
  fail "planted forward overflow: $(cat "$work/err")"
grep -q '"created_by":"boost"' "$work/b.jsonl" || fail "planted overflow: no created_by in the metrics"
# ---- armed forensics (--forensics, the monitor off): every skipped step is diagnosed from
# ABS_MAX of each output; the scans change no value, so the run and its creators are the
# monitored run's above
"$ampx" train "$src/models/mlp_f16.json" --steps 20 --log-every 10 --set train.monitor=0 \
  --forensics --metrics "$work/f.jsonl" >/dev/null 2>"$work/err" || fail "forensics run: $(cat "$work/err")"
python3 - "$work/m.jsonl" "$work/f.jsonl" "$work/err" <<'PY' || fail "armed forensics on mlp_f16"
import json, sys
mon = [json.loads(l) for l in open(sys.argv[1]) if '"tensor"' not in l]
arm = [json.loads(l) for l in open(sys.argv[2])]
err = open(sys.argv[3]).read()
assert [r["loss"] for r in mon] == [r["loss"] for r in arm], "the scan changed the run"
sk = [r for r in arm if r["skipped"]]
assert sk and [r["step"] for r in sk] == [r["step"] for r in mon if r["skipped"]]
for a, m in zip(sk, [r for r in mon if r["skipped"]]):
    assert a.get("created_by") == m.get("created_by") and a["created_by"], (a, m)
assert err.count("  non-finite values created by node ") == len(sk), err
assert not any("tensor" in r for r in arm), "the armed scan wrote monitor lines"
PY
"$ampx" train "$work/boost.json" --steps 2 --set train.monitor=0 --forensics 2>"$work/err" >/dev/null
grep -q "^  non-finite values created by node boost (scale, forward, f16: inf in boost; f16 holds magnitudes up to 65504) from finite inputs (largest |x|: fc1.relu [0-9.e+-]*).*; passed on by fc2" "$work/err" ||
  fail "armed forensics, planted forward overflow: $(cat "$work/err")"
# planted backward overflows under a scaler that grows every 4 steps. A scale of 2000 before
# fc2's activation overflows in its backward (a scale: its bound is exact, from its input);
# fc2's weights drawn with std 20 overflow in its dx product, whose bound is estimated from
# the last step at which that output was finite
python3 - "$src/models/mlp_f16.json" "$work" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["scaler"]["growth_interval"] = 4
w = json.loads(json.dumps(m))
m["layers"].insert(2, {"name": "boost", "type": "scale", "factor": 2000})
json.dump(m, open(sys.argv[2] + "/boost2.json", "w"))
w["layers"][1]["init"] = {"weight": "normal", "std": 20}
json.dump(w, open(sys.argv[2] + "/wide2.json", "w"))
PY
for m in boost2 wide2; do
  "$ampx" train "$work/$m.json" --steps 30 --log-every 10 --set train.monitor=0 --forensics \
    --metrics "$work/$m.jsonl" >/dev/null 2>"$work/$m.err" || fail "$m run: $(cat "$work/$m.err")"
done
python3 - "$work" <<'PY' || fail "safe-scale bounds of backward overflows that are not casts"
import json, re, sys
def skipped(name):
    rows = {r["step"]: r for r in map(json.loads, open(sys.argv[1] + "/" + name + ".jsonl"))}
    err = open(sys.argv[1] + "/" + name + ".err").read().splitlines()
    for i, l in enumerate(err):
        m = re.match(r"step (\d+): skipped", l)
        if m:
            origin = err[i + 1]
            yield rows, int(m.group(1)), origin, float(re.search(r"carried loss scale ([0-9.]+)", origin).group(1))
exact = 0
for rows, step, origin, carried in skipped("boost2"):
    if "created by node boost (scale, backward, f16: inf in " in origin:
        big = float(re.search(r"largest \|x\|: boost.grad ([0-9.e+-]+)\)", origin).group(1))
        most = float(re.search(r"at most ([0-9.e+]+) would have kept them finite;", origin).group(1))
        # big is printed to 3 digits: within 0.4%
        assert abs(most - carried * 65504 / (2000 * big)) <= 5e-3 * most and most < carried, origin
        exact += 1
assert exact >= 3, exact
est = 0
for rows, step, origin, carried in skipped("wide2"):
    if "created by node fc2 (matmul_dx, backward, f16: inf in " not in origin:
        continue
    e = re.search(r"about ([0-9.e+]+) would have kept them finite \(at step (\d+) its values "
                  r"reached ([0-9.e+]+) under loss scale ([0-9.]+);", origin)
    if not e:
        continue
    v, at, reached, s = float(e.group(1)), int(e.group(2)), float(e.group(3)), float(e.group(4))
    assert at < step and not rows[at]["skipped"], (at, step)
    assert abs(v - s * 65504 / reached) <= 1e-3 * v, origin
    assert s < carried and carried / 2 < v < carried, origin
    est += 1
assert est >= 2, est
PY
# a non-finite gradient that no op made (injected after the backward) is said to be so
AMPX_INJECT_NONFINITE=3 "$ampx" train "$src/models/mlp.json" --steps 5 --log-every 5 \
  --set train.monitor=0 --forensics >/dev/null 2>"$work/err" || fail "injected run: $(cat "$work/err")"
grep -q "^step 3: skipped, .*first non-finite: none in the ops' outputs: it appeared after the backward, in fc1.weight.grad" "$work/err" ||
  fail "armed forensics, injected gradient: $(cat "$work/err")"
# a plugin without ABS_MAX (ABI 1.3) cannot arm them: one line, before the first step
if [ -n "${AMPX_TEST_MINOR_1_3:-}" ] && [ -f "$AMPX_TEST_MINOR_1_3" ]; then
  "$ampx" train "$src/models/mlp.json" --steps 1 --forensics --backend "$AMPX_TEST_MINOR_1_3" \
    >/dev/null 2>"$work/err" && fail "forensics armed on an ABI 1.3 plugin"
  grep -q "train.forensics needs the backend op abs_max (ABI 1.8), which backend 'wrapper' (ABI 1.3) does not have" "$work/err" ||
    fail "forensics on ABI 1.3: $(cat "$work/err")"
else
  fail "AMPX_TEST_MINOR_1_3 is not set to the test plugin"
fi

python3 - "$work/m.jsonl" <<'PY' || fail "monitor metrics lines"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in rows if "tensor" not in r]
mon = [r for r in rows if "tensor" in r]
assert len(steps) == 20, len(steps)
assert len(mon) == 20 * 6, len(mon)
for r in mon:
    for k in ("layer", "dtype", "max_abs", "rms", "norm", "zero_frac", "underflow_frac", "inf", "nan"):
        assert k in r, (k, r)
    # a finite tensor's L2 norm is at least its largest element and its RMS
    if r["inf"] == 0 and r["nan"] in (0, None) and r["norm"] is not None:
        assert r["norm"] >= r["max_abs"] * (1 - 1e-6) and r["norm"] >= r["rms"] * (1 - 1e-6), r
PY
"$ampx" train "$src/models/mlp.json" --monitor x 2>/dev/null
[ $? -eq 2 ] || fail "--monitor x is a usage error"

# ---- run health: exit statuses and diagnoses
python3 - "$src/models/mlp.json" "$work" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
def put(name, **kw):
    m = json.loads(json.dumps(d)); m.update(kw); json.dump(m, open(sys.argv[2] + "/" + name, "w"))
put("skip.json", policy="mixed_f16", scaler={"type": "static", "init_scale": 1e30})
put("diverge.json", policy="f32", optimizer={"type": "sgd", "lr": 1000, "momentum": 0.9})
PY
"$ampx" train "$work/skip.json" --steps 5 >"$work/out" 2>"$work/err"
[ $? -eq 1 ] || fail "a run with no applied step exits 0"
grep -q "no step of this run was applied" "$work/err" || fail "no-applied message: $(tail -2 "$work/err")"
grep -q "loss - (no step applied yet)" "$work/out" || fail "progress shows a loss with no applied step: $(cat "$work/out")"
"$ampx" train "$work/skip.json" --steps 1000 --quiet >"$work/out" 2>"$work/err"
[ $? -eq 1 ] || fail "all-skipped run did not stop"
grep -q "step 200: none of the 200 steps so far was applied" "$work/err" || fail "all-skipped: $(tail -1 "$work/err")"
"$ampx" train "$src/models/mlp.json" --steps 20 --checkpoint "$work/good" --quiet >/dev/null || fail "good run"
cp "$work/good" "$work/good.orig"
"$ampx" train "$work/diverge.json" --steps 400 --log-every 10 >"$work/out" 2>"$work/err"
[ $? -eq 1 ] || fail "divergent run exits 0"
grep -q "warning: step .*above 10 times its start" "$work/err" || fail "no divergence warning"
grep -q "has stayed above 10 times its start" "$work/err" || fail "divergence stop: $(tail -1 "$work/err")"
cmp -s "$work/good" "$work/good.orig" || fail "a good checkpoint was touched"
# a run pinned at min_scale that skips most of its steps: a warning at its end, in words and
# in the metrics, naming what to do; the exit status stays 0 (docs/TRAINING.md, Loss scaler)
"$ampx" train "$src/models/mlp_f16.json" --steps 300 --set scaler.min_scale=1048576 \
  --set scaler.init_scale=1048576 --quiet --metrics "$work/pinned.jsonl" >"$work/out" 2>"$work/err"
rc=$?
[ $rc -eq 0 ] || fail "a run pinned at min_scale exits $rc: $(tail -1 "$work/err")"
grep -Eq "^warning: [0-9]+ of this run's 300 steps \([0-9.]+%\) were skipped for non-finite gradients \(more than 10%\), and the loss scale ends at its min_scale 1048576, .*lower scaler.min_scale" "$work/err" ||
  fail "pinned at min_scale: no warning at the end: $(cat "$work/err")"
grep -q '"run_warning":"warning: [0-9]* of this run' "$work/pinned.jsonl" ||
  fail "pinned at min_scale: no run_warning in the metrics: $(tail -1 "$work/pinned.jsonl")"
"$ampx" plot --help >/dev/null 2>&1 && { "$ampx" plot "$work/pinned.jsonl" -o "$work/pinned.svg" ||
  fail "plot reads a metrics file with a run_warning line"; }
"$ampx" train "$src/models/mlp_f16.json" --steps 300 --quiet >"$work/out" 2>"$work/err" ||
  fail "mlp_f16: $(tail -1 "$work/err")"
grep -q "of this run's" "$work/err" && fail "mlp_f16 (a few skips) warned: $(cat "$work/err")"

# ---- plot (built when cairo is found)
# fontconfig (cairo's text) keeps caches for the life of the process: not ampx's leaks
export LSAN_OPTIONS="suppressions=$src/tests/train/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
if "$ampx" plot --help >/dev/null 2>&1; then
  "$ampx" plot "$work/m.jsonl" -o "$work/run.png" || fail "plot png"
  python3 - "$work/run.png" <<'PY' || fail "plot: png"
import struct, sys, zlib
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n"
w, h = struct.unpack(">II", b[16:24])
assert (w, h) == (1200, 900), (w, h)
# inflate the IDAT chunks: the pixels are not all one colour
i, data = 8, b""
while i < len(b):
    n = struct.unpack(">I", b[i:i + 4])[0]; kind = b[i + 4:i + 8]
    if kind == b"IDAT": data += b[i + 8:i + 8 + n]
    i += 12 + n
raw = zlib.decompress(data)
assert len(set(raw[1:1 + w * 4 * 50])) > 4 or len(set(raw)) > 8, "one colour"
PY
  "$ampx" plot "$work/m.jsonl" -o "$work/run.svg" || fail "plot svg"
  python3 -c "import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); assert d.documentElement.tagName == 'svg'" "$work/run.svg" || fail "plot: svg does not parse"
  "$ampx" plot "$work/m.jsonl" -o "$work/run.pdf" && head -c 5 "$work/run.pdf" | grep -q "%PDF" || fail "plot pdf"
  # a known run: the labels drawn, read back from the PDF's text (pdftotext, poppler-utils)
  python3 - "$work/known.jsonl" <<'PY'
import json, math, sys
with open(sys.argv[1], "w") as f:
    for s in range(1, 201):
        scale = 65536.0 if s < 120 else 32768.0
        line = {"step": s, "loss": 2.0 - 1.5 * s / 200, "scale": scale,
                "lr": 1e-3 * min(1.0, s / 50), "grad_norm": 10 ** (-1 + 2 * s / 200)}
        if s == 120: line["skipped"] = True
        if s % 50 == 0: line["val_loss"] = 2.1 - 1.5 * s / 200
        if s % 10 == 0: line["headroom_bits"] = 12 - s / 20
        f.write(json.dumps(line) + "\n")
        if s % 10 == 0:
            for layer, k in (("fc1", 1), ("fc2", 3)):
                f.write(json.dumps({"step": s, "layer": layer, "max_abs": 10 ** (-k + s / 200)}) + "\n")
PY
  if command -v pdftotext >/dev/null; then
    "$ampx" plot "$work/known.jsonl" -o "$work/known.pdf" || fail "plot known run"
    pdftotext "$work/known.pdf" "$work/known.txt" || fail "pdftotext"
    python3 - "$work/known.txt" <<'PY' || fail "plot: labels ($(tr '\n' ' ' <"$work/known.txt" | head -c 400))"
import re, sys
words = open(sys.argv[1]).read().split()
def has(*w):
    for x in w:
        assert x in words, f"no label {x!r}"
has("training", "validation", "max", "|g|", "fc1", "fc2", "headroom", "orders")
assert words.count("step") >= 6, "every panel, the heat map and headroom included, has a step axis"
has("2^15", "2^16")                       # the loss scale: powers of two
has("50", "100", "150", "200")            # round steps
has("0.0000", "0.0005", "0.0010")         # the learning rate from 0
has("0.1", "1", "10")                     # the gradient norm: powers of ten
has("0.01")                               # the colour bar: powers of ten
bad = [w for w in words if re.fullmatch(r"-?\d+(\.\d+)?e[+-]?0*\.\d+|-\d.*", w)]
assert not bad, f"fractional exponents or negative labels: {bad}"
assert not [w for w in words if re.fullmatch(r"\d\.\d{2,}e[+-]\d+", w)], "unround ticks"
PY
  else
    echo "pdftotext not installed: the plot's labels are not checked"
  fi
  "$ampx" plot "$work/none.jsonl" -o "$work/x.png" 2>"$work/err" && fail "plot of a missing file"
  "$ampx" plot "$work/m.jsonl" -o "$work/x.gif" 2>/dev/null; [ $? -eq 2 ] || fail "plot .gif is a usage error"
else
  echo "ampx plot not built (no cairo): skipped"
fi

# ---- every backend option is in `ampx backends --options` and in docs/OPTIONS.md
"$ampx" backends --options >"$work/opts" || fail "backends --options"
for b in cpu opencl cuda; do
  "$ampx" conformance --backend "$b" --backend-opt zz=1 --quick >/dev/null 2>"$work/err"
  known=$(sed -n 's/.*(known: \(.*\)).*/\1/p' "$work/err" | tr -d ,)
  [ -z "$known" ] && { [ "$b" = cpu ] && fail "cpu did not list its options: $(cat "$work/err")"; continue; }
  for k in $known; do
    grep -Eq "^$b +$k " "$work/opts" || fail "backends --options lacks $b $k"
    grep -Fq "| $b | \`$k\` |" "$src/docs/OPTIONS.md" || fail "docs/OPTIONS.md lacks $b $k"
  done
done

# ---- headroom: a planted growing activation is warned of before it overflows; the shipped
# models' normal runs draw no headroom warning, and every monitored step names the tensor
# closest to its range. The planted model regresses onto a target of 1e8 in mixed_f16 with
# no weight decay: its f16 hidden activations grow until the forward pass overflows.
awk 'BEGIN { srand(3); print "x1,x2,x3,x4,y"; for (i = 0; i < 2000; i++)
  printf "%.6f,%.6f,%.6f,%.6f,%d\n", 2*rand()-1, 2*rand()-1, 2*rand()-1, 2*rand()-1, 100000000 }' \
  >"$work/grow.csv"
cat >"$work/grow.json" <<'JSON'
{ "name": "grow",
  "inputs": { "x": { "dtype": "f32", "shape": [4] }, "y": { "dtype": "f32", "shape": [1] } },
  "layers": [
    { "name": "fc1", "type": "dense", "units": 32, "activation": "relu" },
    { "name": "fc2", "type": "dense", "units": 32, "activation": "relu" },
    { "name": "out", "type": "dense", "units": 1 } ],
  "loss": { "type": "mse", "predictions": "out", "targets": "y" },
  "policy": "mixed_f16", "scaler": "dynamic",
  "optimizer": { "type": "adamw", "lr": 0.05, "weight_decay": 0 },
  "data": { "source": "csv", "train": "grow.csv", "test_fraction": 0.1 },
  "train": { "steps": 600, "batch": 32, "seed": 1 } }
JSON
"$ampx" train "$work/grow.json" --monitor 5 --quiet --metrics "$work/grow.jsonl" >/dev/null 2>"$work/err"
warned=$(grep -m1 -o '"step":[0-9]*,[^}]*"headroom_warning"' "$work/grow.jsonl" | sed 's/"step":\([0-9]*\).*/\1/')
inf=$(grep -m1 -o '"step":[0-9]*,"loss":\(null\|inf\)' "$work/grow.jsonl" | sed 's/"step":\([0-9]*\).*/\1/')
[ -n "$warned" ] || fail "headroom: no warning before the planted overflow: $(grep -c headroom_bits "$work/grow.jsonl") monitored steps"
[ -n "$inf" ] || fail "headroom: the planted model did not overflow"
[ -n "$warned" ] && [ -n "$inf" ] && [ "$warned" -lt "$inf" ] ||
  fail "headroom: warned at step '$warned', the loss overflowed at step '$inf'"
grep -q 'fc2.* binary orders below f16.s largest value, and grows' "$work/err" ||
  fail "headroom: the warning is not on the terminal: $(head -n 3 "$work/err")"
echo "headroom: warned at step $warned, the forward pass overflowed at step $inf"
for m in mlp mlp_f16 residual_bn gpt_tiny; do
  "$ampx" train "$src/models/$m.json" --monitor 10 --steps 300 --quiet --metrics "$work/h.jsonl" \
    >/dev/null 2>"$work/err" || fail "headroom: $m: $(cat "$work/err")"
  ! grep -q 'orders below' "$work/err" || fail "headroom: $m warned: $(grep 'orders below' "$work/err")"
  grep -q '"headroom_tensor":"[^"]' "$work/h.jsonl" || fail "headroom: $m: no headroom_tensor"
done

[ $fails -eq 0 ] && echo "observe_cli: all passed"
exit $((fails > 0))
