"""ampx: a thin ctypes binding over the C API of libampx (docs/C_API.md).

    import ampx
    model = ampx.Model("model.json", sets=["train.steps=400"])
    model.set_data(x_train, y_train, x_test, y_test, row=2)
    with ampx.Backend("cpu", ["threads=2"]) as be, ampx.Trainer(model, be) as t:
        t.run(on_record=lambda r: print(r["step"], r["loss"]))
        print(t.evaluate()["accuracy"])

Arrays are any objects with the buffer protocol: numpy arrays (converted to float32 and
int32 when numpy is installed and they hold another type), array.array('f') and
array.array('i'), bytes of float32 or int32 values. numpy is not required.

The library is found through $AMPX_LIBRARY (a path to libampx.so), then the dynamic
loader's search (ctypes.util.find_library), then the build tree next to this folder.

Lifetimes and threads: a Trainer keeps its Model and Backend alive (closing them while a
trainer uses them takes effect when its last trainer is closed); a closed object raises
ampx.Error on any use. Every call on a trainer holds its backend's lock (trainers that share
a backend take turns; one backend per thread trains in parallel), and the interpreter's lock
is released while the library works.
"""
import contextlib
import ctypes
import ctypes.util
import os
import threading

__all__ = ["Error", "Model", "Backend", "Trainer", "library"]

_i64, _f32p, _i32p = ctypes.c_int64, ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_int32)


class Error(Exception):
    """A failed call: the message is the library's one line (file, line, column, reason)."""


class _Memory(ctypes.Structure):
    _fields_ = [("n_train", _i64), ("n_test", _i64), ("row", _i64), ("x_train", _f32p),
                ("x_test", _f32p), ("y_train", _i32p), ("y_test", _i32p)]


class _TrainConfig(ctypes.Structure):
    _fields_ = [("steps", _i64), ("batch", _i64), ("accumulate", _i64), ("seed", ctypes.c_uint64),
                ("log_every", _i64), ("monitor_every", _i64), ("eval_every", _i64),
                ("skip_init", ctypes.c_int), ("start_from", ctypes.c_char_p),
                ("zero", ctypes.c_int), ("forensics", ctypes.c_int)]


class _Fp8Record(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("format", ctypes.c_char_p), ("scale", ctypes.c_float),
                ("amax", ctypes.c_float), ("saturated", ctypes.c_double),
                ("flushed", ctypes.c_double)]


class _Record(ctypes.Structure):
    _fields_ = [("step", _i64), ("loss", ctypes.c_double), ("grad_norm", ctypes.c_double),
                ("scale", ctypes.c_float), ("lr", ctypes.c_float), ("skipped", ctypes.c_int),
                ("time_ms", ctypes.c_double), ("overflow", ctypes.c_char_p),
                ("health", ctypes.c_void_p), ("n_health", ctypes.c_int),
                ("monitor_scale", ctypes.c_double), ("first_nonfinite", ctypes.c_char_p),
                ("applied_steps", _i64), ("warning", ctypes.c_char_p),
                ("created_by", ctypes.c_char_p), ("overflow_origin", ctypes.c_char_p),
                ("headroom_tensor", ctypes.c_char_p), ("headroom_bits", ctypes.c_double),
                ("headroom_underflow", ctypes.c_double), ("headroom_warning", ctypes.c_char_p),
                ("fp8", ctypes.POINTER(_Fp8Record)), ("n_fp8", ctypes.c_int)]


_LINE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)


def _text(p):
    return p.decode(errors="replace") if p else ""


class _Eval(ctypes.Structure):
    _fields_ = [("accuracy", ctypes.c_double), ("loss", ctypes.c_double), ("examples", _i64),
                ("regression", ctypes.c_int), ("mse", ctypes.c_double), ("mae", ctypes.c_double),
                ("r2", ctypes.c_double)]


_RECORD_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_Record))
_BATCH_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, _i64, _i64,
                             ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_int32))
_lib = None


def _find():
    env = os.environ.get("AMPX_LIBRARY")
    if env:
        return env
    found = ctypes.util.find_library("ampx")
    if found:
        return found
    here = os.path.dirname(os.path.abspath(__file__))
    for build in ("build", "build-rel"):
        path = os.path.join(here, "..", "..", build, "lib", "libampx.so")
        if os.path.exists(path):
            return path
    raise Error("libampx.so not found: set AMPX_LIBRARY to its path")


def library():
    """The loaded libampx (ctypes.CDLL), loaded and typed on first use."""
    global _lib
    if _lib is not None:
        return _lib
    lib = ctypes.CDLL(_find())
    vp, cp, sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t
    sigs = {
        "ampx_model_load_with": (ctypes.c_int, [cp, cp, ctypes.POINTER(cp), ctypes.c_int,
                                                ctypes.POINTER(vp), cp, sz]),
        "ampx_model_free": (None, [vp]),
        "ampx_model_train_config": (ctypes.POINTER(_TrainConfig), [vp]),
        "ampx_model_set_data": (ctypes.c_int, [vp, ctypes.POINTER(_Memory)]),
        "ampx_backend_open": (ctypes.c_int, [cp, ctypes.POINTER(cp), ctypes.c_uint32,
                                             ctypes.POINTER(vp), cp, sz]),
        "ampx_backend_close": (None, [vp]),
        "ampx_trainer_create": (ctypes.c_int, [vp, vp, ctypes.POINTER(vp), cp, sz]),
        "ampx_trainer_run": (ctypes.c_int, [vp, _i64, _RECORD_FN, vp]),
        "ampx_trainer_evaluate": (ctypes.c_int, [vp, ctypes.POINTER(_Eval)]),
        "ampx_trainer_set_batches": (ctypes.c_int, [vp, _BATCH_FN, vp]),
        "ampx_trainer_row_values": (_i64, [vp]),
        "ampx_trainer_error": (cp, [vp]),
        "ampx_trainer_step": (_i64, [vp]),
        "ampx_trainer_save": (ctypes.c_int, [vp, cp, cp, sz]),
        "ampx_trainer_free": (None, [vp]),
        "ampx_status_name": (cp, [ctypes.c_int]),
        "ampx_trainer_placement": (None, [vp, ctypes.c_int, _LINE_FN, vp]),
        "ampx_trainer_copies": (ctypes.c_uint64, [vp, ctypes.POINTER(ctypes.c_double)]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    _lib = lib
    return lib


def _strings(items):
    items = [s.encode() for s in (items or [])]
    return (ctypes.c_char_p * max(len(items), 1))(*items), len(items)


_INT_FORMATS = "bBhHiIlLqQnN"
_I32_MIN, _I32_MAX = -2**31, 2**31 - 1


def _classes(obj, what):
    """Class labels as an int32 buffer, refused when a value is not a whole number within
    int32 (never truncated or wrapped): int64 and float arrays are checked value by value."""
    try:
        import numpy
    except ImportError:
        numpy = None
    if numpy is not None and isinstance(obj, numpy.ndarray):
        a = obj.reshape(-1)
        if a.dtype.kind == "f":
            bad = numpy.nonzero(~numpy.isfinite(a) | (a != numpy.floor(a)))[0]
            if len(bad):
                raise Error("%s row %d is %r, expected a whole number (a class)"
                            % (what, bad[0], float(a[bad[0]])))
        elif a.dtype.kind not in "iub":
            raise Error("%s: expected integer classes, got dtype %s" % (what, a.dtype))
        bad = numpy.nonzero((a < _I32_MIN) | (a > _I32_MAX))[0]
        if len(bad):
            raise Error("%s row %d is %d, outside the int32 range [%d, %d]"
                        % (what, bad[0], int(a[bad[0]]), _I32_MIN, _I32_MAX))
        return numpy.ascontiguousarray(a, dtype=numpy.int32)
    mv = memoryview(obj)
    fmt = mv.format.lstrip("<=@")
    if fmt in _INT_FORMATS and mv.itemsize != 4:
        values = mv.cast("B").cast(fmt).tolist() if mv.ndim != 1 else mv.tolist()
        for i, v in enumerate(values):
            if not _I32_MIN <= v <= _I32_MAX:
                raise Error("%s row %d is %d, outside the int32 range [%d, %d]"
                            % (what, i, v, _I32_MIN, _I32_MAX))
        return (ctypes.c_int32 * len(values))(*values)
    if fmt in ("f", "d", "e"):
        raise Error("%s: expected integer classes (int32 values, buffer format 'i'), got "
                    "format '%s'" % (what, mv.format))
    return obj


def _array(obj, kind, what):
    """obj's values as a ctypes array of float32 ('f') or int32 ('i'), and its row width
    when obj is two-dimensional (else None)."""
    ctype = ctypes.c_float if kind == "f" else ctypes.c_int32
    try:
        import numpy
        if isinstance(obj, numpy.ndarray) and kind == "f":
            obj = numpy.ascontiguousarray(obj, dtype=numpy.float32)
    except ImportError:
        pass
    width = None
    if kind == "i":
        obj = _classes(obj, what)
    try:
        mv = memoryview(obj)
    except TypeError:
        raise Error("%s: expected a buffer of %s values, got %s"
                    % (what, "float32" if kind == "f" else "int32", type(obj).__name__)) from None
    fmt = mv.format.lstrip("<=@")
    ok = fmt == kind or (mv.format == "B" and mv.nbytes % 4 == 0)
    if not ok or (fmt != "B" and mv.itemsize != 4):
        raise Error("%s: expected %s values (buffer format '%s'), got format '%s'"
                    % (what, "float32" if kind == "f" else "int32", kind, mv.format))
    width = mv.shape[1] if mv.ndim == 2 else None
    arr = (ctype * (mv.nbytes // 4))()
    ctypes.memmove(arr, mv.tobytes(), mv.nbytes)
    return arr, width


class _Object:
    """A library object: its handle, its lock and the count of trainers that use it. close()
    ends its use at once (ampx.Error on any later use) and frees the handle when no trainer
    uses it any more."""
    _free, _what = None, "object"

    def _open(self):
        self._h, self._lock, self._users, self._closed = ctypes.c_void_p(), threading.RLock(), 0, False

    def _handle(self):
        if self._closed or not getattr(self, "_h", None):
            raise Error("%s is closed" % self._what)
        return self._h

    def _release(self):
        with self._lock:
            self._users -= 1
            self._free_unused()

    def _free_unused(self):
        if self._closed and not self._users and self._h:
            h, self._h = self._h, None
            getattr(library(), self._free)(h)

    def close(self):
        """Ends this object's use; it is freed now, or when the last trainer using it closes."""
        lock = getattr(self, "_lock", None)
        if lock is None:  # __init__ failed before the handle existed
            return
        with lock:
            self._closed = True
            self._free_unused()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the module's globals may be gone
            pass


class Model(_Object):
    """A JSON model (ampx_model_load_with): `sets` are --set overrides ("train.steps=400")."""
    _free, _what = "ampx_model_free", "model"

    def __init__(self, path, policy=None, sets=None):
        lib, err = library(), ctypes.create_string_buffer(1024)
        arr, n = _strings(sets)
        self._open()
        self._keep = None
        st = lib.ampx_model_load_with(os.fsencode(path), policy.encode() if policy else None, arr,
                                      n, ctypes.byref(self._h), err, len(err))
        if st:
            self._h = None
            raise Error(err.value.decode(errors="replace"))

    @property
    def steps(self):
        with self._lock:
            return library().ampx_model_train_config(self._handle()).contents.steps

    def set_data(self, x_train, y_train, x_test, y_test, row=None):
        """Trains on these rows instead of the model's "data" (ampx_model_set_data): x arrays of
        float32 rows (features, then regression targets), y arrays of int32 classes (None for a
        regression model), one class per row. `row` is the values per row, or taken from a 2-D
        x. Lengths, types and ranges are checked here: a class is a whole number in int32."""
        self._handle()
        xtr, w1 = _array(x_train, "f", "x_train")
        xte, w2 = _array(x_test, "f", "x_test")
        row = row if row is not None else (w1 or w2)
        if row is None:
            raise Error("set_data: give row= (values per row) for one-dimensional x arrays")
        if isinstance(row, bool) or not isinstance(row, int) or row <= 0:
            raise Error("set_data: row=%r, expected a positive number of values per row" % (row,))
        if len(xtr) % row or len(xte) % row:
            raise Error("set_data: x arrays of %d and %d values are not whole rows of %d"
                        % (len(xtr), len(xte), row))
        n_train, n_test = len(xtr) // row, len(xte) // row
        ytr = _array(y_train, "i", "y_train")[0] if y_train is not None else None
        yte = _array(y_test, "i", "y_test")[0] if y_test is not None else None
        for name, y, n in (("y_train", ytr, n_train), ("y_test", yte, n_test)):
            if y is not None and len(y) != n:
                raise Error("set_data: %s holds %d classes, expected one per row: %d"
                            % (name, len(y), n))
        mem = _Memory(n_train, n_test, row, ctypes.cast(xtr, _f32p), ctypes.cast(xte, _f32p),
                      ctypes.cast(ytr, _i32p) if ytr is not None else None,
                      ctypes.cast(yte, _i32p) if yte is not None else None)
        with self._lock:
            st = library().ampx_model_set_data(self._handle(), ctypes.byref(mem))
            if st:
                raise Error("set_data: %s (a token model reads windows, not rows)"
                            % library().ampx_status_name(st).decode())
            self._keep = (mem, xtr, xte, ytr, yte)  # the library keeps the pointers until create


class Backend(_Object):
    """A backend plugin (ampx_backend_open): "cpu", "opencl", "cuda" or a path to a plugin."""
    _free, _what = "ampx_backend_close", "backend"

    def __init__(self, spec="cpu", options=None):
        lib, err = library(), ctypes.create_string_buffer(1024)
        arr, n = _strings(options)
        self._open()
        if lib.ampx_backend_open(os.fsencode(spec), arr, n, ctypes.byref(self._h), err, len(err)):
            self._h = None
            raise Error(err.value.decode(errors="replace"))


class Trainer:
    """A trainer of a model on a backend (ampx_trainer_create). It keeps both alive until it
    is closed. Its calls hold the backend's lock: one thread at a time, waiting its turn."""

    def __init__(self, model, backend):
        self._h = None
        if not isinstance(model, Model) or not isinstance(backend, Backend):
            raise Error("Trainer(model, backend): expected an ampx.Model and an ampx.Backend")
        lib, err = library(), ctypes.create_string_buffer(1024)
        self._model, self._backend, self._lock = model, backend, backend._lock
        self._source, self._failure, self._running, self._close_later = None, [], 0, False
        h = ctypes.c_void_p()
        with model._lock, backend._lock:  # always model, then backend
            if lib.ampx_trainer_create(model._handle(), backend._handle(), ctypes.byref(h), err,
                                       len(err)):
                raise Error(err.value.decode(errors="replace"))
            model._users += 1
            backend._users += 1
        self._h = h

    @contextlib.contextmanager
    def _use(self, what):
        with self._lock:
            if not self._h or self._close_later:
                raise Error("%s: the trainer is closed" % what)
            yield self._h

    def _check(self, st):
        if st:
            raise Error(library().ampx_trainer_error(self._h).decode(errors="replace"))

    def set_batches(self, source):
        """Trains on the batches source(micro, rows) returns (ampx_trainer_set_batches): a pair
        (x, y) of `rows` rows of float32 values (ampx_trainer_row_values each: the inputs, then
        a regression model's targets) and their int32 classes (None for real-valued targets), as
        any buffer-protocol object or numpy array. micro counts the micro-batches from 0. The
        held-out rows stay the model's. None returns to the model's training rows."""
        lib = library()
        with self._use("set_batches") as h:
            row = lib.ampx_trainer_row_values(h)

        def cb(_user, micro, rows, xp, yp):
            try:
                x, y = source(micro, rows)
                xa = _array(x, "f", "batch x")[0]
                if len(xa) != rows * row:
                    raise Error("batch %d: x holds %d values, expected %d rows of %d"
                                % (micro, len(xa), rows, row))
                ctypes.memmove(xp, xa, rows * row * 4)
                if yp:
                    ya = _array(y, "i", "batch y")[0]
                    if len(ya) != rows:
                        raise Error("batch %d: y holds %d classes, expected %d"
                                    % (micro, len(ya), rows))
                    ctypes.memmove(yp, ya, rows * 4)
                return 0
            except BaseException as e:  # raised again by run, never across the C frames
                self._failure.append(e)
                return 1

        with self._use("set_batches") as h:
            self._source = _BATCH_FN(cb) if source else None
            self._check(lib.ampx_trainer_set_batches(h, self._source or _BATCH_FN(), None))

    def run(self, until=None, on_record=None):
        """Trains up to step `until` (default: the model's steps). on_record(dict) is called for
        each step as the trainer reads the records back; a true return value stops the run at
        the end of that log interval. An exception raised there (KeyboardInterrupt included)
        stops the run and is raised again here; closing the trainer there stops it too."""
        with self._use("run") as h:
            if self._running:
                raise Error("run: called from inside the trainer's own callback")
            failure = self._failure
            del failure[:]

            def cb(_user, rp):
                try:
                    r = rp.contents
                    rec = {"step": r.step, "loss": r.loss, "scale": r.scale,
                           "skipped": bool(r.skipped), "lr": r.lr, "grad_norm": r.grad_norm,
                           "time_ms": r.time_ms, "warning": _text(r.warning)}
                    if r.health:  # a monitored step
                        rec.update(created_by=_text(r.created_by),
                                   headroom_tensor=_text(r.headroom_tensor),
                                   headroom_bits=r.headroom_bits,
                                   headroom_warning=_text(r.headroom_warning))
                    if r.n_fp8:  # policy.fp8, at the end of a log interval
                        rec["fp8"] = [{"tensor": _text(q.name), "format": _text(q.format),
                                       "scale": q.scale, "amax": q.amax,
                                       "saturated": q.saturated, "flushed": q.flushed}
                                      for q in r.fp8[:r.n_fp8]]
                    stop = bool(on_record and on_record(rec))
                    return 1 if stop or self._close_later else 0
                except BaseException as e:  # raised again after the run, never across C frames
                    failure.append(e)
                    return 1

            fn = _RECORD_FN(cb)
            steps = until if until is not None else \
                library().ampx_model_train_config(self._model._h).contents.steps
            self._running += 1
            try:
                st = library().ampx_trainer_run(h, steps, fn, None)
            finally:
                self._running -= 1
            try:
                if failure:
                    raise failure[0]
                if not self._close_later:
                    self._check(st)
            finally:
                del failure[:]
        if self._close_later:
            self.close()

    @property
    def step(self):
        with self._use("step") as h:
            return library().ampx_trainer_step(h)

    def evaluate(self):
        """The held-out figures: accuracy and loss (classifiers), mse, mae, r2 (regression)."""
        ev = _Eval()
        with self._use("evaluate") as h:
            self._check(library().ampx_trainer_evaluate(h, ctypes.byref(ev)))
        out = {"loss": ev.loss, "examples": ev.examples}
        if ev.regression:
            out.update(mse=ev.mse, mae=ev.mae, r2=ev.r2)
        else:
            out["accuracy"] = ev.accuracy
        return out

    def placement(self, full=True):
        """Where each node runs on a backend list ("opencl,cpu"), as lines: with full, one per
        node with its backend, the bytes copied in before it and why; else the summary line
        (nothing on one backend)."""
        lines = []
        cb = _LINE_FN(lambda _user, line: lines.append(line.decode(errors="replace")))
        with self._use("placement") as h:
            library().ampx_trainer_placement(h, 1 if full else 0, cb, None)
        return lines

    def copies(self):
        """Bytes the copies between the backends of a list moved so far, and their seconds."""
        secs = ctypes.c_double()
        with self._use("copies") as h:
            n = library().ampx_trainer_copies(h, ctypes.byref(secs))
        return n, secs.value

    def save(self, path):
        err = ctypes.create_string_buffer(1024)
        with self._use("save") as h:
            if library().ampx_trainer_save(h, os.fsencode(path), err, len(err)):
                raise Error(err.value.decode(errors="replace"))

    def close(self):
        """Frees the trainer (inside its own run's callback: when that run returns) and lets
        go of its model and backend."""
        lock = getattr(self, "_lock", None)
        if lock is None or not self._h:
            return
        with lock:
            if not self._h:
                return
            if self._running:
                self._close_later = True
                return
            h, self._h = self._h, None
            library().ampx_trainer_free(h)
        self._model._release()  # outside the backend's lock: a model's lock comes first
        self._backend._release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the module's globals may be gone
            pass
