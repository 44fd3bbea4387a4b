"""packedfunc.typed: a Function from a C function pointer and a signature."""
import ctypes
import inspect

import numpy as np
import pytest

import packedfunc as pf

LIBC = ctypes.CDLL(None)


def test_libc_functions():
    labs = pf.typed(LIBC.labs, "int64(int64)")
    assert labs(-7) == 7 and labs(2**62) == 2**62
    assert labs.signature == "int64(int64)"
    assert str(inspect.signature(labs)) == "(arg0: int, /) -> int"
    strlen = pf.typed(LIBC.strlen, "uint64(str)")
    assert strlen("hello") == 5 and strlen("") == 0


@pytest.mark.parametrize("as_pointer", [
    lambda f: ctypes.cast(f, ctypes.c_void_p).value,     # an int address
    lambda f: ctypes.cast(f, ctypes.c_void_p),           # a c_void_p
    lambda f: f,                                         # the ctypes function
], ids=["int", "c_void_p", "ctypes-function"])
def test_every_kind_of_pointer(testlib, as_pointer):
    add = pf.typed(as_pointer(testlib.pft_add), "int64(int64,int64)")
    assert add(40, 2) == 42
    with pytest.raises(TypeError, match="argument 1: expected int64, got float"):
        add(1, 2.5)
    with pytest.raises(TypeError, match="takes 2 arguments, got 1"):
        add(1)


def test_a_ctypes_callback_into_python():
    proto = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double, ctypes.c_int32)
    scale = pf.typed(proto(lambda x, k: x * k), "float64(float64,int32)")
    assert scale(1.5, 4) == 6.0  # the callback object was kept alive


def test_typed_function_passes_to_c_and_to_numpy(fn, testlib):
    ndim = pf.typed(testlib.pft_tensor_ndim, "int64(tensor)")
    assert ndim(np.zeros((2, 3))) == 2
    assert fn("call")(pf.typed(testlib.pft_add, "int64(int64,int64)"), 1, 2) == 3


@pytest.mark.parametrize("bad,exc,match", [
    (0, ValueError, "typed: argument 'fn' is a NULL pointer"),
    (ctypes.c_void_p(), ValueError, "typed: argument 'fn' is a NULL pointer"),
    (-1, ValueError, r"typed: argument 'fn' \(-1\) is not an address"),
    (2**64, ValueError, "is not an address"),
    (True, TypeError, "typed: argument 'fn' must be a C function pointer .*, not bool"),
    ("labs", TypeError, "must be a C function pointer .*, not str"),
    (1.5, TypeError, "not float"),
    (None, TypeError, "not NoneType"),
    (ctypes.c_int(5), TypeError, "not c_int"),
], ids=["zero", "null-c_void_p", "negative", "too-large", "bool", "str", "float", "None",
        "c_int"])
def test_bad_fn(bad, exc, match):
    with pytest.raises(exc, match=match):
        pf.typed(bad, "int64(int64)")


@pytest.mark.parametrize("bad,exc,match", [
    ("int64(int64,,int64)", ValueError, "typed: argument 'signature': .*bad signature "
     "\"int64\\(int64,,int64\\)\" at position 12"),
    ("", ValueError, "at position 0"),
    ("float(int64)", ValueError, "'float' is ambiguous"),
    ("int64(int64", ValueError, "argument 'signature'"),
    ("int64(int64)\0", ValueError, "argument 'signature' .* contains a NUL character"),
    ("int64(ïnt64)", ValueError, "argument 'signature' .* is not ASCII"),
    (None, TypeError, "typed: argument 'signature' must be a str, not NoneType"),
    (b"int64(int64)", TypeError, "must be a str, not bytes"),
], ids=["double-comma", "empty", "ambiguous", "unclosed", "nul", "non-ascii", "None", "bytes"])
def test_bad_signature(bad, exc, match):
    with pytest.raises(exc, match=match):
        pf.typed(LIBC.labs, bad)


def test_shape_parameter_takes_a_list_or_tuple(testlib):
    """A list or tuple of ints at a `shape` parameter becomes a Shape, as a
    str at a `device` parameter becomes a Device; elsewhere a list stays an
    Array, which a shape parameter refuses."""
    total = pf.typed(testlib.pft_shape_sum, "int64(shape)")
    assert total(pf.Shape((2, 3))) == 5
    assert total((2, 3)) == 5
    assert total([4, 5, 6]) == 15
    assert total(()) == 0
    assert total((-1, 2**62)) == 2**62 - 1
    with pytest.raises(TypeError, match=r"argument 0: 'str' object cannot be interpreted"):
        total(("a",))
    with pytest.raises(OverflowError, match=r"argument 0: .*does not fit in int64"):
        total((2**64,))
    with pytest.raises(TypeError, match="argument 0"):
        total(pf.convert([1, 2]))  # an Array object is not a Shape
    # A packed function whose signature names a shape parameter gets the
    # same conversion; its other parameters are left alone.
    echo = pf.convert(lambda s, rest: (s, rest))
    echo.set_info(signature="object(shape,object)")
    got = echo((7, 8), (7, 8))
    assert isinstance(got[0], pf.Shape) and got[0] == (7, 8)
    assert not isinstance(got[1], pf.Shape) and list(got[1]) == [7, 8]


# ---- Function.from_c_pointer: a packed C function's address (issue 36) ---------

class Twice(pf.Function):
    """A subclass of Function, with a method of its own."""

    def twice(self, x):
        return self(self(x))


def test_function_from_a_packed_c_function_pointer(fn, testlib):
    for addr in (testlib.pft_packed_echo, ctypes.cast(testlib.pft_packed_echo, ctypes.c_void_p),
                 ctypes.cast(testlib.pft_packed_echo, ctypes.c_void_p).value):
        f = pf.Function.from_c_pointer(addr)
        assert type(f) is pf.Function
        assert f("x") == "x" and f([1, 2]) == [1, 2]
        assert fn("call")(f, 7) == 7  # and passes to C
    with pytest.raises(TypeError, match="testing.echo: expected 1 argument, got 2"):
        f(1, 2)


def test_subclass_of_function_from_a_c_pointer(fn, testlib):
    f = Twice.from_c_pointer(testlib.pft_packed_echo)
    assert type(f) is Twice and isinstance(f, pf.Function)
    assert f.twice(5) == 5
    assert fn("call")(f, 3) == 3
    assert fn("echo")(f) == f  # the same PackedFunc comes back
    with pytest.raises(TypeError, match="cannot be created directly"):
        Twice()


@pytest.mark.parametrize("bad,exc,match", [
    (0, ValueError, "Function.from_c_pointer: argument 'fn' is a NULL pointer"),
    (-1, ValueError, r"Function.from_c_pointer: argument 'fn' \(-1\) is not an address"),
    (True, TypeError, "Function.from_c_pointer: argument 'fn' must be a C function pointer "
     ".*, not bool"),
    ("echo", TypeError, "not str"),
], ids=["zero", "negative", "bool", "str"])
def test_from_c_pointer_bad_fn(bad, exc, match):
    with pytest.raises(exc, match=match):
        pf.Function.from_c_pointer(bad)
