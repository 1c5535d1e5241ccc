#!/usr/bin/env python3
"""same_metrics.py A.jsonl B.jsonl [--norm-rel TOL | --rel TOL] — two --metrics files record
the same run: every step's loss, loss scale, skip, learning rate and gradient norm equal (the
values are printed with 9 significant digits, so equal text is equal f32). With --norm-rel
the gradient norms need only agree within TOL relative (ZeRO-1 sums the squares per shard,
then over the ranks: another summation order); with --rel the losses too (one process's
batch against the same batch sharded over ranks, as PyTorch's DDP tests compare each
iteration: each rank's mean loss averaged is another summation order). The largest relative
differences are printed. Exit 0 when they agree, and there is at least one step; prints the
first difference."""
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
mode = sys.argv[3] if len(sys.argv) > 3 else None
if mode not in (None, "--norm-rel", "--rel") or (mode and len(sys.argv) != 5):
    sys.exit("usage: same_metrics.py A.jsonl B.jsonl [--norm-rel TOL | --rel TOL]")
tol = float(sys.argv[4]) if mode else None
loose = {"--norm-rel": ("grad_norm",), "--rel": ("grad_norm", "loss")}.get(mode, ())
keys = [k for k in ("step", "loss", "scale", "skipped", "lr", "grad_norm") if k not in loose]
bad = [(x["step"], k, x.get(k), y.get(k)) for x, y in zip(a, b) for k in keys if x.get(k) != y.get(k)]
worst = {k: 0.0 for k in loose}
for x, y in zip(a, b):
    for k in loose:
        g, h = x.get(k), y.get(k)
        if g == h or (isinstance(g, float) and isinstance(h, float) and g != g and h != h):
            continue  # equal, or NaN in both
        rel = abs(g - h) / abs(g) if g is not None and h is not None and g != 0 else float("inf")
        worst[k] = max(worst[k], rel)
        if not rel <= tol:
            bad.append((x["step"], k, g, h))
print(f"{len(a)} and {len(b)} steps; first difference {bad[0] if bad else None}"
      + "".join(f"; {k} within {w:.3g} relative" for k, w in worst.items()))
sys.exit(1 if bad or len(a) != len(b) or not a else 0)
