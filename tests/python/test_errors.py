"""Errors across the boundary, both ways, and custom kinds."""
import os
import subprocess
import sys
import traceback

import pytest

import packedfunc as pf
from packedfunc import _errors, _ffi

from conftest import ROOT

BUILTIN = [TypeError, ValueError, KeyError, IndexError, AttributeError, NotImplementedError,
           MemoryError, RuntimeError]


@pytest.mark.parametrize("cls", BUILTIN)
def test_c_error_kind_maps_to_class(fn, cls):
    with pytest.raises(cls) as info:
        fn("raise_error")(cls.__name__, "message from C")
    assert type(info.value) is cls
    assert "message from C" in str(info.value)


def test_unknown_kind_is_runtime_error(fn):
    with pytest.raises(RuntimeError, match="odd"):
        fn("raise_error")("SomeUnknownKind", "odd")


def test_other_builtin_kinds_map_by_name(fn):
    with pytest.raises(ZeroDivisionError):
        fn("raise_error")("ZeroDivisionError", "x")


def test_failure_without_error_is_runtime_error(fn):
    with pytest.raises(RuntimeError, match="without recording an error"):
        fn("fail_silently")()


@pytest.mark.parametrize("cls", BUILTIN + [ZeroDivisionError, OverflowError])
def test_callback_exception_comes_back_as_same_class(fn, cls):
    def cb():
        raise cls("raised in python")

    with pytest.raises(cls) as info:
        fn("call")(cb)
    err = info.value
    assert type(err) is cls and err.args == ("raised in python",)
    # One traceback: the C level is a frame of its own, then the callback.
    names = [f.name for f in traceback.extract_tb(err.__traceback__)]
    assert names[-1] == "cb" and "testing.call" in names
    assert names.index("testing.call") < names.index("cb")


def test_callback_error_kind_seen_by_c(fn):
    # A C caller sees the kind without parsing: testing.call propagates it
    # and adds its own traceback line.
    def cb():
        raise IndexError("out of range")

    with pytest.raises(IndexError) as info:
        fn("call")(cb)
    assert "in testing.call" in "".join(traceback.format_exception(info.value))


def test_unregistered_subclass_keeps_its_class(fn):
    class MyValueError(ValueError):
        pass

    def cb():
        raise MyValueError("mine")

    with pytest.raises(MyValueError) as info:
        fn("call")(cb)
    assert type(info.value) is MyValueError


def test_plain_custom_exception_is_runtime_error_kind(fn):
    class Odd(Exception):
        pass

    def cb():
        raise Odd("odd")

    # The kind is RuntimeError, but the original class comes back.
    assert _errors.kind_of(Odd) == "RuntimeError"
    with pytest.raises(Odd):
        fn("call")(cb)


def test_nested_callbacks(fn):
    call = fn("call")

    def inner():
        raise KeyError("deep")

    def outer():
        return call(inner)

    with pytest.raises(KeyError) as info:
        call(outer)
    assert "deep" in str(info.value)


def test_register_error_both_ways(fn):
    @pf.register_error("pytest.CustomKind")
    class CustomError(Exception):
        pass

    # C -> Python
    with pytest.raises(CustomError, match="from C"):
        fn("raise_error")("pytest.CustomKind", "from C")
    # Python -> C: the kind C sees is the registered one.
    assert _errors.kind_of(CustomError) == "pytest.CustomKind"

    seen = {}

    def cb():
        raise CustomError("from python")

    with pytest.raises(CustomError):
        fn("call")(cb)
    f = pf.convert(cb)
    # Call the callback from C and read the kind in C's error state.
    with pytest.raises(CustomError):
        f()
    seen["kind"] = _ffi.PFErrorGetKind().decode()
    assert seen["kind"] == "pytest.CustomKind"


def test_register_error_forms_and_validation():
    class A(Exception):
        pass

    class B(Exception):
        pass

    assert pf.register_error(A) is A
    assert _errors.class_of("A") is A
    assert pf.register_error("pytest.B", B) is B
    assert _errors.class_of("pytest.B") is B
    with pytest.raises(ValueError, match="not an identifier"):
        pf.register_error("bad kind", B)
    with pytest.raises(ValueError):
        pf.register_error("x" * 64, B)
    with pytest.raises(TypeError, match="exception class"):
        pf.register_error("Fine", int)
    with pytest.raises(TypeError, match="must be a str"):
        pf.register_error(3, B)


def test_error_from_callback_on_c_thread(fn):
    def cb():
        raise ValueError("on a C thread")

    with pytest.raises(ValueError) as info:
        fn("call_in_thread")(cb)
    assert str(info.value) == "on a C thread"
    assert traceback.extract_tb(info.value.__traceback__)[-1].name == "cb"


def test_callback_result_overflow(fn):
    with pytest.raises(OverflowError, match="int64"):
        fn("call")(lambda: 2**70)


# The binding keeps a few exceptions that callbacks raised (so that an
# error coming back to Python is the original object). A C thread that
# ignores 300 errors makes it drop old ones; dropping one frees what its
# traceback kept, here an object whose __del__ has a failing callback
# record another exception on the same thread. That once happened while
# the binding held its non-reentrant lock: a deadlock. In a subprocess, so
# that a hang fails the test by its timeout.
EVICTION_SCRIPT = r"""
import ctypes, os
import packedfunc as pf
ctypes.CDLL(os.environ["PF_TESTLIB_PATH"]).pft_init()
call = pf.get_global_func("testing.call")
call_in_thread_n = pf.get_global_func("testing.call_in_thread_n")
deleted = [0]

def failing():
    raise KeyError("raised by a __del__'s callback")

armed = [True]  # the exceptions still kept die at exit: let them go quietly

class Tripwire:
    def __del__(self):
        if armed and armed[0]:
            deleted[0] += 1
            try:
                call(failing)
            except KeyError:
                pass

def raises():
    tripwire = Tripwire()  # kept alive by the exception's traceback
    raise ValueError("C ignores this")

print(call_in_thread_n(raises, 300), deleted[0] > 0)
armed[0] = False
"""


def test_dropping_a_saved_exception_runs_no_user_code_under_a_lock(testlib):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"),
               PF_TESTLIB_PATH=testlib._name)
    r = subprocess.run([sys.executable, "-c", EVICTION_SCRIPT], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "300 True\n"
    assert r.stderr == ""



# ---- Kinds that name a class outside Exception ---------------------------------
#
# An error's kind is text: C code, a plugin or a remote server chooses it.
# One that names a class which `except Exception` does not catch
# (SystemExit, KeyboardInterrupt, GeneratorExit, BaseExceptionGroup) would
# let any of them end the program; such a kind arrives as a RuntimeError that
# names it. Only an exception that this process raised itself (a callback's,
# Ctrl-C's) comes back as such a class: as the very object it was.

BASE_ONLY = ["SystemExit", "KeyboardInterrupt", "GeneratorExit", "BaseExceptionGroup",
             "BaseException"]


@pytest.mark.parametrize("kind", BASE_ONLY)
def test_c_error_of_a_base_only_kind_is_an_ordinary_exception(fn, kind):
    try:
        fn("raise_error")(kind, "the program should end")
    except Exception as err:  # noqa: BLE001 - the point of the test
        caught = err
    assert type(caught) is RuntimeError
    assert caught.kind == kind
    assert str(caught) == "%s: the program should end" % kind


@pytest.mark.parametrize("kind", BASE_ONLY)
def test_base_only_kind_through_c_levels_is_an_ordinary_exception(fn, kind):
    with pytest.raises(RuntimeError, match="^%s: nested$" % kind):
        fn("call")(fn("call"), fn("raise_error"), kind, "nested")


def test_kind_whose_class_needs_more_arguments_is_a_runtime_error(fn):
    # UnicodeDecodeError and ExceptionGroup take more than a message: the
    # error still arrives, as a RuntimeError naming the kind.
    for kind in ("UnicodeDecodeError", "ExceptionGroup"):
        with pytest.raises(RuntimeError, match="^%s: odd$" % kind) as info:
            fn("raise_error")(kind, "odd")
        assert info.value.kind == kind


def test_keyboard_interrupt_from_a_callback_still_propagates(fn):
    # Raised in this process: the very object comes back, as its class.
    raised = []

    def cb():
        raised.append(KeyboardInterrupt("Ctrl-C in a callback"))
        raise raised[-1]

    with pytest.raises(KeyboardInterrupt) as info:
        fn("call")(cb)
    assert info.value is raised[0]
    with pytest.raises(SystemExit) as info:
        fn("call")(lambda: sys.exit(3))
    assert info.value.code == 3


def test_register_error_refuses_classes_outside_exception():
    class Fatal(BaseException):
        pass

    for cls in (Fatal, KeyboardInterrupt, SystemExit, GeneratorExit, BaseException):
        with pytest.raises(TypeError, match="Exception"):
            pf.register_error("pytest.Fatal", cls)
    assert _errors.class_of("pytest.Fatal") is RuntimeError
    # The kind of a Python KeyboardInterrupt is still its name (for C).
    assert _errors.kind_of(KeyboardInterrupt) == "KeyboardInterrupt"


def test_remote_error_of_a_base_only_kind_is_an_ordinary_exception(fn):
    from packedfunc import rpc
    server = rpc.serve("tcp://127.0.0.1:*", expose=["testing.raise_error"], workers=1)
    try:
        with rpc.connect(server.endpoint, timeout=20) as remote:
            for kind in ("SystemExit", "KeyboardInterrupt", "GeneratorExit"):
                try:
                    remote["testing.raise_error"](kind, "from the server")
                except Exception as err:  # noqa: BLE001
                    caught = err
                assert type(caught) is RuntimeError and caught.kind == kind
                assert str(caught) == "%s: from the server" % kind
    finally:
        server.stop()


# Each process's exceptions are named by tokens in the error's text, which
# travels: a server's text that happens to name a token of the client must
# not take the client's own exception (another thread's, or one C kept).
TOKEN_SCRIPT = r"""
import ctypes, os
import packedfunc as pf
from packedfunc import _ffi
ctypes.CDLL(os.environ["PF_TESTLIB_PATH"]).pft_init()
def cb():
    raise ValueError("same text")
pf.get_global_func("testing.call_ignoring")(cb)
print(_ffi.PFErrorGetTraceback().decode().splitlines()[0])
"""


def test_error_tokens_are_unique_to_a_process(testlib):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"),
               PF_TESTLIB_PATH=testlib._name)
    tokens = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", TOKEN_SCRIPT], env=env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        tokens.append(r.stdout.strip())
    assert tokens[0].startswith("[python exception #"), tokens
    assert tokens[0] != tokens[1]
