"""Every supported type, both directions, through C echo functions."""
import ctypes
import enum
import math

import numpy as np
import pytest

import packedfunc as pf


@pytest.fixture
def echo(fn):
    return fn("echo")


@pytest.fixture
def type_name(fn):
    return fn("type_name")


@pytest.mark.parametrize("value", [0, 1, -1, 42, 2**63 - 1, -2**63, 123456789012])
def test_int(echo, type_name, value):
    r = echo(value)
    assert r == value and type(r) is int
    assert type_name(value) == "int"


@pytest.mark.parametrize("value", [2**63, -2**63 - 1, 10**30])
def test_int_out_of_range_is_overflow_error(echo, value):
    with pytest.raises(OverflowError, match="argument 0"):
        echo(value)
    with pytest.raises(OverflowError, match="argument 1"):
        pf.get_global_func("testing.nargs")(1, value)


@pytest.mark.parametrize("value", [0.0, -1.5, 1e300, math.inf, -math.inf])
def test_float(echo, type_name, value):
    r = echo(value)
    assert r == value and type(r) is float
    assert type_name(value) == "float"


def test_nan(echo):
    assert math.isnan(echo(math.nan))


@pytest.mark.parametrize("value", [True, False])
def test_bool_comes_back_as_bool(echo, type_name, value):
    r = echo(value)
    assert r is value
    assert type_name(value) == "bool"


def test_none(echo, type_name):
    assert echo(None) is None
    assert type_name(None) == "null"


@pytest.mark.parametrize("value", ["", "hello", "héllo wörld", "日本語", "emoji \U0001F600",
                                   "x" * 10000])
def test_str(echo, type_name, value):
    r = echo(value)
    assert r == value and type(r) is str
    assert type_name(value) == "str"


def test_str_with_nul_is_rejected(echo):
    with pytest.raises(ValueError, match="argument 0.*NUL"):
        echo("a\0b")


@pytest.mark.parametrize("value", [b"", b"abc", b"a\0b\0", bytes(range(256)) * 10])
def test_bytes_binary_safe(echo, fn, type_name, value):
    r = echo(value)
    assert r == value and type(r) is bytes
    assert fn("bytes_len")(value) == len(value)
    assert type_name(value) == "bytes"


def test_bytearray_and_memoryview(echo, fn):
    data = b"x\0y\0z"
    assert echo(bytearray(data)) == data
    assert echo(memoryview(data)) == data  # read-only view
    assert echo(memoryview(bytearray(data))) == data  # writable view
    assert echo(memoryview(b"0123456789")[::2]) == b"02468"  # strided
    assert fn("bytes_len")(bytearray(b"\0\0\0")) == 3


def test_datatype(echo, type_name):
    for name in ["float32", "int8", "uint16", "float16x4", "bfloat16", "bool", "int64"]:
        dt = pf.DataType(name)
        r = echo(dt)
        assert r == dt and type(r) is pf.DataType
        assert str(r) == name
    assert type_name(pf.DataType("float32")) == "dtype"
    assert echo(np.dtype("float64")) == pf.DataType("float64")


def test_device(echo, type_name):
    for dev in [pf.Device("cpu", 0), pf.Device("cuda", 3), pf.Device("cuda:1"),
                pf.Device(2, 7)]:
        r = echo(dev)
        assert r == dev and type(r) is pf.Device
    assert type_name(pf.Device("cpu")) == "device"
    assert str(pf.Device("cuda", 1)) == "cuda:1"


def test_opaque_handle(echo, type_name):
    buf = ctypes.create_string_buffer(8)
    h = ctypes.cast(buf, ctypes.c_void_p)
    r = echo(h)
    assert isinstance(r, ctypes.c_void_p) and r.value == h.value
    assert type_name(h) == "handle"


def test_function_round_trip(echo, type_name, fn):
    add = fn("add")
    r = echo(add)
    assert isinstance(r, pf.Function)
    assert r == add and r.handle == add.handle  # the same PackedFunc
    assert r(2, 3) == 5
    assert type_name(add) == "function"


def test_callable_is_converted_automatically(echo, type_name):
    r = echo(lambda a, b: a - b)
    assert isinstance(r, pf.Function)
    assert r(10, 4) == 6
    assert type_name(print) == "function"


def test_converted_function_round_trip_is_not_rewrapped(echo):
    f = pf.convert(lambda: 7)
    assert pf.convert(f) is f
    back = echo(f)
    assert back == f and back.handle == f.handle


def test_object_handle(echo, fn):
    boxed = fn("make_boxed")()
    assert isinstance(boxed, pf.Object) and boxed.type_index == 4
    again = echo(boxed)
    assert again.handle == boxed.handle


def test_function_returned_from_c(fn):
    f = fn("make_func")()
    assert isinstance(f, pf.Function) and f(20, 22) == 42


def test_many_arguments(fn):
    nargs = fn("nargs")
    assert nargs() == 0
    assert nargs(*range(8)) == 8
    assert nargs(*range(30)) == 30
    assert nargs(*(["s", 1.0, None, b"b", True] * 6)) == 30
    call = fn("call")
    assert call(lambda *a: sum(a), *range(20)) == sum(range(20))


def test_mixed_argument_types_reach_callbacks(fn):
    seen = []

    def cb(*args):
        seen.append(args)
        return len(args)

    dev, dt = pf.Device("cpu", 0), pf.DataType("int32")
    args = (1, 2.5, True, None, "s", b"b\0", dev, dt)
    assert fn("call")(cb, *args) == len(args)
    got = seen[0]
    assert got == args
    assert [type(x) for x in got] == [type(x) for x in args]


def test_numpy_scalars_and_subclasses(echo, type_name):
    class Color(enum.IntEnum):
        RED = 3

    class MyStr(str):
        pass

    class MyFloat(float):
        pass

    assert echo(np.int64(5)) == 5 and type(echo(np.int32(5))) is int
    assert echo(np.float32(0.5)) == 0.5
    assert echo(np.bool_(True)) is True
    assert echo(Color.RED) == 3 and type_name(Color.RED) == "int"
    assert echo(MyStr("abc")) == "abc"
    assert echo(MyFloat(2.5)) == 2.5


class LyingStr(str):
    """A str whose __str__ and encode say something else."""

    def __str__(self):
        return "lie"

    def encode(self, *args, **kwargs):
        return b"lie"


class LyingInt(int):
    """An int whose conversions to int say something else."""

    def __int__(self):
        return 99

    def __index__(self):
        return 98

    def __and__(self, other):
        return 97


class LyingFloat(float):
    def __float__(self):
        return 99.0


class Shade(enum.IntEnum):
    DARK = 7


def test_subclasses_cross_as_their_value_not_their_overrides(echo, type_name, fn):
    # As arguments and as a callback's results: the value that the base
    # type holds, whatever the subclass's methods say.
    s, i, f = LyingStr("abc"), LyingInt(5), LyingFloat(2.5)
    assert echo(s) == "abc" and type(echo(s)) is str
    assert echo(i) == 5 and type(echo(i)) is int and type_name(i) == "int"
    assert echo(f) == 2.5 and type(echo(f)) is float
    assert echo(Shade.DARK) == 7 and type(echo(Shade.DARK)) is int
    assert echo(True) is True and type_name(True) == "bool"
    assert fn("nargs")(s, i, f, Shade.DARK) == 4
    call = fn("call")
    assert call(lambda: LyingStr("xyz")) == "xyz"
    assert call(lambda: LyingInt(-3)) == -3
    assert call(lambda: LyingFloat(0.5)) == 0.5
    assert call(lambda: Shade.DARK) == 7
    # convert keeps a plain value as it is (as for numpy scalars): what
    # crosses is its value.
    assert pf.convert(s) is s and echo(pf.convert(s)) == "abc"


def test_bad_container_item_names_type_and_position(echo, fn):
    with pytest.raises(TypeError, match=r"argument 0 at \[0\], dict key 0 \(2.5\) has "
                       "unsupported type float"):
        echo([{2.5: 1}])
    with pytest.raises(TypeError, match=r"argument 2, dict key 1 \(\(\)\) has unsupported "
                       "type tuple"):
        fn("nargs")(1, 2, {"a": 1, (): 2})


def test_callback_returning_a_tuple_gives_an_array(fn):
    r = fn("call")(lambda: (1, 2))
    assert isinstance(r, pf.Array) and r == (1, 2)


def test_c_argument_type_error(fn):
    with pytest.raises(TypeError, match="testing.add: argument 1 must be int, not str"):
        fn("add")(1, "two")


def test_every_type_code_has_one_decoder():
    # Results and callback arguments share one decoder table, keyed by the
    # type codes that the library names: a new code needs one registration.
    from packedfunc import _convert, _library
    assert sorted(_convert._decoders) == sorted(_library.TYPE_CODES.values())


def test_extension_codes_are_refused_as_results_and_as_callback_arguments():
    from packedfunc import _convert, _errors, _ffi, _mirrors
    ext = _mirrors.EXT_BEGIN  # C passes codes of the extension range through untouched
    assert _ffi.PFTypeCodeName(ext) == b"ext"
    with pytest.raises(TypeError, match=r"returned a value of unsupported type code %d "
                       r"\(extension\)" % ext):
        _convert.decode(bytes(8), 0, ext)
    # A C caller passes an extension value to a Python callback.
    cb = pf.convert(lambda x: x)
    vals, codes = (ctypes.c_int64 * 1)(7), (ctypes.c_int * 1)(ext)
    out, code = ctypes.c_int64(), ctypes.c_int()
    with pytest.raises(TypeError, match="a callback got an argument of unsupported type code %d"
                       % ext):
        _errors.check_call(_ffi._cdll.PFFuncCall(ctypes.c_void_p(cb.handle), vals, codes, 1,
                                                 ctypes.byref(out), ctypes.byref(code)))
