#!/usr/bin/env bash
# generate.sh [AMPX] [ROUNDS] [BACKEND-OPT...] — `ampx generate` with the KV cache against
# --no-cache: models/gpt.json (its data swapped for the embedded text: speed does not depend
# on what was learned) trained 5 steps, then 512 greedy tokens from the default prompt,
# cached and uncached runs alternated ROUNDS times (default 3); prints each run's tokens/s,
# the medians and their ratio, and checks that both print the same text.
set -euo pipefail
ampx=${1:-build/bin/ampx}
rounds=${2:-3}
shift $(($# < 2 ? $# : 2))
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed 's|"data": {[^}]*}|"data": {"source": "embedded_text", "bytes": 1000000}|' \
  "$src/models/gpt.json" >"$work/gpt.json"
grep -q embedded_text "$work/gpt.json" || { echo "no data line to replace in models/gpt.json"; exit 1; }
"$ampx" train "$work/gpt.json" --steps 5 --quiet --checkpoint "$work/c.safetensors" >/dev/null
opts=()
for o in "$@"; do opts+=(--backend-opt "$o"); done
run() { # run OUT [--no-cache]: tokens/s
  "$ampx" generate "$work/gpt.json" --checkpoint "$work/c.safetensors" --tokens 512 \
    --temperature 0 ${opts[@]+"${opts[@]}"} "${@:2}" >"$1" 2>"$work/err"
  sed -n 's/.*s: \([0-9.]*\) tokens\/s.*/\1/p' "$work/err"
}
cached=() whole=()
for r in $(seq 1 "$rounds"); do
  cached+=("$(run "$work/a")")
  whole+=("$(run "$work/b" --no-cache)")
  cmp -s "$work/a" "$work/b" || { echo "round $r: the KV cache changes the text"; exit 1; }
  echo "round $r: KV cache ${cached[-1]} tokens/s, whole window ${whole[-1]} tokens/s"
done
python3 - "${cached[*]}" "${whole[*]}" <<'PY'
import statistics, sys
c = statistics.median(float(x) for x in sys.argv[1].split())
w = statistics.median(float(x) for x in sys.argv[2].split())
print(f"median: KV cache {c:.1f} tokens/s, whole window {w:.1f} tokens/s, ratio {c / w:.2f}x")
PY
