#!/usr/bin/env bash
# backends.sh AMPX SRC — models/mlp.json trained on every other available backend (opencl,
# cuda) reaches the CPU backend's held-out accuracy within 1 point, and a small GPT
# (models/gpt_tiny.json, shortened) its validation loss within 2%. Backends that are not
# built or not available here are reported and skipped.
set -uo pipefail
ampx=$1
src=$2
fails=0
acc() { # acc BACKEND [MODEL] -> held-out accuracy in percent
  "$ampx" train "$src/models/${2:-mlp.json}" --backend "$1" --quiet 2>&1 |
    sed -n 's/^held-out accuracy \([0-9.]*\)%.*/\1/p'
}
# gpt_tiny.json at d_model 64 and context 32, so the sanitizer run stays quick
sed -e 's/"dim": 128/"dim": 64/; s/"units": 512/"units": 256/; s/"units": 128/"units": 64/' \
  -e 's/"shape": \[64\]/"shape": [32]/g' "$src/models/gpt_tiny.json" >"${TMPDIR:-/tmp}/gpt_small.$$.json"
trap 'rm -f "${TMPDIR:-/tmp}/gpt_small.$$.json"' EXIT
val() { # val BACKEND -> validation loss of a short small-GPT run
  "$ampx" train "${TMPDIR:-/tmp}/gpt_small.$$.json" --steps 120 --backend "$1" --quiet 2>&1 |
    sed -n 's/^validation loss \([0-9.]*\) nats.*/\1/p'
}
cpu=$(acc cpu)
cpu_val=$(val cpu)
[ -n "$cpu_val" ] || { echo "FAIL: the cpu gpt_tiny run gave no validation loss"; exit 1; }
[ -n "$cpu" ] || { echo "FAIL: the cpu run gave no accuracy"; exit 1; }
echo "cpu: $cpu%"
tested=0
for b in opencl cuda; do
  if ! "$ampx" backends | grep -A1 -E "^$b " | grep 'available$' >/dev/null; then
    echo "$b: not available here, skipped"
    continue
  fi
  a=$(acc "$b")
  tested=$((tested + 1))
  if [ -z "$a" ]; then
    echo "FAIL: $b: training failed"
    fails=$((fails + 1))
  elif awk -v a="$a" -v c="$cpu" 'BEGIN { exit !(a >= c - 1) }'; then
    echo "$b: $a% (cpu $cpu%)"
    r=$(acc "$b" residual_bn.json)
    if [ -z "$r" ] || ! awk -v a="$r" 'BEGIN { exit !(a >= 95) }'; then
      echo "FAIL: $b: residual_bn.json (batch norm, dropout) reached '${r}'%"
      fails=$((fails + 1))
    else
      echo "$b: residual_bn.json $r%"
    fi
    v=$(val "$b")
    if [ -z "$v" ] || ! awk -v a="$v" -v c="$cpu_val" 'BEGIN { d = a - c; if (d < 0) d = -d; exit !(d <= 0.02 * c) }'; then
      echo "FAIL: $b: gpt_tiny.json validation loss '${v}', cpu $cpu_val (more than 2% apart)"
      fails=$((fails + 1))
    else
      echo "$b: gpt_tiny.json validation loss $v (cpu $cpu_val)"
    fi
  else
    echo "FAIL: $b: $a%, more than 1 point below cpu $cpu%"
    fails=$((fails + 1))
  fi
done
echo "$tested other backend(s) trained"
exit $((fails > 0))
