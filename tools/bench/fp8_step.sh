#!/usr/bin/env bash
# fp8_step.sh [BUILD] [ROUNDS] — the training step of models/gpt.json (mixed_bf16) against
# models/gpt_fp8.json (its products of weights in fp8) and of gpt_tiny under both, alternated
# round by round: each cell the median over rounds of a run's median per-step host time
# (`time_ms` of 5-step intervals, the first dropped), with the peak resident memory of the
# last round (/usr/bin/time). Needs data/shakespeare (tools/data/shakespeare.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-rel} rounds=${2:-5}
ampx=$build/bin/ampx
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); m["policy"]={"preset":"mixed_bf16","fp8":{}}; json.dump(m,open(sys.argv[2],"w"))' \
  models/gpt_tiny.json "$tmp/gpt_tiny_fp8.json"
cp models/gpt_tiny.json "$tmp/gpt_tiny.json"
cp models/gpt.json models/gpt_fp8.json "$tmp/"
sed -i 's#"\$DATA/#"'"$PWD"'/data/#g' "$tmp/gpt.json" "$tmp/gpt_fp8.json"
one() { # MODEL STEPS -> "median_ms rss_kb"
  /usr/bin/time -f %M -o "$tmp/rss" "$ampx" train "$tmp/$1.json" --steps "$2" --log-every 5 \
    --eval-every 0 --quiet --metrics "$tmp/m.jsonl" >/dev/null
  python3 -c 'import json,statistics,sys
r=[json.loads(l)["time_ms"] for l in open(sys.argv[1]) if "time_ms" in l][1:]
print(statistics.median(r), open(sys.argv[2]).read().strip())' "$tmp/m.jsonl" "$tmp/rss"
}
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '| model | mixed_bf16 ms/step | fp8 ms/step | fp8/bf16 steps/s | RSS bf16 | RSS fp8 |\n|---|---|---|---|---|---|\n'
for cfg in "gpt_tiny 45" "gpt 30"; do
  set -- $cfg
  : >"$tmp/a" && : >"$tmp/b"
  for ((r = 0; r < rounds; r++)); do
    if ((r % 2)); then one "${1}_fp8" "$2" >>"$tmp/b"; one "$1" "$2" >>"$tmp/a"
    else one "$1" "$2" >>"$tmp/a"; one "${1}_fp8" "$2" >>"$tmp/b"; fi
  done
  python3 - "$1" "$tmp/a" "$tmp/b" <<'PY'
import statistics, sys
a = [l.split() for l in open(sys.argv[2])]
b = [l.split() for l in open(sys.argv[3])]
ma, mb = statistics.median(float(x[0]) for x in a), statistics.median(float(x[0]) for x in b)
print(f"| {sys.argv[1]} | {ma:.2f} | {mb:.2f} | {ma / mb:.2f} | {int(a[-1][1]) / 1024:.1f} MiB | {int(b[-1][1]) / 1024:.1f} MiB |")
PY
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
