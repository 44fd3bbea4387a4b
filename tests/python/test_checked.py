"""Checked registrations (include/packedfunc/checked.h) seen from Python: the
demo plugin registers its typed functions and methods with
PF_REGISTER_CHECKED and PF_METHOD_CHECKED, and each keeps the signature and
doc that its former string registration gave, and calls through it."""
import os

import pytest

from conftest import ROOT

DEMO_PLUGIN = os.environ.get("PF_DEMO_PLUGIN") or os.path.join(
    ROOT, os.environ.get("BUILD", "build"), "examples", "demo_plugin.so")

# What the plugin's string registrations said (canonical), and its docs.
FUNCTIONS = {
    "add": ("int64(a: int64, b: int64)", "Adds two integers."),
    "hypot": ("float64(x: float64, y: float64)",
              "The length of the vector (x, y), without overflow."),
    "greet": ("str(name: str)", "Returns 'Hello, NAME!'."),
}
METHODS = {
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


@pytest.fixture(scope="module")
def demo():
    import packedfunc
    assert os.path.exists(DEMO_PLUGIN), "%s is missing; run `make test-python`" % DEMO_PLUGIN
    return packedfunc.load_module(DEMO_PLUGIN).demo


def canonical(pf, text):
    """The canonical text of a hand-written signature, as the runtime keeps it."""
    f = pf.convert(lambda *a: None)
    f.set_info(signature=text)
    return f.signature


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_functions_keep_the_hand_written_signature(pf, demo, name):
    text, doc = FUNCTIONS[name]
    f = getattr(demo, name)
    assert f.signature == canonical(pf, text)
    assert f.doc == doc


def test_functions_call_through_the_checked_signature(demo):
    assert demo.add(40, 2) == 42
    assert demo.add(a=1, b=2) == 3
    assert demo.hypot(3.0, 4) == 5.0
    assert demo.greet("checked") == "Hello, checked!"
    with pytest.raises(TypeError, match="argument 0 'a': expected int64"):
        demo.add(1.5, 2)


@pytest.mark.parametrize("cls,name", sorted(METHODS))
def test_methods_keep_the_hand_written_signature(pf, demo, cls, name):
    text, doc = METHODS[(cls, name)]
    method = getattr(getattr(demo, cls), name)
    assert method.__doc__ == "%s\n\nname: demo.%s.%s\nsignature: %s" % (
        doc, cls, name, canonical(pf, text))


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
