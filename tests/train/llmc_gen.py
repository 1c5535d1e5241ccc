#!/usr/bin/env python3
"""llmc_gen.py — test fixtures in llm.c's formats, written without llm.c or PyTorch:

  llmc_gen.py model SRC_MODEL OUT.json   models/gpt2_124m.json shrunk (2 blocks, 2 heads,
                                         width 32, context 16, vocabulary 200)
  llmc_gen.py ckpt OUT.bin VERSION [FIELD=VALUE]...   a GPT-2 checkpoint for that model as
                                         train_gpt2.py's write_model lays it out (header of
                                         256 int32, then the 16 tensors), seeded values, the
                                         padding rows of wte non-zero (llm.c never reads them);
                                         FIELD=VALUE overrides a header field (magic, version,
                                         maxT, V, L, NH, C, Vp), trunc=N drops N bytes,
                                         extra=N appends N, nan=I makes value I a NaN
  llmc_gen.py ckpt124m OUT.bin           an f32 checkpoint of GPT-2 124M's shape for
                                         models/gpt2_124m.json as it ships (498 MB; values a
                                         repeating pattern, for timing, not training)
  llmc_gen.py tokens OUT.bin N           an llm.c token file of N tokens below 200
  llmc_gen.py same A.bin B.bin           exit 0 when B equals A with wte's padding rows zeroed
"""
import json, random, struct, sys

MAXT, V, L, NH, C, VP = 32, 200, 2, 2, 32, 256
FIELDS = ["magic", "version", "maxT", "V", "L", "NH", "C", "Vp"]


def bf16(x):
    b = struct.unpack("<I", struct.pack("<f", x))[0]
    b += 0x7FFF + ((b >> 16) & 1)  # round to nearest even
    return b >> 16


def sizes(maxt=MAXT, v=VP, l=L, c=C):
    return [v * c, maxt * c, l * c, l * c, l * 3 * c * c, l * 3 * c, l * c * c, l * c,
            l * c, l * c, l * 4 * c * c, l * 4 * c, l * c * 4 * c, l * c, c, c]


def model(src, out):
    m = json.load(open(src))
    m["name"] = "gpt2_llmc_test"
    m["inputs"]["tokens"]["shape"] = [16]
    m["inputs"]["next"]["shape"] = [16]
    m["inputs"]["next"]["classes"] = V
    nodes = [n for n in m["nodes"] if not n["name"][:2].startswith("h") or not n["name"][1].isdigit() or int(n["name"][1:].split(".")[0]) < L]
    for n in nodes:
        if n["op"] == "embedding":
            n["vocab"], n["dim"] = V, C
        if n["op"] == "position_embedding":
            n["max_positions"] = MAXT
        if n["op"] == "attention":
            n["heads"] = NH
            n["init"]["proj"]["residual_layers"] = L
        if n["op"] == "dense" and "units" in n:
            n["units"] = 4 * C if n["units"] == 3072 else C
            if "residual_layers" in n["init"]:
                n["init"]["residual_layers"] = L
        if n["name"] == "ln_f":
            n["inputs"] = ["h%d.res2" % (L - 1)]
    m["nodes"] = nodes
    m["policy"], m["scaler"] = "f32", "none"
    m["data"] = {"source": "tokens", "train": "tokens.bin"}
    m["train"] = {"steps": 4, "batch": 2, "seed": 1, "log_every": 1}
    json.dump(m, open(out, "w"), indent=1)


def ckpt(out, version, args):
    h = dict(zip(FIELDS, [20240326, version, MAXT, V, L, NH, C, VP]))
    trunc = extra = 0
    nan = -1
    for a in args:
        k, v = a.split("=")
        if k == "trunc": trunc = int(v)
        elif k == "extra": extra = int(v)
        elif k == "nan": nan = int(v)
        else: h[k] = int(v)
    rng = random.Random(7)
    vals = []
    for t, n in enumerate(sizes()):
        if t in (2, 8, 14):  # layer norm weights near 1
            vals += [1 + rng.gauss(0, 0.1) for _ in range(n)]
        else:
            vals += [rng.gauss(0, 0.05) for _ in range(n)]
    if nan >= 0: vals[nan] = float("nan")
    if version == 5:
        data = struct.pack("<%dH" % len(vals), *[bf16(x) for x in vals])
    else:
        data = struct.pack("<%df" % len(vals), *vals)
    header = struct.pack("<256i", *([h[f] for f in FIELDS] + [0] * 248))
    blob = header + data + b"\0" * extra
    open(out, "wb").write(blob[: len(blob) - trunc])


def ckpt124m(out):
    maxt, v, l, nh, c, vp = 1024, 50257, 12, 12, 768, 50304
    n = sum(sizes(maxt, vp, l, c))
    pattern = struct.pack("<16f", *[(i - 7.5) * 0.002 for i in range(16)])
    block = pattern * 65536  # 1 Mi values
    with open(out, "wb") as f:
        f.write(struct.pack("<256i", *([20240326, 3, maxt, v, l, nh, c, vp] + [0] * 248)))
        for _ in range(n // (16 * 65536)):
            f.write(block)
        rest = n % (16 * 65536)
        f.write((block * 2)[: 4 * rest])


def tokens(out, n):
    rng = random.Random(3)
    # a learnable stream: a repeating phrase with noise
    toks = [(i * 7) % 50 if rng.random() < 0.9 else rng.randrange(V) for i in range(n)]
    open(out, "wb").write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)) +
                          struct.pack("<%dH" % n, *toks))


def same(a, b):
    x, y = open(a, "rb").read(), open(b, "rb").read()
    if len(x) != len(y):
        sys.exit("%s is %d bytes, %s %d" % (a, len(x), b, len(y)))
    es = 4 if struct.unpack("<i", x[4:8])[0] == 3 else 2
    lo, hi = 1024 + V * C * es, 1024 + VP * C * es  # wte's padding rows
    x = x[:lo] + b"\0" * (hi - lo) + x[hi:]
    if x != y:
        i = next(i for i in range(len(x)) if x[i] != y[i])
        sys.exit("%s and %s differ first at byte %d" % (a, b, i))


cmd = sys.argv[1]
if cmd == "model": model(sys.argv[2], sys.argv[3])
elif cmd == "ckpt": ckpt(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
elif cmd == "ckpt124m": ckpt124m(sys.argv[2])
elif cmd == "tokens": tokens(sys.argv[2], int(sys.argv[3]))
elif cmd == "same": same(sys.argv[2], sys.argv[3])
