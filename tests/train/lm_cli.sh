#!/usr/bin/env bash
# lm_cli.sh AMPX SRC — language models end to end: models/gpt_tiny.json trains on the
# embedded text task with validation during the run, a resumed run is bit-identical to a
# straight one, `ampx generate` samples (greedy is deterministic, a long prompt is cropped),
# and malformed text and token files each get one clear line.
set -uo pipefail
ampx=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

expect_error() { # NAME PATTERN CMD...: exit 1, one line on stderr matching PATTERN
  local name=$1 pattern=$2
  shift 2
  "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  [ $rc -eq 1 ] || fail "$name: exit $rc, expected 1 ($(cat "$work/err"))"
  [ "$(wc -l <"$work/err")" -eq 1 ] || fail "$name: expected one line, got: $(cat "$work/err")"
  grep -Eq -- "$pattern" "$work/err" || fail "$name: '$(cat "$work/err")' does not match '$pattern'"
}

# models/gpt_tiny.json made smaller (d_model 64, context 32) so the suite stays quick under
# the sanitizers; the shipped file itself trains in the quick start
sed -e 's/"dim": 128/"dim": 64/; s/"units": 512/"units": 256/; s/"units": 128/"units": 64/' \
  -e 's/"shape": \[64\]/"shape": [32]/g' "$src/models/gpt_tiny.json" >"$work/gpt_small.json"
[ "$(grep -c '"units": 64\|"shape": \[32\]\|"dim": 64' "$work/gpt_small.json")" -eq 5 ] ||
  fail "models/gpt_tiny.json no longer has the sizes this test shrinks"
tiny=$work/gpt_small.json

# ---- training with validation every 100 steps
"$ampx" train "$tiny" --steps 300 --eval-every 100 --metrics "$work/m.jsonl" \
  --checkpoint "$work/c.safetensors" >"$work/out" 2>"$work/err" || fail "train: $(cat "$work/err")"
grep -Eq "^step 100: val_loss [0-9.]+ \([0-9.]+ bits per byte\)" "$work/out" || fail "no validation in bits per byte at step 100: $(cat "$work/out")"
grep -Eq "^validation loss [0-9.]+ nats per token" "$work/out" || fail "no final validation line"
python3 - "$work/m.jsonl" <<'PY' || fail "metrics: no falling val_loss"
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
val = [r for r in rows if "val_loss" in r]
steps = [r["step"] for r in val]
assert steps == [100, 200, 300], steps
# uniform over 256 bytes is ln 256 = 5.55 nats; the generated language is far more regular
assert val[-1]["val_loss"] < val[0]["val_loss"] < math.log(256), val
assert val[-1]["val_loss"] < 1.6, val
PY

# ---- resume: 30 + 30 steps equal 60 straight, bit for bit
"$ampx" train "$tiny" --steps 60 --quiet --checkpoint "$work/a.safetensors" >/dev/null 2>&1 ||
  fail "straight run"
"$ampx" train "$tiny" --steps 30 --quiet --checkpoint "$work/b.safetensors" >/dev/null 2>&1 ||
  fail "first half"
"$ampx" train "$tiny" --steps 60 --quiet --resume "$work/b.safetensors" \
  --checkpoint "$work/b.safetensors" >/dev/null 2>&1 || fail "resumed half"
cmp -s "$work/a.safetensors" "$work/b.safetensors" || fail "resumed GPT run differs from the straight one"
# the same with dropout on the attention probabilities: the masks repeat after a resume
sed -e 's/"heads": 4, "causal": true}/"heads": 4, "causal": true, "dropout": 0.1}/' "$tiny" >"$work/drop.json"
grep -q '"dropout": 0.1' "$work/drop.json" || fail "no attention to put dropout on in $tiny"
"$ampx" train "$work/drop.json" --steps 40 --quiet --checkpoint "$work/d1.safetensors" >/dev/null 2>&1 ||
  fail "dropout straight run"
"$ampx" train "$work/drop.json" --steps 20 --quiet --checkpoint "$work/d2.safetensors" >/dev/null 2>&1 &&
  "$ampx" train "$work/drop.json" --steps 40 --quiet --resume "$work/d2.safetensors" \
    --checkpoint "$work/d2.safetensors" >/dev/null 2>&1 || fail "dropout resumed run"
cmp -s "$work/d1.safetensors" "$work/d2.safetensors" || fail "resumed GPT run with dropout differs"

# ---- fused attention (ATTN_FWD / ATTN_BWD) against its composite: the same masks, the same
# training within rounding (the composite rounds the probabilities to bf16 for its GEMM)
sed -e 's/"causal": true/"causal": true, "fused": false/' "$work/drop.json" >"$work/dropc.json"
grep -q '"fused": false' "$work/dropc.json" || fail "no attention to unfuse in $work/drop.json"
"$ampx" policy "$work/drop.json" >"$work/pol" 2>&1 || fail "policy: $(cat "$work/pol")"
grep -q "fused attention (attn_fwd, attn_bwd), lse f32" "$work/pol" ||
  fail "ampx policy does not show the fused attention"
"$ampx" policy "$work/dropc.json" >"$work/pol" 2>&1 || fail "policy: $(cat "$work/pol")"
grep -q "attention as its composite" "$work/pol" ||
  fail "ampx policy does not show the composite attention"
for t in q k v scores probs context merged; do
  grep -q "^h0\.attn\.$t " "$work/pol" || fail "ampx policy does not list h0.attn.$t"
done
# attention=1: the cpu plugin claims the fused op on every ISA path (by default on AVX2 and
# AVX-512)
"$ampx" train "$work/drop.json" --steps 60 --quiet --metrics "$work/f.jsonl" \
  --backend-opt attention=1 --trace "$work/f.trace.json" >/dev/null 2>&1 ||
  fail "fused attention run"
grep -q '"attn_fwd\.' "$work/f.trace.json" && grep -q '"attn_bwd\.' "$work/f.trace.json" ||
  fail "the fused run's trace has no attn_fwd / attn_bwd"
# a product computed in bf16 gets its output's gradient in bf16 (one cast where the f32
# residual stream hands it down), so both of its backward GEMMs read bf16 operands
python3 - "$work/f.trace.json" <<'PY' || fail "bf16 products' backward GEMMs"
import json, sys
ops = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("cat") == "op"]
gemm = [e for e in ops if e["name"].startswith("gemm.")]
low = {e["args"]["node"] for e in gemm if e["args"]["phase"] == "forward" and e["name"] == "gemm.bf16"}
bwd = [e for e in gemm if e["args"]["phase"] == "backward" and e["args"]["node"] in low]
assert len(low) >= 4 and len(bwd) >= 2 * len(low), (low, len(bwd))
for e in bwd:
    assert e["args"]["dtypes"].split(",")[:2] == ["bf16", "bf16"], e["args"]
casts = {e["args"]["node"] for e in ops if e["name"] == "cast.bf16" and e["args"]["phase"] == "backward"}
assert any(n.endswith(".proj") for n in casts), casts
PY
"$ampx" train "$work/dropc.json" --steps 60 --quiet --metrics "$work/c.jsonl" >/dev/null 2>&1 ||
  fail "composite attention run"
python3 - "$work/f.jsonl" "$work/c.jsonl" <<'PY' || fail "fused and composite attention train differently"
import json, sys
f, c = ([json.loads(l)["loss"] for l in open(p) if '"loss"' in l] for p in sys.argv[1:])
assert len(f) == len(c) > 0, (len(f), len(c))
worst = max(abs(a - b) for a, b in zip(f, c))
assert worst < 2e-3, ("largest loss difference", worst)
assert f[-1] < f[0] - 0.5, ("no training", f[0], f[-1])
PY
# a plugin of ABI 1.3 (no attention ops, no GEMM epilogue) trains the model as its composite,
# exactly as cpu does with the epilogue off
if [ -n "${AMPX_TEST_MINOR_1_3:-}" ] && [ -f "$AMPX_TEST_MINOR_1_3" ]; then
  "$ampx" train "$work/drop.json" --steps 20 --quiet --backend "$AMPX_TEST_MINOR_1_3" \
    --metrics "$work/o.jsonl" >/dev/null 2>"$work/err" || fail "1.3 plugin: $(cat "$work/err")"
  "$ampx" train "$work/dropc.json" --steps 20 --quiet --metrics "$work/c20.jsonl" \
    --backend-opt gemm_epilogue=0 >/dev/null 2>&1 ||
    fail "composite 20 steps"
  cmp -s <(grep -o '"loss":[^,]*' "$work/o.jsonl") <(grep -o '"loss":[^,]*' "$work/c20.jsonl") ||
    fail "the 1.3 plugin's run is not the composite's"
else
  fail "AMPX_TEST_MINOR_1_3 is not set to the test plugin"
fi

# ---- eval of a token model's checkpoint: the final validation loss again
"$ampx" eval "$tiny" --checkpoint "$work/c.safetensors" >"$work/ev" 2>"$work/err" || fail "eval: $(cat "$work/err")"
want=$(sed -n 's/^validation loss \([0-9.]*\) nats.*/\1/p' "$work/out")
grep -q "^step 300: validation loss $want nats per token" "$work/ev" ||
  fail "eval: '$(cat "$work/ev")' does not repeat the run's validation loss $want"

# ---- --checkpoint-every with --keep: the last K by step; best: the lowest validation loss
mkdir -p "$work/keep"
"$ampx" train "$tiny" --steps 120 --checkpoint-every 20 --keep 2 --eval-every 40 --metrics "$work/keep.jsonl" \
  --checkpoint "$work/keep/run.safetensors" --quiet >/dev/null 2>"$work/err" || fail "keep: $(cat "$work/err")"
[ "$(cd "$work/keep" && ls | tr '\n' ' ')" = "run.best.safetensors run.safetensors run.step000100.safetensors run.step000120.safetensors " ] ||
  fail "keep: $(ls "$work/keep" | tr '\n' ' ')"
best=$(python3 -c 'import json,sys; print("%.4f" % min(json.loads(l)["val_loss"] for l in open(sys.argv[1]) if "val_loss" in l))' "$work/keep.jsonl")
"$ampx" eval "$tiny" --checkpoint "$work/keep/run.best.safetensors" >"$work/ev" 2>&1
grep -q "validation loss $best nats" "$work/ev" || fail "best checkpoint: '$(cat "$work/ev")', lowest val_loss $best"

# ---- generate
g() { "$ampx" generate "$tiny" --checkpoint "$work/c.safetensors" "$@"; }
g --prompt "count: one" --tokens 40 --temperature 0 >"$work/g1" 2>"$work/err" || fail "generate: $(cat "$work/err")"
g --prompt "count: one" --tokens 40 --temperature 0 >"$work/g2" 2>/dev/null
cmp -s "$work/g1" "$work/g2" || fail "greedy generation is not deterministic"
[ "$(head -c 10 "$work/g1")" = "count: one" ] || fail "generate does not echo the prompt: $(cat "$work/g1")"
[ "$(wc -c <"$work/g1")" -eq $((10 + 40 + 1)) ] || fail "generate printed $(wc -c <"$work/g1") bytes, expected 51"
g --tokens 30 --seed 7 >"$work/s1" 2>/dev/null && g --tokens 30 --seed 7 >"$work/s2" 2>/dev/null ||
  fail "sampling"
cmp -s "$work/s1" "$work/s2" || fail "sampling with one seed is not reproducible"
long=$(printf 'ada has a red ball. %.0s' $(seq 1 20))
g --prompt "$long" --tokens 5 --temperature 0 >"$work/g3" 2>"$work/err" || fail "a prompt longer than the context: $(cat "$work/err")"
# the KV cache: the same greedy text as the whole window per token, past the window of 32
# (dropping half of it, or one token as nanoGPT does), from a prompt longer than it, with
# attention fused on each ISA path and as its composite, in mixed bf16 and f32
grep -q "tokens/s (KV cache)" "$work/err" || fail "no speed line with the KV cache: $(cat "$work/err")"
sed -e 's/"causal": true/"causal": true, "fused": false/' "$tiny" >"$work/comp.json"
sed -e 's/"policy": "mixed_bf16"/"policy": "f32"/' "$tiny" >"$work/f32.json"
grep -q '"policy": "f32"' "$work/f32.json" || fail "no policy to change in $tiny"
same() { # MODEL ARGS...: greedy text with and without the cache, compared
  local m=$1
  shift
  "$ampx" generate "$m" --checkpoint "$work/c.safetensors" --temperature 0 "$@" \
    >"$work/kc" 2>"$work/kerr" || fail "generate $*: $(cat "$work/kerr")"
  grep -q "tokens/s (KV cache)" "$work/kerr" || fail "generate $*: no KV cache: $(cat "$work/kerr")"
  "$ampx" generate "$m" --checkpoint "$work/c.safetensors" --temperature 0 --no-cache "$@" \
    >"$work/kn" 2>"$work/kerr" || fail "generate --no-cache $*: $(cat "$work/kerr")"
  grep -q "tokens/s (whole window per token)" "$work/kerr" || fail "generate --no-cache $*: $(cat "$work/kerr")"
  cmp -s "$work/kc" "$work/kn" || fail "generate $*: the KV cache changes the text: $(cat "$work/kc") / $(cat "$work/kn")"
}
same "$tiny" --prompt "count: one" --tokens 90
same "$tiny" --prompt "count: one" --tokens 40 --shift 1
same "$tiny" --prompt "$long" --tokens 40 --shift 5
same "$work/f32.json" --prompt "count: one" --tokens 70
same "$work/comp.json" --prompt "count: one" --tokens 70
for isa in portable avx2; do
  same "$work/comp.json" --prompt "count: one" --tokens 40 --backend-opt isa=$isa
  same "$tiny" --prompt "count: one" --tokens 40 --backend-opt isa=$isa --backend-opt attention=1
done
# the portable path does not claim the fused ops: the fused model file generates (and
# predicts) as its composite there, and the text is the composite's
same "$tiny" --prompt "count: one" --tokens 40 --backend-opt isa=portable
cp "$work/kc" "$work/k_auto"
same "$tiny" --prompt "count: one" --tokens 40 --backend-opt isa=portable --backend-opt attention=0
cmp -s "$work/k_auto" "$work/kc" || fail "generate on isa=portable is not the composite's text"
# several samples: greedy ones repeat, sampled ones differ; --quiet drops the speed line
g --prompt "a" --tokens 20 --temperature 0 --samples 2 --quiet >"$work/m2" 2>"$work/err" || fail "--samples 2: $(cat "$work/err")"
[ ! -s "$work/err" ] || fail "--quiet still prints: $(cat "$work/err")"
python3 - "$work/m2" <<'PY' || fail "two greedy samples: $(cat "$work/m2")"
import sys
parts = open(sys.argv[1], "rb").read().split(b"\n---\n")
assert len(parts) == 2 and parts[0] + b"\n" == parts[1] and len(parts[0]) == 21, parts
PY
g --prompt "a" --tokens 40 --samples 2 --quiet >"$work/m3" 2>/dev/null || fail "--samples 2 sampled"
python3 - "$work/m3" <<'PY' || fail "two sampled samples are the same: $(cat "$work/m3")"
import sys
a, b = open(sys.argv[1], "rb").read().split(b"\n---\n")
assert a + b"\n" != b
PY
for bad in "--shift 0" "--shift 33" "--samples 0" "--samples x"; do
  # shellcheck disable=SC2086
  g $bad >"$work/out" 2>"$work/err"
  rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l <"$work/err")" -eq 1 ] && grep -q -- "${bad%% *}" "$work/err" ||
    fail "generate $bad: exit $rc, $(cat "$work/err")"
done
expect_error "generate without a checkpoint file" "no-such.safetensors" \
  "$ampx" generate "$tiny" --checkpoint "$work/no-such.safetensors"
expect_error "generate from a classifier" "token model" \
  "$ampx" generate "$src/models/mlp.json" --checkpoint "$work/c.safetensors"

# ---- malformed text and token files
model() { # model SOURCE TRAIN [VAL]: a small token model reading the given files
  local val=""
  [ $# -ge 3 ] && val=", \"val\": \"$3\""
  sed -e 's|"data": {[^}]*}|"data": {"source": "'"$1"'", "train": "'"$2"'"'"$val"'}|' "$tiny" >"$work/model.json"
}
python3 - "$work" <<'PY'
import struct, sys
w = sys.argv[1]
def tok(name, magic=20240520, version=1, count=None, tokens=range(1000), extra=b""):
    tokens = list(tokens)
    h = [0] * 256
    h[0], h[1], h[2] = magic, version, len(tokens) if count is None else count
    with open(f"{w}/{name}", "wb") as f:
        f.write(struct.pack("<256i", *h) + struct.pack(f"<{len(tokens)}H", *tokens) + extra)
tok("good.bin", tokens=[i % 256 for i in range(5000)])
tok("magic.bin", magic=1234)
tok("version.bin", version=2)
tok("count.bin", count=2000)
tok("odd.bin", extra=b"\x01")
tok("vocab.bin", tokens=[300] * 1000)
tok("short.bin", tokens=[1, 2, 3])
open(f"{w}/header.bin", "wb").write(b"\x00" * 100)
open(f"{w}/short.txt", "w").write("too short")
PY
model tokens "$work/good.bin" "$work/good.bin"
"$ampx" train "$work/model.json" --steps 2 --quiet >/dev/null 2>"$work/err" || fail "a good token file: $(cat "$work/err")"
for c in "magic.bin:not a token file" "version.bin:version 2" "count.bin:declares 2000 tokens" \
  "odd.bin:odd count" "vocab.bin:token 0 is 300, outside the model's vocabulary of 256" \
  "short.bin:too few for one window" "header.bin:shorter than the 1024-byte header"; do
  f=${c%%:*}
  model tokens "$work/$f" "$work/good.bin"
  expect_error "token file $f" "$f: .*${c#*:}" "$ampx" train "$work/model.json" --steps 1
done
model text "$work/short.txt"
expect_error "short text" "short.txt: .*too few" "$ampx" train "$work/model.json" --steps 1
model text "$work"
expect_error "a folder as text" "not a regular file" "$ampx" train "$work/model.json" --steps 1
model text "$work/missing.txt"
expect_error "missing text" "missing.txt: No such file" "$ampx" train "$work/model.json" --steps 1
model text "\$DATA/none/train.txt"
AMPX_DATA_DIR=$work/datadir expect_error "\$DATA under AMPX_DATA_DIR" "$work/datadir/none/train.txt" \
  "$ampx" train "$work/model.json" --steps 1

# ---- policy overrides match the names `ampx policy` lists (and the model's node names); one
# that sets nothing is an error naming the nearest tensor
pol() { printf -- '--set\npolicy={"preset": "mixed_bf16", "overrides": {"%s": "%s"}}\n' "$1" "$2"; }
mapfile -t o <<<"$(pol 'h0.attn.context' f32)"
"$ampx" policy "$work/dropc.json" "${o[@]}" >"$work/pol" 2>&1 || fail "override: $(cat "$work/pol")"
grep -q "^h0\.attn\.context  *f32 .*per-layer override" "$work/pol" ||
  fail "an override of a listed name did not apply: $(grep context "$work/pol")"
mapfile -t o <<<"$(pol 'h*.attn.[kv]' f32)"
"$ampx" policy "$work/dropc.json" "${o[@]}" >"$work/pol" 2>&1 || fail "override: $(cat "$work/pol")"
grep -q "^h0\.attn\.q  *f32 .*per-layer override" "$work/pol" ||
  fail "an override of k and v did not set their node's dtype"
mapfile -t o <<<"$(pol 'h0.atn.probs' f32)"
expect_error "misspelt override" 'overrides\["h0\.atn\.probs"\]: matches no tensor; did you mean "h0\.attn\.probs"' \
  "$ampx" policy "$work/dropc.json" "${o[@]}"
mapfile -t o <<<"$(pol 'wte' bf16)"
expect_error "override of a fixed dtype" 'overrides\.wte: matches only tensors whose dtype is fixed' \
  "$ampx" train "$work/dropc.json" --steps 1 "${o[@]}"
# a name of the composite attention, where the attention runs fused, says so (no did-you-mean
# pointing at an unrelated tensor such as h0.attn.proj)
for t in h0.attn.probs h0.attn.k; do
  mapfile -t o <<<"$(pol "$t" f32)"
  expect_error "composite name, fused attention ($t)" "overrides\[\"${t//./\\.}\"\]: matches no tensor: attention \"h0\.attn\" runs fused .*h0\.attn\.qkv, h0\.attn\.attention \(writes h0\.attn\.merged and h0\.attn\.lse\) and h0\.attn\.proj" \
    "$ampx" policy "$work/drop.json" "${o[@]}"
  grep -q "did you mean" "$work/err" && fail "composite name $t: a did-you-mean: $(cat "$work/err")"
done
mapfile -t o <<<"$(pol h0.atn.probs f32)"
expect_error "misspelt composite name, fused attention" 'overrides\["h0\.atn\.probs"\]: matches no tensor; "h0\.attn\.probs" is a tensor of the composite attention: attention "h0\.attn" runs fused' \
  "$ampx" policy "$work/drop.json" "${o[@]}"

echo "$fails failure(s)"
exit $((fails > 0))
