#!/usr/bin/env python3
"""cpu_bench.py — the CPU benchmark of docs/BENCHMARKS.md in one run; start it through
tools/bench/cpu.sh, which installs and builds what it needs.

Five sections, each program alternating with the others (every round starts with a
different one), the median of the rounds per cell:
  gemm   `ampx bench gemm` (bf16, f16, f32) beside OpenBLAS sgemm and oneDNN matmul (f32,
         bf16): squares 256-4096 and the training shapes of mlp_wide, gpt.json and its
         attention (batched), with the machine's FMA peak measured in the same run;
  ops    `ampx bench op` of the memory-bound ops (f32 and bf16) against the copy timed in the
         same process and against a 2-thread memcpy of the machine;
  steps  the training step of models/mlp_wide.json, models/gpt.json at T=128 and T=1024 and
         gpt.json grown to the GPT-2 124M shape (--steps-models picks): ampx (f32,
         mixed_bf16; the best ISA and isa=avx2) beside PyTorch (f32, autocast bf16, each also
         with scaled_dot_product_attention), JAX jit (f32, bf16) and llm.c's train_gpt2.c
         (--llmc DIR, 124M shape only), all on the CPU, from tools/bench/step_torch.py,
         step_jax.py and llmc.py; ms per step, peak RSS of each process and speed ratios;
  attention  tools/bench/attention.sh: fused attention against its composite (best ISA and
         isa=avx2);
  memory the planned activation and total memory `ampx train` prints for gpt.json at T=1024,
         mixed_bf16 against f32, with and without train.recompute.
The tables are printed, and they and a goals table go into --out (docs/BENCHMARKS.md) between
the cpu markers; the rest of the file is kept."""
import argparse, datetime, json, os, re, statistics, subprocess, sys, tempfile, time

BEGIN, END = "<!-- cpu:begin -->", "<!-- cpu:end -->"
SECTIONS = ("gemm", "ops", "steps", "attention", "memory")
AVX2_ENV = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2")  # oneDNN's AVX2 path on an AVX-512 CPU

# m, n, k, trans_a, trans_b, batch, note
SHAPES = [
    (256, 256, 256, 0, 0, 1, "square"),
    (512, 512, 512, 0, 0, 1, "square"),
    (1024, 1024, 1024, 0, 0, 1, "square"),
    (2048, 2048, 2048, 0, 0, 1, "square"),
    (4096, 4096, 4096, 0, 0, 1, "square"),
    (256, 1024, 1024, 0, 0, 1, "mlp_wide fc2 forward"),
    (1024, 1024, 256, 1, 0, 1, "mlp_wide fc2 dW = X^T dY"),
    (256, 1024, 1024, 0, 1, 1, "mlp_wide fc2 dX = dY W^T"),
    (2048, 384, 128, 0, 0, 1, "gpt QKV forward"),
    (2048, 512, 128, 0, 0, 1, "gpt MLP up forward"),
    (2048, 128, 512, 0, 0, 1, "gpt MLP down forward"),
    (128, 512, 2048, 1, 0, 1, "gpt MLP up dW"),
    (2048, 256, 128, 0, 1, 1, "gpt tied head"),
    (128, 128, 32, 0, 1, 64, "attention S = Q K^T"),
    (128, 32, 128, 0, 0, 64, "attention O = P V"),
    (128, 32, 128, 1, 0, 64, "attention dV = P^T dO"),
    (128, 3072, 768, 0, 0, 1, "MLP up-projection, 128 tokens"),
    (128, 768, 3072, 0, 0, 1, "MLP down-projection, 128 tokens"),
    (64, 128, 128, 0, 0, 1, "tiny"),
]
QUICK = {(1024, 1024, 1024), (256, 1024, 1024), (2048, 512, 128), (128, 128, 32), (64, 128, 128)}
OPS = ["cast", "add", "scale", "relu", "gelu", "softmax", "layernorm", "unscale_check",
       "grad_stats", "sum_squares", "amp_separate", "amp_pass", "sgd", "adamw"]
GOAL_OPS = ["gelu", "softmax", "layernorm", "grad_stats", "amp_pass"]


PEAK_RUNS = 3


def measure_peak(a, peak):
    """Runs peer_peak PEAK_RUNS times and keeps each figure's highest value in peak: one run
    on a machine where another tenant holds a core reads half the peak, and a low peak would
    inflate every "% of peak" cell."""
    for _ in range(PEAK_RUNS):
        d, _err = run_json([os.path.join(a.peers, "peer_peak")])
        for k, v in (d or {}).items():
            if isinstance(v, (int, float)) and v > peak.get(k, 0):
                peak[k] = v

PROBE_MIN = 0.9  # a round counts when the FMA probe on both sides of it reads 90% of the peak
RETRIES = 2      # extra rounds allowed per wanted round before contended ones are kept


class Probe:
    """The FMA probe between rounds (`peer_peak probe`, 2 threads, about 0.1 s). This host's
    other tenants take our cores in windows of minutes that neither the load average nor
    /proc/stat shows (every program, the peers too, runs 25-35% slow in them); a round with a
    probe below PROBE_MIN of the peak on either side ran in such a window."""

    def __init__(self, a, peak, retries=RETRIES):
        self.cmd, self.peak, self.dropped, self.total = [os.path.join(a.peers, "peer_peak"), "probe"], peak, 0, 0
        self.retries = retries

    def top(self):
        return self.peak.get("fma512_gflops") or self.peak.get("fma256_gflops") or 0

    def read(self):
        d, _err = run_json(self.cmd)
        g = (d or {}).get("probe_gflops") or 0
        key = "fma512_gflops" if self.peak.get("fma512_gflops") else "fma256_gflops"
        if g > self.peak.get(key, 0):
            self.peak[key] = g
        return g

    def rounds(self, want, one_round):
        """Runs one_round(i) for i = 0, 1, ... until `want` rounds ran clean (the probe before
        and after at PROBE_MIN of the peak or more) or want * (1 + RETRIES) ran; returns the
        results of the clean rounds, else of the `want` best-probed ones, in the order run, and
        the lowest probe among them as a fraction of the peak."""
        runs, before = [], self.read()
        while len(runs) < want * (1 + self.retries):
            r = one_round(len(runs))
            after = self.read()
            runs.append((min(before, after) / max(self.top(), 1e-9), len(runs), r))
            before = after
            if sum(q >= PROBE_MIN for q, _, _ in runs) >= want:
                break
        kept = sorted(sorted(runs, key=lambda x: -x[0])[:want], key=lambda x: x[1])
        self.total += len(runs)
        self.dropped += len(runs) - len(kept)
        return [r for _, _, r in kept], min(q for q, _, _ in kept)

    def collect(self, res, key, want, one_round):
        """rounds(), each kept round's {program: value} appended to res[key][program]; returns
        the lowest probe among the kept rounds."""
        kept, q = self.rounds(want, one_round)
        for r in kept:
            for name, v in r.items():
                res.setdefault(key, {}).setdefault(name, []).append(v)
        return q

    def note(self):
        return (f"Rounds run while the FMA probe (`peer_peak probe`, before and after each round) read below "
                f"{100 * PROBE_MIN:.0f}% of the peak were dropped and run again: {self.dropped} of {self.total} "
                f"in this section; † marks a row that kept such a round (after {self.retries} retries per round).")


def mark(q):
    return " †" if q < PROBE_MIN else ""


class OtherLoad:
    """CPU time the rest of the machine used while a section ran: all busy time in /proc/stat
    less this script's own and its finished children's (every benchmark program is run to
    completion), as cores busy on average. The load average cannot tell the benchmark's own
    two threads from other work; this can."""

    def __init__(self):
        self.t0, self.busy0, self.own0 = time.monotonic(), self.busy(), self.own()

    @staticmethod
    def busy():
        f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
        return (sum(f[:8]) - f[3] - f[4]) / os.sysconf("SC_CLK_TCK")  # all but idle, iowait

    @staticmethod
    def own():
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def cores(self):
        wall = time.monotonic() - self.t0
        other = (self.busy() - self.busy0) - (self.own() - self.own0)
        return max(other, 0.0) / wall if wall > 0 else 0.0


def load_note(ol, load0, load1):
    """The section's load sentence, with a warning when other work ran beside it."""
    c = ol.cores()
    s = (f"Load average {load0:.1f} at the start, {load1:.1f} at the end; other processes used "
         f"{c:.2f} cores on average during this section.")
    if c > 0.2:
        s += (f" **Warning: other work ran beside the benchmark ({c:.2f} of {os.cpu_count()} cores); "
              f"its programs shared the cores, so even the ratios may be disturbed.**")
        print(f"warning: other processes used {c:.2f} cores during this section", file=sys.stderr, flush=True)
    return s


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0 or not p.stdout.strip():
        return None, ((p.stderr.strip() or p.stdout.strip()).splitlines() or ["failed"])[-1]
    return p.stdout.strip().splitlines()[-1], None


def run_json(cmd, env=None):
    out, err = run(cmd, env)
    if out is None:
        return None, err
    try:
        return json.loads(out), None
    except ValueError:
        return None, out


def med(v):
    return statistics.median(v) if v else None


def fmt(v, d=1):
    return f"{v:.{d}f}" if v is not None else "n/a"


def ratio(x, y):
    return f"{x / y:.2f}" if x is not None and y else "n/a"


def shape_name(s):
    m, n, k, ta, tb, b, _ = s
    return f"{f'{b} x ' if b > 1 else ''}{m}x{n}x{k}{' tA' if ta else ''}{' tB' if tb else ''}"


def rotate(progs, rnd):
    return progs[rnd % len(progs):] + progs[:rnd % len(progs)]


def gemm_section(a, peak):
    shapes = [s for s in SHAPES if not a.quick or s[:3] in QUICK]

    def ampx(dt):
        return lambda m, n, k, ta, tb, b, r: [a.ampx, "bench", "gemm", "--backend", "cpu", "--dtype",
            dt, "--m", str(m), "--n", str(n), "--k", str(k), "--batch", str(b), "--json"] + \
            (["--trans-a"] if ta else []) + (["--trans-b"] if tb else []) + (["--reps", str(r)] if r else [])

    def peer(prog, dt):
        return lambda m, n, k, ta, tb, b, r: [os.path.join(a.peers, prog), dt, str(m), str(n), str(k),
            f"batch={b}"] + (["ta"] if ta else []) + (["tb"] if tb else []) + ([f"reps={r}"] if r else [])

    progs = [("ampx bf16", ampx("bf16")), ("ampx f16", ampx("f16")), ("ampx f32", ampx("f32")),
             ("oneDNN bf16", peer("peer_onednn", "bf16")), ("oneDNN f32", peer("peer_onednn", "f32")),
             ("OpenBLAS f32", peer("peer_openblas", "f32"))]
    if a.avx512:  # the AVX2 path of both, capped, beside OpenBLAS (whose Haswell kernel is AVX2)
        progs += [("ampx f32 avx2", lambda *x: ampx("f32")(*x) + ["--backend-opt", "isa=avx2"]),
                  ("oneDNN f32 avx2", (peer("peer_onednn", "f32"), AVX2_ENV))]
    res, notes, impls, quality, kernel = {}, {}, {}, {}, "?"
    load0, ol, pr = os.getloadavg()[0], OtherLoad(), Probe(a, peak)
    for s in shapes:
        m, n, k, ta, tb, b, _ = s
        reps = 3 if m * n * k * b > 2**33 else 0

        def one_round(rnd):
            nonlocal kernel
            out = {}
            for name, build in rotate(progs, rnd):
                build, env = build if isinstance(build, tuple) else (build, None)
                d, err = run_json(build(m, n, k, ta, tb, b, reps), env)
                if d is None:
                    notes[name] = err
                    continue
                out[name] = d["gflops"]
                kernel = d.get("kernel", kernel)
                if "impl" in d:
                    impls[name] = d["impl"]
            return out

        quality[s] = pr.collect(res, s, a.rounds, one_round)
        print(f"gemm {shape_name(s)}: " + ", ".join(f"{c} {med(v):.1f}" for c, v in res.get(s, {}).items()) +
              f" (probe {100 * quality[s]:.0f}%)", flush=True)
    load1 = os.getloadavg()[0]
    cols = [p[0] for p in progs]
    measure_peak(a, peak)  # again after the table: the highest of both is the peak
    top = peak.get("fma512_gflops") or peak.get("fma256_gflops")
    L = ["### GEMM: ampx against OpenBLAS and oneDNN", "",
         f"GFLOP/s = 2 m n k batch / median time. {a.rounds} rounds per shape, the {len(progs)} programs alternating; "
         f"each cell is the median over rounds. `batch x m x n x k` is a strided batched product "
         f"(OpenBLAS: a loop of sgemm calls; oneDNN: one 3-D matmul). A, B and C all in the column's dtype, "
         f"f32 accumulation. ampx kernel: `{kernel}`. Peak: the machine's measured 2-thread f32 FMA rate "
         f"({fmt(top)} GFLOP/s, widest vectors). " + pr.note() + " " + load_note(ol, load0, load1), "",
         "| shape | " + " | ".join(cols) + " | ampx f32 / OpenBLAS | ampx f32 / oneDNN f32 | ampx bf16 / oneDNN bf16 "
         "| ampx bf16 / f32 | ampx f16 / f32 | ampx f32 % of peak |" +
         (" ampx f32 / oneDNN f32 (avx2) | ampx f32 avx2 / OpenBLAS |" if a.avx512 else ""),
         "|---" * (len(cols) + 7 + (2 if a.avx512 else 0)) + "|"]
    goals = {"f32_vs_openblas": [], "peak": [], "bf16_vs_f32": [], "f16_vs_f32": [], "f32_vs_onednn": [],
             "bf16_vs_onednn": [], "avx2_vs_onednn": [], "avx2_vs_openblas": []}
    for s in shapes:
        v = {c: med(res.get(s, {}).get(c, [])) for c in cols}
        f32, bf, hf, ob = v["ampx f32"], v["ampx bf16"], v["ampx f16"], v["OpenBLAS f32"]
        pct = f"{100 * f32 / top:.0f}%" if f32 and top else "n/a"
        L.append(f"| {shape_name(s)} ({s[6]}){mark(quality[s])} | " + " | ".join(fmt(v[c]) for c in cols) + " | " +
                 " | ".join([ratio(f32, ob), ratio(f32, v["oneDNN f32"]), ratio(bf, v["oneDNN bf16"]),
                             ratio(bf, f32), ratio(hf, f32), pct] +
                            ([ratio(v["ampx f32 avx2"], v["oneDNN f32 avx2"]), ratio(v["ampx f32 avx2"], ob)]
                             if a.avx512 else [])) + " |")
        for key, x, y in (("f32_vs_onednn", f32, v["oneDNN f32"]), ("bf16_vs_onednn", bf, v["oneDNN bf16"]),
                          ("avx2_vs_onednn", v.get("ampx f32 avx2"), v.get("oneDNN f32 avx2")),
                          ("avx2_vs_openblas", v.get("ampx f32 avx2"), ob)):
            if x and y: goals[key].append((x / y, shape_name(s)))
        if f32 and ob: goals["f32_vs_openblas"].append((f32 / ob, shape_name(s)))
        if f32 and top and s[0] * s[1] * s[2] >= 512**3 and s[5] == 1 and s[6] == "square":
            goals["peak"].append((f32 / top, shape_name(s)))
        if bf and f32: goals["bf16_vs_f32"].append((bf / f32, shape_name(s)))
        if hf and f32: goals["f16_vs_f32"].append((hf / f32, shape_name(s)))
    L.append("")
    L += [f"- {n}: {i}" for n, i in sorted(impls.items())]
    L += [f"- {n} did not run: `{e}`" for n, e in sorted(notes.items())]
    return L, goals, kernel


def ops_section(a, peak):
    n = 1 << 22 if a.quick else 1 << 24
    res, notes, quality = {}, {}, {}
    load0, ol, pr = os.getloadavg()[0], OtherLoad(), Probe(a, peak)
    for dt in ("f32", "bf16"):
        for op in OPS:
            def one_round(_rnd):
                d, err = run_json([a.ampx, "bench", "op", op, "--backend", "cpu", "--dtype", dt, "--n", str(n),
                                   "--reps", "5", "--json"])
                if d is None:
                    notes[op] = err
                    return None
                return d["gbs"], d["copy_gbs"]

            kept, q = pr.rounds(max(1, a.rounds // 2), one_round)
            kept = [r for r in kept if r]
            if kept:
                res[(op, dt)] = (med([r[0] for r in kept]), med([r[1] for r in kept]))
                quality[(op, dt)] = q
                print(f"op {op} {dt}: {res[(op, dt)][0]:.2f} GB/s, copy {res[(op, dt)][1]:.2f} GB/s "
                      f"(probe {100 * q:.0f}%)", flush=True)
    load1 = os.getloadavg()[0]
    mc = peak.get("copy_gbs")
    L = ["### Memory-bound ops against a 2-thread copy", "",
         f"`ampx bench op NAME --backend cpu --dtype D --n {n} --reps 5`: GB/s of the bytes the op must move, "
         f"beside the backend's buffer copy of the same tensor timed in the same process (2 threads), "
         f"median of {max(1, a.rounds // 2)} runs; the last column compares with a 2-thread memcpy of 64 MiB "
         f"measured by tools/bench/peer_peak.c in the same run ({fmt(mc, 2)} GB/s). "
         f"" + pr.note() + " " + load_note(ol, load0, load1), "",
         "| op | f32 GB/s | f32 / copy | bf16 GB/s | bf16 / copy | f32 / memcpy |", "|---|---|---|---|---|---|"]
    goals = []
    for op in OPS:
        f, b = res.get((op, "f32")), res.get((op, "bf16"))
        if not f and not b:
            L.append(f"| {op} | did not run: `{notes.get(op, '?')}` | | | | |")
            continue
        q = min(quality.get((op, "f32"), 1.0), quality.get((op, "bf16"), 1.0))
        L.append(f"| {op}{mark(q)} | {fmt(f and f[0], 2)} | {ratio(f and f[0], f and f[1])} | {fmt(b and b[0], 2)} | "
                 f"{ratio(b and b[0], b and b[1])} | {ratio(f and f[0], mc)} |")
        if op in GOAL_OPS:
            for dt, r in (("f32", f), ("bf16", b)):
                if r: goals.append((r[0] / r[1], f"{op} {dt}"))
    return L, goals


# name: the GPT shape (layers, heads, width, context, batch; None: mlp_wide), timed steps and
# warm-up steps (normal, --quick), ampx's log interval, and how ampx gets the shape
STEP_MODELS = {
    "mlp_wide": dict(shape=None, run=(60, 5), quick=(60, 5), log=5),
    "gpt": dict(shape=(4, 4, 128, 128, 16), run=(20, 5), quick=(20, 5), log=5),
    "gpt2_124m": dict(shape=(12, 12, 768, 64, 4), run=(10, 3), quick=(3, 2), log=1),
    "gpt_t1024": dict(shape=(4, 4, 128, 1024, 4), run=(10, 3), quick=(3, 2), log=1),
}
STEP_COLS = ["ampx f32", "ampx mixed_bf16", "ampx f32 avx2", "ampx mixed_bf16 avx2", "PyTorch f32", "PyTorch bf16",
             "PyTorch SDPA f32", "PyTorch SDPA bf16", "JAX f32", "JAX bf16", "llm.c f32"]
# (column title, faster program, slower program): a speed ratio, ms of the second over ms of the first
STEP_RATIOS = [("ampx mixed_bf16 / f32", "ampx mixed_bf16", "ampx f32"),
               ("ampx mixed_bf16 / f32 (avx2)", "ampx mixed_bf16 avx2", "ampx f32 avx2"),
               ("ampx f32 / PyTorch f32", "ampx f32", "PyTorch f32"),
               ("ampx bf16 / PyTorch bf16", "ampx mixed_bf16", "PyTorch bf16"),
               ("ampx f32 / PyTorch SDPA f32", "ampx f32", "PyTorch SDPA f32"),
               ("ampx bf16 / PyTorch SDPA bf16", "ampx mixed_bf16", "PyTorch SDPA bf16"),
               ("ampx f32 / JAX f32", "ampx f32", "JAX f32"),
               ("ampx bf16 / JAX bf16", "ampx mixed_bf16", "JAX bf16"),
               ("ampx f32 / llm.c", "ampx f32", "llm.c f32"),
               ("ampx bf16 / llm.c", "ampx mixed_bf16", "llm.c f32")]


def model_label(name):
    s = STEP_MODELS[name]["shape"]
    if s is None:
        return "mlp_wide (16-1024-1024-1024-4, B=256)"
    L, H, D, T, B = s
    what = {"gpt": "gpt.json", "gpt2_124m": "GPT-2 124M shape", "gpt_t1024": "gpt.json"}[name]
    return f"{what}: L={L} H={H} D={D} T={T} B={B} V=256"


def run_measured(cmd, threads, env=None, cwd=None, until=None):
    """Runs cmd to its end (or, with until, until until(lines) is true: then it is stopped) as
    its own process on `threads` CPUs; returns (stdout lines, error or None, peak RSS in KiB
    of that process from wait4's ru_maxrss)."""
    allowed = sorted(os.sched_getaffinity(0))

    def pin():
        if len(allowed) > threads:
            os.sched_setaffinity(0, allowed[:threads])

    with tempfile.TemporaryFile(mode="w+") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=cwd, preexec_fn=pin)
        lines, stopped = [], False
        for line in p.stdout:
            lines.append(line.rstrip("\n"))
            if until and not stopped and until(lines):
                p.terminate()
                stopped = True
        p.stdout.close()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        msg = err.read().strip()
    if p.returncode != 0 and not stopped:
        return lines, ((msg or "\n".join(lines)).splitlines() or [f"exit {p.returncode}"])[-1], ru.ru_maxrss
    return lines, None, ru.ru_maxrss


def gpt2_124m_json(out_dir):
    """models/gpt.json grown to the GPT-2 124M shape (12 blocks of 12 heads, width 768, T=64):
    the block h0's nodes repeated with their names and inputs renumbered, widths scaled; the
    data paths made absolute, since the file lives in the build folder."""
    base = json.load(open("models/gpt.json"))
    L, H, D, T, _B = STEP_MODELS["gpt2_124m"]["shape"]
    d0 = base["nodes"][0]["dim"]
    blocks = sorted({n["name"].split(".")[0] for n in base["nodes"] if re.match(r"h\d+\.", n["name"])},
                    key=lambda b: int(b[1:]))
    first = [n for n in base["nodes"] if n["name"].startswith("h0.")]
    into = first[0]["inputs"][0]  # what the first block reads
    last = f"{blocks[-1]}.res2"
    pre = [n for n in base["nodes"] if not n["name"].split(".")[0] in blocks]
    head, tail = pre[:[n["name"] for n in pre].index(into) + 1], pre[[n["name"] for n in pre].index(into) + 1:]

    def rename(x, i):
        return f"h{i}.{x[3:]}" if x.startswith("h0.") else (into if i == 0 else f"h{i - 1}.res2") if x == into else x

    nodes = [dict(n) for n in head]
    nodes[0]["dim"] = D
    for i in range(L):
        for n in first:
            m = dict(n, name=rename(n["name"], i), inputs=[rename(x, i) for x in n["inputs"]])
            if "heads" in m:
                m["heads"] = H
            if "units" in m:
                m["units"] = m["units"] * D // d0
            nodes.append(m)
    nodes += [dict(n, inputs=[f"h{L - 1}.res2" if x == last else x for x in n["inputs"]]) for n in tail]
    base["name"], base["nodes"] = "gpt2_124m", nodes
    for k in ("tokens", "next"):
        base["inputs"][k]["shape"] = [T]
    data = os.environ.get("AMPX_DATA_DIR") or os.path.abspath("data")
    for k in ("train", "val"):
        base["data"][k] = base["data"][k].replace("$DATA", data)
    base["data"]["eval_windows"] = 1  # the evaluation at the end of a run is not timed
    path = os.path.join(out_dir, "gpt2_124m.json")
    json.dump(base, open(path, "w"), indent=1)
    return path


def ampx_check(a, model_args, policy_file, want):
    """`ampx policy` of the run's model and policy: every dense product (its `why` column says
    "dense:") in the dtype want and every master weight f32; None, or what is not so."""
    out = subprocess.run([a.ampx_rel, "policy"] + model_args + ["--policy", policy_file], capture_output=True, text=True)
    if out.returncode != 0:
        return "ampx policy: " + ((out.stderr.strip() or out.stdout.strip()).splitlines() or ["failed"])[-1]
    rows = [l.split() for l in out.stdout.splitlines() if len(l.split()) >= 4]
    dense = [r for r in rows if "dense:" in r]
    master = [r for r in rows if "master" in r and r[0] != "optimizer"]
    bad = [f"{r[0]} {r[1]}" for r in dense if r[1] != want] + [f"{r[0]} {r[1]}" for r in master if r[1] != "f32"]
    if len(dense) < 2 or not master or bad:
        return f"ampx policy: dense products not all {want} with f32 master weights: " + (", ".join(bad[:4]) or "none listed")
    return None


def ampx_step(a, tmp, model, pol, isa, timed, warm):
    s, spec = STEP_MODELS[model]["shape"], STEP_MODELS[model]
    if model == "mlp_wide":
        args = ["models/mlp_wide.json"]
    elif model == "gpt2_124m":
        args = [gpt2_124m_json(tmp), "--batch", str(s[4])]
    else:
        args = ["models/gpt.json", "--batch", str(s[4]), "--set", "data.eval_windows=1"] + \
            [x for k in ("tokens", "next") for x in ("--set", f"inputs.{k}.shape=[{s[3]}]")]
    model_args = [x for i, x in enumerate(args) if "--batch" not in args[max(i - 1, 0):i + 1]]
    bad = ampx_check(a, model_args, os.path.join(tmp, pol + ".json"), "bf16" if pol == "bf16" else "f32")
    args += ["--backend-opt", f"threads={a.threads}"] + (["--backend-opt", f"isa={isa}"] if isa else [])

    def go():
        if bad:
            return None, None, bad
        metrics = os.path.join(tmp, "m.jsonl")
        if os.path.exists(metrics):
            os.remove(metrics)
        _, err, rss = run_measured([a.ampx_rel, "train"] + args + ["--policy", os.path.join(tmp, pol + ".json"),
                                   "--steps", str(timed + warm), "--log-every", str(spec["log"]), "--eval-every",
                                   "0", "--quiet", "--metrics", metrics], a.threads)
        if err:
            return None, None, err
        rows = [json.loads(l) for l in open(metrics) if "time_ms" in l][warm:]
        return (med([r["time_ms"] for r in rows]), rss, None) if rows else (None, None, "no time_ms in the metrics")
    return go


def py_step(a, script, model, mode, timed, warm):
    s = STEP_MODELS[model]["shape"]
    cmd = [a.python, os.path.join("tools/bench", script), model if s is None else "gpt", mode, str(timed),
           "--warmup", str(warm)] + (["--shape", ",".join(map(str, s))] if s else []) + \
        (["--threads", str(a.threads)] if script == "step_torch.py" else [])

    def go():
        lines, err, rss = run_measured(cmd, a.threads)
        try:
            return float(lines[-1]), rss, None
        except (ValueError, IndexError):
            return None, None, err or "no time printed"
    return go


def llmc_step(a, tmp, timed, warm, notes):
    """llm.c's train_gpt2 at the GPT-2 124M shape (tools/bench/llmc.py), or None with a note."""
    import llmc
    exe, info = llmc.build(a.llmc, os.path.abspath(os.path.join(os.path.dirname(a.peers), "bench-llmc")))
    if not exe:
        notes["llm.c f32"] = info
        return None
    L, H, D, T, B = STEP_MODELS["gpt2_124m"]["shape"]
    run_dir = os.path.join(tmp, "llmc")
    os.makedirs(run_dir, exist_ok=True)
    _, err, _ = run_measured([a.python, "tools/bench/llmc.py", "write", run_dir, str(L), str(H), str(D), str(T)], 1)
    if err:
        notes["llm.c f32"] = "its input files could not be written: " + err
        return None
    notes["llm.c build"] = info
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    n = warm + timed  # steps 0 .. n-1; stopped before the sampling at step 20
    if n > 20:
        warm, timed = max(1, 20 - timed), min(timed, 19)

    def go():
        lines, err, rss = run_measured(["stdbuf", "-oL", exe], a.threads, env=env, cwd=run_dir,
                                       until=lambda ls: len(llmc.parse_steps(ls, warm, timed)) >= timed)
        t = llmc.parse_steps(lines, warm, timed)
        return (med(t), rss, None) if len(t) == timed else (None, None, err or "fewer step lines than asked")
    return go


def step_programs(a, tmp, model, notes):
    timed, warm = STEP_MODELS[model]["quick" if a.quick else "run"]
    progs = [("ampx f32", ampx_step(a, tmp, model, "f32", None, timed, warm)),
             ("ampx mixed_bf16", ampx_step(a, tmp, model, "bf16", None, timed, warm)),
             ("ampx f32 avx2", ampx_step(a, tmp, model, "f32", "avx2", timed, warm)),
             ("ampx mixed_bf16 avx2", ampx_step(a, tmp, model, "bf16", "avx2", timed, warm)),
             ("PyTorch f32", py_step(a, "step_torch.py", model, "f32", timed, warm)),
             ("PyTorch bf16", py_step(a, "step_torch.py", model, "bf16", timed, warm))]
    if STEP_MODELS[model]["shape"]:
        progs += [("PyTorch SDPA f32", py_step(a, "step_torch.py", model, "sdpa_f32", timed, warm)),
                  ("PyTorch SDPA bf16", py_step(a, "step_torch.py", model, "sdpa_bf16", timed, warm))]
    progs += [("JAX f32", py_step(a, "step_jax.py", model, "f32", timed, warm)),
              ("JAX bf16", py_step(a, "step_jax.py", model, "bf16", timed, warm))]
    if model == "gpt2_124m" and a.llmc:
        go = llmc_step(a, tmp, timed, warm, notes)
        if go:
            progs.append(("llm.c f32", go))
    return progs, timed, warm


def steps_tables(a, models, res, quality, counts):
    """The three Markdown tables of the steps section: ms per step, peak RSS, speed ratios."""
    cols = [c for c in STEP_COLS if any(res.get(m, {}).get(c) for m in models)]
    v = {m: {c: med([x[0] for x in res.get(m, {}).get(c, [])]) for c in cols} for m in models}
    rss = {m: {c: med([x[1] for x in res.get(m, {}).get(c, [])]) for c in cols} for m in models}
    L = ["| model | steps | " + " | ".join(cols) + " |", "|---" * (len(cols) + 2) + "|"]
    for m in models:
        L.append(f"| {model_label(m)}{mark(quality.get(m, 1.0))} | {counts[m][1]}+{counts[m][0]} | " +
                 " | ".join(fmt(v[m][c], 2) for c in cols) + " |")
    L += ["", "Peak RSS (MiB, ru_maxrss of each program's own process; the PyTorch and JAX figures include the "
          "Python interpreter and the framework's libraries):", "",
          "| model | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for m in models:
        L.append(f"| {model_label(m)} | " + " | ".join(fmt(rss[m][c] and rss[m][c] / 1024, 0) for c in cols) + " |")
    rats = [r for r in STEP_RATIOS if r[1] in cols and r[2] in cols]
    L += ["", "Speed ratios (X / Y = Y's ms per step over X's: above 1, X is faster):", "",
          "| model | " + " | ".join(r[0] for r in rats) + " |", "|---" * (len(rats) + 1) + "|"]
    for m in models:
        L.append(f"| {model_label(m)} | " + " | ".join(ratio(v[m][y], v[m][x]) for _, x, y in rats) + " |")
    return L, v, rss


def steps_section(a, peak):
    tmp = tempfile.mkdtemp()
    for p, body in (("f32", '{"policy": "f32", "scaler": "none"}'),
                    ("bf16", '{"policy": "mixed_bf16", "scaler": "dynamic"}')):
        open(os.path.join(tmp, p + ".json"), "w").write(body)
    models = [m for m in STEP_MODELS if m in a.steps_models]
    res, notes, quality, counts = {}, {}, {}, {}
    load0, ol, pr = os.getloadavg(), OtherLoad(), Probe(a, peak, 0 if a.quick else RETRIES)
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rounds = a.steps_rounds
    for model in models:
        progs, timed, warm = step_programs(a, tmp, model, notes)
        counts[model] = (timed, warm)

        def one_round(rnd):
            out = {}
            for name, go in rotate(progs, rnd):
                ms, kib, err = go()
                if ms is None:
                    notes[name] = err
                    continue
                out[name] = (ms, kib)
                print(f"  {model} {name}: {ms:.2f} ms, {kib / 1024:.0f} MiB", flush=True)
            return out

        quality[model] = pr.collect(res, model, rounds, one_round)
        print(f"step {model}: " + ", ".join(f"{c} {med([x[0] for x in v]):.2f} ms" for c, v in res.get(model, {}).items())
              + f" (probe {100 * quality[model]:.0f}%)", flush=True)
    load1 = os.getloadavg()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    tables, v, rss = steps_tables(a, models, res, quality, counts)
    L = ["### Training step against PyTorch, JAX and llm.c", "",
         f"Command: `{a.cmd}`. Date: {started}. CPU: {cpu} ({os.cpu_count()} online), each program on "
         f"{a.threads} threads. Load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in load0)} at the start, "
         f"{' '.join(f'{x:.2f}' for x in load1)} at the end." +
         "".join(f" {k}={os.environ[k]} was set." for k in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "XLA_FLAGS")
                 if os.environ.get(k)), "",
         f"ms per step, median over {rounds} round(s), the programs alternating (each round starts with another); "
         f"`steps` is warm-up + timed steps per run. Every program trains the same network: pre-layernorm GPT blocks "
         f"(causal attention with biased QKV and output projections, 4x tanh-GELU MLP), learned positions, "
         f"the head tied to the byte embedding (vocabulary 256), AdamW, clipping at 1.0 (llm.c: its own AdamW, "
         f"no clipping), random or synthetic tokens. "
         f"ampx: `ampx train MODEL --policy P --backend-opt threads={a.threads}`, Release build, `isa` the "
         f"best the CPU has (`auto`) or capped with `--backend-opt isa=avx2`; the median of the per-step host "
         f"time (`time_ms`) after the warm-up steps" +
         ("; gpt.json at T=1024 through `--set inputs.tokens.shape=[1024] --set inputs.next.shape=[1024] "
          "--batch 4` (B reduced from 16 to 4 to keep a step at a few seconds)" if "gpt_t1024" in models else "") +
         ("; the 124M shape: models/gpt.json grown to 12 blocks by the script (the JSON in the run's temporary "
          "folder)" if "gpt2_124m" in models else "") + f". PyTorch: tools/bench/step_torch.py, bf16 as torch.autocast, SDPA: attention as one "
         f"`scaled_dot_product_attention(is_causal=True)`. JAX: tools/bench/step_jax.py, jit, bf16 as Flax's "
         f"dtype=bfloat16 with f32 parameters. Both check on their first step that parameters and gradients "
         f"are f32 and the products' outputs bf16 (f32 in the f32 modes), and exit otherwise. "
         f"llm.c: train_gpt2.c of `--llmc DIR` built by its Makefile, its printed step time (B=4, T=64, fixed in "
         f"its main) on a synthetic checkpoint of this shape (tools/bench/llmc.py). " + pr.note() + " " +
         load_note(ol, load0[0], load1[0]), ""] + tables + [""]
    L += [f"- {n} did not run: `{e}`" for n, e in sorted(notes.items()) if n != "llm.c build"]
    if "llm.c build" in notes:
        L.append(f"- llm.c built with `{notes['llm.c build']}`")
    elif not a.llmc and "gpt2_124m" in models:
        L.append("- llm.c: not run (no `--llmc DIR`)")
    versions, _ = run([a.python, "-c", "import torch, jax; print('PyTorch', torch.__version__, '/ JAX', jax.__version__)"])
    if versions:
        L.append(f"- {versions} (PyPI, benchmark only)")
    return L, v, rss


ACT = re.compile(r"memory at batch (\d+): activations ([0-9.]+) MiB .* vs f32 ([0-9.]+) MiB")
TOTAL = re.compile(r"^memory: .*total ([0-9.]+) vs f32 ([0-9.]+) MiB")


def memory_section(a):
    """The planned memory `ampx train` prints at start, gpt.json at T=1024 under mixed_bf16 (the
    model's policy) against f32, with and without train.recompute, with the fused attention and
    with its composite (one step; the plan does not vary)."""
    rows, notes = [], []
    for att in ("fused", "composite"):
        for rc in (None, '["gelu","layernorm"]'):
            cmd = [a.ampx_rel, "train", "models/gpt.json", "--steps", "1", "--eval-every", "0",
                   "--set", "data.eval_windows=1", "--backend-opt", f"attention={int(att == 'fused')}",
                   "--backend-opt", f"threads={a.threads}"] + \
                [x for k in ("tokens", "next") for x in ("--set", f"inputs.{k}.shape=[1024]")] + \
                (["--set", f"train.recompute={rc}"] if rc else [])
            p = subprocess.run(cmd, capture_output=True, text=True)
            act = next((m for m in map(ACT.search, p.stdout.splitlines()) if m), None)
            tot = next((m for m in map(TOTAL.search, p.stdout.splitlines()) if m), None)
            if p.returncode != 0 or not act or not tot:
                notes.append(f"- {att}{' recompute' if rc else ''} did not run: `" +
                             ((p.stderr.strip() or p.stdout.strip()).splitlines() or ["?"])[-1] + "`")
                continue
            rows.append((att, rc, int(act[1]), float(act[2]), float(act[3]), float(tot[1]), float(tot[2])))
    L = ["### Planned memory, gpt.json at T=1024", "",
         "What `ampx train models/gpt.json --set inputs.tokens.shape=[1024] --set inputs.next.shape=[1024] "
         "--steps 1 --backend-opt attention=A [--set 'train.recompute=[\"gelu\",\"layernorm\"]']` prints at start: "
         "activation memory live at the peak of the plan under mixed_bf16 and under f32 for the same graph, "
         "and the total (arena, inputs, parameters and optimizer state). `attention=1`: the fused attention "
         "(no T x T scores); `attention=0`: the composite, which keeps the T x T probabilities.", "",
         "| attention | recompute | batch | activations mixed_bf16 MiB | f32 MiB | ratio | total mixed_bf16 MiB | "
         "total f32 MiB | ratio |", "|---" * 9 + "|"]
    for isa, rc, b, bf, f, tb, tf in rows:
        L.append(f"| {isa} | {'gelu, layernorm' if rc else 'none'} | {b} | {bf:.1f} | {f:.1f} | {bf / f:.3f} | "
                 f"{tb:.1f} | {tf:.1f} | {tb / tf:.3f} |")
    return L + notes, rows


ATTN_ROW = re.compile(r"^T=(\d+) D=(\d+) H=(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)$")


def attention_section(a):
    """tools/bench/attention.sh on the best path and (on AVX-512 machines) the AVX2 one."""
    res, notes = {}, []
    for isa in (["auto", "avx2"] if a.avx512 else ["auto"]):
        env = dict(os.environ, AMPX_BACKEND_OPTS=f"isa={isa},threads={a.threads},attention=1")
        p = subprocess.run(["bash", "tools/bench/attention.sh", a.ampx_rel, str(a.steps_rounds)],
                           capture_output=True, text=True, env=env)
        got = [m for m in map(ATTN_ROW.match, p.stdout.splitlines()) if m]
        if p.returncode != 0 or not got:
            notes.append(f"- isa={isa} did not run: `" + ((p.stderr.strip() or "no rows").splitlines() or ["?"])[-1] + "`")
        for m in got:
            res.setdefault((int(m[1]), int(m[2]), int(m[3])), {})[isa] = (float(m[4]), float(m[5]), float(m[6]))
    paths = ["auto", "avx2"] if a.avx512 else ["auto"]
    L = ["### Fused attention against its composite", "",
         f"`bash tools/bench/attention.sh build-rel/bin/ampx {a.steps_rounds}` with "
         f"`AMPX_BACKEND_OPTS=isa=I,threads={a.threads},attention=1`: a one-block GPT under mixed_bf16 trained 3 steps, fused "
         "(ATTN_FWD + ATTN_BWD) and composite (permutes, GEMMs, softmax) runs alternated; the device time of the "
         "attention's ops (forward and backward) over steps 2-3 from the trace, median of the rounds.",
         "", "| shape | " + " | ".join(f"{p} composite ms | {p} fused ms | {p} composite / fused" for p in paths) + " |",
         "|---" * (1 + 3 * len(paths)) + "|"]
    for (t, d, h), v in sorted(res.items(), key=lambda x: (x[0][1], x[0][0])):
        L.append(f"| T={t}, D={d}, {h} heads | " + " | ".join(
            " | ".join(f"{x:.2f}" for x in v[p]) if p in v else "n/a | n/a | n/a" for p in paths) + " |")
    return L + notes, res


def step_goals(v, rss):
    """The step goals of the mixed-precision dividend from the steps section's medians (ms)
    and peak RSS (KiB)."""
    out = []

    def best(m, cols):  # the lowest ms among the columns that ran
        t = [v.get(m, {}).get(c) for c in ((cols,) if isinstance(cols, str) else cols)]
        return min([x for x in t if x] or [None], key=lambda x: x or 0)

    def r(m, x, y):  # speed of x over y: y's ms / x's ms
        xs, ys = best(m, x), best(m, y)
        return ys / xs if xs and ys else None

    def add(what, x, goal):
        if x is not None:
            out.append((what, f"{x:.2f}x", x >= goal))
    add("gpt.json mixed_bf16 >= 1.6x ampx f32", r("gpt", "ampx mixed_bf16", "ampx f32"), 1.6)
    add("gpt.json mixed_bf16 >= 2x PyTorch autocast bf16 (the faster of plain and SDPA)",
        r("gpt", "ampx mixed_bf16", ("PyTorch bf16", "PyTorch SDPA bf16")), 2.0)
    add("gpt.json mixed_bf16 >= 3x JAX bf16", r("gpt", "ampx mixed_bf16", "JAX bf16"), 3.0)
    for m in ("gpt", "mlp_wide", "gpt2_124m"):
        add(f"AVX2 path: {m} mixed_bf16 >= 1.0x f32", r(m, "ampx mixed_bf16 avx2", "ampx f32 avx2"), 1.0)
        add(f"AVX2 path: {m} mixed_bf16 >= 1.5x PyTorch f32 (the faster of plain and SDPA)",
            r(m, "ampx mixed_bf16 avx2", ("PyTorch f32", "PyTorch SDPA f32")), 1.5)
    add("124M shape: ampx (faster policy) >= 4x llm.c", r("gpt2_124m", ("ampx f32", "ampx mixed_bf16"), "llm.c f32"), 4.0)
    m = rss.get("gpt2_124m", {})
    bf, f, lc = m.get("ampx mixed_bf16"), m.get("ampx f32"), m.get("llm.c f32")
    if bf and f:
        out.append(("124M shape: peak RSS mixed_bf16 below f32", f"{bf / 1024:.0f} / {f / 1024:.0f} MiB", bf < f))
    if bf and lc:
        out.append(("124M shape: peak RSS mixed_bf16 at most llm.c's", f"{bf / 1024:.0f} / {lc / 1024:.0f} MiB", bf <= lc))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampx", required=True, help="ampx for the op and GEMM benchmarks")
    ap.add_argument("--ampx-rel", required=True, help="Release ampx for the training steps")
    ap.add_argument("--peers", required=True, help="folder of peer_openblas, peer_onednn, peer_peak")
    ap.add_argument("--python", required=True, help="python of the venv with torch, jax, optax")
    ap.add_argument("--rounds", type=int, help="rounds per cell (default 5; the steps of --quick: 2)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sections", default=",".join(SECTIONS))
    ap.add_argument("--steps-models", default=",".join(STEP_MODELS),
                    help=f"models of the steps section, of {','.join(STEP_MODELS)} (all by default)")
    ap.add_argument("--threads", type=int, default=2, help="threads of every program of the steps section")
    ap.add_argument("--llmc", help="a checkout of karpathy/llm.c: its train_gpt2.c at the GPT-2 124M shape")
    ap.add_argument("--out", default="docs/BENCHMARKS.md", help="the Markdown file to update, or - for none")
    a = ap.parse_args()
    sections = set(a.sections.split(","))
    if sections - set(SECTIONS):
        sys.exit(f"cpu_bench.py: --sections {a.sections}: sections are {', '.join(SECTIONS)}")
    a.steps_models = a.steps_models.split(",")
    unknown = [m for m in a.steps_models if m not in STEP_MODELS]
    if unknown:
        sys.exit(f"cpu_bench.py: --steps-models: unknown {','.join(unknown)} (known: {','.join(STEP_MODELS)})")
    if a.threads < 1:
        sys.exit("cpu_bench.py: --threads must be 1 or more")
    if a.llmc:
        a.llmc = os.path.join(os.environ.get("AMPX_BENCH_CWD", ""), a.llmc)  # cpu.sh runs from the root
        if not os.path.isfile(os.path.join(a.llmc, "train_gpt2.c")):
            print(f"cpu_bench.py: --llmc {a.llmc}: no train_gpt2.c there; llm.c is skipped", file=sys.stderr)
    given = a.rounds
    a.rounds = given or 5
    a.steps_rounds = given or (2 if a.quick else 5)
    peak = {}
    measure_peak(a, peak)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    flags = set(next((l for l in open("/proc/cpuinfo") if l.startswith("flags")), "").split())
    isa = [f for f in ("avx2", "fma", "f16c", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    a.avx512 = "avx512f" in flags
    cmd = "bash tools/bench/cpu.sh" + (" --quick" if a.quick else "") + \
        (f" --rounds {given}" if given else "") + \
        (f" --sections {a.sections}" if sections != set(SECTIONS) else "") + \
        (f" --steps-models {','.join(a.steps_models)}" if a.steps_models != list(STEP_MODELS) else "") + \
        (f" --threads {a.threads}" if a.threads != 2 else "") + (" --llmc DIR" if a.llmc else "")
    a.cmd = cmd
    L, goals = [], []
    if "gemm" in sections:
        lines, g, kernel = gemm_section(a, peak)
        gemm_goals = g
        L += lines + [""]
        lo = min(g["f32_vs_openblas"]) if g["f32_vs_openblas"] else None
        if lo: goals.append(("f32 GEMM >= 1.0x OpenBLAS at every shape", f"lowest {lo[0]:.2f} ({lo[1]})", lo[0] >= 1.0))
        lo = min(g["peak"]) if g["peak"] else None
        if lo: goals.append(("f32 GEMM >= 85% of FMA peak from 512^3 up", f"lowest {100 * lo[0]:.0f}% ({lo[1]})", lo[0] >= 0.85))
        for key, name in (("bf16_vs_f32", "bf16"), ("f16_vs_f32", "f16")):
            lo = min(g[key]) if g[key] else None
            if lo: goals.append((f"{name} GEMM >= 1.0x ampx f32", f"lowest {lo[0]:.2f} ({lo[1]})", lo[0] >= 1.0))
    if "ops" in sections:
        lines, g = ops_section(a, peak)
        L += lines + [""]
        for r, name in sorted(g):
            goals.append((f"{name} >= 0.8x copy", f"{r:.2f}", r >= 0.8))
    if "steps" in sections:
        lines, st, st_rss = steps_section(a, peak)
        L += lines + [""]
        w = st.get("mlp_wide", {c: None for c in STEP_COLS})
        for c in ("ampx f32", "ampx mixed_bf16"):
            if w[c] and w["JAX f32"]:
                goals.append((f"mlp_wide {c} >= 1.15x faster than JAX f32", f"{w['JAX f32'] / w[c]:.2f}x", w["JAX f32"] / w[c] >= 1.15))
            if w[c] and w["PyTorch f32"]:
                goals.append((f"mlp_wide {c} faster than PyTorch f32", f"{w['PyTorch f32'] / w[c]:.2f}x", w["PyTorch f32"] / w[c] > 1.0))
        if w["ampx f32"] and w["ampx mixed_bf16"]:
            goals.append(("mlp_wide mixed_bf16 at least as fast as f32", f"{w['ampx f32'] / w['ampx mixed_bf16']:.2f}x",
                          w["ampx f32"] / w["ampx mixed_bf16"] >= 1.0))
    dividend = []
    if "gemm" in sections:
        for key, what in (("f32_vs_onednn", "f32 GEMM >= 1.0x oneDNN f32 at every shape"),
                          ("bf16_vs_onednn", "bf16 GEMM >= 1.0x oneDNN bf16 at every shape"),
                          ("avx2_vs_onednn", "AVX2 path: f32 GEMM >= 1.0x oneDNN f32 (AVX2) at every shape"),
                          ("avx2_vs_openblas", "AVX2 path: f32 GEMM >= 1.0x OpenBLAS at every shape")):
            if gemm_goals[key]:
                lo = min(gemm_goals[key])
                dividend.append((what, f"lowest {lo[0]:.2f} ({lo[1]}); {sum(r >= 1.0 for r, _ in gemm_goals[key])} "
                                 f"of {len(gemm_goals[key])} shapes at 1.0 or more", lo[0] >= 1.0))
    if "steps" in sections:
        dividend += step_goals(st, st_rss)
    if "memory" in sections:
        mem_lines, mem = memory_section(a)
        L += mem_lines + [""]
        for path, rc, b, bf, f, tb, tf in mem:
            if not rc:
                dividend.append((f"gpt.json T=1024 planned activations mixed_bf16 <= 0.6x f32 ({path})",
                                 f"{bf:.1f} / {f:.1f} MiB = {bf / f:.3f}", bf / f <= 0.6))
            else:
                base = next((r for r in mem if r[0] == path and not r[1]), None)
                if base:
                    dividend.append((f"... with recompute lower still ({path})", f"{bf:.1f} MiB (without: {base[3]:.1f})",
                                     bf < base[3]))
    if "attention" in sections:
        att_lines, att = attention_section(a)
        L += att_lines + [""]
        for (t, d, h), v in sorted(att.items()):
            if t == 1024 and "auto" in v:
                dividend.append((f"fused attention fwd+bwd >= 3x the composite at T=1024, D={d}",
                                 f"{v['auto'][2]:.2f}x", v["auto"][2] >= 3.0))
    head = [BEGIN, "## CPU: GEMM, memory-bound ops and training steps against peers", "",
            f"Command: `{cmd}` ({datetime.date.today().isoformat()}). Machine: {cpu}, {os.cpu_count()} cores, "
            f"ISA flags {' '.join(isa) or 'none'}; measured in this run (tools/bench/peer_peak.c, 2 threads, "
            f"the highest of {PEAK_RUNS} runs at the start and {PEAK_RUNS} after the GEMM table): "
            f"f32 FMA {fmt(peak.get('fma256_gflops'))} GFLOP/s with 256-bit vectors, "
            f"{fmt(peak.get('fma512_gflops'))} with 512-bit, memcpy {fmt(peak.get('copy_gbs'), 2)} GB/s. "
            f"The machine is shared: the ratios of programs run alternately are what to read, not the "
            f"absolute numbers.", ""]
    L = head + L
    if goals:
        L += ["### Goals of issue 15 in this run", "", "| goal | measured | met |", "|---|---|---|"]
        L += [f"| {g} | {m} | {'yes' if ok else 'no'} |" for g, m, ok in goals]
        L.append("")
    if dividend:
        L += ["### Goals of issue 24 (the mixed-precision dividend) in this run", "",
              "| goal | measured | met |", "|---|---|---|"]
        L += [f"| {g} | {m} | {'yes' if ok else 'no'} |" for g, m, ok in dividend]
        L.append("")
    L.append(END)
    block = "\n".join(L)
    print("\n" + block + "\n", flush=True)
    if a.out == "-":
        return 0
    text = open(a.out).read() if os.path.exists(a.out) else "# Benchmarks\n"
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    open(a.out, "w").write(text)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    sys.exit(main())
