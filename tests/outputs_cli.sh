#!/usr/bin/env bash
# outputs_cli.sh AMPX SRC — outputs that never destroy inputs, and readers that keep the input
# rules (issue 30, items 1, 2, 8 and 9's outputs over inputs): `ampx export`, `predict`,
# `train`, `tokenize`, `plot` and `trace-summary` refuse an output that is one of their inputs
# (by path, symlink or hard link) with one line and leave every file as it was; a failed
# command leaves an existing output as it was; FIFOs, /dev/zero and oversized files are
# refused at once.
set -uo pipefail
ampx=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_error NAME PATTERN CMD...: exit status 1 within 20 s, one line on stderr matching
# PATTERN.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  timeout 20 "$@" >"$work/out" 2>"$work/err" </dev/null
  local rc=$?
  [ $rc -eq 1 ] || fail "$name: exit $rc, expected 1 ($(cat "$work/err"))"
  [ "$(wc -l <"$work/err")" -eq 1 ] || fail "$name: expected one line, got: $(cat "$work/err")"
  grep -Eq -- "$pattern" "$work/err" || fail "$name: '$(cat "$work/err")' does not match '$pattern'"
}
# unchanged NAME FILE: FILE is as its copy FILE.orig.
keep() { cp -p "$1" "$1.orig"; }
unchanged() { cmp -s "$2" "$2.orig" || fail "$1: $2 changed"; }

same='is the same file as'
cp "$src/models/mlp.json" "$work/m.json"
"$ampx" train "$work/m.json" --steps 5 --quiet --checkpoint "$work/c.safetensors" >/dev/null 2>&1 ||
  fail "setup: train"
keep "$work/c.safetensors"
keep "$work/m.json"

# ---- 1. ampx export: a checkpoint with no weights leaves -o alone; -o is never --checkpoint
python3 - "$work/empty.safetensors" <<'PY'
import json, struct, sys
h = json.dumps({"__metadata__": {"format": "ampx"}}).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h)
PY
echo "precious" >"$work/keep.safetensors"
keep "$work/keep.safetensors"
expect_error export_no_weights 'no weights to export' \
  "$ampx" export --checkpoint "$work/empty.safetensors" -o "$work/keep.safetensors"
unchanged export_no_weights "$work/keep.safetensors"
expect_error export_over_checkpoint "c.safetensors \(-o\) $same .*c.safetensors \(--checkpoint\)" \
  "$ampx" export --checkpoint "$work/c.safetensors" -o "$work/c.safetensors"
ln -s c.safetensors "$work/link.safetensors"
ln "$work/c.safetensors" "$work/hard.safetensors"
expect_error export_over_symlink "$same" \
  "$ampx" export --checkpoint "$work/c.safetensors" -o "$work/link.safetensors"
expect_error export_over_hardlink "$same" \
  "$ampx" export --checkpoint "$work/c.safetensors" -o "$work/hard.safetensors"
expect_error export_via_dotdot "$same" \
  "$ampx" export --checkpoint "$work/c.safetensors" -o "$work/../$(basename "$work")/c.safetensors"
expect_error export_llmc_over_model "$same" \
  "$ampx" export "$work/m.json" --checkpoint "$work/c.safetensors" --format llmc --out "$work/m.json"
unchanged export "$work/c.safetensors"
unchanged export "$work/m.json"
"$ampx" eval "$work/m.json" --checkpoint "$work/c.safetensors" >/dev/null 2>&1 ||
  fail "export: the checkpoint no longer evaluates"
"$ampx" export --checkpoint "$work/c.safetensors" -o "$work/w.safetensors" 2>"$work/err" ||
  fail "export: $(cat "$work/err")"
ls -a "$work" | grep -q '\.tmp\.' && fail "export: a temporary file was left behind"

# ---- 2. ampx predict: -o is never --input, --checkpoint or the model; a FIFO is refused
cat >"$work/csv.json" <<'J'
{ "name": "csv", "inputs": { "x": { "dtype": "f32", "shape": [2] }, "y": { "dtype": "i32", "classes": 2 } },
  "layers": [ { "type": "dense", "units": 8, "activation": "tanh" }, { "type": "dense", "units": 2 } ],
  "optimizer": { "lr": 0.01 }, "data": { "source": "csv", "train": "in.csv" }, "train": { "steps": 5, "batch": 8 } }
J
python3 - "$work/in.csv" <<'PY'
import random, sys
random.seed(3)
with open(sys.argv[1], "w") as f:
    for i in range(64):
        x, y = random.uniform(-1, 1), random.uniform(-1, 1)
        f.write("%.5f,%.5f,%d\n" % (x, y, int(x * y > 0)))
PY
"$ampx" train "$work/csv.json" --quiet --checkpoint "$work/p.safetensors" >/dev/null 2>&1 ||
  fail "predict: train"
keep "$work/in.csv"
keep "$work/p.safetensors"
keep "$work/csv.json"
pr=("$ampx" predict "$work/csv.json" --checkpoint "$work/p.safetensors")
expect_error predict_over_input "in.csv \(-o\) $same .*in.csv \(--input\)" \
  "${pr[@]}" --input "$work/in.csv" -o "$work/in.csv"
expect_error predict_over_checkpoint "p.safetensors \(-o\) $same .*\(--checkpoint\)" \
  "${pr[@]}" --input "$work/in.csv" -o "$work/p.safetensors"
expect_error predict_over_model "\(the model file\)" \
  "${pr[@]}" --input "$work/in.csv" -o "$work/csv.json"
unchanged predict "$work/in.csv"
unchanged predict "$work/p.safetensors"
unchanged predict "$work/csv.json"
mkfifo "$work/fifo"
expect_error predict_fifo 'fifo: not a regular file \(a pipe\)' "${pr[@]}" --input "$work/fifo"
expect_error predict_zero '/dev/zero: not a regular file \(a device\)' "${pr[@]}" --input /dev/zero
# a failed prediction leaves an existing -o as it was
printf '0.1,0.2,1\n0.3,zz,0\n' >"$work/bad.csv"
echo "earlier predictions" >"$work/pred.csv"
keep "$work/pred.csv"
expect_error predict_bad_row 'bad.csv:2: column 2' "${pr[@]}" --input "$work/bad.csv" -o "$work/pred.csv"
unchanged predict_bad_row "$work/pred.csv"
"${pr[@]}" --input "$work/in.csv" -o "$work/pred.csv" 2>"$work/err" || fail "predict: $(cat "$work/err")"
[ "$(wc -l <"$work/pred.csv")" -eq 65 ] || fail "predict: $(wc -l <"$work/pred.csv") lines, expected 65"
"${pr[@]}" --input "$work/in.csv" -o /dev/null 2>"$work/err" || fail "predict -o /dev/null: $(cat "$work/err")"

# ---- 9. ampx train: no output is an input of the run, or another output
tr=("$ampx" train "$work/m.json" --steps 5 --quiet)
echo '{ "policy": { "preset": "mixed_bf16" } }' >"$work/pol.json"
keep "$work/pol.json"
expect_error train_metrics_model "m.json \(--metrics\) $same .*\(the model file\)" "${tr[@]}" --metrics "$work/m.json"
expect_error train_checkpoint_model "\(--checkpoint\) $same .*\(the model file\)" "${tr[@]}" --checkpoint "$work/m.json"
expect_error train_trace_model "\(--trace\) $same .*\(the model file\)" "${tr[@]}" --trace "$work/m.json"
expect_error train_trace_policy "\(--trace\) $same .*\(--policy\)" "${tr[@]}" --policy "$work/pol.json" --trace "$work/pol.json"
expect_error train_metrics_symlink "$same" "${tr[@]}" --metrics "$work/link.safetensors" --init-from "$work/w.safetensors" --checkpoint "$work/c.safetensors"
expect_error train_checkpoint_init "\(--checkpoint\) $same .*\(--init-from\)" "${tr[@]}" --init-from "$work/w.safetensors" --checkpoint "$work/w.safetensors"
expect_error train_metrics_resume "\(--metrics\) $same .*\(--resume\)" \
  "$ampx" train "$work/m.json" --steps 9 --quiet --resume "$work/c.safetensors" --metrics "$work/c.safetensors"
expect_error train_metrics_checkpoint "\(--metrics\) $same .*\(--checkpoint\)" \
  "$ampx" train "$work/m.json" --steps 9 --quiet --resume "$work/c.safetensors" --checkpoint "$work/c.safetensors" --metrics "$work/c.safetensors"
expect_error train_metrics_data "\(--metrics\) $same .*data.train" \
  "$ampx" train "$work/csv.json" --quiet --metrics "$work/in.csv"
expect_error train_two_outputs "\(--trace\) $same .*\(--metrics\)" "${tr[@]}" --metrics "$work/o.jsonl" --trace "$work/o.jsonl"
unchanged train "$work/m.json"
unchanged train "$work/pol.json"
unchanged train "$work/in.csv"
unchanged train "$work/c.safetensors"
# continuing a checkpoint is writing it again: allowed
cp "$work/c.safetensors" "$work/r.safetensors"
"$ampx" train "$work/m.json" --steps 9 --quiet --resume "$work/r.safetensors" --checkpoint "$work/r.safetensors" \
  >/dev/null 2>"$work/err" || fail "resume into the same checkpoint: $(cat "$work/err")"

echo "outputs_cli: $fails failure(s)"
[ $fails -eq 0 ]
