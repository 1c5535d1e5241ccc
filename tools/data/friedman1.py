#!/usr/bin/env python3
"""friedman1.py OUT_DIR — writes models/data/friedman1_{train,test}.csv, the regression data of
models/regression.json: Friedman's first benchmark function (J. H. Friedman, "Multivariate
Adaptive Regression Splines", Annals of Statistics 19(1), 1991), ten features uniform on
[0, 1) of which five matter,
    y = 10 sin(pi x1 x2) + 20 (x3 - 0.5)^2 + 10 x4 + 5 x5 + N(0, 1),
1000 training and 250 test rows from a fixed seed, four decimals. The files ship in the tree;
this script says how they were made and makes them again."""
import os, random, sys
from math import pi, sin

def rows(rng, n):
    for _ in range(n):
        x = [rng.random() for _ in range(10)]
        y = 10 * sin(pi * x[0] * x[1]) + 20 * (x[2] - 0.5) ** 2 + 10 * x[3] + 5 * x[4]
        yield x, y + rng.gauss(0, 1)

def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../models/data")
    rng = random.Random(1991)
    for name, n in (("train", 1000), ("test", 250)):
        with open(os.path.join(out, f"friedman1_{name}.csv"), "w") as f:
            f.write(",".join([f"x{i}" for i in range(1, 11)] + ["y"]) + "\n")
            for x, y in rows(rng, n):
                f.write(",".join(f"{v:.4f}" for v in x + [y]) + "\n")

main()
