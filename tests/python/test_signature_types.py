"""Element types, optional and union in signatures (signature.h): a typed
function's checks and conversions of elements, arguments and results, and
the metadata every reader shows (inspect.signature, help, stubs, remote
functions)."""
import gc
import inspect
import os
import typing
import weakref

import pytest

import packedfunc as pf
from packedfunc import rpc, stubgen

#: the type index of each container, as the library numbers them
ARRAY, LIST, MAP, DICT = (pf.Array([]).type_index, pf.List([]).type_index,
                          pf.Map({}).type_index, pf.Dict({}).type_index)


@pytest.fixture
def size(testlib):
    return pf.typed(testlib.pft_array_size, "int64(xs: array<int64>)")


def test_a_list_or_tuple_builds_the_array(size):
    assert size([1, 2, 3]) == 3
    assert size((4, 5)) == 2
    assert size([]) == 0
    assert size(pf.List([1, True])) == 2  # a List converts; a bool is an int
    assert size(None) == -1  # null, as for an unconstrained array


@pytest.mark.parametrize("bad,exc,match", [
    ([1, "x", 3], TypeError, r"argument 0 'xs', element 1: expected int64, got str"),
    ([1, 2.5], TypeError, r"argument 0 'xs', element 1: expected int64, got float"),
    ([None], TypeError, r"argument 0 'xs', element 0: expected int64, got null"),
    ([2**63 - 1, 2**63], OverflowError, None),
    (5, TypeError, r"argument 0 'xs': expected array<int64>, got int"),
    ({"a": 1}, TypeError, r"argument 0 'xs': expected array<int64>, got map object"),
], ids=["str", "float", "None", "too-big", "int", "dict"])
def test_a_wrong_element_names_the_parameter_index_and_type(size, bad, exc, match):
    with pytest.raises(exc, match=match):
        size(bad)


def test_ints_convert_where_floats_are_wanted(testlib):
    first = pf.typed(testlib.pft_first_code, "int64(xs: array<float64>)")
    float_code = first([1.5])
    assert first([1, 2]) == float_code  # exact ints: floats, as a float64 argument
    with pytest.raises(ValueError, match=r"element 0: expected float64, got int "
                                         r"9007199254740993, which a double cannot hold"):
        first([2**53 + 1])
    small = pf.typed(testlib.pft_array_size, "int64(xs: array<int8>)")
    with pytest.raises(ValueError, match=r"element 1: expected int8, got int 300"):
        small([1, 300])


def test_containers_convert_to_the_kind_wanted(testlib):
    kind = lambda sig: pf.typed(testlib.pft_type_index, sig)  # noqa: E731
    assert kind("int64(xs: list<str>)")(["a", "b"]) == LIST
    assert kind("int64(xs: list<str>)")(pf.List(["a"])) == LIST
    assert kind("int64(xs: array<str>)")(pf.List(["a"])) == ARRAY
    assert kind("int64(m: map<str, float64>)")(pf.Dict({"a": 1})) == MAP
    assert kind("int64(m: dict<str, float64>)")({"a": 1.5}) == DICT
    nested = kind("int64(d: dict<str, list<array<int64>>>)")
    assert nested({"a": [[1], (2, 3)]}) == DICT
    with pytest.raises(TypeError, match=r"argument 0 'd', value at key \"a\", element 1, "
                                        r"element 1: expected int64, got str"):
        nested({"a": [[1], [2, "z"]]})
    keys = kind("int64(m: map<str, int64>)")
    with pytest.raises(TypeError, match=r"argument 0 'm', key 1: expected str, got int"):
        keys({1: 1})
    with pytest.raises(TypeError, match=r"argument 0 'm', value at key \"a\": expected int64, "
                                        r"got str"):
        keys({"a": "b"})


def test_a_shared_container_converts_once(testlib):
    # 8 nested lists, each holding the one below 20 times (the same list):
    # one C container per list, each converted once for the call (before:
    # every path, 20^7 Arrays of floats: the call never ended).
    depth = 8
    x = [1] * 20
    for _ in range(depth - 1):
        x = [x] * 20
    sig = "int64(xs: %sfloat64%s)" % ("array<" * depth, ">" * depth)
    assert pf.typed(testlib.pft_array_size, sig)(x) == 20
    kind = pf.typed(testlib.pft_type_index, "int64(xs: list<list<list<list<float64>>>>)")
    assert kind(pf.Array([[[[1] * 200] * 200] * 200] * 200)) == LIST


def test_optional_and_union(testlib):
    opt = pf.typed(testlib.pft_type_index, "int64(x: optional<array<int64>>)")
    assert opt(None) == -1 and opt([1]) == ARRAY
    union = pf.typed(testlib.pft_type_index, "int64(x: union<array<int64>, map<str, str>>)")
    assert union([1]) == ARRAY and union({"a": "b"}) == MAP
    with pytest.raises(TypeError, match=r"argument 0 'x': expected union<array<int64>,"
                                        r"map<str,str>>, got array object"):
        union(["q"])
    inner = pf.typed(testlib.pft_array_size, "int64(xs: array<optional<str>>)")
    assert inner(["a", None]) == 2
    with pytest.raises(ValueError, match=r"parameter 0 \('x'\) is optional<int64>, which has "
                                         r"no C type"):
        pf.typed(testlib.pft_array_size, "int64(x: optional<int64>)")


def test_results_are_checked(testlib):
    same = pf.typed(testlib.pft_same, "array<int64>(array)")
    assert list(same([1, 2])) == [1, 2]
    with pytest.raises(TypeError, match=r"result, element 1: expected int64, got str"):
        same([1, "x"])
    floats = pf.typed(testlib.pft_same, "array<float64>(array)")
    got = floats([1, 2])
    assert list(got) == [1.0, 2.0] and all(type(x) is float for x in got)


def test_unconstrained_containers_keep_working(testlib):
    loose = pf.typed(testlib.pft_array_size, "int64(array)")
    assert loose([1, "x", None, 2.5]) == 4


def test_bad_grammar_is_a_value_error_with_the_position(testlib):
    for text, where in [("int64(xs: array<int64)", "position 21"),
                        ("int64(xs: map<float64, str>)", "a map's keys are str, int64 or any"),
                        ("int64(xs: union<str>)", "union takes at least two types, got 1")]:
        with pytest.raises(ValueError, match=where):
            pf.typed(testlib.pft_array_size, text)


def test_inspect_and_help_show_the_types(testlib):
    f = pf.typed(testlib.pft_type_index,
                 "int64(a: array<int64>, m: map<str, float64>, o: optional<list<str>>, "
                 "u: union<array<int64>, dict<str, bool>>)")
    sig = inspect.signature(f)
    ann = {name: p.annotation for name, p in sig.parameters.items()}
    assert ann["a"] == list[int]
    assert ann["m"] == dict[str, float]
    assert ann["o"] == typing.Optional[list[str]]
    assert ann["u"] == typing.Union[list[int], dict[str, bool]]
    assert "m:map<str,float64>,o:optional<list<str>>" in f.__doc__  # what help() shows


def test_a_packed_functions_metadata_is_not_checked():
    f = pf.convert(lambda xs, o=3: len(xs))
    f.set_info(name="n", signature="int64(xs: array<int64>, o: optional<int64> = 3)")
    assert f(["not", "ints"]) == 2  # metadata only: PFFuncCall does not check it
    params = inspect.signature(f).parameters
    assert params["xs"].annotation == list[int]
    assert params["o"].annotation == typing.Optional[int] and params["o"].default == 3


def test_stubs_spell_the_types(testlib, unique_name):
    prefix = unique_name()
    f = pf.typed(testlib.pft_type_index,
                 "int64(a: array<int64>, m: map<str, float64>, o: optional<list<str>>, "
                 "u: union<array<int64>, dict<str, bool>>)")
    pf.register_func(prefix + ".sig.f", f)
    try:
        text = stubgen.generate_registry(prefix + ".sig")
        compile(text, "sig.pyi", "exec")
        assert ("def f(a: list[int], m: dict[str, float], o: typing.Optional[list[str]], "
                "u: typing.Union[list[int], dict[str, bool]], /) -> int:" in text
                or "def f(a: list[int], m: dict[str, float], o: typing.Optional[list[str]], "
                   "u: typing.Union[list[int], dict[str, bool]]) -> int:" in text), text
    finally:
        pf.remove_global_func(prefix + ".sig.f")


def test_remote_functions_show_the_types(testlib, unique_name):
    prefix = unique_name()
    f = pf.typed(testlib.pft_array_size, "int64(xs: array<int64>)")
    pf.register_func(prefix + ".size", f)
    server = rpc.serve("tcp://127.0.0.1:*", expose=[prefix + "."], workers=1)
    try:
        with rpc.connect(server.endpoint, timeout=20) as mod:
            remote = mod[prefix + ".size"]
            assert remote.signature == "int64(xs:array<int64>)"
            assert inspect.signature(remote).parameters["xs"].annotation == list[int]
            assert remote([1, 2, 3]) == 3
            with pytest.raises(TypeError, match=r"element 1: expected int64, got str"):
                remote([1, "x"])
    finally:
        server.stop()
        pf.remove_global_func(prefix + ".size")


def test_fields_take_the_same_types():
    mod = pf.load_module(os.path.join(os.environ["PF_TEST_MODULE_DIR"], "mod_elements.so"))
    Node = pf.get_class("elements.Node")
    a, b = Node(), Node()
    a.names = ["x", "y"]  # a list builds the Array; the field keeps a List
    assert list(a.names) == ["x", "y"] and type(a.names) is pf.List
    with pytest.raises(TypeError, match=r"field 'names' of elements.Node, element 1: expected "
                                        r"str, got int"):
        a.names = ["x", 1]
    a.next = b
    assert pf.same_as(a.next, b)
    a.next = None
    assert a.next is None
    with pytest.raises(TypeError, match=r"expected obj<elements.Node>, got"):
        a.next = [1]
    stub = stubgen.generate_registry("elements")
    assert "def names(self) -> list[str]:" in stub, stub
    assert "def next(self) -> typing.Optional[Node]:" in stub, stub
    del mod  # kept loaded while its type is used


class _Holder:
    pass


def test_a_cycle_through_an_element_typed_field_is_collected():
    # A field whose type has element types holds a reference like any
    # object field: the instance is tracked, so a cycle through it goes.
    mod = pf.load_module(os.path.join(os.environ["PF_TEST_MODULE_DIR"], "mod_elements.so"))
    Node = pf.get_class("elements.Node")
    watches = []
    for _ in range(3):
        h = _Holder()
        h.node = Node()
        h.node.items = [h]
        watches.append(weakref.ref(h))
        del h
    gc.collect()
    assert [w() for w in watches] == [None, None, None]
    del mod
