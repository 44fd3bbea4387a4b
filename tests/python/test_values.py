"""convert(value): every value that can cross, as what it crosses as."""
import ctypes
import enum

import numpy as np
import pytest

import packedfunc as pf
from packedfunc import _containers, _convert


class Color(enum.IntEnum):
    RED = 3


class Thing:
    pass


def test_callables_become_functions():
    f = pf.convert(lambda a, b: a + b)
    assert isinstance(f, pf.Function) and f(40, 2) == 42
    assert pf.convert(f) is f
    assert pf.convert(len)("abc") == 3
    assert isinstance(pf.convert(Thing), pf.Function)  # a class is callable


@pytest.mark.parametrize("value", [
    0, -2**63, 2**63 - 1, 1.5, float("nan"), True, False, None, "", "text", b"", b"\0x",
    bytearray(b"ab"), pf.DataType("float32"), pf.Device("cuda", 1), ctypes.c_void_p(16),
    Color.RED, np.int32(7), np.float64(0.25), np.bool_(True),
    np.arange(3.0), Thing(), object(), 1 + 2j, {1, 2},
], ids=lambda v: type(v).__name__)
def test_plain_values_come_back_as_themselves(value):
    assert pf.convert(value) is value


def test_a_numpy_dtype_converts_to_its_data_type():
    # It crosses as a kPFDataType, and so converts to the DataType it
    # crosses as. (Before: convert gave the numpy dtype back.)
    assert type(pf.convert(np.dtype("int8"))) is pf.DataType
    assert pf.convert(np.dtype("int8")) == pf.DataType("int8")


def test_objects_come_back_as_themselves(fn):
    boxed = fn("make_boxed")()
    assert pf.convert(boxed) is boxed


def test_converted_value_crosses_as_the_original(fn):
    echo = fn("echo")
    for value in (7, "s", None, pf.Device("cpu")):
        assert echo(pf.convert(value)) == value
    thing = Thing()
    assert echo(pf.convert(thing)) is thing


def test_released_function_cannot_be_converted():
    f = pf.convert(lambda: 1)
    f.__del__()
    with pytest.raises(ValueError, match="the value given to convert: the Function was "
                                         "released"):
        pf.convert(f)


def test_containers_convert_to_array_and_map():
    assert type(pf.convert([1])) is pf.Array and type(pf.convert((1,))) is pf.Array
    assert type(pf.convert({"a": 1})) is pf.Map


def test_container_extension_point(fn):
    # The Array/Map module registers its encoder and converter once per
    # kind; subclasses follow. Here a stand-in passes a list as its length.
    saved = dict(_convert._encoders), dict(_convert._converters), dict(_containers._containers)

    def encode(x, pos, keep):
        return _convert.encode(len(x), pos, keep)

    try:
        _containers.register_container(list, encode, lambda x: ("converted", len(x)))

        class MyList(list):
            pass

        assert pf.convert([1, 2]) == ("converted", 2)
        assert pf.convert(MyList([1])) == ("converted", 1)
        assert fn("echo")([1, 2, 3]) == 3 and fn("echo")(MyList([4])) == 1
        # A kind without a registration is refused, never an opaque object.
        del _containers._containers[tuple], _convert._encoders[tuple]
        with pytest.raises(TypeError, match="unsupported type tuple"):
            fn("echo")((1,))
        with pytest.raises(ValueError, match="is not one of"):
            _containers.register_container(set, encode, len)
    finally:
        for table, old in zip((_convert._encoders, _convert._converters,
                               _containers._containers), saved):
            table.clear()
            table.update(old)
    assert fn("echo")([1]) == [1]
