#!/usr/bin/env bash
# diff_cli.sh AMPX SRC — `ampx diff`: the CPU plugin's AVX2 path against its widest agrees on
# a small GPT, a plugin whose layer norm is moved by 1000 ulps is named at the first layer
# norm and nothing before it, a 1.3 plugin (no fused attention) is compared on the composite
# graph both can run, OpenCL agrees with the CPU on the GPT and on a CNN (when PoCL is
# there), and a malformed command line gets one line and exit 2.
set -uo pipefail
ampx=$1
src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
. "$src/tests/cli_lib.sh"

sed -e 's/"dim": 128/"dim": 64/; s/"units": 512/"units": 256/; s/"units": 128/"units": 64/' \
  -e 's/"shape": \[64\]/"shape": [32]/g' "$src/models/gpt_tiny.json" >"$work/gpt_small.json"
echo '{"policy": "f32", "scaler": "none"}' >"$work/f32.json"

agree() { # NAME ARGS...: exit 0 and "agree"
  local name=$1
  shift
  "$ampx" diff "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  [ $rc -eq 0 ] || fail "$name: exit $rc: $(cat "$work/err") $(tail -n 3 "$work/out")"
  grep -q '^agree: every output within what its dtypes allow' "$work/out" ||
    fail "$name: no agreement line: $(tail -n 2 "$work/out")"
  grep -q '^after [0-9]* steps: loss' "$work/out" || fail "$name: no run comparison"
}

agree isa "$work/gpt_small.json" --backend cpu --backend-opt isa=avx2 --backend cpu --steps 5

# ---- without --steps: the documented 20 steps, never a comparison of none (issue 47)
"$ampx" diff "$src/models/mlp.json" --backend cpu --backend cpu >"$work/out" 2>"$work/err" ||
  fail "default steps: exit $?: $(cat "$work/err")"
grep -Eq '^after 20 steps: loss [0-9.]+ and [0-9.]+ ' "$work/out" ||
  fail "default steps: $(grep '^after' "$work/out")"
expect_error steps0 2 "^ampx diff: --steps '0': expected an integer in \[1, " \
  "$ampx" diff "$src/models/mlp.json" --backend cpu --backend cpu --steps 0

# ---- a perturbed layer norm: named, exit 1, nothing before it beyond its tolerance
if [ -n "${AMPX_TEST_PERTURB:-}" ] && [ -f "$AMPX_TEST_PERTURB" ]; then
  "$ampx" diff "$work/gpt_small.json" --policy "$work/f32.json" --backend cpu \
    --backend "$AMPX_TEST_PERTURB" --steps 3 >"$work/out" 2>"$work/err"
  rc=$?
  [ $rc -eq 1 ] || fail "perturbed: exit $rc, expected 1 ($(cat "$work/err"))"
  grep -Eq '^DIFFER: .*the first: #[0-9]+ "h0.ln1" of node "h0.ln1" \(layernorm, forward, f32\)' \
    "$work/out" || fail "perturbed: the first layer norm is not named: $(tail -n 1 "$work/out")"
  first=$(grep -m1 'BEYOND' "$work/out" | awk '{print $2}')
  [ "$first" = h0.ln1 ] || fail "perturbed: the first output beyond is '$first'"
  # every earlier output has the same bits (the rows before the layer norm's, if any, differ 0)
  grep -E '^ +[0-9]+ ' "$work/out" | awk '$2 == "h0.ln1" { exit } { bad = 1 } END { exit bad }' ||
    fail "perturbed: outputs before the layer norm differ"
else
  fail "AMPX_TEST_PERTURB is not set to the test plugin"
fi

# ---- a plugin without fused attention: both run the composite
if [ -n "${AMPX_TEST_MINOR_1_3:-}" ] && [ -f "$AMPX_TEST_MINOR_1_3" ]; then
  "$ampx" diff "$work/gpt_small.json" --backend cpu --backend-opt gemm_epilogue=0 \
    --backend "$AMPX_TEST_MINOR_1_3" --steps 3 >"$work/out" 2>"$work/err" ||
    fail "1.3 plugin: $(cat "$work/err") $(tail -n 2 "$work/out")"
  grep -q '^every output has the same bits on both' "$work/out" ||
    fail "1.3 plugin: the same inner plugin gave different bits: $(head -n 5 "$work/out")"
else
  fail "AMPX_TEST_MINOR_1_3 is not set to the test plugin"
fi

# ---- OpenCL against the CPU, where PoCL is there
if "$ampx" backends | grep -A1 -E '^opencl ' | grep -q 'available$'; then
  agree opencl_gpt "$work/gpt_small.json" --backend cpu --backend opencl --steps 5
  agree opencl_cnn "$src/models/cnn_mnist.json" --backend cpu --backend opencl --steps 3 \
    --set train.batch=8
  grep -Eq 'conv1.cols|conv2' "$work/out" || grep -q 'same bits' "$work/out" ||
    fail "opencl_cnn: the convolutions are not in the comparison"
else
  echo "opencl: not available here, skipped"
fi

# ---- the command line: a missing operand gets the --help hint after it; a bad option value
# is one line (as every command does it)
usage_error() { # NAME PATTERN CMD...
  local name=$1 pattern=$2
  shift 2
  "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  [ $rc -eq 2 ] || fail "$name: exit $rc, expected 2 ($(cat "$work/err"))"
  head -n 1 "$work/err" | grep -Eq -- "$pattern" || fail "$name: '$(head -n 1 "$work/err")'"
  [ "$(tail -n 1 "$work/err")" = "Try 'ampx diff --help' for more information." ] ||
    fail "$name: no --help hint: $(cat "$work/err")"
}
usage_error one_backend 'expected two --backend' "$ampx" diff "$work/gpt_small.json" --backend cpu
expect_error opt_first 2 "--backend-opt 'isa=avx2' comes before any --backend" \
  "$ampx" diff "$work/gpt_small.json" --backend-opt isa=avx2 --backend cpu --backend cpu
expect_error three 2 'given more than twice' \
  "$ampx" diff "$work/gpt_small.json" --backend cpu --backend cpu --backend cpu
expect_error no_plugin 1 'no_such_backend' \
  "$ampx" diff "$work/gpt_small.json" --backend cpu --backend no_such_backend

echo "diff_cli: $fails failure(s)"
exit $((fails > 0))
