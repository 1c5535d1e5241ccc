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

# ---------------------------------------------------------------------------------------
# Misuse: each raises ampx.Error (or the callback's exception), none crashes

def raises(what, call, want=""):
    try:
        call()
    except ampx.Error as e:
        assert want in str(e), (what, str(e))
        return
    raise AssertionError("%s did not raise ampx.Error" % what)


def model_with_rows():
    m = ampx.Model(model_path)
    m.set_data(xtr, ytr, xte, yte, row=2)
    return m


# use after close, of each object, in every order
import itertools  # noqa: E402
import threading  # noqa: E402
for order in itertools.permutations("mbt"):
    m, be = model_with_rows(), ampx.Backend("cpu", ["threads=1"])
    t = ampx.Trainer(m, be)
    objs = {"m": m, "b": be, "t": t}
    for k in order:
        objs[k].close()
    for k in order:
        objs[k].close()  # twice is fine
    raises("step after close", lambda: t.step, "closed")
    raises("run after close", lambda: t.run(10), "closed")
    raises("evaluate after close", t.evaluate, "closed")
    raises("save after close", lambda: t.save(os.devnull), "closed")
    raises("set_batches after close", lambda: t.set_batches(None), "closed")
    raises("set_data after close", lambda: m.set_data(xtr, ytr, xte, yte, row=2), "model is closed")
    raises("steps after close", lambda: m.steps, "model is closed")
    raises("Trainer of a closed model", lambda: ampx.Trainer(m, ampx.Backend("cpu")), "model is closed")
    raises("Trainer on a closed backend", lambda: ampx.Trainer(model_with_rows(), be), "backend is closed")

# a trainer keeps its model and backend alive: closed (or left by `with`) under it, it trains
m = model_with_rows()
with ampx.Backend("cpu", ["threads=1"]) as be:
    t = ampx.Trainer(m, be)
m.close()
t.run(200)
assert t.step == 200 and t.evaluate()["accuracy"] > 0.5
ck_dir = tempfile.mkdtemp()
t.save(os.path.join(ck_dir, "kept.safetensors"))
os.remove(os.path.join(ck_dir, "kept.safetensors"))
os.rmdir(ck_dir)
del t  # frees the trainer, then the model and the backend

# closed inside its own callback: the run ends at that interval, then the trainer is freed
m, be = model_with_rows(), ampx.Backend("cpu", ["threads=1"])
t = ampx.Trainer(m, be)
t.run(400, lambda r: t.close())
raises("step after a close in the callback", lambda: t.step, "closed")
# the model and the backend closed inside the callback: the run goes on, they are freed after
m2, be2 = model_with_rows(), ampx.Backend("cpu", ["threads=1"])
t2 = ampx.Trainer(m2, be2)
t2.run(200, lambda r: (m2.close(), be2.close()) and None)
assert t2.step == 200 and t2.evaluate()["examples"] == 500
raises("a second trainer on the closed backend", lambda: ampx.Trainer(model_with_rows(), be2), "closed")
t2.close()
# the trainer closed inside its batch source: the run stops at the end of the interval
t2 = ampx.Trainer(model_with_rows(), ampx.Backend("cpu", ["threads=1"]))
t2.set_batches(lambda micro, n: (t2.close(), rows(n, micro))[1])
t2.run(400)
raises("step after a close in the batch source", lambda: t2.step, "closed")

t3 = ampx.Trainer(m, be)
nested = []
t3.run(100, lambda r: nested.append(raises("run from its callback", lambda: t3.run(200), "own callback")))
assert len(nested) == 100 and t3.step == 100
t3.close()

# KeyboardInterrupt and SystemExit in a callback or a batch source are raised from run()
for exc in (KeyboardInterrupt, SystemExit):
    def interrupt(r, exc=exc):
        raise exc()
    t = ampx.Trainer(m, be)
    try:
        t.run(200, interrupt)
        raise AssertionError("%s in on_record was lost" % exc.__name__)
    except exc:
        pass
    assert t.step == 100, t.step  # stopped at the end of the first log interval
    t.set_batches(lambda micro, n, exc=exc: (_ for _ in ()).throw(exc()))
    try:
        t.run(300)
        raise AssertionError("%s in a batch source was lost" % exc.__name__)
    except exc:
        pass
    t.close()

# two threads on one trainer take turns; trainers sharing a model and a backend, too
t = ampx.Trainer(m, be)
t_other = ampx.Trainer(m, be)
errors = []


def work(tr, until):
    try:
        tr.run(until)
        tr.evaluate()
    except BaseException as e:  # noqa: B902 (reported below)
        errors.append(e)


threads = [threading.Thread(target=work, args=(tr, u)) for tr, u in
           ((t, 200), (t, 300), (t_other, 200), (t_other, 100))]
for th in threads:
    th.start()
for th in threads:
    th.join()
assert not errors, errors
assert t.step == 300 and t_other.step == 200, (t.step, t_other.step)
t.close(), t_other.close(), m.close(), be.close()

# lengths, types and ranges are checked before the library reads a value
big = array.array("q", ytr)
big[3] = 2**32 + 1
for what, call, want in [
    ("short y_train", lambda: model_with_rows().set_data(xtr, ytr[:10], xte, yte, row=2),
     "y_train holds 10 classes, expected one per row: 2000"),
    ("long y_test", lambda: model_with_rows().set_data(xtr, ytr, xte, yte + yte, row=2),
     "y_test holds 1000 classes, expected one per row: 500"),
    ("int64 class beyond int32", lambda: model_with_rows().set_data(xtr, big, xte, yte, row=2),
     "y_train row 3 is 4294967297, outside the int32 range"),
    ("float classes", lambda: model_with_rows().set_data(
        xtr, array.array("d", [0.5, 1.5] * 1000), xte, yte, row=2), "expected integer classes"),
    ("row=-1", lambda: model_with_rows().set_data(xtr, ytr, xte, yte, row=-1),
     "row=-1, expected a positive number"),
    ("row=0", lambda: model_with_rows().set_data(xtr, ytr, xte, yte, row=0), "row=0"),
    ("row=2.0", lambda: model_with_rows().set_data(xtr, ytr, xte, yte, row=2.0), "row=2.0"),
    ("x not a buffer", lambda: model_with_rows().set_data([0.5] * 4, ytr, xte, yte, row=2),
     "expected a buffer of float32 values"),
    ("Trainer of a path", lambda: ampx.Trainer(model_path, "cpu"), "expected an ampx.Model"),
]:
    raises(what, call, want)
# int64 classes within range are taken
m = ampx.Model(model_path)
m.set_data(xtr, array.array("q", ytr), xte, array.array("q", yte), row=2)
with ampx.Backend("cpu", ["threads=1"]) as be, ampx.Trainer(m, be) as t:
    t.run(400)
    assert t.evaluate()["accuracy"] > 0.9
m.close()

# numpy arrays, when numpy is there: 2-D rows give their width, float64 is converted
try:
    import numpy as np
except ImportError:
    np = None
if np is not None:
    X = np.array(xtr, dtype=np.float64).reshape(-1, 2)
    step, ev = train(X, np.array(ytr, dtype=np.int64), np.array(xte).reshape(-1, 2), np.array(yte))
    assert step == 400 and ev["accuracy"] > 0.9, ev
    # numpy classes are checked, never wrapped or truncated; whole floats are taken
    Y = np.array(ytr, dtype=np.int64)
    Y[5] = 2**32 + 1
    raises("numpy int64 beyond int32", lambda: model_with_rows().set_data(X, Y, X, Y),
           "y_train row 5 is 4294967297, outside the int32 range")
    raises("numpy float classes", lambda: model_with_rows().set_data(
        X, np.array(ytr, dtype=np.float64) + 0.5, X, np.array(ytr)), "y_train row 0 is 0.5")
    raises("numpy string classes", lambda: model_with_rows().set_data(
        X, np.array(["a"] * 2000), X, np.array(ytr)), "expected integer classes")
    step, ev = train(X, np.array(ytr, dtype=np.float64), xte, yte)
    assert step == 400 and ev["accuracy"] > 0.9, ev
# an ordered backend list: GEMMs on opencl (when this machine has an OpenCL device), the
# rest on cpu; the listing names every fallback, the copies are counted
try:
    lb = ampx.Backend("opencl,cpu", ["opencl.ops=gemm", "cpu.threads=1"])
except ampx.Error as e:
    lb = None
    print("backend list: opencl not available here, skipped (%s)" % e)
if lb is not None:
    m = ampx.Model(model_path)
    m.set_data(xtr, ytr, xte, yte, row=2)
    with lb, ampx.Trainer(m, lb) as t:
        listing = t.placement()
        assert listing[0].startswith("placement: ") and "on opencl" in listing[0], listing[0]
        assert any("opencl has no" in line for line in listing), listing
        t.run(400)
        assert t.evaluate()["accuracy"] > 0.9
        moved, secs = t.copies()
        assert moved > 0 and secs >= 0, (moved, secs)
    m.close()
print("python binding: all passed" + ("" if np is not None else " (numpy not installed: its case skipped)"))
