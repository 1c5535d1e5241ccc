#!/usr/bin/env bash
# faults.sh [--short] [--trials N] [AMPX] — the fault campaign of a training run's files
# (docs/RELIABILITY.md): kill -9 at random moments while checkpoints rotate, a full disk (a
# small tmpfs when mount is allowed, else `ulimit -f`), a read-only folder, a symlinked
# output, two runs writing one checkpoint path. After each fault: at least one intact
# checkpoint exists, resuming from the newest intact one gives the straight run's final
# weights bit for bit, and no input changed. Prints one line per fault kind and a table:
#
#   fault               trials  failures  lost
#
# --short: the few trials CI runs (tens of seconds); the full campaign runs 40 kill trials.
# AMPX defaults to build/bin/ampx. Exit status 1 when any trial failed.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
trials=40
short=0
ampx=$here/build/bin/ampx
while [ $# -gt 0 ]; do
  case $1 in
  --short) short=1 trials=4 ;;
  --trials) trials=$2 && shift ;;
  -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' && exit 0 ;;
  *) ampx=$1 ;;
  esac
  shift
done
[ -x "$ampx" ] || { echo "faults.sh: $ampx: not an executable (build first: bash tools/build.sh)" >&2 && exit 2; }

work=$(mktemp -d)
mounted=""
bgpids=()
cleanup() {
  for p in "${bgpids[@]}"; do kill -9 "$p" 2>/dev/null; done
  [ -n "$mounted" ] && umount "$mounted" 2>/dev/null
  chmod -R u+w "$work" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The run every trial repeats: models/mlp.json, a checkpoint every 10 steps, the last 3 kept.
steps=600
every=10
cp "$here/models/mlp.json" "$work/model.json"
model=$work/model.json
inputs_sum() { sha256sum "$model" | cut -d' ' -f1; }
inputs=$(inputs_sum)
run() { "$ampx" train "$model" --quiet --steps "$steps" --seed 0 "$@"; }

declare -A n_trials n_fail lost
note() { # note KIND OK WHAT: a trial's outcome
  n_trials[$1]=$((${n_trials[$1]:-0} + 1))
  if [ "$2" != 1 ]; then
    n_fail[$1]=$((${n_fail[$1]:-0} + 1))
    lost[$1]="${lost[$1]:+${lost[$1]}; }$3"
    echo "faults: $1: FAIL: $3" >&2
  fi
}

# data_of CKPT: the checksum of a checkpoint's data section (the weights and state; the
# header's keeper fields differ between a straight and a resumed run)
data_of() {
  python3 - "$1" <<'PY'
import hashlib, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
print(hashlib.sha256(b[8 + n:]).hexdigest())
PY
}

# step_of CKPT: its step, when ampx eval reads it whole (an intact checkpoint); else nothing
step_of() {
  "$ampx" eval "$model" --checkpoint "$1" 2>/dev/null | sed -n 's/^step \([0-9]*\): .*/\1/p'
}

# newest_intact DIR: the intact checkpoint with the highest step among F and F.step*
newest_intact() {
  local best="" best_step=-1 f s
  for f in "$1"/F.safetensors "$1"/F.step*.safetensors; do
    [ -f "$f" ] || continue
    s=$(step_of "$f")
    [ -n "$s" ] && [ "$s" -gt "$best_step" ] && best=$f best_step=$s
  done
  echo "$best"
}

# check_resume KIND DIR [SEED]: an intact checkpoint is there, resuming from the newest gives
# the straight run's weights (of that seed), the resumed run leaves no temporary file (a
# killed run's own is removed by the next save of its name: one killed while it wrote F after
# its last periodic checkpoint leaves one, and nothing to resume), the input is unchanged
check_resume() {
  local kind=$1 dir=$2 seed=${3:-0} ck
  ck=$(newest_intact "$dir")
  if [ -z "$ck" ]; then
    note "$kind" 0 "no intact checkpoint in $(ls "$dir" | tr '\n' ' ')"
    return
  fi
  local final=$ck resumed=0 # a run killed after its last periodic checkpoint: that one
  if [ "$(step_of "$ck")" -lt "$steps" ]; then
    resumed=1
    final=$dir/F.safetensors
    if ! run --resume "$ck" --checkpoint "$final" --checkpoint-every $every --keep 3 \
      --seed "$seed" >/dev/null 2>"$work/err"; then
      note "$kind" 0 "resume from $(basename "$ck") failed: $(cat "$work/err")"
      return
    fi
  fi
  [ "$(data_of "$final")" = "${straight[$seed]}" ] ||
    { note "$kind" 0 "resumed from $(basename "$ck"): weights differ from the straight run" && return; }
  [ $resumed = 1 ] && ls -a "$dir" | grep -q '\.tmp\.' &&
    { note "$kind" 0 "a temporary file is left: $(ls -a "$dir" | grep '\.tmp\.')" && return; }
  [ "$(inputs_sum)" = "$inputs" ] || { note "$kind" 0 "the model file changed" && return; }
  note "$kind" 1 ""
}

# the straight runs, seeds 0, 1 and 2, and how long one takes
mkdir -p "$work/straight"
straight=()
for seed in 0 1 2; do
  t0=$(date +%s%N)
  run --checkpoint "$work/straight/F$seed.safetensors" --checkpoint-every $every --keep 3 \
    --seed $seed >/dev/null || { echo "faults.sh: the straight run failed" >&2 && exit 1; }
  secs=$(python3 -c "print(($(date +%s%N) - $t0) / 1e9)")
  straight[$seed]=$(data_of "$work/straight/F$seed.safetensors")
done

# ---- kill -9 at a random moment of a run that rotates a checkpoint every 10 steps; a draw
# that finds the run already done is drawn again (earlier), and not counted
mid_run=0
attempts=0
window=$(python3 -c "print($secs * 0.8)")
while [ $mid_run -lt "$trials" ] && [ $attempts -lt $((trials * 4)) ]; do
  attempts=$((attempts + 1))
  d=$work/kill$attempts
  mkdir -p "$d"
  # (ampx itself in the background, not a subshell: the kill must reach it)
  "$ampx" train "$model" --quiet --steps "$steps" --seed 0 --checkpoint "$d/F.safetensors" \
    --checkpoint-every $every --keep 3 >/dev/null 2>&1 &
  pid=$!
  bgpids+=("$pid")
  sleep "$(python3 -c "import random; print(random.uniform(0.02, $window))")"
  if kill -9 "$pid" 2>/dev/null; then
    mid_run=$((mid_run + 1))
    wait "$pid" 2>/dev/null
    check_resume "kill -9 in rotation" "$d"
  else
    wait "$pid" 2>/dev/null
    window=$(python3 -c "print($window * 0.9)")
  fi
  rm -rf "$d"
done
[ $mid_run -eq "$trials" ] || note "kill -9 in rotation" 0 "only $mid_run of $attempts draws hit a running process"

# ---- a full disk: a small tmpfs (the checkpoints stop fitting), else a file size limit
d=$work/full
mkdir -p "$d"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=400k tmpfs "$d" 2>/dev/null; then
  mounted=$d
  kind="disk full (tmpfs)"
  run --checkpoint "$d/F.safetensors" --checkpoint-every $every --keep 3 --seed 0 \
    --metrics "$d/m.jsonl" >/dev/null 2>"$work/err"
else
  # a limit a checkpoint fits under and the metrics file (a monitor line per tensor and
  # step) outgrows midway
  kind="disk full (ulimit -f)"
  limit=$(($(stat -c %s "$work/straight/F0.safetensors") / 1024 + 16))
  (ulimit -f $limit && run --checkpoint "$d/F.safetensors" --checkpoint-every $every --keep 3 \
    --seed 0 --metrics "$d/m.jsonl" --monitor 1) >/dev/null 2>"$work/err"
fi
rc=$?
# the metrics file outgrowing its room is a warning and the run goes on: under the file size
# limit (checkpoints fit) it ends with exit 0; in the tmpfs a checkpoint stops fitting: exit 1
# with one line besides the metrics warning
want=1
[ "$kind" = "disk full (ulimit -f)" ] && want=0
errors=$(grep -vc "warning: .*m.jsonl: write error" "$work/err")
if [ $rc -ne $want ] || [ "$errors" -ne $want ]; then
  note "$kind" 0 "exit $rc, expected $want with $want error line: $(cat "$work/err")"
elif [ $want = 0 ] && ! grep -q "warning: .*m.jsonl: write error" "$work/err"; then
  note "$kind" 0 "no warning for the metrics file: $(cat "$work/err")"
else
  # room again: the files move to a folder with space, as a user would do
  mkdir -p "$work/moved" && cp "$d"/F*.safetensors "$work/moved/" 2>/dev/null
  check_resume "$kind" "$work/moved"
fi
[ -n "$mounted" ] && umount "$mounted" && mounted=""

# ---- a read-only folder: refused at the start, its checkpoint untouched (as another user:
# root writes anywhere)
d=$work/ro
mkdir -p "$d"
run --steps 300 --checkpoint "$d/F.safetensors" >/dev/null
before=$(sha256sum "$d/F.safetensors")
chmod 555 "$d"
as_user=()
[ "$(id -u)" = 0 ] && as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
chmod o+rx "$work" && chmod o+r "$model"
"${as_user[@]}" "$ampx" train "$model" --quiet --steps "$steps" --resume "$d/F.safetensors" \
  --checkpoint "$d/F.safetensors" >/dev/null 2>"$work/err"
rc=$?
chmod 755 "$d"
if [ $rc -ne 1 ] || [ "$(wc -l <"$work/err")" -ne 1 ]; then
  note "read-only folder" 0 "exit $rc, expected 1 with one line: $(cat "$work/err")"
elif [ "$(sha256sum "$d/F.safetensors")" != "$before" ]; then
  note "read-only folder" 0 "the checkpoint changed"
else
  check_resume "read-only folder" "$d"
fi

# ---- a symlinked output: a checkpoint path that links to the model file must not change it;
# a folder reached through a link works
d=$work/link
mkdir -p "$d/real"
ln -s "$model" "$d/F.safetensors"
run --checkpoint "$d/F.safetensors" >/dev/null 2>"$work/err"
if [ "$(inputs_sum)" != "$inputs" ]; then
  note "symlinked output" 0 "the model file the link names was overwritten"
else
  note "symlinked output" 1 ""
fi
ln -s "$d/real" "$d/dir"
run --steps 300 --checkpoint "$d/dir/F.safetensors" --checkpoint-every $every --keep 3 >/dev/null 2>&1
check_resume "symlinked output" "$d/real"

# ---- two runs writing one checkpoint path at once: one is refused, the other's files alone
for i in $(seq $((short ? 1 : 5))); do
  d=$work/two$i
  mkdir -p "$d"
  run --checkpoint "$d/F.safetensors" --checkpoint-every $every --keep 3 --seed 1 \
    >/dev/null 2>"$d/a.err" &
  a=$!
  run --checkpoint "$d/F.safetensors" --checkpoint-every $every --keep 3 --seed 2 \
    >/dev/null 2>"$d/b.err" &
  b=$!
  bgpids+=("$a" "$b")
  wait "$a"
  ra=$?
  wait "$b"
  rb=$?
  refused=$(cat "$d/a.err" "$d/b.err" | grep -c "in use by another ampx train")
  seeds=$(for f in "$d"/F*.safetensors; do
    python3 - "$f" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
print(json.loads(b[8:8 + n])["__metadata__"]["seed"])
PY
  done | sort -u | wc -l)
  if [ $((ra + rb)) -ne 1 ] || [ "$refused" -ne 1 ]; then
    # both finished: only when one ended before the other started (no overlap, no mix)
    [ $ra -eq 0 ] && [ $rb -eq 0 ] && [ "$seeds" -eq 1 ] && note "two writers" 1 "" && continue
    note "two writers" 0 "exits $ra and $rb, $refused refused: $(cat "$d/a.err" "$d/b.err")"
  elif [ "$seeds" -ne 1 ]; then
    note "two writers" 0 "the folder mixes the runs' files"
  else
    check_resume "two writers" "$d" $((ra == 0 ? 1 : 2))
  fi
done

printf '%-24s %7s %9s  %s\n' fault trials failures lost
total_fail=0
for k in "kill -9 in rotation" "disk full (tmpfs)" "disk full (ulimit -f)" "read-only folder" \
  "symlinked output" "two writers"; do
  [ -n "${n_trials[$k]:-}" ] || continue
  printf '%-24s %7d %9d  %s\n' "$k" "${n_trials[$k]}" "${n_fail[$k]:-0}" "${lost[$k]:-nothing}"
  total_fail=$((total_fail + ${n_fail[$k]:-0}))
done
echo "($attempts draws for $mid_run kills of a running process)"
exit $((total_fail > 0))
