#!/usr/bin/env bash
# ab_step.sh OLD_AMPX NEW_AMPX [ROUNDS] — the training step of models/mlp_wide.json and
# models/gpt_tiny.json (f32 and mixed_bf16) under two builds of ampx, alternated round by
# round on the same machine: a refactor's "no slowdown" check. Each cell is the median over
# rounds of a run's median per-step host time (`time_ms` of 5-step intervals, the first
# dropped); the last column is NEW's steps/s over OLD's.
set -euo pipefail
cd "$(dirname "$0")/../.."
old=$1 new=$2 rounds=${3:-7}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo '{"policy": "f32", "scaler": "none"}' >"$tmp/f32.json"
echo '{"policy": "mixed_bf16", "scaler": "dynamic"}' >"$tmp/bf16.json"
one() { # BIN MODEL POLICY STEPS -> median time_ms of the run
  "$1" train "models/$2.json" --policy "$tmp/$3.json" --steps "$4" --log-every 5 --eval-every 0 \
    --quiet --metrics "$tmp/m.jsonl" >/dev/null
  python3 -c 'import json,statistics,sys
r=[json.loads(l)["time_ms"] for l in open(sys.argv[1]) if "time_ms" in l][1:]
print(statistics.median(r))' "$tmp/m.jsonl"
}
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '| model | policy | old ms/step | new ms/step | new/old steps/s |\n|---|---|---|---|---|\n'
for cfg in "mlp_wide f32 65" "mlp_wide bf16 65" "gpt_tiny f32 45" "gpt_tiny bf16 45"; do
  set -- $cfg
  : >"$tmp/old" && : >"$tmp/new"
  for ((r = 0; r < rounds; r++)); do
    if ((r % 2)); then one "$new" "$1" "$2" "$3" >>"$tmp/new"; one "$old" "$1" "$2" "$3" >>"$tmp/old"
    else one "$old" "$1" "$2" "$3" >>"$tmp/old"; one "$new" "$1" "$2" "$3" >>"$tmp/new"; fi
  done
  python3 - "$1" "$2" "$tmp/old" "$tmp/new" <<'PY'
import statistics, sys
o = statistics.median(float(x) for x in open(sys.argv[3]))
n = statistics.median(float(x) for x in open(sys.argv[4]))
print(f"| {sys.argv[1]} | {sys.argv[2]} | {o:.2f} | {n:.2f} | {o / n:.3f} |")
PY
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
