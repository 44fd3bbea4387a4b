"""Errors as one story: an exception that crosses C any number of times
comes back as the same object with one traceback, its text grows linearly
with the depth, and an exception that C swallows does not keep its frames."""
import gc
import sys
import threading
import traceback
import tracemalloc
import weakref

import pytest

import packedfunc as pf
from packedfunc import _ffi


def _chain(call, depth, innermost):
    """depth callbacks, each calling the next through testing.call; the
    last one runs innermost()."""
    def level(n):
        if n == 0:
            return innermost()
        return call(lambda: level(n - 1))
    return level(depth)


def _formatted(exc):
    return "".join(traceback.format_exception(exc))


def test_python_error_text_is_linear_in_depth(fn):
    call = fn("call")

    def innermost():
        raise ValueError("innermost message")

    sizes = {}
    for depth in (4, 8, 50):
        with pytest.raises(ValueError) as info:
            _chain(call, depth, innermost)
        err = info.value
        text = _formatted(err)
        # The message once, as the exception's own text, at every depth.
        assert str(err) == "innermost message"
        assert text.count("ValueError: innermost message") == 1
        sizes[depth] = (len(text), len(_ffi.PFErrorGetTraceback()))
        # Checked at each depth, so that text that grows faster than
        # linearly fails at depth 8 instead of exhausting the memory at 50.
        for small in sizes:
            if small < depth:
                for i in range(2):
                    per_level = sizes[small][i] / small
                    assert sizes[depth][i] <= 2 * per_level * depth + 2000, (small, depth, sizes)


def test_c_error_text_is_linear_in_depth(fn):
    call, raise_error = fn("call"), fn("raise_error")
    sizes = {}
    for depth in (4, 8, 50):
        with pytest.raises(KeyError) as info:
            _chain(call, depth, lambda: raise_error("KeyError", "from C, deep down"))
        err = info.value
        assert err.args == ("from C, deep down",)  # the innermost kind and message, once
        assert _formatted(err).count("KeyError: 'from C, deep down'") == 1
        sizes[depth] = len(_formatted(err))
        for small in sizes:
            if small < depth:
                assert sizes[depth] <= 2 * sizes[small] / small * depth + 2000, sizes


def test_f1_c_f2_c_f3_is_one_traceback(fn):
    call = fn("call")
    raised = []

    def f3():
        exc = ValueError("from f3", 3)
        raised.append(exc)
        raise exc

    def f2():
        return call(f3)

    def f1():
        return call(f2)

    with pytest.raises(ValueError) as info:
        f1()
    err = info.value
    # The very object f3 raised, with its class and args.
    assert err is raised[0] and type(err) is ValueError and err.args == ("from f3", 3)
    # Its traceback reads from the outermost caller down to the raise, with
    # each C level a frame of its own between the Python levels.
    names = [f.name for f in traceback.extract_tb(err.__traceback__)]
    story = [n for n in names if n in ("f1", "f2", "f3", "testing.call")]
    assert story == ["f1", "testing.call", "f2", "testing.call", "f3"]
    assert names[-1] == "f3"
    # Below the outermost call into C, the binding's own frames (its call
    # into C, the trampoline) are left out: each level is its user code.
    own = pf.__path__[0]
    below = traceback.extract_tb(err.__traceback__)[names.index("testing.call"):]
    assert [f.name for f in below if f.filename.startswith(own)] == []
    assert traceback.extract_tb(err.__traceback__)[-1].line == "raise exc"
    assert err.__cause__ is None


def test_error_through_a_c_thread_is_the_same_object(fn):
    raised = []

    def cb():
        raised.append(KeyError("on a C thread"))
        raise raised[-1]

    with pytest.raises(KeyError) as info:
        fn("call")(lambda: fn("call_in_thread")(cb))
    assert info.value is raised[0]
    names = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert names.index("testing.call") < names.index("testing.call_in_thread") < names.index("cb")


def test_error_through_a_closure_is_the_same_object(fn):
    raised = []

    def cb(x):
        raised.append(IndexError(x))
        raise raised[-1]

    f = pf.convert(cb)  # C sees it as a packed function; call it through C
    with pytest.raises(IndexError) as info:
        fn("call")(f, 7)
    assert info.value is raised[0] and info.value.args == (7,)


def test_error_through_a_c_function_pointer_is_the_same_object(fn):
    raised = []

    def cb(x):
        raised.append(IndexError("from the pointer", x))
        raise raised[-1]

    assert fn("call_via_closure")(lambda x: x * 2, 21) == 42
    with pytest.raises(IndexError) as info:
        fn("call_via_closure")(cb, 5)
    assert info.value is raised[0] and info.value.args == ("from the pointer", 5)
    names = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert names[-1] == "cb" and names.index("testing.call_via_closure") < names.index("cb")


class _Marker:
    pass


def _swallowed_raiser(refs, size):
    def cb():
        big = bytearray(size)  # a large local, kept by the frame
        marker = _Marker()
        refs.append(weakref.ref(marker))
        raise ValueError("C ignores this", len(big))
    return cb


def _alive(refs):
    gc.collect()
    return sum(r() is not None for r in refs)


def test_swallowed_exceptions_release_their_frames(fn):
    call_ignoring, raise_error = fn("call_ignoring"), fn("raise_error")
    size = 50 << 20
    refs = []
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(5):
            assert call_ignoring(_swallowed_raiser(refs, size)) == 1
        # Each new error on this thread replaces the one before: at most
        # the last is kept, for a caller that might still read it.
        assert _alive(refs) <= 1
        assert tracemalloc.get_traced_memory()[0] - base < size + (10 << 20)
        # Another error replaces it: nothing is kept any more.
        with pytest.raises(TypeError):
            raise_error("TypeError", "replaces the swallowed error")
        assert _alive(refs) == 0
        assert tracemalloc.get_traced_memory()[0] - base < 10 << 20
    finally:
        tracemalloc.stop()


def test_an_error_read_and_not_reraised_is_not_kept(fn):
    refs = []
    cb = _swallowed_raiser(refs, 1 << 10)
    with pytest.raises(ValueError) as info:
        fn("call")(cb)
    del info
    assert _alive(refs) == 0


def test_errors_that_c_threads_swallow_are_bounded(fn):
    refs = []
    cb = _swallowed_raiser(refs, 1 << 10)
    assert fn("call_in_thread_n")(cb, 50) == 50
    assert _alive(refs) <= 8
    # The error of each thread is one at a time.
    threads = [threading.Thread(target=fn("call_in_thread_n"), args=(cb, 3)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert _alive(refs) <= 8


def test_c_errors_are_structured(fn):
    with pytest.raises(IndexError) as info:
        fn("call")(fn("raise_error"), "IndexError", "out of range")
    err = info.value
    assert err.kind == "IndexError"
    assert err.c_traceback == ["  in testing.call"]
    assert str(err) == "out of range"
    names = [f.name for f in traceback.extract_tb(err.__traceback__)]
    assert names[-1] == "testing.call"


def test_registered_kinds_are_structured(fn):
    @pf.register_error("story.Kind")
    class StoryError(Exception):
        pass

    with pytest.raises(StoryError) as info:
        fn("raise_error")("story.Kind", "registered")
    assert info.value.kind == "story.Kind" and info.value.args == ("registered",)
    assert info.value.c_traceback == []


def test_a_bad_argument_begins_at_the_level_that_passed_it(fn):
    import ctypes
    labs = pf.typed(ctypes.CDLL(None).labs, "int64(int64)")
    with pytest.raises(TypeError) as info:
        fn("call")(labs, "two")  # the conversion fails inside C, one level down
    err = info.value
    assert err.kind == "TypeError" and "expected int64, got str" in str(err)
    # The runtime's check is no level of its own: the message names the
    # typed function, and the error begins at the C level that called it.
    assert err.c_traceback == ["  in testing.call"]
    entries = traceback.extract_tb(err.__traceback__)
    assert entries[-1].name == "testing.call" and entries[-1].filename == "<C>"


def test_module_loading_errors_show_where_they_began(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        pf.load_module(str(tmp_path / "nope.so"))
    c_error = info.value.__cause__  # the C error, kept as the cause
    assert c_error.kind == "RuntimeError"
    assert c_error.c_traceback[0].startswith('  File "runtime/module.c", line ')
    assert traceback.extract_tb(c_error.__traceback__)[-1].filename == "runtime/module.c"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))
