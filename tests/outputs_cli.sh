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
# --set overrides the model file as train's does: a bad key is the model's error, a policy
# changes the arithmetic, a batch only how the rows are grouped
expect_error predict_set_key 'unknown key "batchh" \(did you mean "batch"\?\)' \
  "${pr[@]}" --input "$work/in.csv" --set train.batchh=4
"${pr[@]}" --input "$work/in.csv" --set train.batch=5 >"$work/pred5.csv" 2>"$work/err" ||
  fail "predict --set train.batch=5: $(cat "$work/err")"
cmp -s "$work/pred.csv" "$work/pred5.csv" || fail "predict --set train.batch=5 changed the predictions"
"${pr[@]}" --input "$work/in.csv" --set policy=mixed_bf16 >"$work/predbf.csv" 2>"$work/err" ||
  fail "predict --set policy=mixed_bf16: $(cat "$work/err")"
cmp -s "$work/pred.csv" "$work/predbf.csv" && fail "predict --set policy=mixed_bf16 did not take"

# ---- 8. readers under the input rules: FIFOs and devices refused at once, sizes capped
"$ampx" train "$work/m.json" --steps 5 --quiet --metrics "$work/run.jsonl" --trace "$work/t.json" >/dev/null 2>&1 ||
  fail "readers: train"
expect_error trace_summary_fifo 'fifo: not a regular file \(a pipe\)' "$ampx" trace-summary "$work/fifo"
expect_error trace_summary_zero '/dev/zero: not a regular file \(a device\)' "$ampx" trace-summary /dev/zero
expect_error trace_summary_cap 't.json: .* is larger than the 100 bytes input limit' \
  env AMPX_MAX_INPUT_BYTES=100 "$ampx" trace-summary "$work/t.json"
"$ampx" trace-summary "$work/t.json" >/dev/null 2>"$work/err" || fail "trace-summary: $(cat "$work/err")"
if "$ampx" plot --help >/dev/null 2>&1; then
  expect_error plot_fifo 'fifo: not a regular file \(a pipe\)' "$ampx" plot "$work/fifo" -o "$work/p.png"
  expect_error plot_zero '/dev/zero: not a regular file \(a device\)' "$ampx" plot /dev/zero -o "$work/p.png"
  expect_error plot_cap 'run.jsonl: .* is larger than the 100 bytes input limit' \
    env AMPX_MAX_INPUT_BYTES=100 "$ampx" plot "$work/run.jsonl" -o "$work/p.png"
  cp "$work/run.jsonl" "$work/run.svg"
  keep "$work/run.svg"
  expect_error plot_over_input "run.svg \(-o\) $same .*\(the metrics file\)" "$ampx" plot "$work/run.svg" -o "$work/run.svg"
  unchanged plot_over_input "$work/run.svg"
  echo "earlier plot" >"$work/p.svg"
  keep "$work/p.svg"
  printf '{"step": 1, "loss": 1}\n{"step": 2, "lo\n' >"$work/torn.jsonl"
  expect_error plot_torn 'torn.jsonl:2: not a metrics line' "$ampx" plot "$work/torn.jsonl" -o "$work/p.svg"
  unchanged plot_torn "$work/p.svg"
  "$ampx" plot "$work/run.jsonl" -o "$work/p.svg" 2>"$work/err" || fail "plot: $(cat "$work/err")"
  grep -q "<svg" "$work/p.svg" || fail "plot: no svg written"
fi
# a model file of many small values is refused by a count before it is parsed: fast and small
python3 - "$work" <<'PY'
import sys
w = sys.argv[1]
limit = 1 << 20
for name, k in (("at.json", limit - 3), ("over.json", limit - 2)):
    # the root, "name", "junk" and k elements of junk
    open(f"{w}/{name}", "w").write('{"name": "x", "junk": [' + ",".join(["0"] * k) + "]}")
n = (16 << 20) // 2 - 64
open(f"{w}/big.json", "w").write('{"name": "x", "junk": [' + ",".join(["0"] * n) + "]}")
PY
expect_error json_at_limit 'unknown key "junk"' "$ampx" policy "$work/at.json"
expect_error json_over_limit '1048577 JSON values, more than the 1048576' "$ampx" policy "$work/over.json"
python3 - "$ampx" "$work/big.json" <<'PY' || fail "json_16mib: refused too late or too dear"
import resource, subprocess, sys, time
t = time.time()
p = subprocess.run([sys.argv[1], "policy", sys.argv[2]], capture_output=True, text=True)
secs, mib = time.time() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(f"16 MiB model: {p.stderr.strip()[:80]}... {secs:.2f} s, {mib:.0f} MiB")
sys.exit(0 if p.returncode == 1 and "JSON values" in p.stderr and secs < 3 and mib < 300 else 1)
PY

# ---- 9. ampx train: no output is an input of the run, or another output
# a token model's shards, named by a pattern (llm.c's fineweb_train_*.bin)
cp "$src/models/gpt.json" "$work/gpt.json"
python3 - "$work/gpt.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["data"] = {"source": "tokens", "train": "sh_*.bin"}
json.dump(m, open(sys.argv[1], "w"))
PY
echo shard >"$work/sh_000.bin"
echo shard >"$work/sh_001.bin"
keep "$work/sh_001.bin"
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
expect_error train_metrics_shard "sh_001.bin \(--metrics\) $same .*sh_001.bin \(the model's data.train\)" \
  "$ampx" train "$work/gpt.json" --steps 1 --quiet --metrics "$work/sh_001.bin"
expect_error train_two_outputs "\(--trace\) $same .*\(--metrics\)" "${tr[@]}" --metrics "$work/o.jsonl" --trace "$work/o.jsonl"
unchanged train "$work/m.json"
unchanged train "$work/pol.json"
unchanged train "$work/in.csv"
unchanged train "$work/c.safetensors"
unchanged train "$work/sh_001.bin"
# continuing a checkpoint is writing it again: allowed
cp "$work/c.safetensors" "$work/r.safetensors"
"$ampx" train "$work/m.json" --steps 9 --quiet --resume "$work/r.safetensors" --checkpoint "$work/r.safetensors" \
  >/dev/null 2>"$work/err" || fail "resume into the same checkpoint: $(cat "$work/err")"

# ---- tokenize: no output is an input, and a failed encode leaves --out as it was
python3 -c 'import sys; open(sys.argv[1], "w").write("the cat sat on the mat. " * 200)' "$work/words.txt"
"$ampx" tokenize train --vocab 300 --out "$work/tok.json" "$work/words.txt" 2>"$work/err" ||
  fail "tokenize train: $(cat "$work/err")"
keep "$work/words.txt"
keep "$work/tok.json"
expect_error tokenize_train_over_corpus "words.txt \(--out\) $same .*\(an input file\)" \
  "$ampx" tokenize train --vocab 300 --out "$work/words.txt" "$work/words.txt"
expect_error tokenize_encode_over_text "words.txt \(--out\) $same .*\(an input file\)" \
  "$ampx" tokenize encode --tokenizer "$work/tok.json" --out "$work/words.txt" "$work/words.txt"
expect_error tokenize_encode_val_over_tokenizer "tok.json \(--val-out\) $same .*\(--tokenizer\)" \
  "$ampx" tokenize encode --tokenizer "$work/tok.json" --out "$work/a.bin" --val-fraction 0.5 --val-out "$work/tok.json" "$work/words.txt"
"$ampx" tokenize encode --tokenizer "$work/tok.json" --out "$work/a.bin" "$work/words.txt" 2>"$work/err" ||
  fail "tokenize encode: $(cat "$work/err")"
keep "$work/a.bin"
expect_error tokenize_decode_over_tokens "a.bin \(--out\) $same .*\(an input file\)" \
  "$ampx" tokenize decode --tokenizer "$work/tok.json" --out "$work/a.bin" "$work/a.bin"
expect_error tokenize_encode_fifo 'fifo: not a regular file \(a pipe\)' \
  "$ampx" tokenize encode --tokenizer "$work/tok.json" --out "$work/a.bin" "$work/fifo"
unchanged tokenize "$work/words.txt"
unchanged tokenize "$work/tok.json"
unchanged tokenize "$work/a.bin"
"$ampx" tokenize decode --tokenizer "$work/tok.json" --out "$work/back.txt" "$work/a.bin" 2>"$work/err" ||
  fail "tokenize decode: $(cat "$work/err")"
grep -q "the cat sat" "$work/back.txt" || fail "tokenize decode: the text did not come back"
ls -a "$work" | grep -q '\.tmp\.' && fail "a temporary file was left behind"

echo "outputs_cli: $fails failure(s)"
[ $fails -eq 0 ]
