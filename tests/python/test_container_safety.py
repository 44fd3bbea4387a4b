"""Containers against hostile values: objects released while an operation
converts its arguments, sequences changed while their items convert,
failed assignments, self-containing containers, hooks nested deep, and
the comparison operators. Run on both backends (see conftest)."""
import numbers

import pytest

import packedfunc as pf


class Releaser:
    """Crosses as `value`; releases `victim` (x.__del__(), as documented;
    None: nothing) when it is converted."""

    def __init__(self, victim, value=5):
        self.victim, self.value = victim, value

    def __packedfunc_value__(self):
        if self.victim is not None:
            self.victim.__del__()
        return self.value


class ReleasingIndex:
    """The index 0; releases `victim` when read."""

    def __init__(self, victim):
        self.victim = victim

    def __index__(self):
        self.victim.__del__()
        return 0


def _released(call):
    with pytest.raises(ValueError, match=r"the (List|Dict|Array|Map) was released"):
        call()


# ---- an item released by a later item's conversion: held to the end ---------

def _victim():
    return pf.convert([1, 2])  # an Array


def test_item_released_while_later_items_convert_is_held():
    c = _victim()
    assert pf.List([c, Releaser(c)]) == [[1, 2], 5]
    c = _victim()
    lst = pf.List()
    lst.extend([c, Releaser(c)])
    assert lst == [[1, 2], 5]
    c = _victim()
    lst = pf.List([0, 0, 0])
    lst[0:2] = [c, Releaser(c)]
    assert lst == [[1, 2], 5, 0]
    c = _victim()
    lst[::2] = [c, Releaser(c)]
    assert lst == [[1, 2], 5, 5]
    c = _victim()
    with pytest.raises(ValueError, match="result.*: the Array was released"):
        lst.insert(0, Releaser(c, c))  # the hook's result is the released one
    assert lst == [[1, 2], 5, 5]
    c = _victim()  # nested: the Array made for the inner list holds it
    assert pf.List([[c, Releaser(c)]]) == [[[1, 2], 5]]


def test_dict_entry_released_while_later_entries_convert_is_held():
    c = _victim()
    assert pf.Dict({1: c, 2: Releaser(c)}) == {1: [1, 2], 2: 5}
    c = _victim()
    d = pf.Dict()
    d.update({1: c, 2: Releaser(c)})
    assert d == {1: [1, 2], 2: 5}
    k = pf.convert(lambda: 1)  # a Function: a key by identity
    d = pf.Dict()
    d[k] = Releaser(k)
    assert len(d) == 1 and list(d.values()) == [5]


# ---- the container itself released by its own operation: a clear error ------

def test_list_released_by_its_own_operation_says_so():
    for op in (lambda l: l.pop(ReleasingIndex(l)),
               lambda l: l.insert(ReleasingIndex(l), 1),
               lambda l: l[ReleasingIndex(l)],
               lambda l: l.__setitem__(ReleasingIndex(l), 1),
               lambda l: l.__delitem__(ReleasingIndex(l)),
               lambda l: l.append(Releaser(l)),
               lambda l: l.extend([1, Releaser(l)]),
               lambda l: l.__setitem__(0, Releaser(l)),
               lambda l: l.__setitem__(slice(0, 2), [Releaser(l)]),
               lambda l: l.__setitem__(slice(0, 3, 2), [1, Releaser(l)])):
        _released(lambda: op(pf.List([1, 2, 3])))


def test_dict_released_by_its_own_operation_says_so():
    for op in (lambda d: d.__setitem__(1, Releaser(d)),
               lambda d: d.update({1: 1, 2: Releaser(d)}),
               lambda d: d.setdefault(3, Releaser(d))):
        _released(lambda: op(pf.Dict({1: 2})))


class ReleasingKey:
    """A number equal to 1 (a Map finds the key 1 under it); releases
    `victim` when the Map asks for its real part."""

    imag = 0

    def __init__(self, victim):
        self.victim = victim

    @property
    def real(self):
        self.victim.__del__()
        return 1

    def __eq__(self, other):
        return other == 1

    def __hash__(self):
        return hash(1)


numbers.Number.register(ReleasingKey)


def test_array_and_map_released_by_their_own_key_say_so():
    a = pf.convert(list(range(100)))
    _released(lambda: a[ReleasingIndex(a)])
    m = pf.convert({i: i for i in range(100)})
    _released(lambda: m[ReleasingKey(m)])


# ---- a sequence changed while its items convert -------------------------------

class Clearing:
    """Crosses as 7; clears (or grows) `seq` when converted."""

    def __init__(self, seq, grow=False):
        self.seq, self.grow = seq, grow

    def __packedfunc_value__(self):
        if self.grow:
            self.seq.extend(object() for _ in range(100))
        else:
            self.seq.clear()
        return 7


@pytest.mark.parametrize("grow", [False, True])
def test_sequence_changed_while_its_items_convert(grow):
    lst = pf.List()
    src = ["a", None, 2]
    src.insert(1, Clearing(src, grow))
    src.extend(["b"] * 20)
    expected = ["a", 7, None, 2] + ["b"] * 20
    lst.extend(src)
    assert lst == expected
    src = ["a", None, 2]
    src.insert(1, Clearing(src, grow))
    assert pf.List(src) == ["a", 7, None, 2]
    src = ["a", None, 2]
    src.insert(1, Clearing(src, grow))
    lst = pf.List([0])
    lst[0:1] = src
    assert lst == ["a", 7, None, 2]
    src = ["a", None, 2]
    src.insert(1, Clearing(src, grow))
    lst = pf.List([0] * 8)
    lst[::2] = src
    assert lst == ["a", 0, 7, 0, None, 0, 2, 0]


def test_mapping_changed_while_its_values_convert():
    src = {}
    src.update({"a": 1, "b": Clearing([]), "c": 3})
    src["b"].seq = src  # clears the dict being read
    d = pf.Dict()
    try:
        d.update(src)
    except RuntimeError:  # dict changed size during iteration: Python's word
        pass
    assert d in ({}, {"a": 1, "b": 7, "c": 3})


# ---- != is the negation of == --------------------------------------------------

@pytest.mark.parametrize("make", [lambda: pf.convert([1, 2]), lambda: pf.List([1, 2]),
                                  lambda: pf.convert({"a": 1}), lambda: pf.Dict({"a": 1}),
                                  lambda: pf.Shape([1, 2])])
def test_not_equal_is_the_negation_of_equal(make):
    a, b = make(), make()
    assert a == b and not (a != b)
    other = pf.Shape([3]) if isinstance(a, pf.Shape) else pf.List([9])
    assert a != other and not (a == other)
    assert (a != object()) is True


# ---- repr of a container that contains itself ----------------------------------

def test_repr_of_self_containing_list_and_dict():
    lst = pf.List([1])
    lst.append(lst)
    assert repr(lst) == "List([1, [...]])"
    d = pf.Dict({"a": 1})
    d["self"] = d
    assert repr(d) == "Dict({'a': 1, 'self': {...}})"
    outer = pf.List([d])
    d["list"] = outer
    assert repr(outer) == "List([Dict({'a': 1, 'self': {...}, 'list': [...]})])"
    arr = pf.convert([lst])
    assert repr(arr) == "(List([1, [...]]),)"
    inner = pf.List([2])
    arr = pf.convert([1, inner])
    inner.append(arr)  # the Array recurs inside itself, through the List
    try:
        assert repr(arr) == "(1, List([2, (...)]))"
        assert str(inner) == "[2, (1, [...])]"
    finally:
        inner.clear()


# ---- all or nothing ----------------------------------------------------------------

def test_failed_slice_assignment_changes_nothing():
    for index in (slice(None, None, 2), slice(0, 2), slice(3, 0, -2)):
        lst = pf.List([1, 2, 3, 4])
        with pytest.raises(ValueError, match="NUL"):
            lst[index] = [9, "a\0"]
        assert lst == [1, 2, 3, 4]
    lst = pf.List([1, 2, 3, 4])
    with pytest.raises(ValueError, match="extended slice of size 2"):
        lst[::2] = [9, 8, 7]
    assert lst == [1, 2, 3, 4]


def test_failed_update_changes_nothing():
    d = pf.Dict({"a": 1})
    with pytest.raises(ValueError, match="NUL"):
        d.update({"b": 2, "c": "x\0", "d": 4})
    with pytest.raises(OverflowError):
        d.update([("b", 2), ("c", 2**80)])
    with pytest.raises(TypeError):
        d.update({"b": 2, (1, 2): 3})
    assert d == {"a": 1}


# ---- hooks nested deep: the nesting limit, never a RecursionError ----------------

def Hooked(value):
    return Releaser(None, value)


def _hook_chain(levels):
    x = 0
    for _ in range(levels):
        x = Hooked([x])
    return x


@pytest.mark.parametrize("levels", [300, 1000])
def test_nesting_through_value_hooks_crosses_up_to_the_limit(fn, levels):
    echo = fn("echo")
    r = echo(_hook_chain(levels))
    for _ in range(levels - 1):
        r = r[0]
    assert r == [0]
    lst = pf.List([_hook_chain(levels)])
    assert len(lst) == 1
    assert isinstance(pf.convert(_hook_chain(levels)), pf.Array)


def test_nesting_through_value_hooks_past_the_limit_is_a_value_error(fn):
    for levels in (1001, 5000):
        with pytest.raises(ValueError, match="nested deeper than 1000 levels"):
            fn("echo")(_hook_chain(levels))
        with pytest.raises(ValueError, match="nested deeper than 1000 levels"):
            pf.List([_hook_chain(levels)])
        with pytest.raises(ValueError, match="nested deeper than 1000 levels"):
            pf.convert(_hook_chain(levels))
    mixed = 0
    for i in range(1200):
        mixed = Hooked([mixed]) if i % 2 else [mixed]
    with pytest.raises(ValueError, match="nested deeper than 1000 levels"):
        fn("echo")(mixed)
