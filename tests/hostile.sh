#!/usr/bin/env bash
# hostile.sh AMPX SRC BUILD — ampx against hostile input and faults (issue: hostile input):
# checkpoints as untrusted input, search paths, readers, write errors, atomic files,
# resource limits, misbehaving plugins. Each case: one clear line and a non-zero exit,
# never a crash, nothing on disk lost.
set -uo pipefail
ampx=$1
src=$2
build=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
mlp=$src/models/mlp.json
: "${AMPX_TEST_INNER_PLUGIN:=$build/lib/ampx/libampx-cpu.so}"
export AMPX_TEST_INNER_PLUGIN

# expect_error NAME PATTERN CMD...: exit status 1, one line on stderr matching PATTERN.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  [ $rc -eq 1 ] || fail "$name: exit $rc, expected 1 ($(head -c 600 "$work/err"))"
  [ "$(wc -l <"$work/err")" -eq 1 ] || fail "$name: expected one line, got: $(head -c 600 "$work/err")"
  grep -Eq -- "$pattern" "$work/err" || fail "$name: '$(head -c 600 "$work/err")' does not match '$pattern'"
}

# ---- 2. checkpoints are untrusted input
"$ampx" train "$mlp" --steps 6 --checkpoint "$work/good" --quiet >/dev/null 2>"$work/err" ||
  fail "train for a checkpoint: $(cat "$work/err")"
ck() { # ck MUTATION PATTERN: the mutated checkpoint is refused by eval and by --resume
  python3 "$src/tests/hostile/ckpt_mutate.py" "$work/good" "$work/bad_$1" "$1" || fail "mutate $1"
  expect_error "checkpoint $1 (eval)" "bad_$1: $2" "$ampx" eval "$mlp" --checkpoint "$work/bad_$1"
  expect_error "checkpoint $1 (resume)" "bad_$1: $2" "$ampx" train "$mlp" --steps 8 --quiet \
    --resume "$work/bad_$1"
}
ck step_negative '__metadata__\.step "-5" is not an integer in \[0, '
ck step_text '__metadata__\.step "12abc" is not an integer'
ck step_huge '__metadata__\.step "99999999999999999999" is not an integer'
ck scale_nan 'ampx\.scalars: scale is nan, expected a finite number > 0'
ck scale_zero 'ampx\.scalars: scale is 0, expected a finite number > 0'
ck scale_negative 'ampx\.scalars: scale is -4, expected'
ck skipped_negative 'ampx\.scalars: skipped_steps is -1, expected an integer in \[0, '
ck growth_negative 'ampx\.scalars: growth_tracker is -3'
ck stop_reason 'ampx\.scalars: stop_reason is 1: the run that wrote it stopped'
ck adam_v_negative 'tensor "ampx\.adam_v\.fc1\.weight" element 3 is -1, expected a finite number >= 0'
ck weight_nan 'tensor "fc2\.bias" element 0 is nan, expected a finite number'
ck weight_inf 'tensor "fc1\.weight" element 7 is -inf'
ck offsets_fraction 'tensor "fc1\.bias": data_offsets is not \[begin, end\] with integers'
ck offsets_overlap 'tensor "fc1\.bias": data_offsets overlap another tensor'
ck offsets_gap 'the tensors cover [0-9]+ bytes of a [0-9]+-byte data section'
ck offsets_huge 'bytes [0-9]+\.\.[0-9]+ of the data section belong to no tensor'
ck extra_tensor 'tensor "stowaway" is not part of model "mlp"'
ck meta_number '__metadata__\.seed is a number, expected a string'
ck meta_disagrees '__metadata__\.applied_steps [0-9]+ disagrees with the scalars block'
ck dtype_unknown 'tensor "fc1\.bias": dtype is missing or not a safetensors dtype'
ck shape_negative 'tensor "fc1\.bias": shape\[0\] is not a non-negative integer'
expect_error "checkpoint /dev/zero" '/dev/zero: not a regular file' "$ampx" eval "$mlp" --checkpoint /dev/zero
"$ampx" eval "$mlp" --checkpoint "$work/good" >/dev/null 2>"$work/err" || fail "the good checkpoint: $(cat "$work/err")"

echo "hostile: $fails failure(s)"
test $fails -eq 0
