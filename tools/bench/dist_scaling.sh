#!/usr/bin/env bash
# dist_scaling.sh [STEPS_GPT] [STEPS_WIDE] — data-parallel training with 1, 2 and 4 ranks (one
# CPU thread each, `mpirun -np N ampx train`, the per-rank batch fixed, so 2 ranks train a
# global batch twice as large; 4 ranks share 2 cores here) on models/gpt_tiny.json and
# models/mlp_wide.json, alternating,
# three times each. Reports examples per second, the speedup, and the share of rank 0's time
# in the gradient all-reduce (ampx's own count: reading buckets to the host, MPI, the
# average and the write back). Writes the table into docs/DISTRIBUTED.md between the
# dist-bench markers, with the load average, which says how far to trust it.
set -euo pipefail
cd "$(dirname "$0")/../.."
gpt=${1:-40}
wide=${2:-40}
bash tools/build.sh >/dev/null
ampx=./build/bin/ampx
mpiexec=$(command -v mpirun || true)
[ -n "$mpiexec" ] || { echo "dist_scaling.sh: no mpirun (Debian: openmpi-bin)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export AMPX_BACKEND_OPTS=threads=1
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for rep in 1 2 3; do
  for model in gpt_tiny mlp_wide; do
    steps=$gpt
    [ $model = mlp_wide ] && steps=$wide
    for n in 1 2 4; do
      # --eval-every 0: validation only at the end, outside the timed steps
      "$mpiexec" --oversubscribe -np $n "$ampx" train models/$model.json --steps "$steps" \
        --eval-every 0 >"$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
      rate=$(sed -n 's/^done: step \([0-9]*\),.* \([0-9.]*\) s (.*/\1 \2/p' "$tmp/out" |
        awk '{printf "%.4f", $1 / $2}')
      comm=$(sed -n 's/^gradient all-reduce: \([0-9.]*\)%.*/\1/p' "$tmp/out")
      batch=$(sed -n 's/.*steps [0-9]*\.\.[0-9]*, batch \([0-9]*\) x \([0-9]*\),.*/\1 \2/p' "$tmp/out" |
        awk '{print $1 * $2}')
      echo "$model $n $rate ${comm:-0} $batch" >>"$tmp/times"
    done
  done
done
# how much of a second core there was: one process, 1 thread and 2 threads
for th in 1 2 1 2; do
  AMPX_BACKEND_OPTS=threads=$th "$ampx" train models/mlp_wide.json --steps "$wide" --eval-every 0 \
    --quiet >"$tmp/out"
  sed -n 's/^done: step \([0-9]*\),.* \([0-9.]*\) s (.*/\1 \2/p' "$tmp/out" |
    awk -v th=$th '{printf "%s %.4f\n", th, $1 / $2}' >>"$tmp/threads"
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
for model in gpt_tiny mlp_wide; do
  "$ampx" policy models/$model.json >"$tmp/$model.policy"
done
python3 - "$tmp" "$gpt" "$wide" "$load0" "$load1" <<'PY'
import datetime, re, statistics, sys
tmp, gpt, wide, load0, load1 = sys.argv[1:6]
rows = [l.split() for l in open(tmp + "/times")]
res = {}
for m, n, rate, comm, batch in rows:
    res.setdefault((m, int(n)), []).append((float(rate), float(comm), int(batch)))
def params(model):
    n = 0
    for line in open("%s/%s.policy" % (tmp, model)):
        f = line.split()
        if len(f) > 3 and "master" in line and re.fullmatch(r"[0-9x]+", f[2]):
            k = 1
            for d in f[2].split("x"):
                k *= int(d)
            n += k
    return n
out = ["<!-- dist-bench:begin -->",
       "Command: `bash tools/bench/dist_scaling.sh %s %s` (%s). Machine: AMD EPYC, 2 cores shared "
       "with other builds; load average (1, 5, 15 min) %s at the start, %s at the end: with more "
       "than 2 runnable processes the 2-rank runs share cores with others, so read the speedups "
       "as a lower bound. One CPU thread per rank (`AMPX_BACKEND_OPTS=threads=1`), the per-rank "
       "batch of the model file, medians of 3 runs, 1, 2 and 4 ranks alternating (4 ranks on "
       "2 cores: at most 2x, each rank a half core); the all-reduce "
       "share is rank 0's host time in it (MPI over shared memory on the CPU backend's own "
       "memory, the waits, the 1/N) over the run's time." % (gpt, wide, datetime.date.today(), load0, load1),
       "",
       "| model | parameters | gradient bytes | ranks | global batch | examples/s | speedup | all-reduce share |",
       "|---|---:|---:|---:|---:|---:|---:|---:|"]
for m in ("gpt_tiny", "mlp_wide"):
    p = params(m)
    base = None
    for n in (1, 2, 4):
        v = res[(m, n)]
        rate = statistics.median(r for r, _, _ in v)
        comm = statistics.median(c for _, c, _ in v)
        b = v[0][2] * n
        ex = rate * b
        base = base or ex
        out.append("| %s | %d | %.1f MiB | %d | %d | %.0f | %.2fx | %s |" % (
            m, p, p * 4 / 2**20, n, b, ex, ex / base, "%.1f%%" % comm if n > 1 else "-"))
th = {}
for l in open(tmp + "/threads"):
    k, v = l.split()
    th.setdefault(k, []).append(float(v))
out.append("")
out.append("How much of the second core the runs had: one process on mlp_wide ran %.2fx as fast "
           "with 2 threads as with 1 in the same minutes (close to 2x when both cores are free; 1.0x "
           "means the other core was busy with someone else's work, and then 2 ranks cannot be "
           "faster than 1 either)." % (max(th["2"]) / max(th["1"])))
out.append("<!-- dist-bench:end -->")
text = "\n".join(out)
print(text)
path = "docs/DISTRIBUTED.md"
doc = open(path).read()
a, b = doc.index("<!-- dist-bench:begin -->"), doc.index("<!-- dist-bench:end -->")
open(path, "w").write(doc[:a] + text + doc[b + len("<!-- dist-bench:end -->"):])
PY
