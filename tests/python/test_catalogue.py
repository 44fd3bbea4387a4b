"""The bad-input catalogue of the Python API (docs/bad-input.md, section
"Python API"): one test per row, each proving what that kind of bad input
gets. The rule: a clear exception whose message names the function (or the
argument position), never a crash, a hang or a silent misreading.
"""
import collections
import ctypes
import ctypes.util
import functools
import os
import pickle

import numpy as np
import pytest

import packedfunc as pf
from packedfunc import _errors, _ffi, _function

from conftest import ROOT

NAME_MAX = 1024  # PF_NAME_MAX (c_api.h)

_create_typed = _ffi._cdll["PFFuncCreateFromTyped"]  # a private copy
_create_typed.restype = ctypes.c_int
_create_typed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]


def typed(c_function, signature):
    """A typed function (libffi) over a C function, as a Function."""
    out = ctypes.c_void_p()
    _errors.check_call(_create_typed(ctypes.cast(c_function, ctypes.c_void_p), signature,
                                   ctypes.byref(out)))
    return _function.Function._adopt(out.value)


def escaped(name):
    return name.replace(".", r"\.")


@pytest.fixture
def echo(fn):
    return fn("echo")


@pytest.fixture
def nargs(fn):
    return fn("nargs")


# ---- names: get_global_func, register_func, remove_global_func, list_global_func_names

NAME_TAKERS = [
    ("get_global_func", lambda name: pf.get_global_func(name)),
    ("register_func", lambda name: pf.register_func(name, lambda: None)),
    ("remove_global_func", lambda name: pf.remove_global_func(name)),
]


@pytest.mark.parametrize("where,call", NAME_TAKERS, ids=[w for w, _ in NAME_TAKERS])
@pytest.mark.parametrize("bad", [42, None, b"testing.echo", 1.5, ["testing.echo"]])
def test_name_not_a_str(where, call, bad):
    with pytest.raises(TypeError, match="%s: name must be a str, not %s"
                       % (where, type(bad).__name__)):
        call(bad)


def test_list_prefix_not_a_str():
    with pytest.raises(TypeError, match="list_global_func_names: name must be a str"):
        pf.list_global_func_names(b"testing.")


@pytest.mark.parametrize("where,call", NAME_TAKERS, ids=[w for w, _ in NAME_TAKERS])
def test_name_empty(where, call):
    with pytest.raises(ValueError, match="argument 'name' is empty"):
        call("")


@pytest.mark.parametrize("where,call", NAME_TAKERS, ids=[w for w, _ in NAME_TAKERS])
def test_name_overlong(where, call):
    # The limit is in UTF-8 bytes: 513 two-byte characters are 1026 bytes.
    for name in ("n" * (NAME_MAX + 1), "é" * 513):
        with pytest.raises(ValueError, match="argument 'name' is longer than 1024 bytes"):
            call(name)


def test_name_at_the_limit_is_accepted(unique_name):
    name = unique_name()
    name = name + "x" * (NAME_MAX - len(name))
    assert len(name.encode()) == NAME_MAX
    pf.register_func(name, lambda: 7)
    try:
        assert pf.get_global_func(name)() == 7
    finally:
        pf.remove_global_func(name)


@pytest.mark.parametrize("where,call", NAME_TAKERS + [
    ("list_global_func_names", lambda name: pf.list_global_func_names(name))],
    ids=[w for w, _ in NAME_TAKERS] + ["list_global_func_names"])
def test_name_with_nul(where, call):
    # Before the fix, C saw the name cut at the NUL: "testing.echo\0junk"
    # found testing.echo, and remove_global_func would have removed it.
    with pytest.raises(ValueError, match="%s: name .* contains a NUL character" % where):
        call("testing.echo\0junk")
    assert pf.get_global_func("testing.echo", allow_missing=True) is not None


@pytest.mark.parametrize("where,call", NAME_TAKERS, ids=[w for w, _ in NAME_TAKERS])
@pytest.mark.parametrize("surrogate", ["\ud800", "\udc7f", "\udd00", "\udfff"])
def test_name_with_lone_surrogate(where, call, surrogate):
    # U+DC80..U+DCFF are not here: they stand for the bytes 0x80..0xFF of a
    # name that is not UTF-8 (see test_name_with_invalid_utf8_round_trips).
    with pytest.raises(ValueError, match=r"%s: name .* contains a lone surrogate .* at index 3"
                       % where):
        call("abc" + surrogate)


_register_raw = _ffi._fn("PFFuncRegisterGlobal", ctypes.c_int,
                          [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int])


def test_name_with_invalid_utf8_round_trips(echo):
    # C registers a name that is not UTF-8. It is listed with surrogateescape
    # (byte 0xFF as U+DCFF), and that str finds, replaces and removes it.
    # (Before: listed with U+FFFD, which named no function.)
    raw = b"pytest.invalid.\xff\xfe.name"
    _errors.check_call(_register_raw(raw, echo.handle, 0))
    try:
        listed = pf.list_global_func_names("pytest.invalid.")
        assert listed == ["pytest.invalid.\udcff\udcfe.name"]
        name = listed[0]
        assert pf.get_global_func(name) == echo
        pf.register_func(name, lambda: "replaced", override=True)
        assert pf.get_global_func(name)() == "replaced"
    finally:
        pf.remove_global_func("pytest.invalid.\udcff\udcfe.name")
    assert pf.get_global_func(name, allow_missing=True) is None


def test_name_non_ascii_is_accepted(unique_name):
    name = unique_name("ünïcødé.日本.\U0001F600")
    pf.register_func(name, lambda: "ok")
    assert pf.get_global_func(name)() == "ok"
    assert name in pf.list_global_func_names(name)


def test_get_global_func_unknown_name():
    with pytest.raises(ValueError, match="no global function named 'no.such.name'"):
        pf.get_global_func("no.such.name")
    assert pf.get_global_func("no.such.name", allow_missing=True) is None


def test_register_func_taken_name(unique_name):
    name = unique_name()
    pf.register_func(name, lambda: 1)
    with pytest.raises(KeyError, match="a function named '%s' is already registered"
                       % escaped(name)):
        pf.register_func(name, lambda: 2)
    assert pf.get_global_func(name)() == 1  # unchanged


def test_register_func_not_callable(unique_name):
    name = unique_name()
    for bad in (42, "text", b"x"):  # (None is the decorator form)
        with pytest.raises(TypeError, match="register_func: expected a callable, not %s"
                           % type(bad).__name__):
            pf.register_func(name, bad)
    assert pf.get_global_func(name, allow_missing=True) is None
    with pytest.raises(TypeError, match="register_func: expected a name or a callable, not int"):
        pf.register_func(42)
    with pytest.raises(TypeError, match="has no __name__; pass a name"):
        pf.register_func(functools.partial(max, 1))


def test_remove_global_func_unknown_name():
    with pytest.raises(KeyError, match="no function named 'no.such.name' is registered"):
        pf.remove_global_func("no.such.name")


def test_init_api_bad_arguments():
    with pytest.raises(TypeError, match="init_api: prefix must be a str, not int"):
        pf.init_api(3, __name__)
    with pytest.raises(TypeError, match="init_api: module_name must be a str, not int"):
        pf.init_api("testing", 3)
    with pytest.raises(ValueError, match="init_api: module 'no_such_module_xyz' is not imported"):
        pf.init_api("testing", "no_such_module_xyz")


# ---- calling a Function --------------------------------------------------------

_Point = collections.namedtuple("_Point", "x y")


def _self_containing():
    x = [1]
    x.append({"k": x})
    return x


def _nested(levels):
    root = inner = []
    for _ in range(levels - 1):
        inner.append([])
        inner = inner[0]
    return root


# Containers (and their subclasses) cross as Array and Map; what they hold
# must cross too. (Before: every list, tuple and dict was refused.)
@pytest.mark.parametrize("bad,exc,match", [
    ({1.5: "x"}, TypeError, r"argument 1, dict key 0 \(1.5\) has unsupported type float "
     r"\(keys are str or int\)"),
    ([0, collections.OrderedDict([("a", 1), (b"k", 2)])], TypeError,
     r"argument 1 at \[1\], dict key 1 \(b'k'\) has unsupported type bytes"),
    (_Point(1, [2, 2**63]), OverflowError, r"argument 1 at \[1\]\[1\]: int 9223372036854775808 does "
     "not fit in int64"),
    ((["a\0"],), ValueError, r"argument 1 at \[0\]\[0\]: str contains a NUL character"),
    (_self_containing(), ValueError, r"argument 1 at \[1\]\['k'\] contains itself"),
    (_nested(1001), ValueError, "argument 1 is nested deeper than 1000 levels"),
], ids=["float-key", "bytes-key", "int-range", "nul", "cycle", "too-deep"])
def test_call_bad_container_argument(nargs, bad, exc, match):
    with pytest.raises(exc, match=match):
        nargs(1, bad)
    assert nargs(1, _nested(1000)) == 2  # the limit itself crosses


@pytest.mark.parametrize("bad", [2**63, -2**63 - 1, 10**40])
def test_call_int_out_of_range(nargs, bad):
    with pytest.raises(OverflowError, match="argument 2: int %d does not fit in int64" % bad):
        nargs(1, 2, bad)
    with pytest.raises(OverflowError, match="argument 0"):
        nargs(np.uint64(2**63))  # numpy scalars convert as Python ints


def test_call_str_with_nul(echo):
    with pytest.raises(ValueError, match="argument 0: str contains a NUL character"):
        echo("a\0b")


@pytest.mark.parametrize("s", ["\ud800", "x\udc80", "ab\udfff", "\ud83d"])
def test_call_str_with_lone_surrogate(echo, s):
    # Including U+DC80..U+DCFF, which surrogateescape used to turn into
    # invalid UTF-8 bytes behind the caller's back.
    with pytest.raises(ValueError, match=r"argument 0: str contains a lone surrogate \('\\ud"
                       r"[89a-f][0-9a-f]{2}' at index %d\)" % (len(s) - 1)):
        echo(s)


def test_str_from_c_with_invalid_utf8(monkeypatch):
    # A C function that returns invalid UTF-8 as a str: libc's getenv, as a
    # typed "str(str)" function, reading a variable set to raw bytes. The
    # binding decodes it losslessly (surrogateescape); such a str cannot be
    # passed back as a str, but re-encodes to the same bytes.
    import os
    monkeypatch.setitem(os.environb, b"PF_CATALOGUE_BAD_UTF8", b"ok\xff\xfe")
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    getenv = typed(libc.getenv, b"str(str)")
    s = getenv("PF_CATALOGUE_BAD_UTF8")
    assert s == "ok\udcff\udcfe"
    assert s.encode("utf-8", "surrogateescape") == b"ok\xff\xfe"
    with pytest.raises(ValueError, match="argument 0: str contains a lone surrogate"):
        getenv(s)
    assert getenv("PF_CATALOGUE_NOT_SET_ANYWHERE") is None  # NULL comes back as None


def test_call_keyword_arguments(echo, fn):
    # The library binds keywords (PFFuncCallKw) with Python's own words; a
    # function without a signature takes none (more in test_keywords.py).
    with pytest.raises(TypeError, match=r"\(\) takes no keyword arguments"):
        echo(x=1)
    with pytest.raises(TypeError, match=r"^clamp\(\) got an unexpected keyword argument 'y'$"):
        fn("clamp")(1.0, y=1)
    with pytest.raises(TypeError, match=r"^clamp\(\) got multiple values for argument 'x'$"):
        fn("clamp")(1.0, x=1)
    with pytest.raises(TypeError, match=r"^clamp\(\) missing 1 required positional argument"):
        fn("clamp")(hi=1.0)


def test_call_wrong_arity_or_types_packed(fn):
    # A packed C function checks its own arguments; its error comes back.
    with pytest.raises(TypeError, match="testing.add: expected 2 arguments, got 1"):
        fn("add")(1)
    with pytest.raises(TypeError, match="testing.add: argument 1 must be int, not str"):
        fn("add")(1, "2")


def test_call_wrong_arity_or_types_typed(testlib):
    add = typed(testlib.pft_add, b"int64(int64,int64)")
    assert add(40, 2) == 42
    with pytest.raises(TypeError, match="takes 2 arguments, got 3"):
        add(1, 2, 3)
    with pytest.raises(TypeError, match="argument 1: expected int64, got float"):
        add(1, 2.0)
    with pytest.raises(TypeError, match="argument 0: expected int64, got str"):
        add("1", 2)


def test_call_typed_out_of_range_integer():
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    c_abs = typed(libc.abs, b"int32(int32)")
    assert c_abs(-(2**31 - 1)) == 2**31 - 1
    with pytest.raises(ValueError, match="argument 0: expected int32, got int 2147483648"):
        c_abs(2**31)
    with pytest.raises(ValueError, match="argument 0: expected int32"):
        c_abs(-2**31 - 1)


def test_callee_fails_without_error(fn):
    with pytest.raises(RuntimeError, match="returned -1 without recording an error"):
        fn("fail_silently")()


def test_callee_error_kinds(fn):
    raise_error = fn("raise_error")
    with pytest.raises(KeyError, match="k"):
        raise_error("KeyError", "k")
    with pytest.raises(IndexError, match="i"):
        raise_error("IndexError", "i")
    # An unknown kind becomes RuntimeError; an invalid one is kept in the message.
    with pytest.raises(RuntimeError, match="u"):
        raise_error("SomeUnregisteredKind", "u")
    with pytest.raises(RuntimeError, match="not a kind"):
        raise_error("not a kind", "m")


def test_function_cannot_be_created_or_pickled(echo):
    with pytest.raises(TypeError, match="cannot be created directly"):
        pf.Function()
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(echo)


def test_function_released_by_hand(echo):
    # No public release: a Function goes when it is collected. Calling its
    # __del__ by hand releases it once; after that it is inert.
    f = pf.convert(lambda x: x + 1)
    assert f(1) == 2
    f.__del__()
    f.__del__()  # a second release is a no-op, not a double free
    assert f.handle == 0
    assert repr(f) == "<packedfunc.Function (released)>"
    with pytest.raises(ValueError, match="the Function was released; it cannot be called"):
        f(1)
    with pytest.raises(ValueError, match="the Function was released"):
        f("general path", None)
    with pytest.raises(ValueError, match="argument 1: the Function was released"):
        pf.get_global_func("testing.call")(echo, f)
    with pytest.raises(TypeError, match="argument 'func' .* is NULL"):
        pf.register_func("pytest.catalogue.released", f)
    assert pf.get_global_func("pytest.catalogue.released", allow_missing=True) is None


def test_object_released_by_hand(fn):
    obj = fn("make_boxed")()
    assert isinstance(obj, pf.Object)
    obj.__del__()
    obj.__del__()
    with pytest.raises(ValueError, match="argument 0: the Object was released"):
        fn("echo")(obj)


# ---- callbacks: what a Python callable does wrong ------------------------------

def test_callback_raises(fn):
    class Custom(Exception):
        pass

    def bad():
        raise Custom("from the callback")

    with pytest.raises(Custom, match="from the callback"):
        fn("call")(bad)


@pytest.mark.parametrize("result,exc,match", [
    ({(1,): 2}, TypeError, r"the callback's result, dict key 0 \(\(1,\)\) has unsupported "
     "type tuple"),
    (2**64, OverflowError, "callback result 18446744073709551616 does not fit in int64"),
    (np.uint64(2**63), OverflowError, "the callback's result: int 9223372036854775808 does not "
     "fit in int64"),
    ("a\0b", ValueError, "the callback's result: str contains a NUL character"),
    ("\ud800", ValueError, "the callback's result: str contains a lone surrogate"),
], ids=["unsupported", "int-range", "numpy-int-range", "nul", "surrogate"])
def test_callback_bad_result(fn, result, exc, match):
    with pytest.raises(exc, match=match):
        fn("call")(lambda: result)
    # From a C thread Python did not start, the same.
    with pytest.raises(exc, match=match):
        fn("call_in_thread")(lambda: result)


def test_callback_message_with_nul(fn, echo):
    # C messages end at the first NUL; C sees the NUL written as \x00, and
    # Python gets the callback's text back whole. (Before: cut at the NUL.)
    def cb():
        raise ValueError("a\0b")

    with pytest.raises(ValueError) as info:
        fn("call")(cb)
    assert str(info.value) == "a\0b"
    f = pf.convert(cb)
    with pytest.raises(ValueError):
        f()
    assert _ffi.PFErrorGetMessage() == b"a\\x00b"
    # Also when C code copies the error to another thread's storage.
    with pytest.raises(ValueError) as info:
        fn("call_in_thread")(cb)
    assert str(info.value) == "a\0b"


def test_callback_wrong_arity(fn):
    with pytest.raises(TypeError, match="positional argument"):
        fn("call")(lambda a, b: a, 1)


# ---- convert, DataType, Device, register_error ----------------------------------

@pytest.mark.parametrize("bad,exc,match", [
    ([{None: 1}], TypeError, r"the value given to convert at \[0\], dict key 0 \(None\) has "
     "unsupported type NoneType"),
    (_self_containing(), ValueError, r"the value given to convert at \[1\]\['k'\] contains "
     "itself"),
    ((_nested(1001),), ValueError, "the value given to convert is nested deeper than 1000"),
    (2**63, OverflowError, "the value given to convert: int 9223372036854775808 does not fit"),
    ("a\0b", ValueError, "the value given to convert: str contains a NUL character"),
], ids=["key", "cycle", "too-deep", "int-range", "nul"])
def test_convert_value_that_cannot_cross(bad, exc, match):
    with pytest.raises(exc, match=match):
        pf.convert(bad)


@pytest.mark.parametrize("text", ["", "float", "flaot32", "int32x", "int-8", "float32 ", "Float32",
                                  "int\0"])
def test_datatype_unparsable(text):
    if text == "float":  # a bare kind means 32 bits: accepted
        assert pf.DataType(text) == pf.DataType("float32")
        return
    with pytest.raises(ValueError, match="DataType: cannot parse"):
        pf.DataType(text)


@pytest.mark.parametrize("args", [(256, 8), (0, 8, 0), (-1, 8)])
def test_datatype_out_of_range(args):
    with pytest.raises(ValueError, match="DataType: out of range"):
        pf.DataType(*args)


@pytest.mark.parametrize("text,match", [("int300", "'int300': the bits must be 0 to 255"),
                                        ("float32x0", "'float32x0': the lanes must be 1 to"),
                                        ("int8x65536", "'int8x65536': the lanes must be 1 to")])
def test_datatype_text_out_of_range(text, match):
    # A text is read by the library (PFDataTypeFromString), in its words.
    # (Before: "DataType: out of range", from the binding's own parser.)
    with pytest.raises(ValueError, match="DataType: " + match):
        pf.DataType(text)


@pytest.mark.parametrize("bad", [3.5, None, [1], object()], ids=lambda b: type(b).__name__)
def test_datatype_wrong_type(bad):
    with pytest.raises(TypeError, match="DataType: expected a str"):
        pf.DataType(bad)


@pytest.mark.parametrize("text", ["float32\n", "int8\n", "float16x4\n"])
def test_datatype_text_with_final_newline(text):
    # (Before: accepted, since a regex "$" also matches before a final newline.)
    with pytest.raises(ValueError, match="DataType: cannot parse"):
        pf.DataType(text)


@pytest.mark.parametrize("args,what,given", [
    ((2, 32, 1.5), "lanes", "float"), ((2.0, 32), "type_code", "float"),
    ((2, "32"), "bits", "str"), ((True, 8), "type_code", "bool"), ((2, 32, None), "lanes",
                                                                      "NoneType"),
])
def test_datatype_fields_of_the_wrong_type(args, what, given):
    # At construction, naming the field. (Before: DataType(2, 32, 1.5) was
    # accepted and failed later, when packed, with a struct.error.)
    with pytest.raises(TypeError, match="DataType: %s must be an int, not %s" % (what, given)):
        pf.DataType(*args)
    assert pf.DataType(np.int32(2), np.int64(32), np.uint8(4)) == pf.DataType("float32x4")


def test_device_bad_input():
    with pytest.raises(ValueError, match="Device: unknown device type 'tpu'"):
        pf.Device("tpu")
    with pytest.raises(ValueError, match="Device: bad device id in 'cuda:x'"):
        pf.Device("cuda:x")
    with pytest.raises(TypeError, match="Device: device_type must be a str or int, not float"):
        pf.Device(1.5)
    with pytest.raises(TypeError, match="not bool"):
        pf.Device(True)
    with pytest.raises(TypeError, match="Device: device_id must be an int, not str"):
        pf.Device(1, "0")
    with pytest.raises(ValueError, match="Device: out of range"):
        pf.Device(2**31)
    with pytest.raises(ValueError, match="Device: out of range"):
        pf.Device("cpu", -2**31 - 1)


def test_register_error_bad_input():
    with pytest.raises(TypeError, match="register_error: kind must be a str"):
        pf.register_error(3, ValueError)
    for kind in ("", "has space", "9lives", "k" * 64):
        with pytest.raises(ValueError, match="is not an identifier of at most 63 bytes"):
            pf.register_error(kind, ValueError)
    with pytest.raises(TypeError, match="cls must be an exception class"):
        pf.register_error("FineKind", int)


def test_register_error_kind_with_final_newline():
    # (Before: accepted, since "$" matches before a final newline; C then
    # refused the kind, and the error came back as RuntimeError.)
    class Mine(Exception):
        pass

    with pytest.raises(ValueError, match=r"register_error: kind 'MyKind\\n' is not an identifier"):
        pf.register_error("MyKind\n", Mine)
    assert _errors.kind_of(Mine) == "RuntimeError"


def test_tensor_argument_that_cannot_export(echo):
    class Broken:
        def __dlpack__(self, stream=None):
            raise BufferError("no export today")

    with pytest.raises(TypeError, match=r"argument 0 \(Broken\) cannot be exported through "
                       "DLPack: no export today"):
        echo(Broken())


@pytest.mark.parametrize("returned", [42, None, b"bytes", "used"], ids=lambda r: repr(r))
def test_tensor_argument_whose_dlpack_is_not_a_capsule(fn, returned):
    class NotACapsule:
        def __dlpack__(self, stream=None):
            if returned == "used":  # a capsule, but one already consumed
                capsule = np.zeros(2).__dlpack__()
                np.from_dlpack(_Exporter(capsule))
                return capsule
            return returned

    # (Before: a bare ValueError from PyCapsule_GetPointer, naming nothing.)
    with pytest.raises(TypeError, match=r"argument 1 \(NotACapsule\) cannot be exported "
                       "through DLPack: its __dlpack__ returned .*, not a DLPack capsule"):
        fn("nargs")(1, NotACapsule())
    with pytest.raises(TypeError, match=r"the callback's result \(NotACapsule\) cannot be "
                       "exported through DLPack"):
        fn("call")(lambda: NotACapsule())


# ---- load_module -------------------------------------------------------------------

def test_load_module_non_module_library():
    libm = ctypes.util.find_library("m")
    assert libm
    with pytest.raises(ValueError, match="is not a packedfunc module"):
        pf.load_module(libm)


class _Exporter:
    """Hands a given capsule to numpy.from_dlpack, which consumes it."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, stream=None):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


DEMO_PLUGIN = os.environ.get("PF_DEMO_PLUGIN") or os.path.join(
    ROOT, os.environ.get("BUILD", "build"), "examples", "demo_plugin.so")


def test_module_lookup_of_a_name_that_cannot_exist():
    plugin = pf.load_module(DEMO_PLUGIN)
    # (Before: UnicodeEncodeError from both.)
    for name in ("\ud800", "demo.add\udfff", "a\0b"):
        assert name not in plugin
        with pytest.raises(KeyError):
            plugin[name]
        with pytest.raises(ValueError, match="Module.get_function: name"):
            plugin.get_function(name)
    assert "demo.add" in plugin


_load_descriptors = _ffi._fn("PFModLoadFromDescriptors", ctypes.c_int,
                              [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)])


class _Descriptor(ctypes.Structure):  # PFFuncDescriptor (c_api.h)
    _fields_ = [("abi", ctypes.c_uint32), ("kind", ctypes.c_uint32), ("name", ctypes.c_char_p),
                ("packed", ctypes.c_void_p), ("typed", ctypes.c_void_p),
                ("signature", ctypes.c_char_p), ("doc", ctypes.c_char_p)]


def test_module_names_with_invalid_utf8_round_trip(testlib):
    # A module whose function name is not UTF-8: listed with surrogateescape,
    # and found again by that name. (Before: listed with U+FFFD.)
    d = _Descriptor(1, 2, b"bad.\xff.add", None, ctypes.cast(testlib.pft_add, ctypes.c_void_p),
                    b"int64(int64,int64)", None)
    table = (ctypes.POINTER(_Descriptor) * 1)(ctypes.pointer(d))
    out = ctypes.c_void_p()
    begin = ctypes.addressof(table)
    _errors.check_call(_load_descriptors(begin, begin + ctypes.sizeof(table), ctypes.byref(out)))
    mod = pf.Module._adopt(out.value, 2)
    assert mod.list_function_names() == ["bad.\udcff.add"]
    assert "bad.\udcff.add" in mod
    assert mod["bad.\udcff.add"](40, 2) == 42
    assert mod.get_function("bad.\udcff.add").name == "bad.\udcff.add"


def test_export_global_overlong_prefix():
    plugin = pf.load_module(DEMO_PLUGIN)
    # (Before: PFFuncGetGlobal: argument 'name' is longer than 1024 bytes.)
    for prefix in ("p" * (NAME_MAX + 1), "p" * (NAME_MAX - 5)):
        with pytest.raises(ValueError, match="Module.export_global: argument 'prefix' "
                           r"\(\d+ bytes\) is too long"):
            plugin.export_global(prefix)
    assert pf.list_global_func_names("ppppp") == []
    with pytest.raises(ValueError, match="Module.export_global: prefix .* lone surrogate"):
        plugin.export_global("\ud800.")


def test_load_module_bad_path(tmp_path):
    with pytest.raises(FileNotFoundError):
        pf.load_module(str(tmp_path / "missing.so"))
    not_a_library = tmp_path / "text.so"
    not_a_library.write_text("not ELF")
    with pytest.raises(OSError):
        pf.load_module(str(not_a_library))
    with pytest.raises(TypeError, match="load_module: path must be a str, bytes or os.PathLike"):
        pf.load_module(42)
    with pytest.raises(ValueError, match="load_module: path .* contains a NUL character"):
        pf.load_module("lib\0m.so")
    with pytest.raises(ValueError, match="empty"):
        pf.load_module("")


class _Index:
    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


def test_device_takes_any_index_integer():
    for d in (pf.Device("cuda", np.int32(1)), pf.Device(np.int64(2), np.uint8(1)),
              pf.Device(_Index(2), _Index(1)), pf.Device("cuda", _Index(1))):
        assert d == pf.Device("cuda", 1)
        assert type(d.device_type) is int and type(d.device_id) is int
    assert repr(pf.Device("cuda", np.int32(1))) == "device(type='cuda', index=1)"


def test_device_refuses_bools_and_bad_index_integers():
    with pytest.raises(TypeError, match="Device: device_id must be an int, not bool"):
        pf.Device("cuda", True)
    with pytest.raises(TypeError, match="Device: device_type must be a str or int, not bool"):
        pf.Device(np.bool_(True))
    with pytest.raises(TypeError, match="Device: device_id must be an int, not float64"):
        pf.Device("cuda", np.float64(1.0))
    with pytest.raises(ValueError, match=r"Device: out of range \(2, 2147483648\)"):
        pf.Device("cuda", _Index(2**31))
    with pytest.raises(TypeError, match=r"__index__ returned non-int"):
        pf.Device("cuda", _Index("1"))
