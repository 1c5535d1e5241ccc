#!/usr/bin/env bash
# fp8_cli.sh AMPX SRC — policy.fp8 end to end: `ampx policy` lists each fp8 tensor with its
# slot, format and reason, and keeps the output layer out; gpt_tiny trains with fp8 products
# (hybrid) to within 3% of its mixed_bf16 validation loss; the e4m3 format, layer globs and
# the most_recent algorithm train; a resumed run is bit-identical (the scaling state is in
# the checkpoint); checkpoints of runs with and without fp8 cross over with a notice; a
# checkpoint whose scales are not positive is refused; malformed fp8 blocks and a plugin
# without the fp8 ops each get one clear line.
set -uo pipefail
ampx=$1
src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
. "$src/tests/cli_lib.sh"

# with_policy IN OUT NAME POLICY-JSON: a copy of model IN under another policy and name
with_policy() {
  python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); m["policy"]=json.loads(sys.argv[4]); m["name"]=sys.argv[3]; json.dump(m, open(sys.argv[2], "w"))' "$@"
}
mlp=$src/models/mlp.json
with_policy "$mlp" "$work/mlp8.json" mlp8 '{"preset": "mixed_bf16", "fp8": {"amax_history": 16}}'

# ---- ampx policy: three tensors per product, each with its slot; the output layer not
"$ampx" policy "$work/mlp8.json" >"$work/pol" 2>"$work/err" || fail "policy: $(cat "$work/err")"
grep -Eq '^  fc1\.x_q +e4m3 .*fp8 slot 0: fc1.s input \(policy\.fp8\.ops "dense"\)' "$work/pol" ||
  fail "policy: no fc1.x_q line: $(cat "$work/pol")"
grep -Eq '^  fc2\.grad_q +e5m2 .*fp8 slot 5' "$work/pol" || fail "policy: no fc2 gradient slot"
grep -q '^fp8: 2 products of weights, 6 tensors with their own scales (hybrid' "$work/pol" ||
  fail "policy: no fp8 summary line"
grep -q 'logits.x_q' "$work/pol" && fail "policy: the output layer runs in fp8 without being named"
grep -Eq '^memory at batch .* e4m3 ' "$work/pol" || fail "policy: no e4m3 activations in the memory line"

# ---- gpt_tiny: fp8 (hybrid) within 3% of mixed_bf16's validation loss after 300 steps (the
# first hundred, with scales from a short history, cost fp8 the most: 3.5% behind at 200)
tiny=$src/models/gpt_tiny.json
with_policy "$tiny" "$work/tiny8.json" gpt_tiny '{"preset": "mixed_bf16", "fp8": {}}'
val() { sed -n 's/^validation loss \([0-9.]*\) nats.*/\1/p' "$1"; }
"$ampx" train "$tiny" --steps 300 --quiet >"$work/bf" 2>"$work/err" || fail "gpt_tiny bf16: $(cat "$work/err")"
"$ampx" train "$work/tiny8.json" --steps 300 --quiet >"$work/f8" 2>"$work/err" ||
  fail "gpt_tiny fp8: $(cat "$work/err")"
vb=$(val "$work/bf") v8=$(val "$work/f8")
echo "gpt_tiny 300 steps: validation loss mixed_bf16 ${vb:-?}, fp8 hybrid ${v8:-?}"
awk -v a="${vb:-0}" -v b="${v8:-99}" 'BEGIN { exit !(a > 0 && b <= a * 1.03) }' ||
  fail "gpt_tiny: fp8 validation loss ${v8:-?} is not within 3% of mixed_bf16's ${vb:-?}"

# ---- what a run reports: a metrics line per fp8 tensor at each log interval (scale, amax,
# saturated and flushed fractions), maps of them in `ampx plot`, counters in the trace
"$ampx" train "$work/mlp8.json" --steps 40 --set train.log_every=20 --quiet --metrics "$work/m.jsonl" \
  --trace "$work/t.json" >/dev/null 2>"$work/err" || fail "metrics run: $(cat "$work/err")"
python3 - "$work/m.jsonl" <<'PY' || fail "fp8 metrics lines: $(grep -m2 fp8_tensor "$work/m.jsonl")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if "fp8_tensor" in l]
assert sorted({l["step"] for l in lines}) == [20, 40], lines[:2]
last = [l for l in lines if l["step"] == 40]
assert [l["fp8_tensor"] for l in last] == ["fc1.x_q", "fc1.w_q", "fc1.grad_q", "fc2.x_q",
                                          "fc2.w_q", "fc2.grad_q"], last
assert all(l["scale"] > 0 and l["amax"] > 0 and 0 <= l["saturated"] <= 1 and 0 <= l["flushed"] <= 1
           for l in last), last
assert last[2]["format"] == "e5m2" and last[0]["format"] == "e4m3"
PY
"$ampx" plot "$work/m.jsonl" -o "$work/m.png" >/dev/null 2>"$work/err" || fail "plot: $(cat "$work/err")"
grep -q '"name":"fp8 scale fc1.x_q"' "$work/t.json" || fail "no fp8 scale counter in the trace"

# the fractions count: a negative margin scales past the format (values saturate), a large
# one below it (values flush to zero); margin 0 does neither to more than 1% of the inputs (a
# delayed scale saturates the few values larger than any of its history)
for mg in -8 20; do
  with_policy "$mlp" "$work/mg.json" mlp8 "{\"preset\": \"mixed_bf16\", \"fp8\": {\"margin\": $mg}}"
  "$ampx" train "$work/mg.json" --steps 20 --set train.log_every=10 --quiet --metrics "$work/mg.jsonl" \
    >/dev/null 2>"$work/err" || fail "margin $mg: $(cat "$work/err")"
  python3 - "$work/mg.jsonl" "$mg" <<'PY' || fail "margin $mg: $(grep -m1 '"fc2.x_q"' "$work/mg.jsonl")"
import json, sys
l = [json.loads(x) for x in open(sys.argv[1]) if '"fc2.x_q"' in x][-1]
key = "saturated" if int(sys.argv[2]) < 0 else "flushed"
assert l[key] > 0.1, l
PY
done
python3 - "$work/m.jsonl" <<'PY' || fail "margin 0: inputs saturated or flushed: $(grep -m1 '"fc2.x_q"' "$work/m.jsonl")"
import json, sys
l = [json.loads(x) for x in open(sys.argv[1]) if '"fc2.x_q"' in x][-1]
assert l["saturated"] < 0.01 and l["flushed"] < 0.05, l
PY

# ---- an overflow in a gradient still skips the step: the casts saturate finite values but
# keep an infinite input non-finite (saturate 2), so the products that read the codes carry
# it to the scaler's check. Layers without bias or activation (nothing else between the
# gradients) in mixed_f16 from a loss scale of 1e9: the first steps overflow and back off.
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); m["name"]="nb"
for l in m["layers"][:2]: l["bias"]=False; l.pop("activation", None)
m["policy"]={"preset":"mixed_f16","fp8":{"amax_history":16}}
m["scaler"]={"type":"dynamic","init_scale":1e9,"growth_interval":2000}
json.dump(m,open(sys.argv[2],"w"))' "$mlp" "$work/nb.json"
"$ampx" train "$work/nb.json" --steps 20 >"$work/out" 2>"$work/err" || fail "overflow run: $(cat "$work/err")"
grep -Eq '^done: step 20, [0-9]+ applied, [1-9][0-9]* skipped' "$work/out" ||
  fail "an fp8 gradient overflow skipped no step: $(grep '^done' "$work/out")"

# ---- generation: the KV cache serves fp8 models (x_q by rows, W_q whole), the same text
"$ampx" train "$work/tiny8.json" --steps 20 --quiet --checkpoint "$work/tiny8.st" >/dev/null 2>&1
"$ampx" generate "$work/tiny8.json" --checkpoint "$work/tiny8.st" --prompt "ab" --tokens 30 \
  --temperature 0 >"$work/g1" 2>"$work/gerr" || fail "generate: $(cat "$work/gerr")"
grep -q "(KV cache)" "$work/gerr" || fail "generate: no KV cache for an fp8 model: $(cat "$work/gerr")"
"$ampx" generate "$work/tiny8.json" --checkpoint "$work/tiny8.st" --prompt "ab" --tokens 30 \
  --temperature 0 --no-cache >"$work/g2" 2>/dev/null
cmp -s "$work/g1" "$work/g2" || fail "generate: the KV cache's text differs from the whole window's"

# ---- the e4m3 format on named layers with the most_recent amax, and the convolution class
with_policy "$tiny" "$work/tinyE.json" gpt_tiny \
  '{"preset": "mixed_bf16", "fp8": {"format": "e4m3", "amax_algo": "most_recent", "margin": 1, "layers": ["h*.fc", "head"]}}'
"$ampx" policy "$work/tinyE.json" >"$work/pol" 2>"$work/err" || fail "e4m3 policy: $(cat "$work/err")"
grep -q '^fp8: 3 products of weights, 9 tensors with their own scales (e4m3 forward and backward), amax history 1024, amax most_recent, margin 1' "$work/pol" ||
  fail "e4m3 policy: $(grep '^fp8' "$work/pol")"
grep -Eq '^  head\.x_q +e4m3 .*\(policy\.fp8\.layers "head"\)' "$work/pol" ||
  fail "e4m3 policy: the named output layer is not in fp8"
"$ampx" train "$work/tinyE.json" --steps 60 --quiet >"$work/out" 2>"$work/err" ||
  fail "e4m3 training: $(cat "$work/err")"
"$ampx" train "$tiny" --steps 60 --quiet >"$work/bf60" 2>"$work/err" || fail "bf16 60: $(cat "$work/err")"
e=$(val "$work/out") b=$(val "$work/bf60")
awk -v a="${e:-99}" -v b="${b:-0}" 'BEGIN { exit !(b > 0 && a <= b * 1.03) }' ||
  fail "e4m3 training: validation loss ${e:-?} after 60 steps, mixed_bf16 ${b:-?}"

# ---- resume: 30 + 30 steps give the bits of 60, scaling state included
"$ampx" train "$work/mlp8.json" --steps 60 --quiet --checkpoint "$work/straight.st" \
  >/dev/null 2>"$work/err" || fail "straight: $(cat "$work/err")"
"$ampx" train "$work/mlp8.json" --steps 30 --quiet --checkpoint "$work/half.st" \
  >/dev/null 2>"$work/err" || fail "half: $(cat "$work/err")"
"$ampx" train "$work/mlp8.json" --steps 60 --quiet --resume "$work/half.st" \
  --checkpoint "$work/resumed.st" >/dev/null 2>"$work/err" || fail "resumed: $(cat "$work/err")"
cmp -s "$work/straight.st" "$work/resumed.st" || fail "the resumed fp8 run's checkpoint differs"
python3 -c 'import json,struct,sys; f=open(sys.argv[1],"rb"); n=struct.unpack("<Q",f.read(8))[0]; h=json.loads(f.read(n)); sys.exit(h["ampx.fp8.state"]["shape"] != [18, 6])' \
  "$work/straight.st" || fail "the checkpoint's ampx.fp8.state is not [2 + 16, 6]"

# ---- a state past the reader's 16 MiB chunk (24 fp8 layers x 3 slots x 65538 rows) resumes:
# the scales' positivity is checked at their place in the tensor, not in each chunk
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); m["name"]="deep"
m["layers"]=[{"name":"d%d" % i,"type":"dense","units":8,"activation":"relu"} for i in range(24)]+[m["layers"][-1]]
m["policy"]={"preset":"mixed_bf16","fp8":{"amax_history":65536}}
json.dump(m,open(sys.argv[2],"w"))' "$mlp" "$work/deep.json"
"$ampx" train "$work/deep.json" --steps 3 --quiet --checkpoint "$work/deep.st" >/dev/null 2>"$work/err" ||
  fail "deep: $(cat "$work/err")"
"$ampx" train "$work/deep.json" --steps 5 --quiet --resume "$work/deep.st" >/dev/null 2>"$work/err" ||
  fail "deep resume: $(cat "$work/err")"

# ---- crossing over: a run without fp8 resumes under fp8 (scales start at 1), and back
with_policy "$mlp" "$work/mlp16.json" mlp8 '"mixed_bf16"'
"$ampx" train "$work/mlp16.json" --steps 20 --quiet --checkpoint "$work/bf.st" >/dev/null 2>&1
"$ampx" train "$work/mlp8.json" --steps 30 --resume "$work/bf.st" >"$work/out" 2>"$work/err" ||
  fail "bf16 -> fp8 resume: $(cat "$work/err")"
grep -q "has no fp8 scaling state: every fp8 tensor's scale starts at 1" "$work/out" "$work/err" ||
  fail "bf16 -> fp8 resume: no notice"
"$ampx" train "$work/mlp16.json" --steps 40 --quiet --resume "$work/half.st" >/dev/null 2>"$work/err" ||
  fail "fp8 -> bf16 resume: $(cat "$work/err")"

# a checkpoint of other fp8 tensors (fc1's slots) does not hand its scales to fc2's
with_policy "$mlp" "$work/only1.json" mlp8 '{"preset": "mixed_bf16", "fp8": {"amax_history": 16, "layers": ["fc1"]}}'
with_policy "$mlp" "$work/only2.json" mlp8 '{"preset": "mixed_bf16", "fp8": {"amax_history": 16, "layers": ["fc2"]}}'
"$ampx" train "$work/only1.json" --steps 20 --quiet --checkpoint "$work/only1.st" >/dev/null 2>&1
"$ampx" train "$work/only2.json" --steps 30 --resume "$work/only1.st" >"$work/out" 2>"$work/err" ||
  fail "fc1 -> fc2 resume: $(cat "$work/err")"
grep -q "the fp8 scaling state of other fp8 tensors (another policy.fp8)" "$work/out" "$work/err" ||
  fail "fc1 -> fc2 resume: no notice"

# ---- a scale of 0 in the checkpoint is refused (every fp8 code would be 0)
python3 - "$work/half.st" "$work/zero.st" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
at = 8 + n + h["ampx.fp8.state"]["data_offsets"][0] + 4 * 2  # scale of slot 2
open(sys.argv[2], "wb").write(raw[:at] + struct.pack("<f", 0.0) + raw[at + 4:])
PY
expect_error zero_scale 1 'ampx.fp8.state" element 2 is 0, expected a finite number > 0' \
  "$ampx" train "$work/mlp8.json" --steps 40 --resume "$work/zero.st"

# ---- finite but absurd states: a scale and inverse that disagree, a scale no margin gives
# (refused); a scale past this policy's margin (a note: its first step saturates)
fp8_edit() { # IN OUT SCALE INV: slot 2's scale and scale_inv ("-": unchanged)
  python3 - "$@" <<'PY'
import json, struct, sys
raw = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
slots = h["ampx.fp8.state"]["shape"][1]
at = 8 + n + h["ampx.fp8.state"]["data_offsets"][0]
for k, v in ((2, sys.argv[3]), (slots + 2, sys.argv[4])):
    if v != "-":
        raw[at + 4 * k:at + 4 * k + 4] = struct.pack("<f", float(v))
open(sys.argv[2], "wb").write(bytes(raw))
PY
}
fp8_edit "$work/half.st" "$work/huge.st" 3e38 -
expect_error fp8_huge_scale 1 'ampx.fp8.state": .* \(slot 2\): scale 3e\+38 and scale_inv [0-9.e+-]+ disagree' \
  "$ampx" train "$work/mlp8.json" --steps 40 --resume "$work/huge.st"
fp8_edit "$work/half.st" "$work/tiny_inv.st" - 1e-45
expect_error fp8_tiny_inverse 1 '\(slot 2\): scale [0-9.e+-]+ and scale_inv 1\.4013e-45 disagree' \
  "$ampx" train "$work/mlp8.json" --steps 40 --resume "$work/tiny_inv.st"
fp8_edit "$work/half.st" "$work/saturating.st" 3e38 3.3333333e-39
expect_error fp8_saturating 1 '\(slot 2\): scale 3e\+38 times the amax .* every value would saturate' \
  "$ampx" train "$work/mlp8.json" --steps 40 --resume "$work/saturating.st"
s2=$(python3 -c 'import json,struct,sys; r=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",r[:8])[0]; h=json.loads(r[8:8+n]); a=8+n+h["ampx.fp8.state"]["data_offsets"][0]; print(repr(struct.unpack("<f",r[a+8:a+12])[0]*1e6))' "$work/half.st")
fp8_edit "$work/half.st" "$work/past_margin.st" "$s2" "$(python3 -c "print(1/$s2)")"
"$ampx" train "$work/mlp8.json" --steps 40 --resume "$work/past_margin.st" >"$work/out" 2>"$work/err" ||
  fail "a scale past the margin: $(cat "$work/err")"
grep -q "saturates until the scale updates" "$work/out" "$work/err" ||
  fail "a scale past the margin: no note: $(cat "$work/out" "$work/err")"
"$ampx" train "$work/mlp8.json" --steps 40 --resume "$work/half.st" >"$work/out" 2>"$work/err" &&
  ! grep -q "saturates" "$work/out" "$work/err" || fail "the saved state gets a note: $(cat "$work/err")"

# ---- malformed fp8 blocks: one line each, with the JSON path
bad() { # NAME PATTERN FP8-JSON
  with_policy "$mlp" "$work/$1.json" mlp8 "{\"preset\": \"mixed_bf16\", \"fp8\": $3}"
  expect_error "$1" 1 "$2" "$ampx" policy "$work/$1.json"
}
bad format 'unknown value "hybird" \(did you mean "hybrid"\?\)' '{"format": "hybird"}'
bad history 'amax_history' '{"amax_history": 0}'
bad margin 'margin' '{"margin": 65}'
bad algo 'unknown value "maximum"' '{"amax_algo": "maximum"}'
bad ops 'expected "dense" or "conv"' '{"ops": ["softmax"]}'
bad glob 'glob\.json:[0-9]+:[0-9]+: \$\.policy\.fp8\.layers\[0\]: "fc9" matches no product of weights' '{"layers": ["fc9"]}'
bad key 'unknown key' '{"fromat": "e4m3"}'
bad none 'no product of weights runs in fp8' '{"ops": ["conv"]}'
echo '{"policy": {"preset": "mixed_bf16", "fp8": {"layers": ["fc9"]}}}' >"$work/p8.json"
expect_error "glob in a --policy file" 1 'p8.json:1:56: \$\.policy\.fp8\.layers\[0\]: "fc9" matches no product' \
  "$ampx" policy "$mlp" --policy "$work/p8.json"

# ---- a plugin of ABI 1.3 has no fp8 ops: refused before the first step, naming the node
if [ -n "${AMPX_TEST_MINOR_1_3:-}" ] && [ -f "$AMPX_TEST_MINOR_1_3" ]; then
  expect_error old_plugin 1 'has no fp8_quantize, which node "fc1" needs' \
    "$ampx" train "$work/mlp8.json" --steps 1 --backend "$AMPX_TEST_MINOR_1_3"
else
  fail "AMPX_TEST_MINOR_1_3 is not set to the test plugin"
fi

[ $fails -eq 0 ] && echo "fp8_cli: all checks passed"
exit $((fails > 0))
