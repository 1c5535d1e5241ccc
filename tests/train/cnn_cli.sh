#!/usr/bin/env bash
# cnn_cli.sh AMPX SRC — convolutions end to end on the MNIST subset shipped in
# models/data/mnist_small (2000 training and 500 test images): models/cnn_mnist.json (two
# convolutions with batch norm and max pooling) learns it, a resumed run is bit-identical to
# a straight one, a grouped (depthwise) convolution with average pooling and concat trains,
# `ampx policy` shows the convolution's tensors and the `conv` class, and malformed layers
# and a plugin without the window ops each get one clear line.
set -uo pipefail
ampx=$1
src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
. "$src/tests/cli_lib.sh"

small=$src/models/data/mnist_small
data=(--set "data.train_images=$small/train-images-idx3-ubyte"
  --set "data.train_labels=$small/train-labels-idx1-ubyte"
  --set "data.test_images=$small/t10k-images-idx3-ubyte"
  --set "data.test_labels=$small/t10k-labels-idx1-ubyte")
model=$src/models/cnn_mnist.json
acc() { sed -n 's/^held-out accuracy \([0-9.]*\)%.*/\1/p' "$1"; }

# ---- cnn_mnist.json runs as shipped, on the subset beside it (run from another folder: its
# paths are the model file's), and the full-MNIST line of models/README.md reads $DATA/mnist
(cd "$work" && "$ampx" train "$model" --steps 2 --quiet >"$work/out" 2>"$work/err") ||
  fail "cnn_mnist as shipped: $(cat "$work/err")"
grep -q "on 500 examples" "$work/out" || fail "cnn_mnist as shipped: not the subset: $(cat "$work/out")"
mkdir -p "$work/data/mnist" && cp "$small"/*-ubyte "$work/data/mnist/"
full=$(sed -n 's/^ *ampx train models\/cnn_mnist.json --set train.steps=2800 --set \(.*\)$/\1/p' "$src/models/README.md")
[ -n "$full" ] || fail "models/README.md has no full-MNIST line"
eval "full=($full)"
AMPX_DATA_DIR=$work/data "$ampx" train "$model" --steps 2 --set "${full[@]}" --quiet >"$work/out" 2>"$work/err" ||
  fail "the full-MNIST line: $(cat "$work/err")"
AMPX_DATA_DIR=$work/nodata "$ampx" train "$model" --steps 2 --set "${full[@]}" --quiet >"$work/out" 2>"$work/err"
grep -qF 'nodata/mnist/train-images-idx3-ubyte: No such file or directory (a $DATA file: fetch "mnist" with tools/data/mnist.sh' "$work/err" ||
  fail "the full-MNIST line without the files: $(cat "$work/err")"

# ---- cnn_mnist.json learns the subset: 150 steps of 32 (2.4 epochs)
"$ampx" train "$model" --set train.batch=32 --steps 150 --quiet \
  >"$work/out" 2>"$work/err" || fail "cnn_mnist: $(cat "$work/err")"
a=$(acc "$work/out")
echo "cnn_mnist on 2000 images: ${a}% held out"
awk -v a="${a:-0}" 'BEGIN { exit !(a >= 90) }' || fail "cnn_mnist reached '${a}'% (< 90%)"

# ---- resume: 20 + 20 steps give the bits of 40 (batch norm statistics, dropout, scaler)
"$ampx" train "$model" --set train.batch=16 --steps 40 --quiet \
  --checkpoint "$work/straight.safetensors" >/dev/null 2>"$work/err" || fail "straight: $(cat "$work/err")"
"$ampx" train "$model" --set train.batch=16 --steps 20 --quiet \
  --checkpoint "$work/half.safetensors" >/dev/null 2>"$work/err" || fail "half: $(cat "$work/err")"
"$ampx" train "$model" --set train.batch=16 --steps 40 --quiet \
  --resume "$work/half.safetensors" --checkpoint "$work/resumed.safetensors" >/dev/null 2>"$work/err" ||
  fail "resumed: $(cat "$work/err")"
cmp -s "$work/straight.safetensors" "$work/resumed.safetensors" ||
  fail "the resumed CNN run's checkpoint differs from the straight run's"

# ---- depthwise convolution, average pooling, concat and global pooling train (nodes form)
cat >"$work/dw.json" <<'JSON'
{ "name": "dw",
  "inputs": { "image": { "dtype": "f32", "shape": [1, 28, 28] }, "label": { "dtype": "i32", "classes": 10 } },
  "nodes": [
    { "name": "c1", "op": "conv2d", "inputs": ["image"], "filters": 16, "kernel": 5, "stride": 2, "activation": "relu" },
    { "name": "dw", "op": "conv2d", "inputs": ["c1"], "filters": 16, "kernel": 3, "padding": "same", "groups": 16, "activation": "relu" },
    { "name": "pw", "op": "conv2d", "inputs": ["c1"], "filters": 16, "kernel": 3, "dilation": 2, "padding": 2, "activation": "relu" },
    { "name": "cat", "op": "concat", "inputs": ["dw", "pw"] },
    { "name": "pool", "op": "avgpool2d", "inputs": ["cat"], "kernel": 3, "stride": 2, "padding": 1, "count_padding": false },
    { "name": "gap", "op": "global_avgpool", "inputs": ["pool"] },
    { "name": "logits", "op": "dense", "inputs": ["gap"], "units": 10 } ],
  "loss": { "type": "softmax_cross_entropy", "logits": "logits", "labels": "label" },
  "policy": "mixed_bf16", "scaler": "dynamic",
  "optimizer": { "type": "adamw", "lr": 0.01 },
  "data": { "source": "mnist", "train_images": "x", "train_labels": "x", "test_images": "x", "test_labels": "x" },
  "train": { "steps": 300, "batch": 32, "seed": 2 } }
JSON
"$ampx" train "$work/dw.json" "${data[@]}" --quiet >"$work/out" 2>"$work/err" || fail "depthwise: $(cat "$work/err")"
a=$(acc "$work/out")
echo "depthwise model: ${a}% held out"
awk -v a="${a:-0}" 'BEGIN { exit !(a >= 75) }' || fail "the depthwise model reached '${a}'% (< 75%)"

# ---- the policy listing: the convolution's rows and weight, cols in the product's dtype;
# the conv class moves the products (and so their cols) to f32
"$ampx" policy "$model" >"$work/pol" 2>&1 || fail "policy: $(cat "$work/pol")"
grep -Eq '^conv1.rows +bf16 +\[784, 32\]' "$work/pol" || fail "policy: no bf16 conv1.rows [784, 32]"
grep -Eq '^  conv1.weight +f32 +9x32 .*bf16 working copy' "$work/pol" || fail "policy: conv1.weight"
grep -Eq '^conv2.cols +f32 +\[196, 288\] .*\(bf16\)' "$work/pol" || fail "policy: conv2.cols not written in bf16"
grep -Eq '^pool1.indices|^pool1 +f32 +\[32, 14, 14\]' "$work/pol" || fail "policy: pool1"
"$ampx" policy "$model" --set 'policy={"preset": "mixed_bf16", "f32_ops": ["conv"]}' >"$work/pol" 2>&1 || fail "policy f32 conv: $(cat "$work/pol")"
grep -Eq '^conv1.rows +f32 .*op class in f32_ops' "$work/pol" || fail "f32_ops conv: conv1.rows is not f32"
grep -Eq '^fc1 +bf16' "$work/pol" || fail "f32_ops conv moved the dense layers too"

# ---- malformed layers: one line with the file, line and column
bad() { # NAME PATTERN SED-EXPRESSION
  sed -e "$3" "$model" >"$work/bad.json"
  expect_error "$1" 1 "$2" "$ampx" policy "$work/bad.json"
}
bad flat_input 'bad.json:[0-9]+:[0-9]+: .*conv2d reads images \[channels, height, width\]; "image" has shape \[B, 784\]' \
  's/"shape": \[1, 28, 28\]/"shape": [784]/'
bad groups 'bad.json:[0-9]+:[0-9]+: .*3 groups do not divide 1 input channels and 32 filters' \
  '0,/"bias": false/s//"bias": false, "groups": 3/'
bad same_stride 'same" padding needs stride 1' 's/"padding": "same", "bias": false/"padding": "same", "stride": 2/'
bad pool_pad 'pooling pads less than its kernel \(2x2\)' '0,/"kernel": 2 }/s//"kernel": 2, "padding": 2 }/'
bad max_count 'count_padding" applies to avgpool2d only' '0,/"kernel": 2 }/s//"kernel": 2, "count_padding": true }/'
bad no_window 'holds no 9x9 window of dilation 4x4' \
  '0,/"kernel": 3, "padding": "same"/s//"kernel": 9, "dilation": 4, "padding": 0/'
bad kernel_list 'expected a size or \[height, width\], found 3 sizes' '0,/"kernel": 3,/s//"kernel": [3, 3, 3],/'

# ---- a plugin of ABI 1.3 has no window ops: refused before the first step, naming the node
if [ -n "${AMPX_TEST_MINOR_1_3:-}" ] && [ -f "$AMPX_TEST_MINOR_1_3" ]; then
  expect_error old_plugin 1 'has no im2col, which node "conv1" needs' \
    "$ampx" train "$model" --steps 1 --backend "$AMPX_TEST_MINOR_1_3"
else
  fail "AMPX_TEST_MINOR_1_3 is not set to the test plugin"
fi

echo "cnn_cli: $fails failure(s)"
exit $((fails > 0))
