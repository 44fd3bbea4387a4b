"""Subclasses of Function (issue 36): made from a function or a callable,
they call, show and compare as the function they share, on both
backends."""
import gc
import weakref

import pytest

import packedfunc as pf


class Tagged(pf.Function):
    """A Function with state and methods of its own."""

    def __init__(self, func, tag="none"):
        self.tag = tag

    def tagged(self, x):
        return (self.tag, self(x))


class Slotted(pf.Function):
    __slots__ = ("extra",)


def test_a_subclass_made_from_a_function_shares_it(fn):
    echo = fn("echo")
    before = pf.use_count(echo)
    t = Tagged(echo, "mine")
    assert type(t) is Tagged and isinstance(t, pf.Function)
    assert pf.use_count(echo) == before + 1  # one more reference, the same PackedFunc
    assert t.tag == "mine" and t.tagged(5) == ("mine", 5)
    assert t(7) == 7 and t("x") == "x"
    # The identity rules of Functions: equal, and hashed alike, to every
    # wrapper of the same PackedFunc.
    assert t == echo and hash(t) == hash(echo) and t.handle == echo.handle
    assert t.name == echo.name and t.release_gil == echo.release_gil
    assert repr(echo).startswith("<packedfunc.Function ")
    assert repr(t) == repr(echo).replace("packedfunc.Function", __name__ + ".Tagged")
    # It passes to C as its PackedFunc; C gives the PackedFunc back as a
    # Function (C knows no Python class), equal to it.
    assert fn("call")(t, 3) == 3
    back = fn("echo")(t)
    assert back == t and type(back) is pf.Function
    assert pf.convert(t) is t
    # Its release is its own: the function it was made from still works.
    del back
    t.__del__()
    assert pf.use_count(echo) == before
    assert echo(1) == 1
    with pytest.raises(ValueError, match="the Function was released"):
        t(1)
    assert repr(t) == "<%s.Tagged (released)>" % __name__


def test_a_subclass_made_from_a_callable_and_slotted_subclasses():
    t = Tagged(lambda x: x * 2, tag="py")
    assert t(21) == 42 and t.tagged(1) == ("py", 2)
    s = Slotted(t)
    assert s(2) == 4 and s == t and not hasattr(s, "__dict__")
    s.extra = 1
    with pytest.raises(AttributeError):
        s.other = 1
    # Collected like any Function (weak references work).
    ref = weakref.ref(s)
    del s
    gc.collect()
    assert ref() is None


def test_a_subclass_of_a_registered_function(unique_name):
    name = unique_name()
    pf.register_func(name, lambda a, b: a - b)
    t = Tagged(pf.get_global_func(name))
    assert t(5, 1) == 4 and t.name == name and name in repr(t)


@pytest.mark.parametrize("bad, exc, match", [
    (1, TypeError, "Tagged: argument 'func' must be a packedfunc Function or a callable, not int"),
    ("testing.echo", TypeError, "argument 'func' must be a packedfunc Function or a callable, "
                                "not str"),
    (None, TypeError, "not NoneType"),
])
def test_what_is_no_function_is_refused(bad, exc, match):
    with pytest.raises(exc, match=match):
        Tagged(bad)


def test_a_released_function_or_none_at_all_is_refused(fn):
    f = pf.convert(lambda: 1)
    f.__del__()
    with pytest.raises(ValueError, match="Tagged: argument 'func': the Function was released"):
        Tagged(f)
    with pytest.raises(TypeError, match="cannot be created directly"):
        Tagged()
    with pytest.raises(TypeError, match="cannot be created directly"):
        pf.Function(fn("echo"))



class NoSuper(pf.Function):
    """Overrides __init__, __call__ and __del__, calling none of Function's."""
    __slots__ = ()

    def __init__(self, func):
        pass

    def __call__(self, *args):
        return "mine"

    def __del__(self):
        pass


class NoSuperBelow(NoSuper):
    def __del__(self):
        super().__del__()
        raise RuntimeError("a failing __del__")  # reported as unraisable


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("cls", [NoSuper, NoSuperBelow])
def test_a_subclass_del_that_does_not_call_super_still_releases(cls):
    # The PackedFunc (and the Python callable it holds) goes with the last
    # wrapper even when a subclass's __del__ never calls Function's.
    class Payload:
        pass

    payload, gone = Payload(), []
    weakref.finalize(payload, gone.append, 1)
    f = pf.convert(lambda p=payload: 1)
    del payload
    s = cls(f)
    assert s() == "mine"
    del f, s
    gc.collect()
    assert gone == [1]


class OwnHandle(pf.Function):
    """Has an attribute of its own named as the binding's state."""
    __slots__ = ("_handle",)

    def __init__(self, func):
        self._handle = 12345  # nothing to do with the C function


def test_a_subclass_attribute_named_handle_is_its_own(fn):
    # The binding reads the handle from Function's own slot (the
    # extension's field), never through the subclass's attribute: before,
    # C was given 12345 as the function (a crash).
    echo = fn("echo")
    before = pf.use_count(echo)
    s = OwnHandle(echo)
    assert s._handle == 12345
    assert s.handle == echo.handle and s == echo and hash(s) == hash(echo)
    assert pf.use_count(s) == before + 1
    assert s(3) == 3 and s("x") == "x"
    assert echo(s) == echo and s.bind({0: 5})() == 5
    assert repr(s).startswith("<%s.OwnHandle " % __name__)
    s.__del__()
    assert pf.use_count(echo) == before and s._handle == 12345
    with pytest.raises(ValueError, match="released"):
        s(1)


class SuperInit(pf.Function):
    """The canonical pattern: __init__ takes more, and calls super's."""

    def __init__(self, f, tag):
        super().__init__(f)
        self.tag = tag


class NoInit(pf.Function):
    """No __init__ of its own: Function's takes what __new__ took."""


class ByName(pf.Function):
    """Made from a registry name: __new__ and __init__ pass the function
    on to Function's."""

    def __new__(cls, name, tag):
        return super().__new__(cls, pf.get_global_func(name))

    def __init__(self, name, tag):
        super().__init__(pf.get_global_func(name))
        self.tag = tag


def test_a_subclass_init_may_call_super_init(fn):
    echo = fn("echo")
    s = SuperInit(echo, "t")
    assert s(3) == 3 and s.tag == "t" and s == echo
    n = NoInit(echo, "extra", key="ignored")  # Function.__init__ takes them
    assert n(4) == 4 and n == echo
    b = ByName("testing.echo", tag="b")
    assert b(5) == 5 and b.tag == "b" and b == echo
    c = SuperInit(lambda x: x + 1, "py")
    assert c(1) == 2
    # Function.__init__ does nothing more: calling it again changes nothing.
    pf.Function.__init__(s, lambda: 0)
    assert s == echo and s(6) == 6


def test_super_init_checks_its_argument_as_new_does(fn):
    class BadSuper(pf.Function):
        def __init__(self, f, what):
            super().__init__(*what)

    with pytest.raises(TypeError, match="BadSuper: argument 'func' must be a packedfunc "
                                        "Function or a callable, not int"):
        BadSuper(fn("echo"), (1,))
    with pytest.raises(TypeError, match="cannot be created directly"):
        BadSuper(fn("echo"), ())
    with pytest.raises(TypeError, match="cannot be created directly"):
        pf.Function.__init__(fn("echo"), fn("echo"))
