#!/usr/bin/env bash
# fp8_gemm.sh [BUILD] — GEMM_FP8 against bf16 GEMM on the cpu backend, side by side:
# `ampx bench gemm --dtype bf16` (A, B, C bf16) and `--dtype e4m3` / `--dtype e5m2` (A, B fp8,
# C bf16), alternated per shape for 3 rounds, on the widest path and on isa=avx2; each cell
# the median GFLOP/s over the rounds, with the fp8 / bf16 ratio. Prints a markdown table
# (docs/BENCHMARKS.md, docs/FP8.md) with the load average before and after.
set -euo pipefail
build=${1:-build-rel}
ampx=$build/bin/ampx
[ -x "$ampx" ] || { echo "fp8_gemm.sh: no $ampx (cmake --build $build first)" >&2; exit 1; }
shapes=(
  "512 512 512 0 0"   "1024 1024 1024 0 0" "2048 2048 2048 0 0"
  "256 1024 1024 0 0" "1024 1024 256 1 0"  "256 1024 1024 0 1"
  "2048 384 128 0 0"  "2048 512 128 0 0"   "2048 128 512 0 0" "128 512 2048 1 0"
  "128 3072 768 0 0"  "128 768 3072 0 0"   "2048 3072 768 0 0")
rounds=3
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for isa in auto avx2; do
  for s in "${shapes[@]}"; do
    read -r m n k ta tb <<<"$s"
    flags=(--m "$m" --n "$n" --k "$k" --reps 20 --json --backend cpu --backend-opt "isa=$isa")
    [ "$ta" = 1 ] && flags+=(--trans-a)
    [ "$tb" = 1 ] && flags+=(--trans-b)
    for r in $(seq $rounds); do
      for dt in bf16 e4m3 e5m2; do
        g=$("$ampx" bench gemm "${flags[@]}" --dtype "$dt" | tail -1 |
          python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["gflops"] if j["ok"] else "FAIL")')
        echo "$isa|$m|$n|$k|$ta|$tb|$dt|$g" >>"$out"
      done
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    isa, m, n, k, ta, tb, dt, g = line.strip().split("|")
    rows.setdefault((isa, m, n, k, ta, tb), {}).setdefault(dt, []).append(float(g))
print("| path | shape | bf16 | e4m3 | e5m2 | e4m3 / bf16 | e5m2 / bf16 |")
print("|---|---|---|---|---|---|---|")
for (isa, m, n, k, ta, tb), d in rows.items():
    med = {dt: statistics.median(v) for dt, v in d.items()}
    shape = f"{m}x{n}x{k}" + (" tA" if ta == "1" else "") + (" tB" if tb == "1" else "")
    print(f"| {isa} | {shape} | {med['bf16']:.1f} | {med['e4m3']:.1f} | {med['e5m2']:.1f} | "
          f"{med['e4m3'] / med['bf16']:.2f} | {med['e5m2'] / med['bf16']:.2f} |")
PY
