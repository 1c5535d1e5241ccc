#!/usr/bin/env bash
# limits_cli.sh AMPX SRC — inputs at the edges of what ampx takes, each refused in one line
# or accepted whole: safetensors tensors of more dimensions than a value has (export,
# --init-from, eval), `--set` paths with empty keys and values that are broken JSON, a name
# clash with a --set value, generate's whole-number options, control bytes in a model's
# name, and dense weights whose low-precision copy is an odd number of bytes.
set -uo pipefail
ampx=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
# fail, expect_error NAME RC PATTERN CMD...
. "$src/tests/cli_lib.sh" || exit 1

mlp=$src/models/mlp.json

# ---- safetensors: a shape of 5 to 8 dimensions is refused when the file is read (it was
# read into a 4-element array: export wrote the bytes past it into its header)
"$ampx" train "$mlp" --steps 3 --quiet --checkpoint "$work/ck.safetensors" >/dev/null 2>&1 || fail "train"
"$ampx" export --checkpoint "$work/ck.safetensors" -o "$work/w.safetensors" || fail "export"
cat >"$work/rank.py" <<'PY'
import json, struct, sys
src, dst, key, extra = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h[key]["shape"] = [1] * extra + h[key]["shape"]
t = json.dumps(h, separators=(",", ":")).encode()
t += b" " * (-len(t) % 8)
open(dst, "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])
PY
for extra in 3 6; do
  dims=$((extra + 2))
  python3 "$work/rank.py" "$work/ck.safetensors" "$work/ck$dims.safetensors" fc1.weight $extra
  python3 "$work/rank.py" "$work/w.safetensors" "$work/w$dims.safetensors" fc1.weight $extra
  rm -f "$work/o.safetensors"
  expect_error "export rank $dims" 1 "ck$dims.safetensors: tensor \"fc1.weight\": shape has $dims dimensions; ampx supports at most 4" \
    "$ampx" export --checkpoint "$work/ck$dims.safetensors" -o "$work/o.safetensors"
  [ -e "$work/o.safetensors" ] && fail "export rank $dims wrote $(head -c 200 "$work/o.safetensors")"
  expect_error "init-from rank $dims" 1 "w$dims.safetensors: tensor \"fc1.weight\": shape has $dims dimensions" \
    "$ampx" train "$mlp" --steps 1 --quiet --init-from "$work/w$dims.safetensors"
  expect_error "eval rank $dims" 1 "shape has $dims dimensions" \
    "$ampx" eval "$mlp" --checkpoint "$work/ck$dims.safetensors"
done

# ---- --set: every key of the path named, broken JSON shown as such, clashes at the flag
for path in optimizer..lr .optimizer.lr optimizer.lr.; do
  expect_error "--set $path" 1 "--set $path=0.1: the path '$path' has an empty key" \
    "$ampx" train "$mlp" --steps 1 --set "$path=0.1"
done
expect_error "--set broken number" 1 "--set optimizer.lr=1e: the value is not valid JSON: .*exponent" \
  "$ampx" train "$mlp" --steps 1 --set optimizer.lr=1e
expect_error "--set broken array" 1 "--set optimizer.lr=\[0.1,: the value is not valid JSON" \
  "$ampx" train "$mlp" --steps 1 --set 'optimizer.lr=[0.1,'
expect_error "--set a word" 1 "optimizer.lr: expected a number, found a string" \
  "$ampx" train "$mlp" --steps 1 --set optimizer.lr=fast
expect_error "--set name clash" 1 "name \"fc2\" is already used \(--set layers\[0\].name=\"?fc2\"?\)" \
  "$ampx" train "$mlp" --steps 1 --set 'layers[0].name="fc2"'
grep -q "line -1" "$work/err" && fail "a clash with a --set value names line -1"
"$ampx" policy "$mlp" --set optimizer.lr=0.5 >/dev/null 2>"$work/err" || fail "--set a number: $(cat "$work/err")"

# ---- generate: whole-number options say which option and value
for opt in "--tokens 3.5" "--top-k 2.5" "--seed 1.5"; do
  set -- $opt
  expect_error "generate $opt" 2 "generate: $1 '$2': expected a whole number" \
    "$ampx" generate "$src/models/gpt_tiny.json" --checkpoint "$work/none.safetensors" $opt
done

# ---- a model's name with control bytes: escaped wherever it is printed
python3 - "$mlp" "$work/esc.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["name"] = "e\x1b[31mred\x07\nx"
json.dump(m, open(sys.argv[2], "w"))
PY
"$ampx" train "$work/esc.json" --steps 1 >"$work/out" 2>&1 || fail "train esc: $(cat "$work/out")"
"$ampx" policy "$work/esc.json" >>"$work/out" 2>&1 || fail "policy esc: $(cat "$work/out")"
LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$work/out" && fail "a control byte of a model name reached the terminal: $(head -3 "$work/out" | cat -v)"
grep -q 'training e\\x1b\[31mred\\x07\\x0ax on' "$work/out" || fail "train does not show the escaped name: $(head -1 "$work/out" | cat -v)"
grep -q '^model e\\x1b\[31mred\\x07\\x0ax ' "$work/out" || fail "policy does not show the escaped name"

# ---- a dense weight whose bf16/f16 copy is an odd number of bytes (3 inputs x 5 units:
# 30 bytes) trains: it stopped in buffer_fill ("not a multiple of pattern_bytes 4")
python3 - "$work" <<'PY'
import json, random, sys
w = sys.argv[1]
random.seed(1)
with open(f"{w}/odd.csv", "w") as f:
    f.write("a,b,c,y\n")
    for _ in range(64):
        a, b, c = (random.random() for _ in range(3))
        f.write(f"{a:.4f},{b:.4f},{c:.4f},{a + b - c:.4f}\n")
json.dump({"name": "odd",
           "inputs": {"x": {"dtype": "f32", "shape": [3]}, "y": {"dtype": "f32", "shape": [1]}},
           "layers": [{"name": "fc1", "type": "dense", "units": 5, "activation": "relu"},
                      {"name": "out", "type": "dense", "units": 1}],
           "loss": {"type": "mse", "predictions": "out", "targets": "y"},
           "policy": "mixed_bf16", "optimizer": {"type": "sgd", "lr": 0.01},
           "data": {"source": "csv", "train": "odd.csv"}, "train": {"steps": 3, "batch": 4}},
          open(f"{w}/odd.json", "w"))
PY
backends="cpu"
"$ampx" backends 2>/dev/null | grep -Eq "^opencl .*" && "$ampx" backends | grep -A1 "^opencl" | grep -q "available" && backends="cpu opencl"
for be in $backends; do
  for pol in mixed_bf16 mixed_f16; do
    for copies in keep cast; do
      "$ampx" train "$work/odd.json" --quiet --backend $be --set policy=$pol \
        --set "train.weight_copies=\"$copies\"" >"$work/out" 2>&1 ||
        fail "odd-sized $pol weights ($copies, $be): $(tail -1 "$work/out")"
    done
  done
done

[ $fails -eq 0 ] && echo "limits_cli: all passed"
exit $((fails > 0))
