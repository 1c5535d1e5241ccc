#!/usr/bin/env bash
# placement_measured.sh [--model M] [--steps N] [--rounds R] — placement "measured" on the
# OpenCL device beside the cpu backend, side by side with all-cpu and all-opencl: each
# configuration trains M for N steps (the measured runs' measuring steps included), the
# configurations alternated R rounds; prints the median steps/s, the ratio to all-cpu and
# what the measured runs chose.
set -euo pipefail
cd "$(dirname "$0")/../.."
model=models/gpt_tiny.json steps=60 rounds=3
while [ $# -gt 0 ]; do
  case $1 in
  --model) model=$2; shift 2 ;;
  --steps) steps=$2; shift 2 ;;
  --rounds) rounds=$2; shift 2 ;;
  *) echo "usage: $0 [--model M] [--steps N] [--rounds R]" >&2; exit 2 ;;
  esac
done
ampx=build/bin/ampx
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
names=(cpu opencl "opencl,cpu measured" "cpu,opencl measured" "opencl,cpu first")
declare -A args=(
  [cpu]="--backend cpu"
  [opencl]="--backend opencl"
  ["opencl,cpu measured"]="--backend opencl,cpu --placement measured"
  ["cpu,opencl measured"]="--backend cpu,opencl --placement measured"
  ["opencl,cpu first"]="--backend opencl,cpu"
)
for ((r = 0; r < rounds; r++)); do
  for n in "${names[@]}"; do
    # shellcheck disable=SC2086
    "$ampx" train "$model" --steps "$steps" --eval-every 0 ${args[$n]} >"$work/out" 2>&1
    rate=$(sed -n 's/^done: .*(\([0-9.]*\) steps\/s).*/\1/p' "$work/out")
    echo "$n|$rate" >>"$work/rates"
    grep '^placement measured' "$work/out" | sed "s/^/$n: /" >>"$work/chose" || true
  done
done
med() { awk -F'|' -v n="$1" '$1 == n { print $2 }' "$work/rates" | sort -g |
  awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
echo "$model, $steps steps, $rounds rounds alternated; load $(cut -d' ' -f1-3 /proc/loadavg)"
base=$(med cpu)
for n in "${names[@]}"; do
  m=$(med "$n")
  printf '%-22s %8s steps/s  %6.3fx cpu\n' "$n" "$m" "$(awk -v a="$m" -v b="$base" 'BEGIN { print a / b }')"
done
sort -u "$work/chose"
