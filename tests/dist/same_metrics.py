#!/usr/bin/env python3
"""same_metrics.py A.jsonl B.jsonl — two --metrics files record the same run: every step's
loss, loss scale, skip, learning rate and gradient norm equal (the values are printed with
9 significant digits, so equal text is equal f32). Exit 0 when they are, and there is at
least one step; prints the first difference."""
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
keys = ("step", "loss", "scale", "skipped", "lr", "grad_norm")
bad = [(x["step"], k, x.get(k), y.get(k)) for x, y in zip(a, b) for k in keys if x.get(k) != y.get(k)]
print(f"{len(a)} and {len(b)} steps; first difference {bad[0] if bad else None}")
sys.exit(1 if bad or len(a) != len(b) or not a else 0)
