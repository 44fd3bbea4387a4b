"""The conversion hooks: a class says how its values cross to C.

__packedfunc_value__(self) gives a value that crosses in its place
(applied once); __dlpack_data_type__ makes a data type and
__dlpack_device__ (without __dlpack__) a device. Each is reached as an
argument, as a callback's result, inside containers and through convert(),
on both backends (the compiled one hands types it does not know to the
package's tables).
"""
import gc
import sys

import numpy as np
import pytest

import packedfunc as pf


class Value:
    """Crosses as whatever it wraps."""

    def __init__(self, value):
        self.value = value

    def __packedfunc_value__(self):
        return self.value


class DType:
    def __init__(self, answer):
        self.answer = answer

    def __dlpack_data_type__(self):
        return self.answer


class Place:
    def __init__(self, answer=(2, 1)):
        self.answer = answer

    def __dlpack_device__(self):
        return self.answer


@pytest.fixture
def echo():
    return pf.get_global_func("testing.echo")


@pytest.fixture
def type_name():
    return pf.get_global_func("testing.type_name")


@pytest.mark.parametrize("inner,code", [
    (5, "int"), (2.5, "float"), (True, "bool"), (None, "null"), ("s", "str"), (b"b", "bytes"),
    (pf.DataType("f16"), "dtype"), (pf.Device("cuda", 1), "device"), ([1, "a"], "object"),
    ({"k": 1}, "object"),
], ids=lambda v: type(v).__name__)
def test_value_hook_crosses_as_its_result(inner, code, echo, type_name):
    assert type_name(Value(inner)) == code
    assert echo(Value(inner)) == inner
    assert pf.convert(Value(inner)) == pf.convert(inner)


def test_value_hook_with_a_tensor_and_a_function(fn, echo):
    a = np.zeros(3)
    fn("fill")(Value(a), 4.0)
    assert a.tolist() == [4.0] * 3
    assert fn("call")(Value(lambda: 7)) == 7
    assert isinstance(pf.convert(Value(lambda: 7)), pf.Function)


def test_value_hook_is_reached_for_callback_results_and_inside_containers(fn, echo):
    assert fn("call")(lambda: Value("from a callback")) == "from a callback"
    assert fn("call")(lambda: DType((2, 16, 1))) == pf.DataType("float16")
    assert fn("call")(lambda: Place()) == pf.Device("cuda", 1)
    r = echo([Value(1), {"k": Value([Value(2), DType("bf16"), Place((1, 0))])}])
    assert r == [1, {"k": [2, pf.DataType("bfloat16"), pf.Device("cpu", 0)]}]


def test_value_hook_is_applied_once(echo):
    me = Value(None)
    me.value = me
    with pytest.raises(TypeError, match=r"argument 0 \(Value\): __packedfunc_value__\(\) "
                                        r"returned the value itself"):
        echo(me)
    with pytest.raises(TypeError, match="applied once"):
        echo(Value(Value(1)))
    with pytest.raises(TypeError, match="applied once"):
        pf.convert(Value(Value(1)))
    loop = Value(None)
    loop.value = [1, {"k": loop}]
    with pytest.raises(TypeError, match="result contains the value itself"):
        echo(loop)
    with pytest.raises(TypeError, match="result contains the value itself"):
        pf.convert(loop)


def test_value_hook_result_that_cannot_cross_is_named(echo):
    with pytest.raises(OverflowError, match=r"argument 1 \(Value.__packedfunc_value__\(\)'s "
                                            r"result\): int \d+ does not fit in int64"):
        echo(1, Value(2**70))
    with pytest.raises(TypeError, match=r"argument 0 \(Value.__packedfunc_value__\(\)'s "
                                        r"result\), dict key 0 \(1.5\) has unsupported type float"):
        echo(Value({1.5: 1}))
    with pytest.raises(ValueError, match="NUL"):
        pf.convert(Value("a\0b"))


def test_value_hook_errors_propagate(echo):
    class Failing:
        def __packedfunc_value__(self):
            raise LookupError("no value today")

    with pytest.raises(LookupError, match="no value today"):
        echo(Failing())


def test_value_hook_is_looked_up_on_the_class(echo):
    # As Python's own hooks (__index__): an instance attribute is not one.
    class Plain:
        pass

    p = Plain()
    p.__packedfunc_value__ = lambda: 5
    assert echo(p) is p  # an opaque host object


@pytest.mark.parametrize("answer,expected", [
    ((10, 8, 1), "float8_e4m3fn"), ((17, 4, 2), "float4_e2m1fnx2"), ("f16", "float16"),
    (pf.DataType("bool"), "bool"), (np.dtype("int16"), "int16"), (np.float32, "float32"),
])
def test_dlpack_data_type_hook(answer, expected, echo, type_name):
    d = DType(answer)
    assert type_name(d) == "dtype"
    assert echo(d) == pf.DataType(expected)
    assert pf.convert(d) == pf.DataType(expected) and type(pf.convert(d)) is pf.DataType
    assert pf.DataType(d) == pf.DataType(expected)


@pytest.mark.parametrize("answer,exc,match", [
    ((10, 8), TypeError, "expected a \\(type_code, bits, lanes\\) tuple"),
    ((300, 8, 1), ValueError, "out of range"),
    ("float8_e9m9", ValueError, "returned 'float8_e9m9', not a data type"),
    (DType("f16"), TypeError, "has __dlpack_data_type__ itself"),
    (object(), TypeError, "not a data type"),
])
def test_dlpack_data_type_hook_bad_answers(answer, exc, match, echo):
    with pytest.raises(exc, match="argument 0: DataType: .*" + match):
        echo(DType(answer))
    with pytest.raises(exc, match=match):
        pf.DataType(DType(answer))


def test_dlpack_device_hook(echo, type_name):
    assert type_name(Place()) == "device"
    assert echo(Place()) == pf.Device("cuda", 1)
    assert pf.convert(Place((1, 0))) == pf.Device("cpu", 0)
    assert pf.Device(Place((10, 2))) == pf.Device("rocm", 2)
    assert pf.Device("cuda:3").__dlpack_device__() == (2, 3)
    with pytest.raises(TypeError, match="argument 0: Device: Place.__dlpack_device__\\(\\) "
                                        "returned 'cpu', not a \\(device_type, device_id\\)"):
        echo(Place("cpu"))


def test_an_array_with_dlpack_device_is_a_tensor_not_a_device(fn, type_name):
    a = np.zeros(2)
    assert type_name(a) == "tensor"  # numpy arrays have __dlpack_device__ too


def test_typed_parameters_take_hooked_values(fn):
    assert fn("typed_device")(10, Place((2, 3))) == 23
    assert fn("typed_device")(Value(10), pf.Device("cpu")) == 10


def test_hooked_values_do_not_leak(echo):
    vals = [Value(1), Value("x"), Value([1]), DType((2, 32, 1)), Place()]
    for i in range(1000):
        echo(vals[i % 5])
    gc.collect()
    blocks = sys.getallocatedblocks()
    for i in range(10000):  # a block leaked by one of the five: 2000 blocks
        echo(vals[i % 5])
    gc.collect()
    assert sys.getallocatedblocks() - blocks < 1000
