#!/usr/bin/env bash
# opencl_tiled.sh [--rounds N] [--base BASE_BUILD] [--shapes "MxNxK ..."] [--trans-b] [--rows]
#                 BUILD
# — the OpenCL backend's GEMM paths side by side with the CPU backend on the same cores:
# every variant below is one `ampx bench gemm --json` process, and the variants run
# alternately (one each, round after round) so that load and clock drift hit them alike.
# Prints the median GFLOP/s over the rounds of each variant and shape as a markdown table.
#
# Variants: opencl f32 convert (CLBlast SGEMM: f32 needs no widening), f32 tiled, f32 packed
# (auto on CPU devices); bf16 tiled, bf16 packed; cpu f32, cpu bf16; with --rows, the per-row
# kernel in f32 and bf16 too; with --base, another build's f32 and bf16 `auto`. The tiled
# kernel uses the parameters in the cache folder: run `ampx bench gemm --backend opencl
# --tune ...` once first (docs/OPENCL.md).
set -euo pipefail
rounds=3 base="" trans=() rows=0 shapes="512x512x512 1024x1024x1024 2048x2048x2048 4096x768x768 4096x3072x768"
while [ $# -gt 1 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --base) base=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    --trans-b) trans=(--trans-b); shift ;;
    --rows) rows=1; shift ;;
    *) break ;;
  esac
done
build=${1:?usage: opencl_tiled.sh [--rounds N] [--base BASE_BUILD] [--shapes S] BUILD}
variants=("opencl f32 gemm=convert" "opencl f32 gemm=tiled" "opencl f32 gemm=packed"
  "opencl bf16 gemm=tiled" "opencl bf16 gemm=packed" "cpu f32 -" "cpu bf16 -")
[ "$rows" = 1 ] && variants+=("opencl f32 gemm=rows" "opencl bf16 gemm=rows")
[ -n "$base" ] && variants+=("base:opencl f32 gemm=auto" "base:opencl bf16 gemm=auto")
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for r in $(seq "$rounds"); do
  for s in $shapes; do
    IFS=x read -r m n k <<<"$s"
    for v in "${variants[@]}"; do
      bin=$build/bin/ampx
      [ "${v#base:}" != "$v" ] && bin=$base/bin/ampx
      read -r be dt opt <<<"${v#base:}"
      args=(bench gemm --backend "$be" --dtype "$dt" --m "$m" --n "$n" --k "$k" --warmup 1
        --reps 3 --json "${trans[@]}")
      [ "$opt" != "-" ] && args+=(--backend-opt "$opt")
      g=$("$bin" "${args[@]}" 2>/dev/null | tail -1 |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["gflops"])' 2>/dev/null || echo nan)
      printf '%s\t%s\t%s\n' "$v" "$s" "$g" >>"$out"
    done
  done
  echo "round $r done, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
python3 - "$out" "$shapes" <<'EOF'
import math, statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
shapes = sys.argv[2].split()
names = list(dict.fromkeys(r[0] for r in rows))
print("| variant | " + " | ".join(shapes) + " |")
print("|---" * (len(shapes) + 1) + "|")
for v in names:
    cells = []
    for s in shapes:
        g = [float(r[2]) for r in rows if r[0] == v and r[1] == s and r[2] != "nan"]
        cells.append("%.1f" % statistics.median(g) if g else "-")
    print("| " + v + " | " + " | ".join(cells) + " |")
EOF
