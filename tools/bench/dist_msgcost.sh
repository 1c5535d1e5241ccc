#!/usr/bin/env bash
# dist_msgcost.sh [ROUNDS] [REPS] — the per-message costs behind docs/DISTRIBUTED.md's ring
# model, measured, and the model's extrapolation to 8-64 ranks from them.
#
# Builds tools/bench/mpi_cost.c with mpicc and runs it ROUNDS times (default 3) with 2 and 4
# ranks alternating (REPS timed repetitions per size, default 30): a ping-pong between two
# ranks, MPI_Allreduce and MPI_Reduce_scatter_block of 64 B to 16 MiB of floats. From the
# medians over the rounds it fits the latency alpha (the ping-pong's smallest messages) and
# the bandwidth BW (least squares over 4 KiB - 1 MiB, the bucket sizes ampx sends), checks
# the ring formula against the measured 2- and 4-rank all-reduces, measures one step of
# each shipped model (one process, one thread: the compute a rank overlaps with), and writes
# the tables between the dist-cost markers of docs/DISTRIBUTED.md with the load average.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
reps=${2:-30}
mpicc=$(command -v mpicc || true)
mpiexec=$(command -v mpirun || true)
[ -n "$mpicc" ] && [ -n "$mpiexec" ] ||
  { echo "dist_msgcost.sh: needs mpicc and mpirun (Debian: libopenmpi-dev openmpi-bin)" >&2; exit 1; }
bash tools/build.sh >/dev/null
ampx=./build/bin/ampx
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$mpicc" -O2 -o "$tmp/mpi_cost" tools/bench/mpi_cost.c
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export AMPX_BACKEND_OPTS=threads=1
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq "$rounds"); do
  for np in 2 4; do
    "$mpiexec" --oversubscribe -np $np "$tmp/mpi_cost" "$reps" >>"$tmp/cost"
  done
  # one step of compute per model, one thread: the trainer's own time per step (--metrics,
  # full digits), the median over the log intervals after the first (which holds the first
  # step's set-up)
  for model in mlp gpt_tiny gpt mlp_wide; do
    steps=40 every=10
    [ $model = mlp ] && steps=800 every=100
    rm -f "$tmp/m.jsonl"
    "$ampx" train models/$model.json --steps $steps --log-every $every --eval-every 0 --quiet \
      --metrics "$tmp/m.jsonl" >/dev/null
    python3 -c 'import json, statistics, sys
r = [json.loads(l) for l in open(sys.argv[1])]
print(sys.argv[2], statistics.median(x["time_ms"] for x in r if "time_ms" in x and x["step"] > int(sys.argv[3])))' \
      "$tmp/m.jsonl" $model $every >>"$tmp/steps"
  done
done
# the buckets ampx sends (1 MiB by default; a larger parameter is a bucket of its own)
for model in mlp gpt_tiny gpt mlp_wide; do
  "$mpiexec" --oversubscribe -np 2 "$ampx" train models/$model.json --steps 1 --eval-every 0 >"$tmp/out" 2>&1
  sed -n "s/^data-parallel .*; gradients \([0-9.]*\) MiB in \([0-9]*\) all-reduce buckets\?.*/$model \1 \2/p" \
    "$tmp/out" >>"$tmp/buckets"
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$tmp" "$rounds" "$reps" "$load0" "$load1" <<'PY'
import datetime, statistics, sys
tmp, rounds, reps, load0, load1 = sys.argv[1:6]
med = {}
for line in open(tmp + "/cost"):
    f = line.split()
    key = (f[0], 2, int(f[1])) if f[0] == "pingpong" else (f[0], int(f[1]), int(f[2]))
    med.setdefault(key, []).append(float(f[-1]))
med = {k: statistics.median(v) for k, v in med.items()}
def sizes(kind, n):
    return sorted(s for (k, m, s) in med if k == kind and m == n)
# alpha: the ping-pong's smallest messages; 1/BW: least squares over 4 KiB - 1 MiB
alpha = statistics.median(med[("pingpong", 2, s)] for s in sizes("pingpong", 2)[:2])
pts = [(s, med[("pingpong", 2, s)]) for s in sizes("pingpong", 2) if 4096 <= s <= 1 << 20]
mx = statistics.mean(s for s, _ in pts)
my = statistics.mean(t for _, t in pts)
slope = sum((s - mx) * (t - my) for s, t in pts) / sum((s - mx) ** 2 for s, _ in pts)
bw = 1 / slope / 1e3  # bytes per microsecond -> GB/s
def ring(n, s, a=alpha, b=bw):  # microseconds for one all-reduce of s bytes
    return 2 * (n - 1) / n * s / (b * 1e3) + 2 * (n - 1) * a
def fmt_b(s):
    return "%d B" % s if s < 1024 else "%d KiB" % (s // 1024) if s < 1 << 20 else "%d MiB" % (s >> 20)
def fmt_t(us):
    return "%.1f µs" % us if us < 1000 else "%.2f ms" % (us / 1e3)
out = ["<!-- dist-cost:begin -->",
       "Command: `bash tools/bench/dist_msgcost.sh %s %s` (%s). Machine: AMD EPYC (Zen 4), 2 cores "
       "shared with other work, Open MPI over shared memory (`vader`, no single-copy mechanism, "
       "as in the tests); load average (1, 5, 15 min) %s at the start, %s at the end. Each time is "
       "the median over %s rounds of the median of %s repetitions of the slowest rank's time; "
       "4 ranks share the 2 cores." % (rounds, reps, datetime.date.today(), load0, load1, rounds, reps),
       "",
       "Fitted from the ping-pong: **alpha = %.2f µs** per message, **BW = %.2f GB/s** "
       "(4 KiB - 1 MiB)." % (alpha, bw),
       "",
       "| bytes | ping-pong (half round trip) | all-reduce, 2 ranks | ring model, 2 | all-reduce, 4 ranks | ring model, 4 | reduce-scatter, 2 | reduce-scatter, 4 |",
       "|---:|---:|---:|---:|---:|---:|---:|---:|"]
for s in sizes("allreduce", 2):
    g = lambda k, n: fmt_t(med[(k, n, s)]) if (k, n, s) in med else "-"
    out.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
        fmt_b(s), g("pingpong", 2), g("allreduce", 2), fmt_t(ring(2, s)), g("allreduce", 4),
        fmt_t(ring(4, s)), g("rscatter", 2), g("rscatter", 4)))
# the shipped models' gradients (MiB and buckets, as ampx reports them) and step compute
steps = {}
for line in open(tmp + "/steps"):
    m, ms = line.split()
    steps.setdefault(m, []).append(float(ms))
grads = {l.split()[0]: (float(l.split()[1]) * 2**20, int(l.split()[2])) for l in open(tmp + "/buckets")}
out += ["",
        "The ring model with these alpha and BW, per step (f32 gradients in ampx's buckets, as a "
        "2-rank run reports them), against one step's compute on one thread (the trainer's time "
        "per step after the first log interval, median over intervals and rounds), "
        "and the weak-scaling efficiency T_c / (T_c + T_allreduce) with nothing overlapped:",
        "",
        "| model | gradient bytes | buckets | step compute | N = 8 | N = 16 | N = 32 | N = 64 | efficiency at 64 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
for m in ("mlp", "gpt_tiny", "gpt", "mlp_wide"):
    s, nb = grads[m]
    tc = statistics.median(steps[m]) * 1e3
    t = {n: 2 * (n - 1) / n * s / (bw * 1e3) + 2 * (n - 1) * alpha * nb for n in (8, 16, 32, 64)}
    out.append("| %s.json | %.2f MiB | %d | %s | %s | %s | %s | %s | %.0f%% |" % (
        m, s / 2**20, nb, fmt_t(tc), fmt_t(t[8]), fmt_t(t[16]), fmt_t(t[32]), fmt_t(t[64]),
        100 * tc / (tc + t[64])))
out.append("<!-- dist-cost:end -->")
text = "\n".join(out)
print(text)
path = "docs/DISTRIBUTED.md"
doc = open(path).read()
a, b = doc.index("<!-- dist-cost:begin -->"), doc.index("<!-- dist-cost:end -->")
open(path, "w").write(doc[:a] + text + doc[b + len("<!-- dist-cost:end -->"):])
PY
