"""The two backends: choosing one, falling back, and the same behaviour on both.

The whole suite runs once per backend (`make test-python`); the tests here
check the switch itself in fresh interpreters, and the edges where the
compiled fast path hands over to the package's general path (which must
then give exactly the ctypes path's results and errors).
"""
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT

import packedfunc
from packedfunc import _callback

PKG = os.path.join(ROOT, "bindings", "python")
CEXT_BUILT = any(name.startswith("_cext") and name.endswith(".so")
                 for name in os.listdir(os.path.join(PKG, "packedfunc")))
cext_only = pytest.mark.skipif(packedfunc.backend != "cext",
                               reason="checks the compiled extension itself")


def _run(code, backend=None, block_extension=False):
    """Runs `code` after importing packedfunc in a fresh interpreter, with
    PACKEDFUNC_BACKEND set to `backend` (None: unset); the extension's
    import fails there when block_extension. Returns the CompletedProcess."""
    env = dict(os.environ)
    env.pop("PACKEDFUNC_BACKEND", None)
    if backend is not None:
        env["PACKEDFUNC_BACKEND"] = backend
    prelude = "import sys\nsys.path.insert(0, %r)\n" % PKG
    if block_extension:
        # What an interpreter without the built extension sees.
        prelude += "sys.modules['packedfunc._cext'] = None\n"
    prelude += "import packedfunc\n"
    return subprocess.run([sys.executable, "-c", prelude + code], env=env, capture_output=True,
                          text=True, timeout=120)


_WORKS = ("f = packedfunc.convert(lambda a, b: a + b)\n"
          "assert f(40, 2) == 42 and f('a', 'b') == 'ab'\n"
          "print(packedfunc.backend)\n")


def test_backend_is_one_of_the_two():
    assert packedfunc.backend in ("cext", "ctypes")
    wanted = os.environ.get("PACKEDFUNC_BACKEND")
    if wanted:
        assert packedfunc.backend == wanted


def test_ctypes_forced_by_the_environment():
    r = _run(_WORKS + "print('packedfunc._cext' in sys.modules)\n"
             "print(packedfunc.Function.__mro__[1].__name__)\n", backend="ctypes")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["ctypes", "False", "object"]


@pytest.mark.skipif(not CEXT_BUILT, reason="the extension is not built (make python)")
def test_extension_used_by_default_when_built():
    r = _run(_WORKS + "print(packedfunc.Function.__mro__[1].__name__)\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["cext", "FunctionBase"]


def test_missing_extension_falls_back_to_ctypes_silently():
    r = _run(_WORKS, block_extension=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["ctypes"]
    assert r.stderr == ""


def test_missing_extension_when_required_is_an_import_error():
    r = _run(_WORKS, backend="cext", block_extension=True)
    assert r.returncode != 0
    assert "ImportError: packedfunc: PACKEDFUNC_BACKEND is 'cext', but the compiled extension " \
           "cannot be used" in r.stderr


def test_unknown_backend_is_an_import_error():
    r = _run(_WORKS, backend="fast")
    assert r.returncode != 0
    assert "PACKEDFUNC_BACKEND is 'fast'; expected one of cext, ctypes, or unset" in r.stderr


# ---- the hand-over points: the same results and errors on both backends -------

@pytest.fixture
def echo_all():
    return packedfunc.convert(lambda *a: a)


def test_mixed_common_types_cross_unchanged(echo_all, fn):
    values = (1, -2**63, 2**63 - 1, 2.5, True, False, None, "héllo", "", b"a\0b", b"")
    assert list(echo_all(*values[:8])) == list(values[:8])
    for v in values:
        out = fn("echo")(v)
        assert out == v and type(out) is type(v)


@pytest.mark.parametrize("args, error, message", [
    (("a", "b\ud800"), ValueError, "argument 1: str contains a lone surrogate"),
    (("b\ud800",), ValueError, "argument 0: str contains a lone surrogate"),
    (("x\0y",), ValueError, "argument 0: str contains a NUL character"),
    (("a", "x\0y"), ValueError, "argument 1: str contains a NUL character"),
    (("a", 2**64), OverflowError, "argument 1: int 18446744073709551616 does not fit in int64"),
    ((1.5, -2**63 - 1), OverflowError, "argument 1: int"),
    ((object.__new__(type("Odd", (), {"__slots__": ()})),), None, None),
])
def test_errors_after_a_fast_argument_name_the_right_one(echo_all, args, error, message):
    if error is None:  # an opaque host object: not a fast type, and no error
        assert echo_all(*args)[0] is args[0]
        return
    with pytest.raises(error, match=message.replace("(", r"\(")):
        echo_all(*args)


def test_more_arguments_than_the_fast_path_takes(fn):
    many = list(range(12)) + ["s", b"b", 1.5, None]
    assert fn("nargs")(*many) == len(many)
    assert list(fn("call")(packedfunc.convert(lambda *a: a), *many)) == many


def test_keyword_arguments_are_refused_alike(fn):
    # A function without a signature has no names to match (PFFuncCallKw).
    with pytest.raises(TypeError, match=r"\(\) takes no keyword arguments"):
        fn("echo")(1, x=2)


def test_released_function_is_refused_alike(fn):
    f = packedfunc.convert(lambda: 1)
    f.__del__()
    for args in ((), (1, 2), ("s",)):
        with pytest.raises(ValueError, match="the Function was released"):
            f(*args)
    with pytest.raises(ValueError, match="argument 0: the Function was released"):
        fn("echo")(f)


def test_objects_dtypes_and_devices_cross_by_their_fields(fn):
    echo = fn("echo")
    for v in (packedfunc.DataType("float32"), packedfunc.DataType("int8x4"),
              packedfunc.Device("cpu:0"), packedfunc.Device("cuda:3")):
        assert echo(v) == v and fn("type_name")(v) in ("dtype", "device")
    arr = packedfunc.convert([1, 2])  # an Array: an Object
    assert echo(arr) == arr and fn("type_name")(arr) == "object"
    arr.__del__()
    with pytest.raises(ValueError, match="argument 0: the Array was released"):
        echo(arr)


def test_strings_become_devices_only_where_the_signature_says(fn):
    device = fn("typed_device")
    expected = device(10, packedfunc.Device("cpu:0"))
    assert device(10, "cpu:0") == expected
    assert device(10, "cpu:0") == expected  # the cached parameters, again
    assert fn("type_name")("cpu:0") == "str"


def test_callback_results_of_every_common_type(fn):
    for value in (7, 2.5, True, None, "s\u00e9", b"\0x"):
        out = fn("call")(packedfunc.convert(lambda v=value: v))
        assert out == value and type(out) is type(value)
    # Not a common type: the package's encoder table (a list as an Array).
    assert list(fn("call")(packedfunc.convert(lambda: [1, "a"]))) == [1, "a"]


@pytest.mark.parametrize("value, error, message", [
    (2**64, OverflowError, "callback result 18446744073709551616 does not fit in int64"),
    ("a\0b", ValueError, "the callback's result: str contains a NUL character"),
    ("\ud800", ValueError, "the callback's result: str contains a lone surrogate"),
])
def test_callback_result_errors_alike(fn, value, error, message):
    cb = packedfunc.convert(lambda: value)
    with pytest.raises(error, match=message):
        fn("call")(cb)


def test_callback_with_handles_and_tensors_takes_the_general_path(fn):
    seen = []

    def cb(f, arr, n):
        seen.append((f, arr.copy(), n))
        return f

    inner = packedfunc.convert(lambda: 5)
    arr = np.arange(3, dtype=np.int64)
    out = fn("call")(packedfunc.convert(cb), inner, arr, 9)
    assert out == inner and out() == 5
    assert seen[0][0] == inner and list(seen[0][1]) == [0, 1, 2] and seen[0][2] == 9


def test_tensor_argument_that_comes_back_is_the_same_object(fn):
    arr = np.arange(4, dtype=np.float64)
    assert fn("echo")(arr) is arr
    assert fn("echo")(arr) is arr  # the array type is known now: the fast path
    from packedfunc import _convert
    assert _convert.tensors_in_flight == {}


def test_tensor_that_cannot_be_exported_is_refused_alike(fn):
    class NoExport:
        def __dlpack__(self, stream=None):
            raise RuntimeError("no")

    with pytest.raises(TypeError, match=r"argument 0 \(NoExport\) cannot be exported"):
        fn("echo")(NoExport())
    fn("echo")(np.arange(3))  # the fast path now knows numpy arrays
    odd = np.zeros(3, dtype=[("a", "<i8"), ("b", "u1")])["a"]  # numpy refuses to export it
    with pytest.raises(TypeError, match=r"argument 0 \(ndarray\) cannot be exported through "
                                        r"DLPack: .*strides"):
        fn("echo")(odd)


def test_callback_count_goes_back_after_release():
    import gc
    gc.collect()
    before = _callback.live_count()
    fs = [packedfunc.convert(lambda i=i: i) for i in range(5)]
    assert _callback.live_count() == before + 5
    del fs
    gc.collect()
    assert _callback.live_count() == before


# ---- the extension's own entry points refuse bad input ---------------------------

@cext_only
def test_extension_entry_points_refuse_bad_input():
    from packedfunc import _cext
    with pytest.raises(TypeError, match="set_hooks: call_general must be a callable"):
        _cext.set_hooks(call_general=1)
    with pytest.raises(TypeError, match="set_hooks: tensor_types must be a set"):
        _cext.set_hooks(tensor_types={})
    with pytest.raises(TypeError, match="set_hooks: tensors_in_flight must be a dict"):
        _cext.set_hooks(tensors_in_flight=set())
    with pytest.raises(TypeError, match="set_hooks: dtype_type must be a class"):
        _cext.set_hooks(dtype_type=packedfunc.DataType("int8"))
    with pytest.raises(TypeError, match="keyword arguments only"):
        _cext.set_hooks(print)
    with pytest.raises(TypeError, match="cls must subclass FunctionBase"):
        _cext.adopt(object, 1)
    with pytest.raises(TypeError, match="cls must subclass FunctionBase"):
        _cext.adopt(packedfunc.Function)
    with pytest.raises(TypeError, match="expected a FunctionBase subclass"):
        _cext.enable_vectorcall(int)
    with pytest.raises(ValueError, match="NULL PFGetApiBase"):
        _cext.init(0)
    with pytest.raises(TypeError, match=r"new_host\(kind, gate, x\)"):
        _cext.new_host(1)
    with pytest.raises(TypeError, match=r"new_host\(kind, gate, x\)"):
        _cext.new_host(1, 2, 3, 4)
    with pytest.raises(ValueError, match="not a kind of hold"):
        _cext.new_host(7, 1, print)
    with pytest.raises(ValueError, match="not a kind of hold"):
        _cext.live_count(-1)
    with pytest.raises(TypeError, match=r"host_object_value\(gate, handle\)"):
        _cext.host_object_value(1)


@cext_only
def test_host_object_on_a_bad_gate_fails_and_drops_the_object():
    from packedfunc import _cext, _holds, _hostobj
    before = _hostobj.live_count()
    rc, handle = _cext.new_host(_holds.OBJECT, 0, object())
    assert (rc, handle) == (-1, 0)
    with pytest.raises(TypeError, match="gate"):
        packedfunc.check_call(rc)
    assert _hostobj.live_count() == before


@cext_only
def test_host_object_value_of_something_else_is_not_found(fn):
    from packedfunc import _cext
    from packedfunc._callback import GATE
    f = packedfunc.convert(lambda: 1)  # a handle, but not a host object
    assert _cext.host_object_value(GATE.value, f.handle) == (False, None)
    assert _cext.host_object_value(GATE.value, 0) == (False, None)
    from packedfunc import _ffi
    assert not _ffi.PFErrorGetKind()  # the lookup's error is not left behind


@cext_only
def test_host_function_on_a_bad_gate_fails_and_drops_the_callable():
    from packedfunc import _cext, _holds
    before = _callback.live_count()
    rc, handle = _cext.new_host(_holds.FUNCTION, 0, print)
    assert (rc, handle) == (-1, 0)
    with pytest.raises(TypeError, match="gate"):
        packedfunc.check_call(rc)
    assert _callback.live_count() == before


@cext_only
def test_callback_error_that_cannot_be_recorded(fn):
    # The recorder raising (as a signal handler can make it, on entry): the
    # newer exception is recorded instead; failing again, a RuntimeError
    # says so. Never a crash, and the callback's call always fails.
    from packedfunc import _cext, _errors
    calls = []

    def flaky(exc, skip_frames):
        calls.append(type(exc).__name__)
        if len(calls) == 1:
            raise KeyboardInterrupt()
        return _errors.record_exception(exc, skip_frames)

    def broken(exc, skip_frames):
        raise MemoryError()

    def cb():
        raise KeyError("lost")

    f = packedfunc.convert(cb)
    try:
        _cext.set_hooks(record_exception=flaky)
        with pytest.raises(KeyboardInterrupt):
            fn("call")(f)
        assert calls == ["KeyError", "KeyboardInterrupt"]
        _cext.set_hooks(record_exception=broken)
        with pytest.raises(RuntimeError, match="its error could not be recorded"):
            fn("call")(f)
    finally:
        _cext.set_hooks(record_exception=_errors.record_exception)
    with pytest.raises(KeyError, match="lost"):
        fn("call")(f)


# The extension is not built with ASan (the interpreter is not); instead a
# short workout of every path it has runs under valgrind memcheck, which
# fails on any invalid read or write (leaks are the interpreter's to keep).
_WORKOUT = r'''
import ctypes, gc, os, sys
import numpy as np
import packedfunc as pf
assert pf.backend == "cext", pf.backend
ctypes.CDLL(os.environ["PF_TESTLIB_PATH"]).pft_init()
g = lambda n: pf.get_global_func("testing." + n)
echo, call, nargs, in_thread = g("echo"), g("call"), g("nargs"), g("call_in_thread")
for i in range(3):
    assert echo(1) == 1 and echo(2.5) == 2.5 and echo(True) is True and echo(None) is None
    assert echo("h\u00e9llo") == "h\u00e9llo" and echo(b"a\0b") == b"a\0b"
    arr = np.arange(5.0)
    assert echo(arr) is arr
    o = object()
    assert echo(o) is o
    cb = pf.convert(lambda *a: a[0] if a else "x")
    assert call(cb, 5) == 5 and call(cb, "s") == "s" and call(cb) == "x"
    assert call(cb, arr) is not None and call(cb, cb) == cb
    assert in_thread(cb, 7) == 7
    assert nargs(*range(12)) == 12
    for bad in (2**70, "a\0b"):
        try:
            echo(bad)
        except (OverflowError, ValueError):
            pass
    def fails():
        raise KeyError("k")
    try:
        call(pf.convert(fails))
    except KeyError:
        pass
    assert list(call(pf.convert(lambda: [1, 2]))) == [1, 2]
    gc.collect()
print("ok")
'''


@cext_only
@pytest.mark.skipif(not os.path.exists("/usr/bin/valgrind"), reason="valgrind is not installed")
def test_extension_under_memcheck(testlib):
    env = dict(os.environ, PYTHONMALLOC="malloc", PF_TESTLIB_PATH=testlib._name,
               PYTHONPATH=PKG)
    r = subprocess.run(["valgrind", "-q", "--error-exitcode=99", sys.executable, "-c", _WORKOUT],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-4000:]


def test_calls_in_turn_keep_their_own_function_and_count(pf):
    """The ctypes path reuses call frames and rewrites only the function
    and, when the argument types change, the codes and their count: calls
    to different functions with the same, then different, argument types,
    nested ones among them, each reach their own function with their own
    arguments."""
    count = pf.convert(lambda *a: ("count", len(a)))
    total = pf.convert(lambda *a: ("total", sum(a)))
    nested = pf.convert(lambda a, b: (count(a, b, a), total(a, b), count()))
    for _ in range(3):
        assert count(1, 2) == ["count", 2]
        assert total(1, 2) == ["total", 3]
        assert count(1.5, 2) == ["count", 2]
        assert count(7) == ["count", 1]
        assert total(1, 2, 3, 4) == ["total", 10]
        assert count() == ["count", 0]
        assert nested(5, 6) == [["count", 3], ["total", 11], ["count", 0]]
        assert total(10, 20) == ["total", 30]
        assert count("a", "b") == ["count", 2]


def test_frame_mirror_matches_the_library():
    """The ctypes mirror of PFCallFrame, whose field offsets the fast path
    uses, has the size the library reports (import checks it too)."""
    from packedfunc import _ffi, _mirrors
    import ctypes
    size = ctypes.c_size_t()
    assert _ffi.PFGetStructSize(b"PFCallFrame", ctypes.byref(size)) == 0
    assert size.value == ctypes.sizeof(_mirrors.PFCallFrame) == 16 + 3 * ctypes.sizeof(
        ctypes.c_void_p)
