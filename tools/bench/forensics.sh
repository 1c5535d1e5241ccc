#!/usr/bin/env bash
# forensics.sh [BUILD] [ROUNDS] — what the overflow forensics cost a training step: each model
# with the monitor off (train.monitor 0), with the forensics armed on every step
# (--forensics, the monitor off) and with the monitor on every step (--monitor 1, the
# diagnosis before ABS_MAX), run by run in rotating order; each cell the median over rounds
# of a run's median per-step host time (`time_ms` of 5-step intervals, the first dropped).
# Needs data/shakespeare for gpt.json (tools/data/shakespeare.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-rel} rounds=${2:-5}
ampx=$build/bin/ampx
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp models/gpt.json models/gpt_tiny.json models/mlp_wide.json "$tmp/"
sed -i 's#"\$DATA/#"'"$PWD"'/data/#g' "$tmp/gpt.json"
one() { # MODEL STEPS MODE -> median ms per step
  local extra=(--set train.monitor=0)
  [ "$3" = armed ] && extra+=(--forensics)
  [ "$3" = monitor ] && extra=(--monitor 1)
  "$ampx" train "$tmp/$1.json" --steps "$2" --log-every 5 --eval-every 0 --quiet \
    --metrics "$tmp/m.jsonl" "${extra[@]}" >/dev/null
  python3 -c 'import json,statistics,sys
r=[json.loads(l)["time_ms"] for l in open(sys.argv[1]) if "time_ms" in l][1:]
print(statistics.median(r))' "$tmp/m.jsonl"
}
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '| model | off ms/step | armed ms/step | armed / off | --monitor 1 ms/step | monitor / off |\n|---|---|---|---|---|---|\n'
modes=(off armed monitor)
for cfg in "gpt 40" "gpt_tiny 60" "mlp_wide 60"; do
  set -- $cfg
  for m in "${modes[@]}"; do : >"$tmp/$m"; done
  for ((r = 0; r < rounds; r++)); do
    for ((k = 0; k < 3; k++)); do
      m=${modes[$(((r + k) % 3))]}
      one "$1" "$2" "$m" >>"$tmp/$m"
    done
  done
  python3 - "$1" "$tmp/off" "$tmp/armed" "$tmp/monitor" <<'PY'
import statistics, sys
med = [statistics.median(float(l) for l in open(p)) for p in sys.argv[2:]]
print(f"| {sys.argv[1]} | {med[0]:.2f} | {med[1]:.2f} | {med[1] / med[0]:.3f} | {med[2]:.2f} | {med[2] / med[0]:.3f} |")
PY
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
