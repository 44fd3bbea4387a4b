"""Reflection from a class: Cls.__pf_type_info__ (key, index, parent, fields,
methods, constructor signature) and pf.registered_types(), read from the
library's description of each registered object type."""
import os

import pytest

import packedfunc as pf

DEMO_PLUGIN = os.environ.get("PF_DEMO_PLUGIN")


@pytest.fixture(scope="module")
def demo():
    return pf.load_module(DEMO_PLUGIN)


def test_the_record_of_a_type(demo):
    Counter = pf.get_class("demo.Counter")
    info = Counter.__pf_type_info__
    assert isinstance(info, pf.TypeInfo)
    assert info.key == "demo.Counter" and info.parent == "demo.Base"
    assert info.index == Counter.__pf_type__[0]
    assert info.doc == "A Base that counts."
    assert info.init_signature == "void(self:obj<demo.Counter>,name:str,start:int64)"
    fields = {f.name: f for f in info.fields}
    assert fields["count"] == pf.TypeField("count", "int64", True, "The count so far.",
                                           "demo.Counter")
    assert fields["name"].declared_by == "demo.Base" and not fields["name"].writable
    methods = {m.name: m for m in info.methods}
    assert methods["add"] == pf.TypeMethod("add", "int64(self:obj<demo.Counter>,n:int64)", False,
                                           "Adds N steps and returns the count.", "demo.Counter")
    assert methods["max_step"].static and methods["max_step"].signature == "int64()"
    assert methods["reset"].signature is None  # a packed method without one
    assert "__init__" not in methods
    base = pf.get_class("demo.Base").__pf_type_info__
    assert base.parent is None and [f.name for f in base.fields] == ["name", "id"]


def test_the_record_is_read_only(demo):
    info = pf.get_class("demo.Counter").__pf_type_info__
    with pytest.raises(AttributeError):
        info.key = "other"
    assert hash(info) == hash(pf.get_class("demo.Counter").__pf_type_info__)


def test_element_types_show_in_fields():
    mod = pf.load_module(os.path.join(os.environ["PF_TEST_MODULE_DIR"], "mod_elements.so"))
    info = pf.get_class("elements.Node").__pf_type_info__
    assert [(f.name, f.type) for f in info.fields] == [
        ("names", "list<str>"), ("next", "optional<obj<elements.Node>>"), ("items", "list<any>")]
    assert info.init_signature is None and info.methods == ()
    del mod


def test_registered_types(demo):
    keys = pf.registered_types()
    assert keys.index("demo.Base") < keys.index("demo.Counter")  # in registration order
    assert len(keys) == len(set(keys))
    for key in ("demo.Base", "demo.Counter"):
        assert pf.get_class(key).__pf_type_info__.key == key
