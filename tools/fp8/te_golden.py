#!/usr/bin/env python3
"""te_golden.py — the golden file of FP8_SCALE_UPDATE: Transformer Engine's delayed-scaling
update (transformer_engine/pytorch's _default_get_amax_and_update_history,
_update_amax_history and _default_sf_compute, with scale_inv = 1 / scale), written out in
PyTorch float32, run over a sequence of per-tensor amaxes, every state written as f32 bits.

    python3 tools/fp8/te_golden.py > tests/data/fp8_te_golden.txt

The amax sequence is recorded from a deterministic generator shaped like training: each
tensor's amax drifts (a log-normal walk), with a growth phase, spikes, steps where a tensor
saw only zeros, and a few inf and NaN amaxes (an overflowing step) and amaxes so small that
fp8_max / amax overflows f32. tests/test_fp8_golden.c replays it through each backend's
FP8_SCALE_UPDATE and compares every bit. Needs torch (a benchmark peer, not a build or test
dependency: the file is shipped)."""
import math
import random
import struct
import sys

import torch

FMAX = {"e4m3": 448.0, "e5m2": 57344.0}


def update_amax_history(amax_history):
    if amax_history.shape[0] > 1:
        new = torch.roll(amax_history, -1, 0)
        amax_history.copy_(new)
    amax_history[0].fill_(0.0)
    return amax_history


def get_amax_and_update_history(amax_history, algo):
    if algo == "max":
        amax = torch.max(amax_history, dim=0).values
    else:
        amax = amax_history[0].clone()
    amax_history = update_amax_history(amax_history)
    return amax_history, amax


def sf_compute(amax, scale, fp8_max, margin, _fp32_max=torch.finfo(torch.float32).max):
    sf = (fp8_max / amax) / (2**margin)
    sf = torch.where(amax > 0.0, sf, scale)
    sf = torch.where(torch.isfinite(amax), sf, scale)
    sf = torch.where(torch.isinf(sf), torch.full_like(sf, _fp32_max), sf)
    scale.copy_(sf)
    return scale


def bits(t):
    return " ".join("%08x" % struct.unpack("<I", struct.pack("<f", v))[0] for v in t.tolist())


def sequence(rng, n, steps):
    level = [rng.uniform(-6, 6) for _ in range(n)]
    rows = []
    for s in range(steps):
        row = []
        for i in range(n):
            level[i] += rng.gauss(0.02 if s < steps // 3 else 0.0, 0.15)
            v = math.exp(level[i])
            r = rng.random()
            if r < 0.03:
                v *= 50.0  # a spike
            elif r < 0.05:
                v = 0.0  # the tensor was all zeros
            elif r < 0.06:
                v = float("inf")
            elif r < 0.065:
                v = float("nan")
            elif r < 0.075:
                v = 1e-42  # 448 / v overflows f32
            row.append(struct.unpack("<f", struct.pack("<f", v))[0])
        rows.append(row)
    return rows


def main():
    rng = random.Random(20261205)
    configs = [
        ("max", 0, 16, ["e4m3", "e4m3", "e5m2", "e4m3", "e5m2"], 300),
        ("max", 2, 1024, ["e4m3", "e5m2", "e4m3"], 1500),
        ("most_recent", -1, 4, ["e5m2", "e4m3", "e4m3", "e5m2"], 200),
    ]
    out = sys.stdout
    out.write("# FP8_SCALE_UPDATE golden: Transformer Engine's delayed scaling in torch %s\n"
              % torch.__version__)
    out.write("# config <algo> <margin> <history> <n> <steps>; fmax <f32 bits>...;\n")
    out.write("# then per step: amax <row 0 written before the update>, scale, scale_inv\n")
    for algo, margin, hist, fmts, steps in configs:
        n = len(fmts)
        fmax = torch.tensor([FMAX[f] for f in fmts], dtype=torch.float32)
        amax_history = torch.zeros(hist, n, dtype=torch.float32)
        scale = torch.ones(n, dtype=torch.float32)
        out.write("config %s %d %d %d %d\n" % (algo, margin, hist, n, steps))
        out.write("fmax %s\n" % bits(fmax))
        for row in sequence(rng, n, steps):
            amax_history[0] = torch.tensor(row, dtype=torch.float32)
            out.write("amax %s\n" % bits(amax_history[0]))
            amax_history, amax = get_amax_and_update_history(amax_history, algo)
            scale = sf_compute(amax, scale, fmax, margin)
            scale_inv = 1.0 / scale
            out.write("scale %s\n" % bits(scale))
            out.write("scale_inv %s\n" % bits(scale_inv))
        out.write("history %s\n" % bits(amax_history.flatten()))


if __name__ == "__main__":
    main()
