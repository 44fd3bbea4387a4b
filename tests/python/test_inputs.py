"""Inputs that users pass: integers of other libraries, device strings,
short dtype names, and what a DataType tells about itself."""
import decimal
import fractions

import numpy as np
import pytest

import packedfunc as pf


class Index:
    """An integer type of another library: only __index__."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


class RefusingIndex:
    def __index__(self):
        raise TypeError("not an integer")


def test_objects_with_index_pass_as_int(fn):
    echo = fn("echo")
    assert echo(Index(42)) == 42 and type(echo(Index(42))) is int
    assert fn("type_name")(Index(-1)) == "int"
    assert fn("add")(Index(40), Index(2)) == 42
    assert fn("typed_add")(Index(1), 2) == 3
    assert pf.convert(Index(3)).value == 3  # crosses as an int, converts to itself
    with pytest.raises(OverflowError, match="argument 0: int 18446744073709551616 does not fit"):
        echo(Index(2**64))


def test_bool_float_and_numpy_keep_their_own_handling(fn):
    type_name = fn("type_name")
    assert type_name(True) == "bool" and type_name(np.bool_(False)) == "bool"
    assert type_name(np.int16(3)) == "int" and type_name(np.float32(0.5)) == "float"
    assert type_name(2.0) == "float"
    # Not integers: a Fraction and a Decimal have no __index__, and one whose
    # __index__ refuses is an opaque object like any other.
    for value in (fractions.Fraction(1, 2), decimal.Decimal(1), RefusingIndex()):
        assert type_name(value) == "object"


def test_device_strings():
    assert pf.Device("cpu") == pf.Device("cpu", 0)
    assert pf.Device("cuda:1") == pf.Device("cuda", 1) == pf.Device(2, 1)


def test_dl_device_type_names_dlpacks_device_types(fn):
    # DLPack's names (tvm-ffi's DLDeviceType), equal to the numbers and to
    # the short names Device takes; a Device takes one as its type.
    T = pf.DLDeviceType
    assert (T.kDLCPU, T.kDLCUDA, T.kDLCUDAHost, T.kDLOpenCL, T.kDLMetal) == (1, 2, 3, 4, 8)
    assert (T.kDLExtDev, T.kDLOneAPI, T.kDLTrn) == (12, 14, 18) and len(T) == 16
    for t in T:
        assert pf.Device(t, 1) == pf.Device(pf.Device(t, 1).type_name, 1)
    d = fn("echo")(pf.Device(T.kDLCUDA, 3))
    assert d.device_type == T.kDLCUDA and T(d.device_type) is T.kDLCUDA
    assert str(pf.Device(T.kDLROCMHost, 0)) == "rocm_host:0"
    with pytest.raises(ValueError):
        T(5)  # no DLPack device has 5


def test_str_for_a_typed_device_parameter(fn):
    typed_device = fn("typed_device")
    assert typed_device(100, "cuda:1") == 201
    assert typed_device(100, "cpu") == 100
    assert typed_device(100, pf.Device("rocm", 3)) == 1003
    with pytest.raises(ValueError, match="argument 1: Device: unknown device type 'tpu'"):
        typed_device(1, "tpu")
    # A Python function that declares a device parameter gets a Device too.
    f = pf.convert(lambda d: str(d))
    f.set_info(signature="str(device)")
    assert f("cuda:2") == "cuda:2" and f(pf.Device("cpu")) == "cpu:0"


def test_str_for_an_untyped_function_stays_a_str(fn):
    # Without a signature the call cannot know: pass Device("cuda:1").
    assert fn("type_name")("cuda:1") == "str"
    assert fn("type_name")(pf.Device("cuda:1")) == "device"


@pytest.mark.parametrize("short,long", [
    ("i8", "int8"), ("i16", "int16"), ("i32", "int32"), ("i64", "int64"), ("u8", "uint8"),
    ("u32", "uint32"), ("f16", "float16"), ("f32", "float32"), ("f64", "float64"),
    ("bf16", "bfloat16"), ("f32x4", "float32x4"),
])
def test_short_dtype_names_are_widths_in_bits(short, long):
    assert pf.DataType(short) == pf.DataType(long)
    assert pf.DataType(long) == short


@pytest.mark.parametrize("text", ["i", "f", "bf", "i8x", "x8", "I8", "i 8", "c64", "i8\n"])
def test_short_dtype_names_that_do_not_parse(text):
    with pytest.raises(ValueError, match="DataType: cannot parse"):
        pf.DataType(text)


def test_datatype_sizes_and_lanes():
    f32 = pf.DataType("f32")
    assert (f32.bits, f32.lanes, f32.itemsize) == (32, 1, 4)
    v = f32.with_lanes(4)
    assert v == pf.DataType("float32x4") and v.itemsize == 16 and v.lanes == 4
    assert pf.DataType("bool").itemsize == 1
    assert pf.DataType("int4").itemsize == 1 and pf.DataType("int4x4").itemsize == 2
    assert v.with_lanes(1) == f32
    with pytest.raises(ValueError, match="out of range"):
        f32.with_lanes(0)
    with pytest.raises(TypeError, match="lanes must be an int"):
        f32.with_lanes(2.0)
