"""Data types: every DLPack 1.1 code by name and short name, read and
written by the library (PFDataTypeFromString/ToString), str() that
round-trips, the kind predicates, numpy both ways, pickling and hashing,
and no leak over many conversions."""
import gc
import pickle
import re
import sys

import numpy as np
import pytest

import packedfunc as pf
from packedfunc import _types

# DLDataTypeCode (dlpack.h, DLPack 1.1), written out here on purpose: the
# package reads them from the library, the test checks what it reads.
LONG_NAMES = [
    ("bool", (6, 8, 1)),
    ("float8_e3m4", (7, 8, 1)), ("float8_e4m3", (8, 8, 1)),
    ("float8_e4m3b11fnuz", (9, 8, 1)), ("float8_e4m3fn", (10, 8, 1)),
    ("float8_e4m3fnuz", (11, 8, 1)), ("float8_e5m2", (12, 8, 1)),
    ("float8_e5m2fnuz", (13, 8, 1)), ("float8_e8m0fnu", (14, 8, 1)),
    ("float6_e2m3fn", (15, 6, 1)), ("float6_e3m2fn", (16, 6, 1)),
    ("float4_e2m1fn", (17, 4, 1)), ("float4_e2m1fnx2", (17, 4, 2)),
    ("int8", (0, 8, 1)), ("uint16", (1, 16, 1)), ("float32", (2, 32, 1)),
    ("handle64", (3, 64, 1)), ("bfloat16", (4, 16, 1)), ("complex64", (5, 64, 1)),
    ("uint1", (1, 1, 1)), ("float32x4", (2, 32, 4)), ("boolx4", (6, 8, 4)),
]

SHORT_NAMES = [
    ("i8", "int8"), ("i64", "int64"), ("u8", "uint8"), ("f16", "float16"),
    ("f32", "float32"), ("f64", "float64"), ("bf16", "bfloat16"), ("f32x4", "float32x4"),
    ("f8e4m3fn", "float8_e4m3fn"), ("f8_e4m3fn", "float8_e4m3fn"),
    ("fp8_e4m3fn", "float8_e4m3fn"), ("f8e5m2", "float8_e5m2"),
    ("fp8_e5m2x4", "float8_e5m2x4"), ("f8_e8m0fnu", "float8_e8m0fnu"),
    ("f8e3m4", "float8_e3m4"), ("f8e4m3b11fnuz", "float8_e4m3b11fnuz"),
    ("f6e2m3fn", "float6_e2m3fn"), ("fp6_e3m2fn", "float6_e3m2fn"),
    ("f4e2m1fn", "float4_e2m1fn"), ("f4_e2m1fnx2", "float4_e2m1fnx2"),
    ("f4_e2m1fn_x2", "float4_e2m1fnx2"), ("float4_e2m1fn_x2", "float4_e2m1fnx2"),
]


def fields(d):
    return (d.type_code, d.bits, d.lanes)


@pytest.mark.parametrize("name,expected", LONG_NAMES, ids=[n for n, _ in LONG_NAMES])
def test_every_dlpack_code_by_name(name, expected, echo):
    d = pf.DataType(name)
    assert fields(d) == expected
    assert str(d) == name and repr(d) == "DataType(%r)" % name
    assert str(pf.DataType(*expected)) == name  # the canonical text
    back = echo(d)  # through C and back: a kPFDataType value
    assert type(back) is pf.DataType and fields(back) == expected and back == d


@pytest.mark.parametrize("short,long", SHORT_NAMES, ids=[s for s, _ in SHORT_NAMES])
def test_short_names(short, long):
    d = pf.DataType(short)
    assert d == pf.DataType(long) and d == long and d == short
    # str() gives back what was written; the canonical text is the long name.
    assert str(d) == short
    assert str(pf.DataType(*fields(d))) == long
    assert hash(d) == hash(pf.DataType(long)) == hash(long)


def test_bool_is_dlpacks_bool_and_uint1_is_an_integer(echo):
    # (Before: "bool" was uint1, which is not what DLPack 1.x or numpy's
    # DLPack export call bool.)
    b = pf.DataType("bool")
    assert fields(b) == (6, 8, 1) and b.itemsize == 1 and b.is_bool and not b.is_integer
    assert pf.DataType(np.bool_) == b and pf.DataType(np.dtype(bool)) == b
    assert pf.DataType(bool) == b
    assert echo(np.dtype(bool)) == b
    u1 = pf.DataType("uint1")
    assert fields(u1) == (1, 1, 1) and u1.is_integer and not u1.is_bool and u1 != b
    assert str(u1) == "uint1"


@pytest.mark.parametrize("name", [n for n, _ in LONG_NAMES] + [s for s, _ in SHORT_NAMES]
                         + ["int", "float", "handle", "custom[99]16", "bool16", "handle32",
                            "uint1x8"])
def test_str_round_trips(name):
    d = pf.DataType(name)
    assert pf.DataType(str(d)) == d
    canonical = pf.DataType(*fields(d))
    assert pf.DataType(str(canonical)) == d
    assert pickle.loads(pickle.dumps(d)) == d
    assert str(pickle.loads(pickle.dumps(d))) == name  # the spelling survives
    assert eval(repr(d), {"DataType": pf.DataType}) == d


@pytest.mark.parametrize("name,kinds", [
    ("bool", "b"), ("boolx4", "b"), ("int32", "i"), ("uint8", "i"), ("uint1", "i"),
    ("float32", "f"), ("bfloat16", "f"), ("float8_e4m3fn", "f"), ("float6_e2m3fn", "f"),
    ("float4_e2m1fnx2", "f"), ("handle", "h"), ("complex64", ""), ("custom[200]8", ""),
])
def test_kind_predicates(name, kinds):
    d = pf.DataType(name)
    assert (d.is_bool, d.is_integer, d.is_float, d.is_handle) == (
        "b" in kinds, "i" in kinds, "f" in kinds, "h" in kinds)


@pytest.mark.parametrize("name,itemsize", [
    ("float32", 4), ("float32x4", 16), ("float8_e5m2x4", 4), ("float6_e2m3fnx4", 3),
    ("float4_e2m1fnx4", 2), ("float4_e2m1fnx2", 1), ("uint8", 1), ("bool", 1), ("uint1", 1),
])
def test_itemsize(name, itemsize):
    assert pf.DataType(name).itemsize == itemsize


def test_from_dlpack_data_type_and_is_dtype():
    assert pf.DataType.from_dlpack_data_type((2, 16, 1)) == "float16"
    assert pf.DataType.from_dlpack_data_type((17, 4, 2)) == "float4_e2m1fnx2"
    with pytest.raises(TypeError, match="expected a \\(type_code, bits, lanes\\) tuple"):
        pf.DataType.from_dlpack_data_type((2, 16))
    assert pf.DataType.is_dtype("f8e4m3fn") and pf.DataType.is_dtype(np.float32)
    assert pf.DataType.is_dtype("float8") and pf.DataType("float8").type_code == 2  # kDLFloat
    assert not pf.DataType.is_dtype("not_a_dtype") and not pf.DataType.is_dtype(3.5)


# ---- numpy both ways -----------------------------------------------------------------

NUMPY_TYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
               np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128]


@pytest.mark.parametrize("t", NUMPY_TYPES, ids=lambda t: t.__name__)
def test_numpy_dtypes_both_ways(t, echo):
    npd = np.dtype(t)
    d = pf.DataType(npd)
    assert d == pf.DataType(t) and d.itemsize == npd.itemsize and d.lanes == 1
    assert np.dtype(d) == npd and d.dtype == npd  # numpy reads DataType.dtype
    assert np.zeros(2, dtype=d).dtype == npd
    assert pf.convert(npd) == d and type(pf.convert(npd)) is pf.DataType
    assert echo(npd) == d


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float4_e2m1fn", "float32x4",
                                  "handle", "uint1", "float128", "custom[50]8"])
def test_types_numpy_does_not_have(name):
    if name == "bfloat16" and "ml_dtypes" in sys.modules:  # pragma: no cover
        pytest.skip("ml_dtypes gives numpy a bfloat16")
    canonical = str(pf.DataType(*fields(pf.DataType(name))))
    with pytest.raises(TypeError, match=re.escape("DataType: %s has no numpy dtype" % canonical)):
        pf.DataType(name).dtype
    with pytest.raises(TypeError):
        np.dtype(pf.DataType(name))


@pytest.mark.parametrize("npd,match", [
    (np.dtype(object), "has no DLPack data type"), (np.dtype("U3"), "has no DLPack data type"),
    (np.dtype([("a", "i4")]), "has no DLPack data type"), (np.dtype("V8"), "has no DLPack"),
    (np.dtype(np.longdouble), "has no DLPack data type"),
    (np.dtype(">f4"), "not in the machine's byte order"),
    (np.dtype("datetime64[s]"), "has no DLPack data type"),
])
def test_numpy_dtypes_dlpack_cannot_describe(npd, match, echo):
    with pytest.raises(TypeError, match="DataType: numpy dtype .*" + match):
        pf.DataType(npd)
    with pytest.raises(TypeError, match="argument 0: DataType: numpy dtype"):
        echo(npd)
    with pytest.raises(TypeError, match="the value given to convert: DataType: numpy dtype"):
        pf.convert(npd)


# ---- equality, hashing -----------------------------------------------------------------

def test_equality_and_hash_with_strings():
    f16 = pf.DataType("f16")
    assert f16 == "float16" and f16 == "f16" and "float16" == f16
    assert f16 != "float32" and f16 != "not a type" and f16 != 16
    assert {"float16": 1}[f16] == 1  # the hash is the canonical name's
    assert len({pf.DataType("f16"), pf.DataType("float16"), pf.DataType(2, 16)}) == 1
    assert pf.DataType("float32") != pf.DataType("float32x2")


def test_immutable():
    d = pf.DataType("int8")
    with pytest.raises(AttributeError, match="immutable"):
        d.bits = 16


def test_str_subclass_is_read_as_its_value():
    class Name(str):
        def __str__(self):
            return "float64"

    assert pf.DataType(Name("int8")) == "int8" and type(str(pf.DataType(Name("int8")))) is str


# ---- the library's text, cached -----------------------------------------------------------

def test_text_is_the_librarys_and_is_cached(monkeypatch):
    calls = []
    real = _types.PFDataTypeFromString

    def counting(text, out):
        calls.append(text)
        return real(text, out)

    monkeypatch.setattr(_types, "PFDataTypeFromString", counting)
    monkeypatch.setattr(_types, "_parsed", {})
    for _ in range(3):
        assert pf.DataType("f8e4m3fn") == "float8_e4m3fn"
    assert calls == [b"f8e4m3fn", b"float8_e4m3fn"]  # once per distinct text


def test_the_caches_are_bounded(monkeypatch):
    monkeypatch.setattr(_types, "_parsed", {})
    monkeypatch.setattr(_types, "_texts", {})
    for lanes in range(1, 6000):
        d = pf.DataType("int8x%d" % lanes)
        str(pf.DataType(*fields(d)))
    assert len(_types._parsed) <= _types._CACHE_MAX and len(_types._texts) <= _types._CACHE_MAX
    assert pf.DataType("int8x5999").lanes == 5999  # past the bound: asked again


def test_bad_text_is_the_librarys_error():
    with pytest.raises(ValueError, match="DataType: cannot parse 'float8_e9m9' as a data type"):
        pf.DataType("float8_e9m9")
    with pytest.raises(ValueError, match="DataType: cannot parse 'fl.at32'"):
        pf.DataType("fl\xf6at32")


# ---- leaks ----------------------------------------------------------------------------------

ALL_TEXTS = [n for n, _ in LONG_NAMES] + [s for s, _ in SHORT_NAMES]


def test_no_leak_over_20000_dtype_conversions(echo):
    values = [pf.DataType(t) for t in ALL_TEXTS] + [np.dtype(t) for t in NUMPY_TYPES[:4]]

    def cycle(i):
        v = values[i % len(values)]
        back = echo(v)
        if i % 997 == 0:
            assert back == pf.DataType(v)
        pf.DataType(ALL_TEXTS[i % len(ALL_TEXTS)])
        str(back)

    for i in range(2000):
        cycle(i)
    gc.collect()
    objects_before = len(gc.get_objects())
    blocks_before = sys.getallocatedblocks()  # every Python allocation (tracemalloc is slow)
    for i in range(20000):
        cycle(i)
    gc.collect()
    # A block leaked for one of the 48 values alone would be 400 blocks;
    # without a leak this is a few dozen.
    assert len(gc.get_objects()) - objects_before < 100
    assert sys.getallocatedblocks() - blocks_before < 200


@pytest.fixture
def echo():
    return pf.get_global_func("testing.echo")
