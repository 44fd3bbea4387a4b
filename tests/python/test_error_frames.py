"""What a traceback of an error from C shows: the user's frames and one
frame per C level, never the binding's own frames, no misleading caret
under a C level; and what it keeps alive: nothing, once it is dropped."""
import ctypes
import gc
import os
import traceback
import weakref

import pytest

import packedfunc as pf
from packedfunc import _errors, _ffi

OWN = os.path.dirname(os.path.abspath(pf.__file__)) + os.sep


def _labs(name=None):
    f = pf.typed(ctypes.CDLL(None).labs, "int64(int64)")
    if name:
        f.set_info(name=name)
    return f


def _entries(exc):
    return traceback.extract_tb(exc.__traceback__)


def _below_call(exc):
    """The entries below the user's call, made through _caught(lambda: ...)."""
    entries = _entries(exc)
    assert [e.name for e in entries[:2]] == ["_caught", "<lambda>"], entries
    return entries[2:]


def _own_entries(exc):
    return ["%s:%s %s" % (e.filename, e.lineno, e.name) for e in _entries(exc)
            if os.path.abspath(e.filename).startswith(OWN)]


def _caught(call):
    try:
        call()
    except Exception as err:  # noqa: BLE001
        return err
    raise AssertionError("no error")


# ---- The binding's own frames never show ----------------------------------------

def _failing_calls(fn):
    """(what, call) of failures of every origin."""
    call = fn("call")
    labs = _labs()

    def cb():
        raise KeyError("from the callback")

    def nested():
        return call(lambda: call(cb))

    return [
        ("C error", lambda: fn("raise_error")("KeyError", "from C")),
        ("C error one level down", lambda: call(fn("raise_error"), "IndexError", "x")),
        ("C error, first call with a str", lambda: fn("raise_error")("ValueError", "x")),
        ("bad argument, typed", lambda: labs("two")),
        ("bad argument count, typed", lambda: labs(1, 2)),
        ("bad argument, typed, one level down", lambda: call(labs, "two")),
        ("bad argument, registered typed", lambda: fn("typed_ndim")(3)),
        ("callback error", lambda: call(cb)),
        ("callback error through nested C levels", nested),
        ("callback error on a C thread", lambda: fn("call_in_thread")(cb)),
        ("value the binding refuses", lambda: fn("echo")(2 ** 70)),
        ("value the binding refuses, one level down", lambda: call(fn("echo"), 2 ** 70)),
        ("released function", lambda: _released(fn)()),
    ]


def _released(fn):
    f = fn("echo")
    f.__del__()
    return f


def test_tracebacks_show_no_frame_of_the_binding(fn):
    for what, call in _failing_calls(fn):
        for _ in range(2):  # the first call of a kind of arguments, then the planned one
            err = _caught(call)
            assert _own_entries(err) == [], (what, _own_entries(err))
            # The traceback begins at the user's call: this file's frame.
            assert _entries(err)[0].filename == __file__, what


def test_a_call_level_is_a_frame_named_by_the_function(fn, unique_name):
    name = unique_name()

    @pf.register_func(name)
    def fails():
        raise ValueError("registered and failing")

    err = _caught(lambda: pf.get_global_func(name)())
    names = [e.name for e in _entries(err)]
    # The user's call, the C level of the called function, the callback.
    assert names[-2:] == [name, "fails"], names
    assert [e.filename for e in _entries(err)][-2] == "<C>"


def test_runtime_argument_errors_begin_at_the_users_call(fn):
    labs = _labs("pytest.labs")
    for call in (lambda: labs("two"), lambda: labs(1, 2), lambda: labs(2.5)):
        err = _caught(call)
        assert isinstance(err, (TypeError, ValueError))
        entries = _below_call(err)
        # Only the level of the function called: no frame of the runtime's
        # own checks.
        assert [e.name for e in entries] == ["pytest.labs"], entries
        assert not any(e.filename.endswith(".c") for e in entries)
        assert err.c_traceback == []
    # One C level down, the error begins at the level that passed the value.
    err = _caught(lambda: fn("call")(labs, "two"))
    assert [e.name for e in _below_call(err)] == ["testing.call"]
    assert "expected int64, got str" in str(err)


def test_an_unnamed_function_is_still_a_level_of_its_own(fn):
    err = _caught(lambda: _labs()("two"))
    assert [e.filename for e in _below_call(err)] == ["<C>"]
    err = _caught(lambda: fn("raise_error")("KeyError", "no line recorded"))
    assert [e.filename for e in _below_call(err)] == ["<C>"]


def test_a_global_function_without_a_name_is_named_as_it_was_found(fn):
    # testing.raise_error records no name of its own: its level is named by
    # the registry name it was looked up under.
    err = _caught(lambda: fn("raise_error")("KeyError", "no line recorded"))
    entries = _below_call(err)
    assert [(e.filename, e.name) for e in entries] == [("<C>", "testing.raise_error")]


def test_a_level_that_named_itself_is_not_repeated(fn):
    cb_raised = []

    def cb():
        cb_raised.append(IndexError("x"))
        raise cb_raised[-1]

    err = _caught(lambda: fn("call")(cb))
    names = [e.name for e in _below_call(err)]
    assert names == ["testing.call", "cb"], names


# ---- No misleading caret ----------------------------------------------------------

def _frame_blocks(exc):
    """The lines of format_exception, grouped by the frame they follow."""
    blocks = []
    for chunk in traceback.format_exception(exc):
        for line in chunk.splitlines():
            if line.startswith('  File "'):
                blocks.append([line])
            elif blocks and line.startswith("    "):
                blocks[-1].append(line)
    return blocks


def test_c_levels_show_no_caret(tmp_path):
    # A C level whose source is readable shows its line, and nothing under it.
    src = tmp_path / "plugin.c"
    src.write_text("int f(void) {\n  return PF_ERROR(kPFErrValueError, \"bad %d\", x);\n}\n")
    _ffi.PFErrorSet(b"ValueError", b"bad 3")
    _ffi.PFErrorAppendTraceback(('  File "%s", line 2, in f' % src).encode())
    _ffi.PFErrorAppendTraceback(b"  in caller_level")
    err = _errors.last_error()
    blocks = _frame_blocks(err)
    assert [b[0] for b in blocks] == ['  File "<C>", line 1, in caller_level',
                                      '  File "%s", line 2, in f' % src]
    assert blocks[1][1:] == ['    return PF_ERROR(kPFErrValueError, "bad %d", x);']
    # The entry has no column positions, so no tool draws a caret.
    entry = _entries(err)[1]
    assert (entry.lineno, entry.colno, entry.end_colno) == (2, None, None)


def test_c_level_files_that_are_not_plain_files_are_never_read(tmp_path):
    # A C level's file name may come from another process (a remote
    # server): a FIFO would hang the printing of the traceback, a device
    # or a huge file exhaust memory. Such files are not read.
    fifo = tmp_path / "hostile.c"
    os.mkfifo(fifo)
    big = tmp_path / "big.c"
    with open(big, "wb") as f:
        f.truncate(64 << 20)  # sparse: large, cheap
    for path in (fifo, big, "/dev/zero"):
        _ffi.PFErrorSet(b"RuntimeError", b"from far away")
        _ffi.PFErrorAppendTraceback(('  File "%s", line 3, in far' % path).encode())
        err = _errors.last_error()
        text = "".join(traceback.format_exception(err))  # returns: nothing blocks
        assert 'File "%s", line 3, in far' % path in text
        assert "\x00" not in text


def test_failing_calls_show_no_caret_under_c_levels(fn):
    for what, call in _failing_calls(fn):
        for block in _frame_blocks(_caught(call)):
            if block[0].startswith('  File "<C>"') or '.c", line' in block[0]:
                assert not any("^" in line for line in block[1:]), (what, block)


# ---- Nothing kept alive -------------------------------------------------------------
#
# With the cyclic collector off, a local of the frame that caught an error is
# freed when that frame returns: nothing in the exception refers back to the
# frames that raised or caught it (apache/tvm-ffi checks the same).

class _Probe:
    pass


def _probe_catching(call):
    probe = _Probe()
    try:
        call()
    except Exception:  # noqa: BLE001
        pass
    return weakref.ref(probe)


def _probe_catching_as(call):
    probe = _Probe()
    try:
        call()
    except Exception as err:  # noqa: BLE001
        text = "".join(traceback.format_exception(err))  # reading it keeps nothing either
        assert text
    return weakref.ref(probe)


@pytest.fixture
def no_gc():
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_errors_keep_no_frame_alive(fn, no_gc):
    for what, call in _failing_calls(fn):
        for probe in (_probe_catching, _probe_catching_as):
            for _ in range(2):
                ref = probe(call)
                assert ref() is None, what


def test_callback_errors_keep_no_frame_of_the_callback_alive(fn, no_gc):
    refs = []

    def cb():
        local = _Probe()
        refs.append(weakref.ref(local))
        raise ValueError("from the callback")

    call = fn("call")
    for outer in (lambda: call(cb), lambda: call(lambda: call(cb))):
        _probe_catching(outer)
        assert refs[-1]() is None
