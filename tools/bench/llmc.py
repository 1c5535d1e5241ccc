"""llmc.py — llm.c's CPU trainer (train_gpt2.c of a checkout of karpathy/llm.c the user names
with `cpu.sh --llmc DIR`) as a peer of the steps section of cpu_bench.py. Nothing of llm.c is
in this tree: its own Makefile builds its train_gpt2.c into build/bench-llmc/ (make -f
DIR/Makefile with VPATH=DIR: the Makefile's flags, -Ofast -march=native and OpenMP where the
compiler has it), and the program runs unchanged in a folder of the files it opens, written
here with the benchmark's shape instead of GPT-2's weights and data (the machine that runs
the benchmark has no network):
  gpt2_124M.bin    the checkpoint header (magic 20240326, version 3: max_seq_len, vocab,
                   layers, heads, channels, padded vocab) and random f32 parameters in
                   llm.c's order; vocabulary 256 (padded 256) so the shape is the one ampx,
                   PyTorch and JAX train
  dev/data/tinyshakespeare/tiny_shakespeare_{train,val}.bin
                   token files (magic 20240520, version 1, uint16 tokens below 256)
  gpt2_tokenizer.bin  a version-2 tokenizer of 256 one-byte tokens, end-of-text 0
train_gpt2.c trains at B=4, T=64 (fixed in its main) and prints "step N: train loss X (took Y
ms)" per step, the time of forward, backward and AdamW; the median of steps W..W+S-1 is
taken and the program stopped before its step-20 sampling."""
import os
import re
import subprocess

STEP = re.compile(r"^step (\d+): train loss \S+ \(took ([0-9.]+) ms\)")


def build(src, out_dir):
    """Builds src/train_gpt2.c with src's Makefile into out_dir; returns (binary, None) or
    (None, why)."""
    if not os.path.isfile(os.path.join(src, "train_gpt2.c")) or not os.path.isfile(os.path.join(src, "Makefile")):
        return None, f"{src} has no train_gpt2.c and Makefile (a checkout of karpathy/llm.c)"
    os.makedirs(out_dir, exist_ok=True)
    p = subprocess.run(["make", "-B", "-f", os.path.abspath(os.path.join(src, "Makefile")),
                        f"VPATH={os.path.abspath(src)}", "train_gpt2"], cwd=out_dir, capture_output=True, text=True)
    exe = os.path.join(out_dir, "train_gpt2")
    if p.returncode != 0 or not os.path.isfile(exe):
        return None, "make train_gpt2 failed: " + ((p.stderr.strip() or p.stdout.strip()).splitlines() or ["?"])[-1]
    flags = next((l.strip() for l in p.stdout.splitlines() if "train_gpt2.c" in l), "")
    return exe, flags


def write_inputs(run_dir, L, H, C, T, V=256, seed=1):
    """The checkpoint, token files and tokenizer train_gpt2.c opens, in run_dir (numpy)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    head = np.zeros(256, np.int32)
    head[:8] = [20240326, 3, T, V, L, H, C, V]
    sizes = [V * C, T * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C, L * C, L * C,
             L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C, C, C]
    ones = {2, 8, 14}  # ln1w, ln2w, lnfw
    with open(os.path.join(run_dir, "gpt2_124M.bin"), "wb") as f:
        f.write(head.tobytes())
        for i, n in enumerate(sizes):
            a = np.ones(n, np.float32) if i in ones else (0.02 * rng.standard_normal(n)).astype(np.float32)
            f.write(a.tobytes())
    data = os.path.join(run_dir, "dev", "data", "tinyshakespeare")
    os.makedirs(data, exist_ok=True)
    for name, n in (("train", 1 << 16), ("val", 1 << 14)):
        h = np.zeros(256, np.int32)
        h[:3] = [20240520, 1, n]
        with open(os.path.join(data, f"tiny_shakespeare_{name}.bin"), "wb") as f:
            f.write(h.tobytes() + rng.integers(0, V, n, dtype=np.uint16).tobytes())
    t = np.zeros(256, np.uint32)
    t[:4] = [20240328, 2, V, 0]
    with open(os.path.join(run_dir, "gpt2_tokenizer.bin"), "wb") as f:
        f.write(t.tobytes() + b"".join(bytes([1, i if 32 <= i < 127 else 63]) for i in range(V)))


def parse_steps(lines, warmup, steps):
    """The step times of steps warmup .. warmup+steps-1 from train_gpt2's output lines."""
    got = {}
    for l in lines:
        m = STEP.match(l)
        if m:
            got[int(m.group(1))] = float(m.group(2))
    return [got[s] for s in range(warmup, warmup + steps) if s in got]


if __name__ == "__main__":  # llmc.py write RUN_DIR L H C T (run by the benchmark venv's python)
    import sys

    if len(sys.argv) != 7 or sys.argv[1] != "write":
        sys.exit("usage: llmc.py write RUN_DIR LAYERS HEADS CHANNELS T")
    write_inputs(sys.argv[2], *(int(x) for x in sys.argv[3:7]))
