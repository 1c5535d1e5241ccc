#!/usr/bin/env bash
# keeper_cli.sh AMPX SRC — the files of a training run: one run per checkpoint path (a lock),
# the keeper's state (best loss, periodic files) carried across a resume, every name checked
# before the first step, SIGINT/SIGTERM saving a checkpoint, the metrics file cut back to the
# checkpoint's step on resume, a file size limit reported, the activation arena in the
# memory check.
set -uo pipefail
ampx=$1
src=$2
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
fails=0
# fail, expect_error NAME RC PATTERN CMD...
. "$src/tests/cli_lib.sh" || exit 1

# meta FILE KEY: a __metadata__ field of a safetensors file ("" when absent)
meta() {
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
print(json.loads(b[8:8 + n])["__metadata__"].get(sys.argv[2], ""))
PY
}

# bg CMD...: CMD in the background with SIGINT and SIGTERM at their defaults (a shell's
# background jobs start with SIGINT ignored, which ampx keeps, as nohup wants); its pid in $!
bg() {
  python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])' "$@" &
  pids+=($!)
}
# signal_wait PID SIG: sends SIG, waits (at most 30 s, then kill -9); the exit status in $rc
signal_wait() {
  kill -"$2" "$1"
  for _ in $(seq 300); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$1" 2>/dev/null
  wait "$1"
  rc=$?
}

mlp=$src/models/mlp.json
train() { "$ampx" train "$mlp" --quiet "$@"; }

# ---- item 3: a second run on the same checkpoint path is refused at its start
d=$work/lock
mkdir -p "$d"
bg "$ampx" train "$mlp" --quiet --steps 2000000 --checkpoint "$d/F.safetensors" \
  --checkpoint-every 50 --keep 3 --seed 1 >"$d/a.out" 2>"$d/a.err"
a=$!
for _ in $(seq 200); do [ -s "$d/F.safetensors.lock" ] && break; sleep 0.05; done
[ -s "$d/F.safetensors.lock" ] || fail "lock: the first run took no lock"
expect_error "lock: second run" 1 "F.safetensors: in use by another ampx train \(pid $a\)" \
  train --steps 600 --checkpoint "$d/F.safetensors" --checkpoint-every 50 --keep 3 --seed 2
grep -q "training" "$work/out" && fail "lock: the second run trained"

# ---- item 9: SIGTERM (and SIGINT) finish the step, save a checkpoint, exit 128 + signal
# (once the first periodic checkpoint is there, the run is past its start)
for _ in $(seq 600); do [ -f "$d/F.step000050.safetensors" ] && break; sleep 0.05; done
signal_wait "$a" TERM
[ $rc -eq 143 ] || fail "SIGTERM: exit $rc, expected 143 ($(cat "$d/a.err"))"
[ "$(wc -l <"$d/a.err")" -eq 1 ] || fail "SIGTERM: expected one line, got: $(cat "$d/a.err")"
grep -Eq "stopped by SIGTERM at step [0-9]+: checkpoint written to $d/F.safetensors" "$d/a.err" ||
  fail "SIGTERM: $(cat "$d/a.err")"
stopped=$(sed -n 's/.*at step \([0-9]*\).*/\1/p' "$d/a.err")
[ -n "$stopped" ] && [ "$(meta "$d/F.safetensors" step)" = "$stopped" ] ||
  fail "SIGTERM: the checkpoint is not at step $stopped"
# the lock went with the process: the path is free again
train --steps $((stopped + 10)) --resume "$d/F.safetensors" --checkpoint "$d/F.safetensors" \
  >/dev/null 2>"$work/err" || fail "after SIGTERM: resume refused: $(cat "$work/err")"
bg "$ampx" train "$mlp" --quiet --steps 2000000 --checkpoint "$d/I.safetensors" \
  --checkpoint-every 50 >/dev/null 2>"$d/i.err"
i=$!
for _ in $(seq 600); do [ -f "$d/I.safetensors" ] && break; sleep 0.05; done
[ -s "$d/I.safetensors.lock" ] || fail "SIGINT: the run took no lock"
signal_wait "$i" INT
[ $rc -eq 130 ] || fail "SIGINT: exit $rc, expected 130 ($(cat "$d/i.err"))"
grep -q "stopped by SIGINT" "$d/i.err" && [ -f "$d/I.safetensors" ] || fail "SIGINT: $(cat "$d/i.err")"

# ---- item 4: the keeper's state goes on in a resumed run. The resumed run's learning rate
# is raised so that its validations are worse than the first run's best.
d=$work/keep
mkdir -p "$d"
opts=(--eval-every 50 --checkpoint-every 50 --keep 2 --checkpoint "$d/F.safetensors" --metrics "$d/m.jsonl")
train --steps 225 "${opts[@]}" >/dev/null 2>"$work/err" || fail "keeper: first run: $(cat "$work/err")"
best_before=$(meta "$d/F.best.safetensors" step)
train --steps 300 "${opts[@]}" --resume "$d/F.safetensors" --set optimizer.lr=0.05 >/dev/null \
  2>"$work/err" || fail "keeper: resumed run: $(cat "$work/err")"
python3 - "$d/m.jsonl" "$(meta "$d/F.best.safetensors" step)" "$best_before" <<'PY' || fail "keeper: the best checkpoint got worse"
import json, sys
vals = [json.loads(l) for l in open(sys.argv[1]) if "val_loss" in l]
after = [v for v in vals if v["step"] > 225]
assert after and all(v["val_loss"] > 0.06 for v in after), after  # the resumed run is worse
assert sys.argv[2] == sys.argv[3], f"best moved from step {sys.argv[3]} to {sys.argv[2]}"
PY
ls "$d" | grep -c '\.step[0-9]*\.safetensors' >"$work/n"
[ "$(cat "$work/n")" -eq 2 ] || fail "keeper: --keep 2 left $(cat "$work/n") periodic files: $(ls "$d")"
[ -f "$d/F.step000300.safetensors" ] && [ -f "$d/F.step000250.safetensors" ] ||
  fail "keeper: the newest two are not kept: $(ls "$d")"

# A checkpoint written before the keeper's state was saved: the periodic files of its name up
# to its step become the resumed run's, and --keep rotates them.
d=$work/old
mkdir -p "$d"
opts=(--checkpoint-every 50 --keep 3 --checkpoint "$d/F.safetensors")
train --steps 200 "${opts[@]}" >/dev/null 2>"$work/err" || fail "old: first run: $(cat "$work/err")"
python3 - "$d/F.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]
b = open(p, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["__metadata__"] = {k: v for k, v in h["__metadata__"].items() if not k.startswith("keeper_")}
s = json.dumps(h, separators=(",", ":")).encode()
s += b" " * (-len(s) % 8)
open(p, "wb").write(struct.pack("<Q", len(s)) + s + b[8 + n:])
PY
[ "$(meta "$d/F.safetensors" keeper_kept)" = "" ] || fail "old: the state was not stripped"
train --steps 300 "${opts[@]}" --keep 2 --resume "$d/F.safetensors" >/dev/null 2>"$work/err" ||
  fail "old: resumed run: $(cat "$work/err")"
[ "$(ls "$d" | grep -c '\.step[0-9]*\.safetensors')" -eq 2 ] ||
  fail "old: --keep 2 left: $(ls "$d")"

# A malformed keeper state is refused in one line.
cp "$d/F.safetensors" "$d/bad.safetensors"
python3 - "$d/bad.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]
b = open(p, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["__metadata__"]["keeper_kept"] = "300,200"
s = json.dumps(h, separators=(",", ":")).encode()
s += b" " * (-len(s) % 8)
open(p, "wb").write(struct.pack("<Q", len(s)) + s + b[8 + n:])
PY
expect_error "keeper: malformed" 1 "bad.safetensors: __metadata__.keeper_kept \"300,200\" is not a rising list" \
  train --steps 400 --resume "$d/bad.safetensors"

# ---- item 5: every name the run writes is checked before the first step
d=$work/names
mkdir -p "$d"
long=$d/$(printf 'n%.0s' $(seq 200)).safetensors # 212 bytes: F fits, F.step000050... does not
# (the metrics file, opened before the first step, tells whether the run started)
expect_error "names: periodic name too long" 1 "path too long" \
  train --steps 100 --checkpoint "$long" --checkpoint-every 50 --keep 3 --metrics "$d/m.jsonl"
expect_error "names: best name too long" 1 "path too long" \
  train --steps 100 --checkpoint "$d/$(printf 'b%.0s' $(seq 210))" --eval-every 50 --metrics "$d/m.jsonl"
[ -z "$(ls "$d")" ] || fail "names: files were left: $(ls "$d")"

# ---- item 9: the metrics file of a resumed run holds each step once, whole lines only
d=$work/metrics
mkdir -p "$d"
opts=(--checkpoint-every 50 --checkpoint "$d/F.safetensors" --metrics "$d/m.jsonl")
train --steps 100 "${opts[@]}" >/dev/null 2>"$work/err" || fail "metrics: first run: $(cat "$work/err")"
cp "$d/F.safetensors" "$d/at100.safetensors"
train --steps 130 "${opts[@]}" --resume "$d/F.safetensors" >/dev/null 2>&1 # lines past step 100
printf '{"step":131,"loss":0.0' >>"$d/m.jsonl"                         # a torn last line
train --steps 150 "${opts[@]}" --resume "$d/at100.safetensors" >/dev/null 2>"$work/err" ||
  fail "metrics: resumed run: $(cat "$work/err")"
python3 - "$d/m.jsonl" <<'PY' || fail "metrics: steps written twice or torn lines"
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1]) if "loss" in l and "val" not in l]
assert steps == list(range(1, 151)), steps
PY
"$ampx" plot "$d/m.jsonl" -o "$d/m.svg" 2>"$work/err" || fail "metrics: ampx plot refuses it: $(cat "$work/err")"

# ---- item 9: a file size limit is reported, the process is not killed by SIGXFSZ
d=$work/fsize
mkdir -p "$d"
(
  ulimit -f 40 # 40 KiB: the checkpoint does not fit (the metrics file outgrows it: a warning)
  "$ampx" train "$mlp" --quiet --steps 400 --checkpoint "$d/F.safetensors" --metrics "$d/m.jsonl"
) >"$work/out" 2>"$work/err"
rc=$?
[ $rc -eq 1 ] || fail "ulimit -f: exit $rc, expected 1 ($(cat "$work/err"))"
grep -Eq "F.safetensors: File too large" "$work/err" || fail "ulimit -f: $(cat "$work/err")"
[ "$(grep -vc 'warning: .*m.jsonl' "$work/err")" -eq 1 ] ||
  fail "ulimit -f: expected one line, got: $(cat "$work/err")"
[ -f "$d/F.safetensors" ] && fail "ulimit -f: a partial checkpoint is there"
ls -a "$d" | grep -q '\.tmp\.' && fail "ulimit -f: a temporary file is left: $(ls -a "$d")"

# ---- the keeper's files are outputs too: an input named F.best or F.stepN (with --keep) is
# refused before the first step (a --resume from them continues the run, as from F)
d=$work/kept_inputs
mkdir -p "$d"
"$ampx" train "$mlp" --quiet --steps 20 --checkpoint "$d/F.safetensors" --checkpoint-every 10 \
  --keep 3 >/dev/null 2>&1 || fail "kept inputs: the first run"
cp "$d/F.step000020.safetensors" "$d/F.best.safetensors"
for f in F.step000020 F.best; do
  before=$(sha256sum <"$d/$f.safetensors")
  "$ampx" train "$mlp" --quiet --steps 40 --eval-every 10 --checkpoint "$d/F.safetensors" \
    --checkpoint-every 10 --keep 3 --init-from "$d/$f.safetensors" >/dev/null 2>"$work/err"
  rc=$?
  [ $rc -eq 1 ] && grep -q "is the same file as .*$f.safetensors (--init-from)" "$work/err" ||
    fail "--init-from $f: exit $rc, $(cat "$work/err")"
  [ "$(sha256sum <"$d/$f.safetensors")" = "$before" ] || fail "--init-from $f: the file changed"
done
"$ampx" train "$mlp" --quiet --steps 40 --eval-every 10 --checkpoint "$d/F.safetensors" \
  --checkpoint-every 10 --keep 3 --resume "$d/F.step000020.safetensors" >/dev/null 2>"$work/err" ||
  fail "--resume F.step000020: $(cat "$work/err")"

# ---- a full metrics or trace disk costs the run nothing: one warning, the run goes on and
# writes its checkpoint (before: exit 1 at the first flush, no checkpoint)
d=$work/fullmetrics
mkdir -p "$d"
for what in metrics trace; do
  "$ampx" train "$mlp" --quiet --steps 30 --checkpoint "$d/$what.safetensors" --"$what" /dev/full \
    >"$work/out" 2>"$work/err"
  rc=$?
  [ $rc -eq 0 ] || fail "--$what /dev/full: exit $rc, expected 0 ($(cat "$work/err"))"
  grep -q "warning: .*No space left on device.*training goes on" "$work/err" ||
    fail "--$what /dev/full: no warning: $(cat "$work/err")"
  [ "$(wc -l <"$work/err")" -eq 1 ] || fail "--$what /dev/full: expected one line: $(cat "$work/err")"
  [ "$(meta "$d/$what.safetensors" step)" = 30 ] || fail "--$what /dev/full: no checkpoint at step 30"
done
# a metrics file cut short by a file size limit ends at a whole line (ampx plot reads it)
(
  ulimit -f 8
  "$ampx" train "$mlp" --quiet --steps 60 --log-every 1 --monitor 1 --metrics "$d/m.jsonl"
) >"$work/out" 2>"$work/err"
rc=$?
[ $rc -eq 0 ] && grep -q "warning: .*m.jsonl: write error: File too large" "$work/err" ||
  fail "metrics under ulimit -f: exit $rc, $(cat "$work/err")"
python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$d/m.jsonl" ||
  fail "metrics under ulimit -f: a torn line"

# ---- item 9: the memory check counts the activation arena
expect_error "memory: arena" 1 "model \"gpt_tiny\".*activation arena \([0-9.]+ GiB planned for batch 65536\)" \
  "$ampx" train "$src/models/gpt_tiny.json" --steps 1 --batch 65536 --quiet \
  --set 'inputs.tokens.shape=[4096]' --set 'inputs.next.shape=[4096]'

[ $fails -eq 0 ] && echo "keeper_cli: all passed"
exit $((fails > 0))
