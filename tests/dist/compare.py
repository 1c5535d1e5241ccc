#!/usr/bin/env python3
"""compare.py A.safetensors B.safetensors [--rel TOL | --exact | --differ TOL]

Compares the tensors two ampx checkpoints hold. Per tensor, the relative difference is
max|a - b| / max|a| (f32 tensors; bf16/f16 working copies and the U8 scalars block are
compared only with --exact). Exit 0 when:
  --rel TOL     every f32 tensor is within TOL (the model's plain-named weights and state)
  --exact       every tensor of the file, ampx.* state included, is byte for byte the same
  --differ TOL  some f32 weight differs by more than TOL (a control: the check can fail)
Prints the worst tensor and the largest absolute difference of any f32 weight either way."""
import json
import struct
import sys
from array import array


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        out[name] = (e["dtype"], data[a:b])
    return out


def main():
    if len(sys.argv) != 5 and not (len(sys.argv) == 4 and sys.argv[3] == "--exact"):
        print(__doc__, file=sys.stderr)
        return 2
    a, b, mode = read(sys.argv[1]), read(sys.argv[2]), sys.argv[3]
    tol = float(sys.argv[4]) if mode != "--exact" else 0.0
    if sorted(a) != sorted(b):
        print(f"different tensors: {sorted(set(a) ^ set(b))}")
        return 1
    worst, worst_name, same, most = 0.0, "", True, 0.0
    for name in sorted(a):
        (da, ba), (db, bb) = a[name], b[name]
        same = same and da == db and ba == bb
        if mode == "--exact" or da != "F32" or name.startswith("ampx."):
            continue
        xa, xb = array("f"), array("f")
        xa.frombytes(ba)
        xb.frombytes(bb)
        scale = max((abs(v) for v in xa), default=0.0) or 1.0
        diff = max((abs(p - q) for p, q in zip(xa, xb)), default=0.0)
        most = max(most, diff)
        rel = diff / scale
        if rel > worst or not worst_name:
            worst, worst_name = rel, name
    if mode == "--exact":
        print("identical" if same else "not bitwise identical")
        return 0 if same else 1
    print(f"worst relative difference {worst:.3g} in {worst_name}; largest |a - b| {most:.3g}")
    if mode == "--rel":
        return 0 if worst <= tol else 1
    return 0 if worst > tol else 1


if __name__ == "__main__":
    sys.exit(main())
