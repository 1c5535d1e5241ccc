#!/usr/bin/env bash
# forensics.sh [BUILD] [ROUNDS] — what the overflow forensics cost a training step. Each model
# runs with the monitor off (train.monitor 0), with the forensics armed on every step
# (--forensics, the monitor off) and with the monitor on every step (--monitor 1), the three
# rotated round by round. Two measures:
#   cpu:  the process's CPU time (user + sys) per step on one thread, from the difference of
#         a long and a short run (set-up and evaluation cancel), which another process on a
#         shared machine disturbs far less than wall time;
#   wall: the median per-step host time (`time_ms` of 5-step intervals, the first dropped)
#         on the default threads.
# Each cell is the median over rounds. gpt.json needs data/shakespeare (tools/data/shakespeare.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-rel} rounds=${2:-6}
ampx=$build/bin/ampx
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp models/gpt.json models/gpt_tiny.json models/mlp.json "$tmp/"
sed -i 's#"\$DATA/#"'"$PWD"'/data/#g' "$tmp/gpt.json"
flags() { # MODE
  case $1 in
  off) echo "--set train.monitor=0" ;;
  armed) echo "--set train.monitor=0 --forensics" ;;
  monitor) echo "--monitor 1" ;;
  esac
}
cpu_ms() { # MODEL STEPS MODE -> CPU seconds
  # shellcheck disable=SC2046
  /usr/bin/time -f "%U %S" -o "$tmp/t" "$ampx" train "$tmp/$1.json" --steps "$2" --log-every 10 \
    --eval-every 0 --quiet --backend-opt threads=1 $(flags "$3") >/dev/null 2>&1
  awk '{print $1 + $2}' "$tmp/t"
}
wall_ms() { # MODEL STEPS MODE -> median ms per step
  # shellcheck disable=SC2046
  "$ampx" train "$tmp/$1.json" --steps "$2" --log-every 5 --eval-every 0 --quiet \
    --metrics "$tmp/m.jsonl" $(flags "$3") >/dev/null
  python3 -c 'import json,statistics,sys
r=[json.loads(l)["time_ms"] for l in open(sys.argv[1]) if "time_ms" in l][1:]
print(statistics.median(r))' "$tmp/m.jsonl"
}
modes=(off armed monitor)
table() { # KIND: rows of MODEL LONG SHORT
  for cfg in "gpt 50 10" "gpt_tiny 150 30" "mlp 8000 1000"; do
    set -- $cfg
    for m in "${modes[@]}"; do : >"$tmp/$m"; done
    for ((r = 0; r < rounds; r++)); do
      for ((k = 0; k < 3; k++)); do
        m=${modes[$(((r + k) % 3))]}
        if [ "$kind" = cpu ]; then
          l=$(cpu_ms "$1" "$2" "$m") s=$(cpu_ms "$1" "$3" "$m")
          python3 -c "print(($l - $s) / ($2 - $3) * 1000)" >>"$tmp/$m"
        else
          wall_ms "$1" "$2" "$m" >>"$tmp/$m"
        fi
      done
    done
    python3 - "$1" "$tmp/off" "$tmp/armed" "$tmp/monitor" <<'PY'
import statistics, sys
med = [statistics.median(float(l) for l in open(p)) for p in sys.argv[2:]]
print(f"| {sys.argv[1]} | {med[0]:.4g} | {med[1]:.4g} | {med[1] / med[0]:.3f} | {med[2]:.4g} | {med[2] / med[0]:.3f} |")
PY
  done
}
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for kind in cpu wall; do
  echo
  echo "$kind: ms per step"
  printf '| model | off | armed | armed / off | --monitor 1 | monitor / off |\n|---|---|---|---|---|---|\n'
  table
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
