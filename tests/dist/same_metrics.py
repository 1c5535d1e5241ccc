#!/usr/bin/env python3
"""same_metrics.py A.jsonl B.jsonl [--norm-rel TOL] — two --metrics files record the same
run: every step's loss, loss scale, skip, learning rate and gradient norm equal (the values
are printed with 9 significant digits, so equal text is equal f32). With --norm-rel the
gradient norms need only agree within TOL relative (ZeRO-1 sums the squares per shard, then
over the ranks: another summation order); the largest relative difference is printed. Exit 0
when they agree, and there is at least one step; prints the first difference."""
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
tol = float(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == "--norm-rel" else None
keys = ("step", "loss", "scale", "skipped", "lr") + (() if tol is not None else ("grad_norm",))
bad = [(x["step"], k, x.get(k), y.get(k)) for x, y in zip(a, b) for k in keys if x.get(k) != y.get(k)]
worst = 0.0
for x, y in zip(a, b):
    g, h = x.get("grad_norm"), y.get("grad_norm")
    if tol is None or g == h:
        continue
    rel = abs(g - h) / abs(g) if g is not None and h is not None and g != 0 else float("inf")
    worst = max(worst, rel)
    if not rel <= tol:
        bad.append((x["step"], "grad_norm", g, h))
print(f"{len(a)} and {len(b)} steps; first difference {bad[0] if bad else None}"
      + (f"; gradient norms within {worst:.3g} relative" if tol is not None else ""))
sys.exit(1 if bad or len(a) != len(b) or not a else 0)
