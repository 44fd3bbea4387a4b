"""Function metadata from Python: name, signature and docstring; the typed
signature as inspect.Signature; help(); list_global_func_names(prefix=)."""
import collections.abc
import ctypes
import inspect
import os
import pydoc

import numpy as np
import pytest

from conftest import ROOT

DEMO_PLUGIN = os.environ.get("PF_DEMO_PLUGIN") or os.path.join(
    ROOT, os.environ.get("BUILD", "build"), "examples", "demo_plugin.so")


@pytest.fixture(scope="module")
def demo():
    import packedfunc
    assert os.path.exists(DEMO_PLUGIN), "%s is missing; run `make test-python`" % DEMO_PLUGIN
    return packedfunc.load_module(DEMO_PLUGIN).demo


def with_signature(pf, text):
    """A fresh function whose signature metadata is `text`."""
    f = pf.convert(lambda *a: None)
    f.set_info(signature=text)
    return f


# ---- the fields -----------------------------------------------------------------

def test_typed_c_function_fields(demo):
    f = demo.hypot
    assert f.name == "demo.hypot"
    assert f.signature == "float64(x:float64,y:float64)"
    assert f.doc == "The length of the vector (x, y), without overflow."
    assert f.__name__ == "demo.hypot"


def test_packed_c_function_fields(demo):
    f = demo.reverse
    assert f.name == "demo.reverse"
    assert f.signature is None
    assert f.doc.startswith("Reverses a str")


def test_doc_shows_doc_name_and_signature(demo):
    assert demo.add.__doc__ == ("Adds two integers.\n\n"
                                "name: demo.add\nsignature: int64(a:int64,b:int64)")
    assert demo.fail.__doc__ == ("fail([message]): always raises ValueError with the "
                                 "message.\n\nname: demo.fail")


def test_anonymous_function_has_no_doc(pf):
    f = pf.convert(lambda: 1)
    assert f.name is None and f.signature is None and f.doc is None
    assert f.__doc__ is None
    assert f.__name__ == "<anonymous>"
    assert "(anonymous)" in repr(f)


def test_the_class_keeps_its_docstring(pf):
    assert pf.Function.__doc__.startswith("A packed function")
    assert isinstance(pf.Function.__signature__, type(None))


def test_help_shows_name_signature_and_doc(demo):
    text = pydoc.render_doc(demo.hypot, renderer=pydoc.plaintext)
    assert "demo.hypot(x: float, y: float) -> float" in text
    assert "The length of the vector (x, y), without overflow." in text
    assert "signature: float64(x:float64,y:float64)" in text
    text = pydoc.render_doc(demo.fill, renderer=pydoc.plaintext)
    assert "demo.fill(*args)" in text
    assert "fill(tensor, value)" in text


# ---- inspect.signature ---------------------------------------------------------------

def test_inspect_signature_of_typed_functions(demo):
    # The demo's signatures name their parameters (keywords, too); unnamed
    # ones are positional only (test_keywords.py).
    assert str(inspect.signature(demo.add)) == "(a: int, b: int) -> int"
    assert str(inspect.signature(demo.hypot)) == "(x: float, y: float) -> float"
    assert str(inspect.signature(demo.greet)) == "(name: str) -> str"
    sig = inspect.signature(demo.add)
    assert [p.kind for p in sig.parameters.values()] == \
        [inspect.Parameter.POSITIONAL_OR_KEYWORD] * 2
    sig.bind(1, b=2)  # binds as the call does
    assert demo.add(1, b=2) == 3
    with pytest.raises(TypeError):
        sig.bind(1)


def test_inspect_signature_of_packed_functions_takes_any_arguments(pf, demo):
    assert str(inspect.signature(demo.reverse)) == "(*args)"
    assert str(inspect.signature(pf.convert(lambda a: a))) == "(*args)"


@pytest.mark.parametrize("ctype, annotation", [
    ("int8", int), ("int16", int), ("int32", int), ("int64", int),
    ("uint8", int), ("uint16", int), ("uint32", int), ("uint64", int),
    ("float32", float), ("float64", float), ("double", float), ("bool", bool),
    ("str", str), ("bytes", bytes), ("ptr", ctypes.c_void_p), ("tensor", np.ndarray),
])
def test_each_type_maps_to_its_python_type(pf, ctype, annotation):
    sig = inspect.signature(with_signature(pf, "%s(%s)" % (ctype, ctype)))
    assert sig.return_annotation is annotation
    assert [p.annotation for p in sig.parameters.values()] == [annotation]


def test_handle_types_map_to_the_binding_classes(pf):
    sig = inspect.signature(with_signature(pf, "func(func,dtype,device)"))
    assert [p.annotation for p in sig.parameters.values()] == [
        collections.abc.Callable, pf.DataType, pf.Device]
    assert sig.return_annotation is pf.Function  # a function result is a Function
    assert inspect.signature(with_signature(pf, "dtype()")).return_annotation is pf.DataType
    assert inspect.signature(with_signature(pf, "device()")).return_annotation is pf.Device
    assert str(inspect.signature(with_signature(pf, "void()"))) == "() -> None"


def test_blanks_and_many_arguments(pf):
    sig = inspect.signature(with_signature(pf, " int64 ( int32 ,\tuint8\n) "))
    assert str(sig) == "(arg0: int, arg1: int, /) -> int"
    sixteen = "void(" + ",".join(["int64"] * 16) + ")"
    assert len(inspect.signature(with_signature(pf, sixteen)).parameters) == 16


@pytest.mark.parametrize("text", [
    "int64(int64,,int64)", "float(int64)", "int64(void)", "int64(int64", "int64 int64)",
    "int64(int64) x", "", "(int64)", "Int64()", "int64(int64,)",
    "void(" + ",".join(["int64"] * 17) + ")",
])
def test_text_outside_the_grammar_is_refused(pf, text):
    # The library checks a signature before keeping it, so every signature
    # that inspect reads is in the grammar; a refused one leaves it unset.
    f = pf.convert(lambda *a: None)
    with pytest.raises(ValueError, match="PFFuncSetInfo: bad signature"):
        f.set_info(signature=text)
    assert f.signature is None
    assert str(inspect.signature(f)) == "(*args)"


def test_signature_is_kept_canonical(pf):
    f = with_signature(pf, " double ( int32 ,\r\tuint8\n) ")
    assert f.signature == "float64(int32,uint8)"


# ---- set_info, and Python functions that carry their own ---------------------------

def test_set_info_sets_each_field_once(pf):
    f = pf.convert(lambda: 0)
    f.set_info(name="mine", doc="Does nothing.")
    assert (f.name, f.signature, f.doc) == ("mine", None, "Does nothing.")
    f.set_info(signature="int64()")
    assert str(inspect.signature(f)) == "() -> int"
    with pytest.raises(ValueError) as info:
        f.set_info(name="again")
    assert "already set" in str(info.value)
    assert f.name == "mine"


@pytest.mark.parametrize("kwargs, exc", [
    ({"name": 1}, TypeError), ({"doc": b"x"}, TypeError), ({"signature": "a\0b"}, ValueError),
    ({"name": "\ud800"}, ValueError), ({"doc": "\udc80"}, ValueError),
])
def test_set_info_bad_arguments(pf, kwargs, exc):
    f = pf.convert(lambda: 0)
    with pytest.raises(exc):
        f.set_info(**kwargs)
    assert f.name is None and f.doc is None and f.signature is None


def test_registered_python_function_carries_its_name_and_doc(pf, unique_name):
    name = unique_name()

    @pf.register_func(name)
    def documented(x):
        """Doubles x.

        Really."""
        return 2 * x

    f = pf.get_global_func(name)
    assert f.name == name
    assert f.doc == "Doubles x.\n\nReally."
    assert f(21) == 42
    assert documented.__doc__.startswith("Doubles")  # the Python function is untouched


def test_registered_function_without_docstring(pf, unique_name):
    name = unique_name()
    pf.register_func(name, lambda: 1)
    f = pf.get_global_func(name)
    assert f.name == name and f.doc is None


def test_register_func_of_a_function_uses_its_metadata_name(pf, unique_name):
    name = unique_name()
    f = pf.convert(lambda: 5)
    f.set_info(name=name)
    pf.register_func(f)
    assert pf.get_global_func(name)() == 5
    with pytest.raises(TypeError) as info:
        pf.register_func(pf.convert(lambda: 6))  # anonymous: needs a name
    assert "pass a name" in str(info.value)


def test_function_as_class_attribute_is_not_bound(demo):
    class Holder:
        add = demo.add

    assert Holder().add(1, 2) == 3
    assert Holder.add is demo.add


# ---- list_global_func_names(prefix=) ------------------------------------------------

def test_list_global_func_names_filters_by_prefix(pf, unique_name):
    a, b = unique_name("alpha"), unique_name("beta")
    pf.register_func(a, lambda: 1)
    pf.register_func(b, lambda: 2)
    head = a[:a.index("alpha")]
    assert pf.list_global_func_names(prefix=head) == sorted([a, b])
    assert pf.list_global_func_names(head + "alpha") == [a]
    assert pf.list_global_func_names(prefix=head + "zzz") == []
    everything = pf.list_global_func_names()
    assert {a, b} <= set(everything) and everything == sorted(everything)
    assert pf.list_global_func_names(prefix="") == everything
    with pytest.raises(TypeError):
        pf.list_global_func_names(prefix=1)


def test_every_grammar_type_has_a_python_annotation(pf):
    # The grammar comes from the library; a type added there without a
    # Python type for its code fails here instead of in help().
    import typing
    from packedfunc import _signature
    # The count the library reports (PFSignatureTypeInfo): a new type there
    # must come with its annotation, and with this number.
    assert len(_signature.SIGNATURE_TYPES) == 26
    # any (a packed function's value of any type) has no annotation.
    assert _signature.annotation("any", False) is inspect.Parameter.empty
    for name in _signature.SIGNATURE_TYPES:
        _signature.annotation(name, True)
        _signature.annotation(name, False)
    # The object types share one type code: each is named by its own name.
    assert _signature.annotation("array", True) is pf.Array
    assert _signature.annotation("array", False) == typing.Union[list, tuple, pf.Array]
    assert _signature.annotation("map", True) is pf.Map
    assert _signature.annotation("map", False) == typing.Union[dict, pf.Map]
    assert _signature.annotation("shape", True) is pf.Shape
    assert _signature.annotation("shape", False) is pf.Shape
    assert _signature.annotation("object", True) is pf.Object
    assert _signature.annotation("object", False) is object
    assert _signature.annotation("list", True) is pf.List
    assert _signature.annotation("list", False) == typing.Union[list, tuple, pf.List]
    assert _signature.annotation("dict", True) is pf.Dict
    assert _signature.annotation("dict", False) == typing.Union[dict, pf.Dict]


# ---- checked registrations (checked.h) ------------------------------------------------
# The demo plugin registers its typed functions and methods with
# PF_REGISTER_CHECKED and PF_METHOD_CHECKED: each keeps the signature and doc
# that its former string registration gave, and calls through it.

# What the plugin's string registrations said (canonical), and its docs.
CHECKED_FUNCTIONS = {
    "add": ("int64(a: int64, b: int64)", "Adds two integers."),
    "hypot": ("float64(x: float64, y: float64)",
              "The length of the vector (x, y), without overflow."),
    "greet": ("str(name: str)", "Returns 'Hello, NAME!'."),
}
CHECKED_METHODS = {
    ("Base", "__init__"): ("void(self: obj<demo.Base>, name: str)", "Makes a Base named NAME."),
    ("Base", "describe"): ("str(self: obj<demo.Base>)", "Says what it is."),
    ("Counter", "__init__"): ("void(self: obj<demo.Counter>, name: str, start: int64)",
                              "Makes a Counter named NAME that starts at START."),
    ("Counter", "increment"): ("int64(self: obj<demo.Counter>)",
                               "Adds step to the count and returns it."),
    ("Counter", "add"): ("int64(self: obj<demo.Counter>, n: int64)",
                         "Adds N steps and returns the count."),
    ("Counter", "describe"): ("str(self: obj<demo.Counter>)", "Says what it is."),
    ("Counter", "max_step"): ("int64()", "The largest sensible step."),
}


@pytest.mark.parametrize("name", sorted(CHECKED_FUNCTIONS))
def test_functions_keep_the_hand_written_signature(pf, demo, name):
    text, doc = CHECKED_FUNCTIONS[name]
    f = getattr(demo, name)
    assert f.signature == with_signature(pf, text).signature
    assert f.doc == doc


def test_functions_call_through_the_checked_signature(demo):
    assert demo.add(40, 2) == 42
    assert demo.add(a=1, b=2) == 3
    assert demo.hypot(3.0, 4) == 5.0
    assert demo.greet("checked") == "Hello, checked!"
    with pytest.raises(TypeError, match="argument 0 'a': expected int64"):
        demo.add(1.5, 2)


@pytest.mark.parametrize("cls,name", sorted(CHECKED_METHODS))
def test_methods_keep_the_hand_written_signature(pf, demo, cls, name):
    text, doc = CHECKED_METHODS[(cls, name)]
    method = getattr(getattr(demo, cls), name)
    assert method.__doc__ == "%s\n\nname: demo.%s.%s\nsignature: %s" % (
        doc, cls, name, with_signature(pf, text).signature)


def test_methods_call_through_the_checked_signature(demo):
    c = demo.Counter("clicks", 10)
    assert c.increment() == 11
    c.step = 5
    assert c.add(2) == 21
    assert c.describe() == "Counter 'clicks' at 21"
    assert demo.Counter.max_step() == 1000
    assert demo.Base("b").describe().startswith("Base 'b' #")
    with pytest.raises(TypeError, match="'n': expected int64"):
        c.add("two")
