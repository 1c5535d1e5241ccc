#!/usr/bin/env python3
"""test_python.py SRC — the ctypes binding (python/ampx) trains docs/examples/memory/xor.json on
rows made here and on batches from a source, stops early from its record callback, and raises ampx.Error with the
library's message for a missing model, bad rows and non-float32 arrays. Needs AMPX_LIBRARY
(libampx.so) and AMPX_PLUGIN_PATH (the cpu plugin's folder) from ctest."""
import array
import os
import sys

src = sys.argv[1]
sys.path.insert(0, os.path.join(src, "python"))
import ampx  # noqa: E402

model_path = os.path.join(src, "docs", "examples", "memory", "xor.json")


def rows(n, seed, flip=False):
    x, y = array.array("f"), array.array("i")
    for _ in range(n):
        v = []
        for _ in range(2):
            seed = (seed * 1664525 + 1013904223) % 2**32
            v.append((seed >> 8) / 8388608.0 - 1.0)
        x.extend(v)
        y.append(int((v[0] * v[1] > 0) != flip))
    return x, y


def train(x_train, y_train, x_test, y_test, on_record=None, until=None, **kw):
    m = ampx.Model(model_path)
    m.set_data(x_train, y_train, x_test, y_test, **kw)
    with ampx.Backend("cpu", ["threads=2"]) as be, ampx.Trainer(m, be) as t:
        t.run(until, on_record)
        return t.step, t.evaluate()


xtr, ytr = rows(2000, 7)
xte, yte = rows(500, 99)
seen = []
step, ev = train(xtr, ytr, xte, yte, on_record=lambda r: seen.append(r), row=2)
assert step == 400 and [r["step"] for r in seen] == list(range(1, 401)), (step, len(seen))
assert all(r["loss"] > 0 and r["scale"] > 0 for r in seen if not r["skipped"])
assert ev["examples"] == 500 and ev["accuracy"] > 0.9, ev
# a monitored run's records carry the headroom of the closest activation
mon = []
m = ampx.Model(model_path, sets=["train.monitor=50"])
m.set_data(xtr, ytr, xte, yte, row=2)
with ampx.Backend("cpu", ["threads=2"]) as be, ampx.Trainer(m, be) as t:
    t.run(200, lambda r: mon.append(r) if "headroom_tensor" in r else None)
assert [r["step"] for r in mon] == [50, 100, 150, 200], [r["step"] for r in mon]
assert all(r["headroom_tensor"] and r["headroom_bits"] > 0 and not r["headroom_warning"] for r in mon), mon[0]
# policy.fp8: the records at the end of each log interval carry every fp8 tensor's state
import json  # noqa: E402
import tempfile  # noqa: E402
spec = json.load(open(model_path))
spec["policy"] = {"preset": "mixed_bf16", "fp8": {"amax_history": 4}}
fp8_dir = tempfile.mkdtemp()
fp8_path = os.path.join(fp8_dir, "xor_fp8.json")
with open(fp8_path, "w") as f:
    json.dump(spec, f)
f8 = []
m = ampx.Model(fp8_path)
m.set_data(xtr, ytr, xte, yte, row=2)
with ampx.Backend("cpu", ["threads=2"]) as be, ampx.Trainer(m, be) as t:
    t.run(200, lambda r: f8.append(r) if "fp8" in r else None)
    f8_eval = t.evaluate()
assert [r["step"] for r in f8] == [100, 200], [r["step"] for r in f8]
q = f8[-1]["fp8"]
assert len(q) % 3 == 0 and q and q[0]["tensor"].endswith(".x_q") and q[0]["format"] == "e4m3", q
assert all(e["scale"] > 0 and 0 <= e["saturated"] <= 1 and 0 <= e["flushed"] <= 1 for e in q), q
assert f8_eval["accuracy"] > 0.9, f8_eval
os.remove(fp8_path)
os.rmdir(fp8_dir)
# the held-out rows are these: flipped labels score the complement
_, flipped = train(xtr, ytr, xte, rows(500, 99, flip=True)[1], row=2)
assert flipped["accuracy"] < 0.1, flipped

# a true return from the callback ends the run at the end of that log interval (100 steps)
step, _ = train(xtr, ytr, xte, yte, on_record=lambda r: r["step"] >= 150, row=2)
assert step == 200, step

# an exception in the callback stops the run and is raised again after it
try:
    train(xtr, ytr, xte, yte, on_record=lambda r: 1 / 0, row=2)
    raise AssertionError("the callback's exception was lost")
except ZeroDivisionError:
    pass

# errors carry the library's one line
for what, call, want in [
    ("missing model", lambda: ampx.Model(os.path.join(src, "no_such_model.json")), "no_such_model.json"),
    ("nan row", lambda: train(array.array("f", [float("nan")]) + xtr[1:], ytr, xte, yte, row=2),
     "x_train row 0 column 0 is nan, expected a finite number"),
    ("class out of range", lambda: train(xtr, array.array("i", [5]) + ytr[1:], xte, yte, row=2),
     "y_train row 0 is 5, expected a class in [0, 2)"),
    ("float64 rows", lambda: train(array.array("d", xtr), ytr, xte, yte, row=2), "expected float32"),
    ("no row width", lambda: train(xtr, ytr, xte, yte), "give row="),
]:
    try:
        call()
        raise AssertionError("%s was accepted" % what)
    except ampx.Error as e:
        assert want in str(e), (what, str(e))

# a batch source: the model's own training rows all say class 0, so only the source's
# batches (a fresh draw per micro-batch) teach the task; its exception ends the run
def sourced(source):
    m = ampx.Model(model_path)
    m.set_data(xtr[:64], array.array("i", [0] * 32), xte, yte, row=2)
    with ampx.Backend("cpu", ["threads=2"]) as be, ampx.Trainer(m, be) as t:
        t.set_batches(source)
        t.run()
        return t.step, t.evaluate()


micros = []


def batch(micro, n):
    micros.append(micro)
    return rows(n, 1000 + micro)


step, ev = sourced(batch)
assert step == 400 and micros == list(range(400)), (step, micros[:5])
assert ev["accuracy"] > 0.9, ev
try:
    sourced(lambda micro, n: rows(n + 1, micro))
    raise AssertionError("a batch of the wrong size was accepted")
except ampx.Error as e:
    assert "expected 32 rows of 2" in str(e), str(e)

# numpy arrays, when numpy is there: 2-D rows give their width, float64 is converted
try:
    import numpy as np
except ImportError:
    np = None
if np is not None:
    X = np.array(xtr, dtype=np.float64).reshape(-1, 2)
    step, ev = train(X, np.array(ytr, dtype=np.int64), np.array(xte).reshape(-1, 2), np.array(yte))
    assert step == 400 and ev["accuracy"] > 0.9, ev
print("python binding: all passed" + ("" if np is not None else " (numpy not installed: its case skipped)"))
