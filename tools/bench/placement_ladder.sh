#!/usr/bin/env bash
# placement_ladder.sh [--steps N] [--rounds R] [--example PLUGIN.so] — the bring-up ladder of
# docs/PLUGINS.md measured: models/gpt_tiny.json trained N steps with a backend showing more
# ops at each rung (the loader's ops= option), the rest on cpu, rungs alternated R rounds;
# prints each rung's median steps/s and its ratio to all-cpu. Rungs are measured on opencl
# (when available) and on the example plugin (its own 11 ops at most; 3 steps a run, its
# kernels being plain loops).
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=20 rounds=3 ex=""
while [ $# -gt 0 ]; do
  case $1 in
  --steps) steps=$2; shift 2 ;;
  --rounds) rounds=$2; shift 2 ;;
  --example) ex=$2; shift 2 ;;
  *) echo "usage: $0 [--steps N] [--rounds R] [--example PLUGIN.so]" >&2; exit 2 ;;
  esac
done
ampx=build/bin/ampx
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "$ex" ]; then
  ex=$work/libampx-example.so
  cc -O2 -std=c11 -fPIC -shared -Icore/include -o "$ex" docs/examples/plugin/example.c -lm
fi
r1=gemm
r2=$r1,cast,add,mul,scale,bias_grad,act_fwd,act_bwd,dropout,permute
r3=$r2,layernorm_fwd,layernorm_bwd,softmax_fwd,softmax_bwd,softmax_xent,embedding_fwd,embedding_bwd,reduce
r4=$r3,attn_fwd,attn_bwd,amp_pass,unscale_check,sum_squares,grad_stats,scaler_update,adamw,sgd
rate() { # rate ARGS... -> steps/s of the run (the example plugin's plain loops: 3 steps)
  local n=$steps
  [[ "$*" == *libampx-example* ]] && n=3
  "$ampx" train models/gpt_tiny.json --steps "$n" --eval-every 0 "$@" 2>&1 |
    sed -n 's/^done: .*(\([0-9.]*\) steps\/s).*/\1/p'
}
declare -A runs
names=("cpu")
runs[cpu]="--backend cpu"
if "$ampx" backends 2>/dev/null | grep -A1 -E '^opencl ' | grep -q 'available$'; then
  for k in 1 2 3 4; do
    v=r$k
    names+=("opencl-rung$k")
    runs[opencl-rung$k]="--backend opencl,cpu --backend-opt opencl.ops=${!v}"
  done
  names+=("opencl")
  runs[opencl]="--backend opencl"
fi
names+=("example-gemm" "example-all")
runs[example-gemm]="--backend $ex,cpu --backend-opt example.ops=gemm"
runs[example-all]="--backend $ex,cpu"
for ((r = 0; r < rounds; r++)); do
  for n in "${names[@]}"; do
    # shellcheck disable=SC2086
    echo "$n $(rate ${runs[$n]})" >>"$work/rates"
  done
done
echo "gpt_tiny, $steps steps, $rounds rounds alternated; load $(cut -d' ' -f1-3 /proc/loadavg)"
base=$(awk '$1 == "cpu" { print $2 }' "$work/rates" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
for n in "${names[@]}"; do
  med=$(awk -v n="$n" '$1 == n { print $2 }' "$work/rates" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
  printf '%-16s %8s steps/s  %6.3fx cpu   %s\n' "$n" "$med" "$(awk -v a="$med" -v b="$base" 'BEGIN { print a / b }')" "${runs[$n]}"
done
