#!/usr/bin/env bash
# policy_search_cli.sh AMPX SRC — `ampx policy --search` (and --fp8): on mlp.json, residual_bn.json (batch
# norm) and a small gpt_tiny.json it returns a policy within its tolerance of the f32 run in
# at most three runs (the f32 reference, the next seed's f32 run as the yardstick, and the
# cheapest candidate), written as a --policy file that loads; on a model whose first layer reads features of a tiny spread around 1 (which bf16
# rounds away) it keeps that layer in f32 and says why; bad options get one line.
set -uo pipefail
ampx=$1
src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
. "$src/tests/cli_lib.sh"

sed -e 's/"dim": 128/"dim": 64/; s/"units": 512/"units": 256/; s/"units": 128/"units": 64/' \
  -e 's/"shape": \[64\]/"shape": [32]/g' "$src/models/gpt_tiny.json" >"$work/gpt_small.json"

search() { # NAME MODEL BUDGET MAX_RUNS
  "$ampx" policy --search "$2" --budget "$3" -o "$work/$1.policy.json" >"$work/$1.out" 2>"$work/err"
  local rc=$?
  [ $rc -eq 0 ] || fail "$1: exit $rc: $(cat "$work/err") $(tail -n 3 "$work/$1.out")"
  local runs
  runs=$(sed -n 's/^\([0-9]*\) runs, .*/\1/p' "$work/$1.out")
  [ -n "$runs" ] && [ "$runs" -le "$4" ] || fail "$1: '$runs' runs, expected at most $4"
  grep -q '^chosen: {"policy": ' "$work/$1.out" || fail "$1: no chosen policy"
  "$ampx" policy "$2" --policy "$work/$1.policy.json" >/dev/null 2>"$work/err" ||
    fail "$1: the written policy does not load: $(cat "$work/err")"
  echo "$1: $(grep '^chosen' "$work/$1.out") in $runs runs"
}
search mlp "$src/models/mlp.json" 300 3
search residual_bn "$src/models/residual_bn.json" 200 3
search gpt_small "$work/gpt_small.json" 60 3

# ---- --fp8: the products of weights in fp8 are tried first: chosen on the small GPT (its
# written policy carries the fp8 block); refused on the fragile model below
"$ampx" policy --search "$work/gpt_small.json" --budget 60 --fp8 -o "$work/fp8.policy.json" \
  >"$work/fp8.out" 2>"$work/err" || fail "--fp8: $(cat "$work/err") $(tail -n 3 "$work/fp8.out")"
grep -Eq '^  fp8 products \(hybrid\) under mixed_bf16 .* within$' "$work/fp8.out" ||
  fail "--fp8: no fp8 run within the tolerance: $(grep fp8 "$work/fp8.out")"
grep -q '^chosen: {"policy": {"preset": "mixed_bf16", "fp8": {"format": "hybrid"}}}' "$work/fp8.out" ||
  fail "--fp8: fp8 not chosen: $(grep chosen "$work/fp8.out")"
"$ampx" policy "$work/gpt_small.json" --policy "$work/fp8.policy.json" 2>&1 | grep -q '^fp8: 8 products' ||
  fail "--fp8: the written policy has no fp8 products"

# ---- a fragile first layer: x = 1 + 0.003 u, whose u bf16 rounds away (its spacing at 1 is
# 2^-7); batch norm after it takes the constant out. The learning rate decays to 0, so the
# last batch's statistics (momentum 1) describe the final weights in the held-out pass.
awk 'BEGIN { srand(7); print "x1,x2,label"; for (i = 0; i < 3000; i++) { u = 2 * rand() - 1;
  v = 2 * rand() - 1; printf "%.9f,%.9f,%d\n", 1 + 0.003 * u, 1 + 0.003 * v, (u * v > 0) } }' \
  >"$work/fragile.csv"
cat >"$work/fragile.json" <<'JSON'
{ "name": "fragile",
  "inputs": { "x": { "dtype": "f32", "shape": [2] }, "label": { "dtype": "i32", "classes": 2 } },
  "layers": [
    { "name": "fc1", "type": "dense", "units": 32 },
    { "name": "bn1", "type": "batchnorm", "momentum": 1.0, "eps": 1e-10 },
    { "name": "a1", "type": "relu" },
    { "name": "fc2", "type": "dense", "units": 32, "activation": "relu" },
    { "name": "out", "type": "dense", "units": 2 } ],
  "loss": { "type": "softmax_cross_entropy", "logits": "out", "labels": "label" },
  "policy": "mixed_bf16", "scaler": "none",
  "optimizer": { "type": "adamw", "lr": 0.01,
                 "schedule": { "type": "warmup_cosine", "warmup_steps": 20, "min_lr": 0 } },
  "data": { "source": "csv", "train": "fragile.csv", "test_fraction": 0.2 },
  "train": { "steps": 300, "batch": 64, "seed": 1 } }
JSON
"$ampx" policy --search "$work/fragile.json" --fp8 -o "$work/fragile.policy.json" >"$work/out" 2>"$work/err" ||
  fail "fragile: $(cat "$work/err") $(tail -n 3 "$work/out")"
grep -q '^chosen: {"policy": {"preset": "mixed_bf16", "overrides": {"fc1": "f32"}}}' "$work/out" ||
  fail "fragile: fc1 alone is not kept in f32: $(grep chosen "$work/out")"
grep -Eq '^  -> fc1 stays f32: with it in bf16 .* above f32' "$work/out" ||
  fail "fragile: no reason given for fc1"
grep -Eq '^  mixed_bf16 .*above f32' "$work/out" || fail "fragile: mixed_bf16 was not refused"
grep -Eq '^  fp8 products .*above f32' "$work/out" || fail "fragile: fp8 (--fp8) was not refused"
"$ampx" train "$work/fragile.json" --policy "$work/fragile.policy.json" --quiet >"$work/t" 2>&1 ||
  fail "fragile: training with the chosen policy: $(cat "$work/t")"
acc=$(sed -n 's/^held-out accuracy \([0-9.]*\)%.*/\1/p' "$work/t")
awk -v a="${acc:-0}" 'BEGIN { exit !(a >= 85) }' || fail "fragile: the chosen policy reached '$acc'%"
echo "fragile: fc1 kept in f32, ${acc}% held out"

# ---- options
expect_error tolerance 2 "--tolerance 'x': expected a number" \
  "$ampx" policy --search "$src/models/mlp.json" --tolerance x
expect_error missing 1 'no_such.json' "$ampx" policy --search "$work/no_such.json"

echo "policy_search_cli: $fails failure(s)"
exit $((fails > 0))
