"""The conversion hooks: a class says how its values cross to C.

__packedfunc_value__(self) gives a value that crosses in its place (a
result with the hook goes through it again, up to a bound);
__dlpack_data_type__ makes a data type and
__dlpack_device__ (without __dlpack__) a device. Each is reached as an
argument, as a callback's result, inside containers and through convert(),
on both backends (the compiled one hands types it does not know to the
package's tables).
"""
import gc
import sys
import weakref

import numpy as np
import pytest

import packedfunc as pf
from packedfunc._convert import MAX_HOOK_CHAIN, hook_ids


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


def chain(value, hooks, kind=None):
    """value wrapped in `hooks` Values (kind: the class of each), so that
    each hook returns the next wrapper and the last one `value`."""
    for _ in range(hooks):
        value = (kind or Value)(value)
    return value


@pytest.mark.parametrize("hooks", [1, 2, 3])
def test_value_hook_chains_go_through_each_hook(hooks, fn, echo, type_name):
    assert echo(chain(10, hooks)) == 10
    assert type_name(chain("s", hooks)) == "str"
    assert pf.convert(chain(2.5, hooks)) == 2.5
    assert pf.convert(chain([1, chain(2, hooks)], hooks)) == [1, 2]
    # in containers, dict values and as a chain's container result
    r = echo([chain(1, hooks), {"k": chain(2, hooks)}, chain([chain(3, hooks)], hooks)])
    assert r == [1, {"k": 2}, [3]]
    assert fn("call")(lambda: chain("from a callback", hooks)) == "from a callback"
    assert fn("call")(lambda: chain([chain(4, hooks)], hooks)) == [4]
    # the mutable containers' own conversions (the extension's, with _cext)
    lst = pf.List([chain(5, hooks)])
    lst.append(chain(6, hooks))
    d = pf.Dict({"a": chain(7, hooks)})
    d["b"] = chain([chain(8, hooks)], hooks)
    assert lst == [5, 6] and d == {"a": 7, "b": [8]}


def test_tvm_ffi_value_protocol_chains(echo):
    # tvm-ffi's test_function.py::test_function_with_value_protocol
    assert echo(Value(Value(Value(10)))) == 10
    assert tuple(echo(Value([Value(1), Value(2), Value(3)]))) == (1, 2, 3)
    assert tuple(echo(Value([1, 2, Value(Value(3))]))) == (1, 2, 3)


def test_value_hook_chain_up_to_the_bound_crosses(echo):
    assert echo(chain(7, MAX_HOOK_CHAIN)) == 7
    assert pf.convert([chain(7, MAX_HOOK_CHAIN)]) == [7]
    msg = (r"argument 0 \(Value\): __packedfunc_value__\(\) results that have the hook again "
           r"go through it at most %d times; this chain is longer" % MAX_HOOK_CHAIN)
    with pytest.raises(TypeError, match=msg):
        echo(chain(7, MAX_HOOK_CHAIN + 1))


class Endless:
    """Each hook returns a fresh Endless: a chain that never ends."""

    def __packedfunc_value__(self):
        return Endless()


def test_endless_value_hook_chain_is_a_type_error_naming_the_bound(fn, echo):
    # A fresh wrapper per hook: only a bound stops it (and each wrapper is
    # held, so that a freed one's id, taken by the next, is no false cycle).
    bound = "at most %d times; this chain is longer" % MAX_HOOK_CHAIN
    with pytest.raises(TypeError, match=r"argument 1 \(Endless\): .*" + bound):
        echo(1, Endless())
    with pytest.raises(TypeError, match=r"the value given to convert \(Endless\): .*" + bound):
        pf.convert(Endless())
    with pytest.raises(TypeError, match=r"argument 0 at \[1\]\['k'\] \(Endless\): .*" + bound):
        echo([1, {"k": Endless()}])
    with pytest.raises(TypeError, match=bound):
        fn("call")(lambda: Endless())
    with pytest.raises(TypeError, match=bound):
        pf.List([Endless()])
    with pytest.raises(TypeError, match=bound):
        pf.Dict()["k"] = Endless()


def test_value_hook_returning_itself_is_a_type_error(echo):
    me = Value(None)
    me.value = me
    msg = r"argument 0 \(Value\): __packedfunc_value__\(\) returned the value itself"
    with pytest.raises(TypeError, match=msg):
        echo(me)
    with pytest.raises(TypeError, match=msg):
        echo(Value(Value(me)))  # at the end of a chain


class A(Value):
    pass


class B(Value):
    pass


def test_value_hook_cycles_are_a_type_error_naming_the_value(fn, echo):
    a = A(None)
    a.value = B(a)  # a -> b -> a
    leads_back = "its __packedfunc_value__\\(\\) result leads back to the value itself"
    with pytest.raises(TypeError, match=r"argument 0 \(A\): " + leads_back):
        echo(a)
    with pytest.raises(TypeError, match=r"argument 1 \(B\): " + leads_back):
        echo(0, a.value)
    with pytest.raises(TypeError, match=leads_back):
        pf.convert(a)
    with pytest.raises(TypeError, match=leads_back):
        fn("call")(lambda: a)
    with pytest.raises(TypeError, match=r"argument 0 at \[0\] \(A\): " + leads_back):
        echo([a])
    with pytest.raises(TypeError, match=leads_back):
        pf.List([a])
    # through a container: a -> [b], b -> a; and a container of the value
    a.value = [B(a)]
    with pytest.raises(TypeError, match=r"argument 0 \(A.__packedfunc_value__\(\)'s "
                                        r"result\) at \[0\] \(A\): " + leads_back):
        echo(a)
    loop = Value(None)
    loop.value = [1, {"k": Value(loop)}]
    with pytest.raises(TypeError, match=leads_back):
        echo(loop)
    with pytest.raises(TypeError, match=leads_back):
        pf.convert(loop)
    # the failed conversions left nothing behind: the same values cross
    a.value = 5
    loop.value = 6
    assert echo(a) == 5 and echo([loop]) == [6]


class Handoff:
    """Crosses as what it wraps, which it gives up on the way (the hook's
    result is the only reference left)."""

    def __init__(self, inner):
        self.inner = inner

    def __packedfunc_value__(self):
        inner, self.inner = self.inner, None
        return inner


def test_value_hook_chain_is_held_until_the_conversion_ends(fn, echo):
    def links():
        x = Handoff(Handoff(Handoff(7)))
        refs = [weakref.ref(x.inner), weakref.ref(x.inner.inner)]
        return x, refs

    class Check:
        """Converted after the chain: its links are still alive."""

        def __init__(self, refs):
            self.refs = refs

        def __packedfunc_value__(self):
            return sum(r() is not None for r in self.refs)

    x, refs = links()  # another chain between them
    assert echo([x, Value(Value(0)), Check(refs)]) == [7, 0, 2]
    x, refs = links()
    assert echo({"a": x, "b": Value(0), "c": Check(refs)}) == {"a": 7, "b": 0, "c": 2}
    x, refs = links()
    assert fn("call")(lambda a, b: [a, b], x, Check(refs)) == [7, 2]
    x, refs = links()
    assert pf.List([x, Value(0), Check(refs)]) == [7, 0, 2]
    gc.collect()
    assert [r() for r in refs] == [None, None]  # and released after it


def test_value_hook_result_that_cannot_cross_is_named(echo):
    with pytest.raises(OverflowError, match=r"argument 1 \(Value.__packedfunc_value__\(\)'s "
                                            r"result\): int \d+ does not fit in int64"):
        echo(1, Value(2**70))
    with pytest.raises(TypeError, match=r"argument 0 \(Value.__packedfunc_value__\(\)'s "
                                        r"result\), dict key 0 \(1.5\) has unsupported type float"):
        echo(Value({1.5: 1}))
    with pytest.raises(ValueError, match="NUL"):
        pf.convert(Value("a\0b"))


class Outer(Value):
    pass


class Inner(Value):
    pass


def test_value_hook_chain_result_that_cannot_cross_is_named(echo):
    # named as the result of the chain's last hook
    with pytest.raises(OverflowError, match=r"argument 1 \(Inner.__packedfunc_value__\(\)'s "
                                            r"result\): int \d+ does not fit in int64"):
        echo(1, Outer(Inner(2**70)))
    with pytest.raises(TypeError, match=r"argument 0 at \[0\] \(Inner.__packedfunc_value__\(\)'s "
                                        r"result\), dict key 0 \(1.5\) has unsupported type float"):
        echo([Outer(Outer(Inner({1.5: 1})))])
    with pytest.raises(ValueError, match=r"argument 0 \(Inner.__packedfunc_value__\(\)'s "
                                         r"result\) at \[1\]: str contains a NUL"):
        echo(Outer(Inner([1, "a\0b"])))
    with pytest.raises(ValueError, match="NUL"):
        pf.convert(Outer(Inner("a\0b")))


def test_value_hook_errors_propagate(echo):
    class Failing:
        def __packedfunc_value__(self):
            raise LookupError("no value today")

    with pytest.raises(LookupError, match="no value today"):
        echo(Failing())


def test_value_hook_raising_mid_chain_propagates(fn, echo):
    class Flaky:
        """Raises the first time only."""

        def __init__(self):
            self.calls = 0

        def __packedfunc_value__(self):
            self.calls += 1
            if self.calls == 1:
                raise LookupError("not yet")
            return 3

    for convert in (echo, pf.convert, lambda v: fn("call")(lambda: v),
                    lambda v: echo([0, {"k": v}]), lambda v: pf.List([v])):
        x = Outer(Inner(Flaky()))
        with pytest.raises(LookupError, match="not yet"):
            convert(x)
        convert(x)  # the chain left nothing behind: it crosses now
        assert x.value.value.calls == 2


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
    assert fn("typed_device")(Value(Value(Value(10))), Value(Place((2, 4)))) == 24


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


def test_hook_chains_and_their_errors_do_not_leak(echo):
    def rounds(n):
        for _ in range(n):
            assert echo(Value(Value([Value(Value(1))]))) == [1]
            with pytest.raises(TypeError, match="at most"):
                echo([Endless()])
            with pytest.raises(OverflowError):
                pf.convert(Value(Value(2**70)))

    rounds(20)
    gc.collect()
    blocks = sys.getallocatedblocks()
    rounds(200)  # a block leaked per round: 200 blocks; an Endless per hook: 12800
    gc.collect()
    assert sys.getallocatedblocks() - blocks < 100
    assert not hook_ids()  # no value is left marked as being converted
