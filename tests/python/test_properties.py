"""Property tests (hypothesis) of the binding's argument conversion.

Values go to C and back through the echo functions of pf_testlib.c
(testing.echo returns its argument as C received it; testing.call and
testing.call_in_thread call a function, here a Python callback, from C), so
every test crosses the boundary in both directions. Values that the binding
must refuse (ints outside int64, strings with NUL or lone surrogates) must
raise a clear error naming the argument, never crash or reach C.

Kept to a few seconds: a bounded number of examples, no deadline, and no
example database on disk (the test command runs from the source tree).
"""
import math
import os
import struct

import hypothesis.configuration
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import packedfunc as pf

INT64_MIN, INT64_MAX = -2**63, 2**63 - 1

SETTINGS = settings(max_examples=150, deadline=None, database=None)
# Hypothesis' own cache (Unicode tables) goes to the build directory when
# `make test-python` runs us, not into the source tree.
if os.environ.get("PF_TESTLIB"):
    hypothesis.configuration.set_hypothesis_home_dir(
        os.path.join(os.path.dirname(os.environ["PF_TESTLIB"]), "hypothesis"))

# The C functions under test (conftest has loaded and initialized the test
# library before this module is imported).
echo = pf.get_global_func("testing.echo")
type_name = pf.get_global_func("testing.type_name")
nargs = pf.get_global_func("testing.nargs")
bytes_len = pf.get_global_func("testing.bytes_len")
c_call = pf.get_global_func("testing.call")
c_call_in_thread = pf.get_global_func("testing.call_in_thread")
ADD = pf.get_global_func("testing.add")

# ---- strategies --------------------------------------------------------------

int64s = st.one_of(
    st.integers(INT64_MIN, INT64_MAX),
    st.sampled_from([INT64_MIN, INT64_MIN + 1, -2**31 - 1, -1, 0, 1, 2**31, 2**53 + 1,
                     INT64_MAX - 1, INT64_MAX]))
outside_int64 = st.one_of(st.integers(min_value=INT64_MAX + 1),
                          st.integers(max_value=INT64_MIN - 1),
                          st.sampled_from([INT64_MAX + 1, INT64_MIN - 1, 2**64, -2**64]))


def _float_from_bits(bits):
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324,
                     1.7976931348623157e308, 2.2250738585072014e-308]),
    # Every bit pattern, so NaNs with payloads and signs are included.
    st.integers(0, 2**64 - 1).map(_float_from_bits))

# Text without lone surrogates (hypothesis' default alphabet excludes them).
texts = st.text()
texts_without_nul = st.text().filter(lambda s: "\0" not in s)
lone_surrogates = st.characters(whitelist_categories=("Cs",))
binaries = st.binary(max_size=512)

dtypes = st.builds(pf.DataType, st.integers(0, 255), st.integers(0, 255),
                   st.integers(1, 65535))
devices = st.builds(pf.Device, st.integers(-2**31, 2**31 - 1), st.integers(-2**31, 2**31 - 1))

# Every kind of value that crosses the boundary by value, plus a C function.
values = st.one_of(int64s, floats, st.booleans(), st.none(), texts_without_nul, binaries,
                   dtypes, devices, st.just(ADD))

C_TYPE_NAMES = {int: "int", float: "float", bool: "bool", type(None): "null", str: "str",
                bytes: "bytes", pf.DataType: "dtype", pf.Device: "device",
                pf.Function: "function"}


def same(got, want):
    """Equal, of the same type, and for floats bit for bit (NaN payloads,
    the sign of zero)."""
    assert type(got) is type(want), (got, want)
    if type(want) is float:
        assert struct.pack("<d", got) == struct.pack("<d", want), (got, want)
    else:
        assert got == want


# ---- integers ----------------------------------------------------------------

@SETTINGS
@given(int64s)
def test_int64_round_trip(x):
    same(echo(x), x)
    assert type_name(x) == "int"
    seen = []

    def callback(v):
        seen.append(v)
        return v

    same(c_call(callback, x), x)  # Python -> C -> Python callback -> C -> Python
    same(seen[0], x)


@SETTINGS
@given(outside_int64, st.integers(0, 3))
def test_int_outside_int64_is_overflow_error(x, pos):
    args = [0] * pos + [x]
    with pytest.raises(OverflowError, match="argument %d" % pos):
        nargs(*args)
    # A callback's result outside int64 fails the C call, and the error comes
    # back as the same class.
    with pytest.raises(OverflowError, match="does not fit in int64"):
        c_call(lambda: x)


# ---- floats ------------------------------------------------------------------

@SETTINGS
@given(floats)
def test_float_round_trip_bit_for_bit(x):
    same(echo(x), x)
    assert type_name(x) == "float"
    same(c_call(lambda v: v, x), x)
    same(c_call(lambda: x), x)
    if math.isnan(x):
        assert math.isnan(echo(x))
    elif x == 0.0:
        assert math.copysign(1.0, echo(x)) == math.copysign(1.0, x)


# ---- strings -----------------------------------------------------------------

@SETTINGS
@given(texts)
def test_str_round_trip_or_nul_is_value_error(s):
    if "\0" in s:
        with pytest.raises(ValueError, match="argument 0: str contains a NUL"):
            echo(s)
        with pytest.raises(ValueError, match="NUL"):
            c_call(lambda: s)  # a callback result is checked the same way
        return
    same(echo(s), s)
    assert type_name(s) == "str"
    same(c_call(lambda v: v, s), s)
    same(c_call_in_thread(lambda v: v, s), s)


@SETTINGS
@given(texts_without_nul, lone_surrogates, texts_without_nul, st.integers(0, 2))
def test_lone_surrogate_is_value_error(head, surrogate, tail, pos):
    s = head + surrogate + tail
    args = ["x"] * pos + [s]
    with pytest.raises(ValueError, match=r"argument %d: str contains a lone surrogate"
                       % pos) as info:
        nargs(*args)
    assert "index %d" % len(head) in str(info.value)
    with pytest.raises(ValueError, match="lone surrogate"):
        c_call(lambda: s)
    # As a name, U+DC80..U+DCFF stand for the bytes 0x80..0xFF of a name
    # that is not UTF-8 (surrogateescape): such a name is merely absent.
    escapable = "\udc80" <= surrogate <= "\udcff"
    with pytest.raises(ValueError, match="no global function named" if escapable
                       else "get_global_func: name .* lone surrogate"):
        pf.get_global_func(s)


@SETTINGS
@given(texts_without_nul, texts_without_nul)
def test_str_with_nul_anywhere_is_value_error(head, tail):
    with pytest.raises(ValueError, match="argument 1: str contains a NUL"):
        nargs(1, head + "\0" + tail)


# ---- bytes -------------------------------------------------------------------

@SETTINGS
@given(binaries, st.sampled_from([bytes, bytearray, memoryview]))
def test_bytes_round_trip(data, kind):
    arg = kind(data) if kind is not memoryview else memoryview(bytearray(data))
    same(echo(arg), data)  # always comes back as bytes
    assert bytes_len(arg) == len(data)
    assert type_name(arg) == "bytes"
    same(c_call(lambda v: v, arg), data)


# ---- every kind of value, many arguments, nested callbacks -----------------------

@SETTINGS
@given(values)
def test_any_value_round_trip(x):
    same(echo(x), x)
    assert type_name(x) == C_TYPE_NAMES[type(x)]


@SETTINGS
@given(st.lists(values, max_size=12))
def test_argument_lists(xs):
    # More than 8 arguments takes the binding's non-preallocated frames.
    assert nargs(*xs) == len(xs)
    for i, x in enumerate(xs):
        same(c_call(lambda *a, i=i: a[i], *xs), x)


@SETTINGS
@given(values, st.lists(st.booleans(), min_size=1, max_size=6))
def test_nested_callbacks(x, in_thread):
    """A chain of Python callbacks, each called from C (some on a C thread
    Python did not start), passes the value down and back up unchanged."""
    if isinstance(x, bytes):  # call_in_thread cannot carry a bytes result
        in_thread = [False] * len(in_thread)
    depth_seen = []

    def level(k):
        def callback(v):
            depth_seen.append(k)
            same(v, x)
            if k == len(in_thread):
                return v
            caller = c_call_in_thread if in_thread[k] else c_call
            return caller(level(k + 1), v)
        return callback

    same(c_call(level(0), x), x)
    assert depth_seen == list(range(len(in_thread) + 1))


@SETTINGS
@given(st.sampled_from([ValueError, TypeError, KeyError, IndexError, RuntimeError,
                        OverflowError, ZeroDivisionError]),
       texts_without_nul, st.integers(1, 4))
def test_errors_cross_nested_callbacks(exc_type, message, depth):
    """An exception raised at the bottom of nested callbacks comes back
    through every C level as the same class with its message."""
    def level(k):
        def callback():
            if k == depth:
                raise exc_type(message)
            return c_call(level(k + 1))
        return callback

    with pytest.raises(exc_type) as info:
        c_call(level(0))
    if exc_type is not KeyError:  # KeyError's str() is the repr of its arg
        assert message in str(info.value)
