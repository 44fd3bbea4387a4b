"""The peer suite for data types: tvm-ffi's tests/python/test_dtype.py, the
cases whose behaviour packedfunc shares, re-expressed against the `ffi`
adapter (peer_ffi.py). Left out: torch dtypes (no torch here) and
scalable vectors ("int32xvscalex4", which DLPack has no way to say; here
it is refused when made, where tvm-ffi refuses its itemsize)."""
import pickle

import numpy as np
import pytest

import peer_ffi


@pytest.fixture
def ffi():
    """tvm-ffi's names over packedfunc's (peer_ffi.py)."""
    return peer_ffi.FFI


def test_a_dtype_is_usable_as_numpys(ffi):
    f32 = ffi.dtype("float32")
    assert repr(f32) == ffi.DTYPE_REPR % "float32"
    assert type(f32) is ffi.dtype
    arr = np.array([1, 2, 3], dtype=f32)
    assert arr.dtype == f32


ALIASES = {
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "f16": "float16", "f32": "float32", "f64": "float64", "bf16": "bfloat16",
    "f32x4": "float32x4",
}
for _variant in ("e3m4", "e4m3", "e4m3b11fnuz", "e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz",
                 "e8m0fnu"):
    ALIASES["f8_" + _variant] = ALIASES["fp8_" + _variant] = "float8_" + _variant
for _variant in ("e2m3fn", "e3m2fn"):
    ALIASES["f6_" + _variant] = ALIASES["fp6_" + _variant] = "float6_" + _variant
ALIASES.update({
    "f4_e2m1fn": "float4_e2m1fn", "fp4_e2m1fn": "float4_e2m1fn",
    "f8_e4m3x4": "float8_e4m3x4", "f8_e4m3fnx4": "float8_e4m3fnx4",
    "fp8_e5m2x4": "float8_e5m2x4", "f6_e2m3fnx4": "float6_e2m3fnx4",
    "f4_e2m1fnx2": "float4_e2m1fnx2", "f4_e2m1fn_x2": "float4_e2m1fnx2",
    "fp4_e2m1fnx2": "float4_e2m1fnx2", "fp4_e2m1fn_x2": "float4_e2m1fnx2",
    "float4_e2m1fn_x2": "float4_e2m1fnx2",
})


@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_an_alias_prints_as_written_and_means_its_long_name(ffi, alias):
    d, full = ffi.dtype(alias), ffi.dtype(ALIASES[alias])
    assert str(d) == alias
    assert (d.type_code, d.bits, d.lanes) == (full.type_code, full.bits, full.lanes)


@pytest.mark.parametrize("text,size", [("float32", 4), ("float32x4", 16), ("float8_e5m2x4", 4),
                                       ("float6_e2m3fnx4", 3), ("float4_e2m1fnx4", 2),
                                       ("uint8", 1), ("bool", 1)])
def test_itemsize_counts_every_lane_in_bytes(ffi, text, size):
    assert ffi.dtype(text).itemsize == size


def test_a_scalable_vector_is_refused(ffi):
    with pytest.raises(ValueError):
        ffi.dtype("int32xvscalex4").itemsize


@pytest.mark.parametrize("text", ["float32", "float32x4", "float8_e5m2x4", "float6_e2m3fnx4",
                                  "float4_e2m1fnx4", "uint8", "bool"])
def test_pickle_keeps_the_fields(ffi, text):
    d = ffi.dtype(text)
    again = pickle.loads(pickle.dumps(d))
    assert (again.type_code, again.bits, again.lanes) == (d.type_code, d.bits, d.lanes)


@pytest.mark.parametrize("text", ["float32", "bool"])
def test_with_lanes_keeps_code_and_bits(ffi, text):
    d = ffi.dtype(text)
    wide = d.with_lanes(4)
    assert (wide.type_code, wide.bits, wide.lanes) == (d.type_code, d.bits, 4)


def expect_fields(ffi, value, code, bits, lanes):
    """value, echoed through C and converted, is a dtype of these fields."""
    for got in (ffi.get_global_func("testing.echo")(value), ffi.convert(value)):
        assert isinstance(got, ffi.dtype)
        assert (got.type_code, got.bits, got.lanes) == (code, bits, lanes)


@pytest.mark.parametrize("t,fields", [
    (np.int8, (0, 8, 1)), (np.int16, (0, 16, 1)), (np.int32, (0, 32, 1)), (np.int64, (0, 64, 1)),
    (np.uint8, (1, 8, 1)), (np.uint16, (1, 16, 1)), (np.uint32, (1, 32, 1)),
    (np.uint64, (1, 64, 1)), (np.float16, (2, 16, 1)), (np.float32, (2, 32, 1)),
    (np.float64, (2, 64, 1)),
], ids=lambda v: getattr(v, "__name__", None))
def test_numpy_dtypes_cross_as_dtypes(ffi, t, fields):
    expect_fields(ffi, np.dtype(t), *fields)


def test_ml_dtypes_cross_as_dtypes(ffi):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for name, fields in [("int2", (0, 2, 1)), ("int4", (0, 4, 1)), ("uint2", (1, 2, 1)),
                         ("uint4", (1, 4, 1)), ("bfloat16", (4, 16, 1)),
                         ("float8_e3m4", (7, 8, 1)), ("float8_e4m3", (8, 8, 1)),
                         ("float8_e4m3b11fnuz", (9, 8, 1)), ("float8_e4m3fn", (10, 8, 1)),
                         ("float8_e4m3fnuz", (11, 8, 1)), ("float8_e5m2", (12, 8, 1)),
                         ("float8_e5m2fnuz", (13, 8, 1)), ("float8_e8m0fnu", (14, 8, 1)),
                         ("float6_e2m3fn", (15, 6, 1)), ("float6_e3m2fn", (16, 6, 1)),
                         ("float4_e2m1fn", (17, 4, 1))]:
        if hasattr(ml_dtypes, name):
            expect_fields(ffi, np.dtype(getattr(ml_dtypes, name)), *fields)


@pytest.mark.parametrize("name,fields", [
    ("bool", (6, 8, 1)), ("int8", (0, 8, 1)), ("int16", (0, 16, 1)), ("int32", (0, 32, 1)),
    ("int64", (0, 64, 1)), ("uint8", (1, 8, 1)), ("uint16", (1, 16, 1)),
    ("uint32", (1, 32, 1)), ("uint64", (1, 64, 1)), ("float16", (2, 16, 1)),
    ("float32", (2, 32, 1)), ("float64", (2, 64, 1)), ("bfloat16", (4, 16, 1)),
    ("float8_e3m4", (7, 8, 1)), ("float8_e4m3", (8, 8, 1)), ("float8_e4m3b11fnuz", (9, 8, 1)),
    ("float8_e4m3fn", (10, 8, 1)), ("float8_e4m3fnuz", (11, 8, 1)), ("float8_e5m2", (12, 8, 1)),
    ("float8_e5m2fnuz", (13, 8, 1)), ("float8_e8m0fnu", (14, 8, 1)),
    ("float6_e2m3fn", (15, 6, 1)), ("float6_e3m2fn", (16, 6, 1)),
    ("float4_e2m1fn", (17, 4, 1)), ("float4_e2m1fnx2", (17, 4, 2)),
])
def test_named_dtypes_cross_with_their_dlpack_fields(ffi, name, fields):
    expect_fields(ffi, getattr(ffi, name), *fields)


def test_from_a_dlpack_triple(ffi):
    d = ffi.dtype.from_dlpack_data_type((0, 8, 1))
    assert (d.type_code, d.bits, d.lanes) == (0, 8, 1)


def test_bool_is_kdlbool_of_one_byte(ffi):
    b = ffi.dtype("bool")
    assert (b.type_code, b.bits, b.lanes) == (6, 8, 1)
    b4 = b.with_lanes(4)
    assert (b4.type_code, b4.bits, b4.lanes) == (6, 8, 4)
    assert b4 == "boolx4"


@pytest.mark.parametrize("text,flags", [
    ("bool", "b"), ("int32", "i"), ("uint8", "i"), ("float32", "f"), ("bfloat16", "f"),
    ("float8_e4m3fn", "f"), ("float6_e2m3fn", "f"), ("float4_e2m1fn", "f"), ("handle", "h"),
])
def test_kind_properties(ffi, text, flags):
    d = ffi.dtype(text)
    assert d.is_bool is ("b" in flags)
    assert d.is_integer is ("i" in flags)
    assert d.is_float is ("f" in flags)
    assert d.is_handle is ("h" in flags)
