#!/usr/bin/env python3
"""cpu_gemm.py — runs `ampx bench gemm` on the CPU backend and the peer programs side by
side, alternating (each round starts with a different program), and writes the median
GFLOP/s per shape and their ratios to docs/BENCHMARKS.md between the CPU GEMM markers
(other sections of the file are kept). Run it through tools/bench/cpu_gemm.sh."""
import argparse, json, os, statistics, subprocess, sys, datetime

SHAPES = [  # m, n, k, trans_a, trans_b, note
    (1024, 1024, 1024, 0, 0, "square"),
    (2048, 2048, 2048, 0, 0, "square"),
    (4096, 4096, 4096, 0, 0, "square"),
    (128, 3072, 768, 0, 0, "MLP up-projection, 128 tokens"),
    (128, 768, 3072, 0, 0, "MLP down-projection, 128 tokens"),
    (4096, 768, 768, 0, 0, "attention projection, 4096 tokens"),
    (768, 768, 4096, 1, 0, "weight gradient dW = X^T dY"),
    (4096, 768, 768, 0, 1, "input gradient dX = dY W^T"),
]
OPS = ["cast", "add", "scale", "relu", "gelu", "softmax", "layernorm", "unscale_check",
       "grad_stats", "sgd", "adamw"]
BEGIN, END = "<!-- cpu-gemm:begin -->", "<!-- cpu-gemm:end -->"


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0 or not p.stdout.strip():
        return None, (p.stderr.strip() or p.stdout.strip()).splitlines()[-1:] or ["failed"]
    return json.loads(p.stdout.strip().splitlines()[-1]), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampx", required=True)
    ap.add_argument("--peers", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="1024 and the training shapes only")
    ap.add_argument("--out", default="docs/BENCHMARKS.md")
    ap.add_argument("--no-ops", action="store_true", help="skip the memory-bound op table")
    a = ap.parse_args()
    load0 = os.getloadavg()
    shapes = [s for s in SHAPES if not (a.quick and s[0] * s[1] * s[2] > 2**31)]
    progs = [  # column, command builder
        ("ampx bf16", lambda m, n, k, ta, tb, r: [a.ampx, "bench", "gemm", "--backend", "cpu",
            "--dtype", "bf16", "--m", str(m), "--n", str(n), "--k", str(k), "--json"]
            + (["--trans-a"] if ta else []) + (["--trans-b"] if tb else []) + r),
        ("ampx f16", lambda m, n, k, ta, tb, r: [a.ampx, "bench", "gemm", "--backend", "cpu",
            "--dtype", "f16", "--m", str(m), "--n", str(n), "--k", str(k), "--json"]
            + (["--trans-a"] if ta else []) + (["--trans-b"] if tb else []) + r),
        ("ampx f32", lambda m, n, k, ta, tb, r: [a.ampx, "bench", "gemm", "--backend", "cpu",
            "--dtype", "f32", "--m", str(m), "--n", str(n), "--k", str(k), "--json"]
            + (["--trans-a"] if ta else []) + (["--trans-b"] if tb else []) + r),
        ("oneDNN bf16", lambda m, n, k, ta, tb, r: [os.path.join(a.peers, "peer_onednn"), "bf16",
            str(m), str(n), str(k)] + (["ta"] if ta else []) + (["tb"] if tb else [])
            + [x.replace("--reps=", "reps=") for x in r]),
        ("oneDNN f32", lambda m, n, k, ta, tb, r: [os.path.join(a.peers, "peer_onednn"), "f32",
            str(m), str(n), str(k)] + (["ta"] if ta else []) + (["tb"] if tb else [])
            + [x.replace("--reps=", "reps=") for x in r]),
        ("OpenBLAS f32", lambda m, n, k, ta, tb, r: [os.path.join(a.peers, "peer_openblas"), "f32",
            str(m), str(n), str(k)] + (["ta"] if ta else []) + (["tb"] if tb else [])
            + [x.replace("--reps=", "reps=") for x in r]),
    ]
    results, notes, kernel, impls = {}, {}, "", {}
    for (m, n, k, ta, tb, note) in shapes:
        reps = ["--reps=3"] if m * n * k > 2**33 else []
        key = (m, n, k, ta, tb)
        for rnd in range(a.rounds):
            order = progs[rnd % len(progs):] + progs[:rnd % len(progs)]
            for name, build in order:
                d, err = run(build(m, n, k, ta, tb, reps))
                if d is None:
                    notes[name] = err[0]
                    continue
                results.setdefault(key, {}).setdefault(name, []).append(d["gflops"])
                if "kernel" in d: kernel = d["kernel"]
                if "impl" in d: impls[name] = d["impl"]
        row = results.get(key, {})
        print(f"{m}x{n}x{k}{' tA' if ta else ''}{' tB' if tb else ''}: " + ", ".join(
            f"{c} {statistics.median(v):.1f}" for c, v in row.items()), flush=True)

    ops = {}
    if not a.no_ops:
        n = 1 << 22 if a.quick else 1 << 24
        for op in OPS:
            for isa in ("avx2", "portable"):
                d, err = run([a.ampx, "bench", "op", op, "--backend", "cpu", "--backend-opt",
                              "isa=" + isa, "--dtype", "bf16", "--n", str(n), "--reps", "5",
                              "--json"])
                ops[(op, isa)] = d
            d = ops[(op, "avx2")]
            if d:
                print(f"op {op}: {d['gbs']:.2f} GB/s, copy {d['copy_gbs']:.2f} GB/s", flush=True)
    load1 = os.getloadavg()

    cols = [p[0] for p in progs]
    med = lambda key, c: statistics.median(results[key][c]) if c in results.get(key, {}) else None
    fmt = lambda v: f"{v:.1f}" if v is not None else "n/a"
    ratio = lambda x, y: f"{x / y:.2f}" if x is not None and y else "n/a"
    cpu = "?"
    try:
        cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
    except Exception:
        pass
    flags = set()
    try:
        flags = set([l for l in open("/proc/cpuinfo") if l.startswith("flags")][0].split())
    except Exception:
        pass
    isa = [f for f in ("avx2", "fma", "f16c", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    cmd = "bash tools/bench/cpu_gemm.sh" + (" --quick" if a.quick else "") + \
        (f" --rounds {a.rounds}" if a.rounds != 3 else "")
    lines = [BEGIN, "## CPU GEMM: ampx vs oneDNN and OpenBLAS", "",
             f"Command: `{cmd}` ({datetime.date.today().isoformat()}). "
             f"Machine: {cpu}, {os.cpu_count()} cores, ISA flags {' '.join(isa) or 'none'}; "
             f"ampx kernel path `{kernel}`. GFLOP/s = 2mnk / median time; each program runs "
             f"{a.rounds} times per shape, alternating with the others, and the table shows the "
             f"median of those. m x n x k: C[m,n] = op(A)[m,k] op(B)[k,n]; A, B and C all in the "
             f"column's dtype, f32 accumulation.", ""]
    lines.append("| shape | " + " | ".join(cols) +
                 " | ampx bf16 / oneDNN bf16 | ampx f32 / OpenBLAS | ampx f32 / oneDNN f32 | ampx bf16 / ampx f32 |")
    lines.append("|---" * (len(cols) + 5) + "|")
    for (m, n, k, ta, tb, note) in shapes:
        key = (m, n, k, ta, tb)
        v = {c: med(key, c) for c in cols}
        lines.append(f"| {m}x{n}x{k}{' tA' if ta else ''}{' tB' if tb else ''} ({note}) | "
                     + " | ".join(fmt(v[c]) for c in cols) + " | "
                     + " | ".join([ratio(v["ampx bf16"], v["oneDNN bf16"]),
                                   ratio(v["ampx f32"], v["OpenBLAS f32"]),
                                   ratio(v["ampx f32"], v["oneDNN f32"]),
                                   ratio(v["ampx bf16"], v["ampx f32"])]) + " |")
    lines.append("")
    for name, impl in sorted(impls.items()):
        lines.append(f"- {name}: {impl}")
    for name, err in sorted(notes.items()):
        lines.append(f"- {name} did not run: `{err}`")
    lines += ["", f"Load average (1 min) of the machine, shared with other work: {load0[0]:.1f} "
              f"when the run started, {load1[0]:.1f} when it ended; the peers ran under the "
              f"same load, alternating, so the ratios are fairer than the absolute numbers."]
    if ops:
        lines += ["", "## CPU memory-bound ops: GB/s against a copy in the same run", "",
                  f"Same command. `ampx bench op NAME --backend cpu --dtype bf16 --n "
                  f"{1 << 22 if a.quick else 1 << 24} --reps 5` per op: GB/s of the bytes the op "
                  f"must move (bf16 tensors, f32 optimizer state), beside a buffer copy of the same "
                  f"tensor timed in the same process (best median of 3 alternations each).", "",
                  "| op | avx2 GB/s | copy GB/s | avx2 / copy | portable GB/s | avx2 / portable |",
                  "|---|---|---|---|---|---|"]
        for op in OPS:
            d, p = ops.get((op, "avx2")), ops.get((op, "portable"))
            if not d:
                lines.append(f"| {op} | failed | | | | |")
                continue
            lines.append(f"| {op} | {d['gbs']:.2f} | {d['copy_gbs']:.2f} | {d['gbs'] / d['copy_gbs']:.2f} | "
                         + (f"{p['gbs']:.2f} | {d['gbs'] / p['gbs']:.1f}x |" if p else "n/a | n/a |"))
    lines += ["", END]
    block = "\n".join(lines)

    text = open(a.out).read() if os.path.exists(a.out) else "# Benchmarks\n\nEvery number here comes with the command that produced it.\n"
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    open(a.out, "w").write(text)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    sys.exit(main())
