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
"""
import ctypes
import ctypes.util
import os

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
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    _lib = lib
    return lib


def _strings(items):
    items = [s.encode() for s in (items or [])]
    return (ctypes.c_char_p * max(len(items), 1))(*items), len(items)


def _array(obj, kind, what):
    """obj's values as a ctypes array of float32 ('f') or int32 ('i'), and its row width
    when obj is two-dimensional (else None)."""
    ctype = ctypes.c_float if kind == "f" else ctypes.c_int32
    try:
        import numpy
        if isinstance(obj, numpy.ndarray):
            obj = numpy.ascontiguousarray(obj, dtype=numpy.float32 if kind == "f" else numpy.int32)
    except ImportError:
        pass
    mv = memoryview(obj)
    fmt = mv.format.lstrip("<=@")
    ok = fmt == kind or (mv.format == "B" and mv.nbytes % 4 == 0)
    if not ok or (fmt != "B" and mv.itemsize != 4):
        raise Error("%s: expected %s values (buffer format '%s'), got format '%s'"
                    % (what, "float32" if kind == "f" else "int32", kind, mv.format))
    width = mv.shape[1] if mv.ndim == 2 else None
    arr = (ctype * (mv.nbytes // 4))()
    ctypes.memmove(arr, mv.tobytes(), mv.nbytes)
    return arr, width


class Model:
    """A JSON model (ampx_model_load_with): `sets` are --set overrides ("train.steps=400")."""

    def __init__(self, path, policy=None, sets=None):
        lib, err = library(), ctypes.create_string_buffer(1024)
        arr, n = _strings(sets)
        self._h = ctypes.c_void_p()
        st = lib.ampx_model_load_with(path.encode(), policy.encode() if policy else None, arr, n,
                                      ctypes.byref(self._h), err, len(err))
        if st:
            raise Error(err.value.decode(errors="replace"))
        self._keep = None

    @property
    def steps(self):
        return library().ampx_model_train_config(self._h).contents.steps

    def set_data(self, x_train, y_train, x_test, y_test, row=None):
        """Trains on these rows instead of the model's "data" (ampx_model_set_data): x arrays of
        float32 rows (features, then regression targets), y arrays of int32 classes (None for a
        regression model). `row` is the values per row, or taken from a 2-D x."""
        xtr, w1 = _array(x_train, "f", "x_train")
        xte, w2 = _array(x_test, "f", "x_test")
        row = row or w1 or w2
        if not row:
            raise Error("set_data: give row= (values per row) for one-dimensional x arrays")
        ytr = _array(y_train, "i", "y_train")[0] if y_train is not None else None
        yte = _array(y_test, "i", "y_test")[0] if y_test is not None else None
        mem = _Memory(len(xtr) // row, len(xte) // row, row,
                      ctypes.cast(xtr, _f32p), ctypes.cast(xte, _f32p),
                      ctypes.cast(ytr, _i32p) if ytr is not None else None,
                      ctypes.cast(yte, _i32p) if yte is not None else None)
        if len(xtr) % row or len(xte) % row:
            raise Error("set_data: x arrays of %d and %d values are not whole rows of %d"
                        % (len(xtr), len(xte), row))
        st = library().ampx_model_set_data(self._h, ctypes.byref(mem))
        if st:
            raise Error("set_data: %s (a token model reads windows, not rows)"
                        % library().ampx_status_name(st).decode())
        self._keep = (mem, xtr, xte, ytr, yte)  # the library keeps the pointers until create

    def close(self):
        if self._h:
            library().ampx_model_free(self._h)
            self._h = None

    def __del__(self):
        self.close()


class Backend:
    """A backend plugin (ampx_backend_open): "cpu", "opencl", "cuda" or a path to a plugin."""

    def __init__(self, spec="cpu", options=None):
        lib, err = library(), ctypes.create_string_buffer(1024)
        arr, n = _strings(options)
        self._h = ctypes.c_void_p()
        if lib.ampx_backend_open(spec.encode(), arr, n, ctypes.byref(self._h), err, len(err)):
            raise Error(err.value.decode(errors="replace"))

    def close(self):
        if self._h:
            library().ampx_backend_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Trainer:
    """A trainer of a model on a backend (ampx_trainer_create); both must outlive it."""

    def __init__(self, model, backend):
        lib, err = library(), ctypes.create_string_buffer(1024)
        self._h = ctypes.c_void_p()
        self._model, self._backend = model, backend
        self._source, self._failure = None, []
        if lib.ampx_trainer_create(model._h, backend._h, ctypes.byref(self._h), err, len(err)):
            raise Error(err.value.decode(errors="replace"))

    def _check(self, st):
        if st:
            raise Error(library().ampx_trainer_error(self._h).decode(errors="replace"))

    def set_batches(self, source):
        """Trains on the batches source(micro, rows) returns (ampx_trainer_set_batches): a pair
        (x, y) of `rows` rows of float32 values (ampx_trainer_row_values each: the inputs, then
        a regression model's targets) and their int32 classes (None for real-valued targets), as
        any buffer-protocol object or numpy array. micro counts the micro-batches from 0. The
        held-out rows stay the model's. None returns to the model's training rows."""
        lib, row = library(), library().ampx_trainer_row_values(self._h)

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
            except Exception as e:  # raised again by run, never across the C frames
                self._failure.append(e)
                return 1

        self._source = _BATCH_FN(cb) if source else None
        self._check(lib.ampx_trainer_set_batches(self._h, self._source or _BATCH_FN(), None))

    def run(self, until=None, on_record=None):
        """Trains up to step `until` (default: the model's steps). on_record(dict) is called for
        each step as the trainer reads the records back; a true return value stops the run at
        the end of that log interval."""
        failure = self._failure
        del failure[:]

        def cb(_user, rp):
            r = rp.contents
            rec = {"step": r.step, "loss": r.loss, "scale": r.scale, "skipped": bool(r.skipped),
                   "lr": r.lr, "grad_norm": r.grad_norm, "time_ms": r.time_ms,
                   "warning": _text(r.warning)}
            if r.health:  # a monitored step
                rec.update(created_by=_text(r.created_by), headroom_tensor=_text(r.headroom_tensor),
                           headroom_bits=r.headroom_bits, headroom_warning=_text(r.headroom_warning))
            if r.n_fp8:  # policy.fp8, at the end of a log interval
                rec["fp8"] = [{"tensor": _text(q.name), "format": _text(q.format), "scale": q.scale,
                               "amax": q.amax, "saturated": q.saturated, "flushed": q.flushed}
                              for q in r.fp8[:r.n_fp8]]
            try:
                return 1 if on_record and on_record(rec) else 0
            except Exception as e:  # raised again after the run, never across the C frames
                failure.append(e)
                return 1

        fn = _RECORD_FN(cb)
        st = library().ampx_trainer_run(self._h, until or self._model.steps, fn, None)
        if failure:
            raise failure[0]
        self._check(st)

    @property
    def step(self):
        return library().ampx_trainer_step(self._h)

    def evaluate(self):
        """The held-out figures: accuracy and loss (classifiers), mse, mae, r2 (regression)."""
        ev = _Eval()
        self._check(library().ampx_trainer_evaluate(self._h, ctypes.byref(ev)))
        out = {"loss": ev.loss, "examples": ev.examples}
        if ev.regression:
            out.update(mse=ev.mse, mae=ev.mae, r2=ev.r2)
        else:
            out["accuracy"] = ev.accuracy
        return out

    def save(self, path):
        err = ctypes.create_string_buffer(1024)
        if library().ampx_trainer_save(self._h, path.encode(), err, len(err)):
            raise Error(err.value.decode(errors="replace"))

    def close(self):
        if self._h:
            library().ampx_trainer_free(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()
