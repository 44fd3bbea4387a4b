"""Errors: C error kinds as Python exception classes, and back.

Every call into libpackedfunc that can fail goes through check_call, which
raises the calling thread's packedfunc error as the exception class of its
kind. A Python exception leaving a callback becomes that thread's
packedfunc error (record_exception), and comes back as the same object
when the error reaches Python again, its traceback extended with a frame
for each C level it crossed; the text that C holds meanwhile has the
message once and each level's frames once. What reaches user code holds no
frame of the binding itself (for_caller) and no reference cycle (the C
levels' frames never ran: see _c_frame). Everything here is private; the
package re-exports register_error and check_call.
"""
import builtins
import itertools
import linecache
import os
import re
import stat
import sys
import threading
import traceback
import types

from ._ffi import (PFErrorAppendTraceback, PFErrorGetKind, PFErrorGetMessage,
                   PFErrorGetTraceback, PFErrorSet, PyFrame_New, PyThreadState_Get)

# fullmatch: "$" would also match before a final newline.
_KIND_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_kind_to_class = {}
_class_to_kind = {}
# Guards _saved_exceptions. Held only for dictionary operations on str
# keys: nothing that can run user code (a __del__, a __hash__) happens while
# it is held. Recreated in a child process after fork (see the end).
_errors_lock = threading.Lock()

# Both ways for the kinds of c_api.h. Only Exception subclasses are ever
# raised for a kind: C code, a plugin or a remote server chooses the kind,
# and must not be able to raise what `except Exception` lets through
# (SystemExit, KeyboardInterrupt, GeneratorExit). A KeyboardInterrupt that a
# callback raised still has its kind for C (kind_of: its name), and comes
# back to Python as the very object (last_error), so Ctrl-C propagates.
for _cls in (TypeError, ValueError, KeyError, IndexError, AttributeError,
             NotImplementedError, MemoryError, RuntimeError):
    _kind_to_class[_cls.__name__] = _cls
    _class_to_kind[_cls] = _cls.__name__


def register_error(kind=None, cls=None):
    """Map an error kind to an exception class, in both directions.

    A C function that fails with ``kind`` raises ``cls`` in Python, and a
    Python callback that raises ``cls`` (or a subclass) fails its C call with
    ``kind``. ``kind`` is an identifier of at most 63 bytes (dots allowed).

    Usable as ``register_error("MyKind", MyError)``, or as a class decorator:
    ``@register_error("MyKind")`` or ``@register_error`` (the kind is then the
    class name). Returns the class. Raises TypeError or ValueError for a bad
    kind, and TypeError for a class that does not derive from Exception: an
    error's kind is chosen by C code, plugins and remote servers, which must
    not be able to raise what ``except Exception`` lets through.
    """
    if isinstance(kind, type) and cls is None:
        kind, cls = kind.__name__, kind
    if cls is None:
        return lambda c: register_error(kind, c)
    if not isinstance(kind, str):
        raise TypeError("register_error: kind must be a str, not %s" % type(kind).__name__)
    if len(kind.encode("utf-8", "surrogatepass")) >= 64 or not _KIND_RE.fullmatch(kind):
        raise ValueError("register_error: kind %r is not an identifier of at most 63 bytes" % kind)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        raise TypeError("register_error: cls must be an exception class deriving from "
                        "Exception, not %r" % (cls,))
    # Two plain dictionary stores, each atomic under the GIL; no lock, since
    # hashing a class may run user code (a metaclass's __hash__).
    _kind_to_class[kind] = cls
    _class_to_kind[cls] = kind
    return cls


def _builtin_exception(name):
    obj = getattr(builtins, name, None)
    if isinstance(obj, type) and issubclass(obj, BaseException):
        return obj
    return None


def kind_of(exc_type):
    """The error kind for an exception class: its registered kind, else the
    name of the nearest built-in base class, else "RuntimeError"."""
    for klass in exc_type.__mro__:
        kind = _class_to_kind.get(klass)
        if kind is not None:
            return kind
        if _builtin_exception(klass.__name__) is klass and klass not in (
                Exception, BaseException):
            return klass.__name__
    return "RuntimeError"


# Exception classes that change control flow where they are raised:
# a StopIteration out of a function that map() or a generator calls ends the
# iteration silently. An error of such a kind from C (or a remote server)
# is a RuntimeError that names the kind; one that a Python callback raised
# still comes back as the very object.
_CONTROL_FLOW = (StopIteration, StopAsyncIteration)


def _raisable(cls):
    """Whether an error of C may be raised as an instance of cls."""
    return issubclass(cls, Exception) and not issubclass(cls, _CONTROL_FLOW)


def class_of(kind):
    """The exception class for an error kind: its registered class, else the
    built-in exception of that name; RuntimeError when unknown, or when that
    class is not an Exception subclass or changes control flow."""
    cls = _kind_to_class.get(kind) or _builtin_exception(kind)
    return cls if cls is not None and _raisable(cls) else RuntimeError


def _new_exception(kind, msg):
    """(A new exception for a C error, its message): of its kind's class
    (see class_of) with the message as its one argument. An unknown kind is
    a RuntimeError; a kind that names a class outside Exception or one that
    changes control flow (StopIteration, StopAsyncIteration), or one
    that cannot be made from a message alone (UnicodeDecodeError, a
    registered class that refuses), is a RuntimeError whose message names
    the kind."""
    cls = _kind_to_class.get(kind) or _builtin_exception(kind)
    if cls is None:
        return RuntimeError(msg), msg
    if _raisable(cls):
        try:
            exc = cls(msg)
        except Exception:
            exc = None
        if isinstance(exc, Exception):
            return exc, msg
    msg = "%s: %s" % (kind, msg)
    return RuntimeError(msg), msg


# Python exceptions raised by callbacks, kept so that the very same object
# comes back when its error reaches Python again. Keyed by a token written
# into the error's traceback text, so it survives being carried across
# threads. A token names this process (a random part, new in a forked
# child): error text travels (a remote server sends its own), and a token
# of another process must never take one of this process's exceptions.
# A thread's error is one at a time: when a thread records a new
# exception, or reads its error, whatever else it kept can never come back
# and is dropped, so that a swallowed exception does not keep its frames
# (and their locals) alive. A few are kept in all, for errors carried to a
# thread that has not read them yet.
_saved_exceptions = {}   # token -> exception
_owned = {}              # thread ident -> token it recorded last
_SAVED_MAX = 8
_tokens = itertools.count(1)
_process_tag = os.urandom(8).hex()
_TOKEN_RE = re.compile(r"\[python exception #([0-9a-f]{16}-\d+)\]\n?")
# A traceback line that names a C source location (PF_ERROR writes these).
_C_FRAME_RE = re.compile(r'\s*File "([^"]*)", line (\d+), in (.+)')


def _c_message(msg):
    """A message as C stores it: NUL-terminated UTF-8. A NUL is written as
    the four characters \\x00 (C would cut the text there) and what UTF-8
    cannot encode as "?"."""
    return msg.replace("\0", "\\x00").encode("utf-8", "replace")


def _new_frames_text(exc, tb_obj):
    """The traceback lines of the frames this level added: from tb_obj
    down to the first entry that an earlier crossing already wrote."""
    seen = getattr(exc, "_pf_seen_tb", None)
    entries = []
    while tb_obj is not None and tb_obj is not seen:
        entries.append((tb_obj.tb_frame, tb_obj.tb_lineno))
        tb_obj = tb_obj.tb_next
    summary = traceback.StackSummary.extract(entries, lookup_lines=True)
    return "".join(summary.format()).rstrip("\n")


_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _without_own_frames(exc, tb_obj):
    """The traceback from tb_obj on without the binding's own frames (the
    call into C, check_call, the trampoline), which tell a reader nothing;
    stored as the exception's traceback (None when nothing is left). Frames
    of user code and the C levels stay, in order."""
    kept = []
    t = tb_obj
    while t is not None:
        if not t.tb_frame.f_code.co_filename.startswith(_OWN_DIR):
            kept.append(t)
        t = t.tb_next
    try:
        for a, b in zip(kept, kept[1:]):
            if a.tb_next is not b:
                a.tb_next = b
        if kept and kept[-1].tb_next is not None:
            kept[-1].tb_next = None
        exc.__traceback__ = kept[0] if kept else None
    except BaseException:  # pragma: no cover - a traceback that refuses
        return tb_obj
    return exc.__traceback__


def for_caller(exc):
    """Drops the binding's own frames from the traceback of `exc`, an
    exception about to leave the binding for user code.

    The binding's outermost frame calls it in an ``except`` block and then
    re-raises with a bare ``raise``, which (from Python 3.11 on) raises with
    the traceback that the exception now holds and adds no entry for the
    frame that re-raises: the caller's traceback goes from its own frame
    straight to the C levels and the callbacks below them."""
    _without_own_frames(exc, exc.__traceback__)


def record_exception(exc, skip_frames=1):
    """Record a Python exception as the calling thread's packedfunc error
    (for a callback about to return -1). The first `skip_frames` traceback
    entries (the binding's own trampoline) are left out. Never raises.

    The text given to C holds the message once and only the frames added
    since the exception last crossed, so that an error that crosses C many
    times grows linearly; the object itself keeps the whole story."""
    try:
        kind = kind_of(type(exc))
        msg = getattr(exc, "_pf_message", None)
        if not isinstance(msg, str):
            try:
                msg = str(exc)
            except BaseException:
                msg = "<unprintable %s>" % type(exc).__name__
        token = "%s-%d" % (_process_tag, next(_tokens))
        ident = threading.get_ident()
        evicted = []
        with _errors_lock:
            old = _owned.pop(ident, None)
            if old is not None:
                evicted.append(_saved_exceptions.pop(old, None))
            _saved_exceptions[token] = exc
            _owned[ident] = token
            while len(_saved_exceptions) > _SAVED_MAX:
                first = next(iter(_saved_exceptions))
                evicted.append(_saved_exceptions.pop(first))
        # Dropped outside the lock: freeing an old exception frees what its
        # traceback kept, whose __del__ may call back into packedfunc and
        # record another exception on this very thread.
        del evicted
        tb_obj = exc.__traceback__
        for _ in range(skip_frames):
            if tb_obj is not None and tb_obj.tb_next is not None:
                tb_obj = tb_obj.tb_next
        tb_obj = _without_own_frames(exc, tb_obj)
        frames = _new_frames_text(exc, tb_obj)
        try:
            exc._pf_seen_tb = exc.__traceback__
        except BaseException:
            pass
        PFErrorSet(kind.encode(), _c_message(msg))
        earlier = getattr(exc, "_pf_c_text", None)
        if isinstance(earlier, str) and earlier:
            PFErrorAppendTraceback(earlier.encode("utf-8", "replace"))
        text = "[python exception #%s]\n%s" % (token, frames)
        PFErrorAppendTraceback(text.rstrip("\n").encode("utf-8", "replace"))
        try:
            # What C appends after this text are the C levels it crosses.
            exc._pf_c_text = (PFErrorGetTraceback() or b"").decode("utf-8", "replace")
        except BaseException:
            pass
    except BaseException:  # pragma: no cover - last resort, e.g. at shutdown
        try:
            PFErrorSet(b"RuntimeError", b"packedfunc: a Python callback failed")
        except BaseException:
            pass
    return -1


# ---- C levels as frames -------------------------------------------------------
#
# Each C level of an error is a traceback entry of its own, on a frame made by
# PyFrame_New: one that never ran, so it has no caller (f_back is None) and no
# locals, and its globals are its own. A traceback that holds it keeps nothing
# else alive; a frame made by running code would keep the frames that ran it,
# and through them the exception itself, a reference cycle that only the
# cyclic collector frees. Its code has no column positions, so that nothing
# draws a caret under the line shown: that line is C source, which Python's
# positions do not describe. Frames are shared by all tracebacks, one per
# (file, line, name).

_C_GLOBALS = {"__name__": "<C>"}
_c_frames = {}
_C_FRAMES_MAX = 1024


def _parse_c_line(line):
    """(file, line, name) of a C traceback line: a PF_ERROR location, or
    any other text as the name of a level in "<C>"."""
    m = _C_FRAME_RE.fullmatch(line)
    if m:
        filename, lineno, name = m.group(1), int(m.group(2)), m.group(3).strip()
    else:
        filename, lineno, name = "<C>", 1, line.strip().removeprefix("in ").strip() or "<C>"
    return filename, max(1, min(lineno, 1 << 20)), name


def _without_positions(code):
    """code with no column positions for any instruction (3.11's line table:
    one "no location" entry per 8 code units)."""
    if sys.version_info < (3, 11):  # pragma: no cover - no positions before 3.11
        return code
    table = bytearray()
    units = len(code.co_code) // 2
    while units > 0:
        n = min(units, 8)
        table.append(0x80 | (15 << 3) | (n - 1))
        units -= n
    return code.replace(co_linetable=bytes(table))


# The largest C source file whose lines a traceback may show.
_C_SOURCE_MAX = 1 << 20


def _guard_source(filename):
    """Let a traceback read `filename` only when it is a regular file of a
    sane size: the name may come from another process (a remote server),
    and printing a traceback reads the file whole (a FIFO would hang it, a
    device or a huge file exhaust memory). Any other name gets an empty
    entry in linecache, which is then never opened."""
    if filename.startswith("<") and filename.endswith(">"):
        return
    try:
        st = os.stat(filename)
        if stat.S_ISREG(st.st_mode) and st.st_size <= _C_SOURCE_MAX:
            return
    except (OSError, ValueError):
        pass
    # mtime None: linecache.checkcache keeps the entry as it is.
    linecache.cache[filename] = (0, None, [], filename)


def _c_frame(filename, lineno, name):
    key = (filename, lineno, name)
    if filename not in linecache.cache:
        _guard_source(filename)
    frame = _c_frames.get(key)
    if frame is None:
        code = compile("", filename, "exec").replace(co_name=name, co_firstlineno=lineno)
        frame = PyFrame_New(PyThreadState_Get(), _without_positions(code), _C_GLOBALS, None)
        if len(_c_frames) < _C_FRAMES_MAX:
            _c_frames[key] = frame
    return frame


def _with_c_frames(tb, lines, level=None):
    """tb with one entry per C traceback line in front of it, then one for
    `level` (a name), if given. C appends its lines innermost first, and a
    traceback reads outermost first."""
    places = []
    for line in lines:
        try:
            places.append(_parse_c_line(line))
        except BaseException:
            pass
    if level is not None:
        places.append(("<C>", 1, level))
    for filename, lineno, name in places:
        try:
            # tb_lasti 0: the instruction without a position.
            tb = types.TracebackType(tb, _c_frame(filename, lineno, name), 0, lineno)
        except BaseException:
            pass
    return tb


def _missing_level(lines, level):
    """The name of the called function's level when its C code wrote no line
    for it, else None. `level` gives the function's name (or None). With no
    line at all, the level is missing; with lines, it is when the function
    has a name that the outermost line does not begin with. (Lines under a
    function without a name stand for its level: whether it wrote them
    cannot be told.)"""
    if level is None:
        return None
    try:
        name = level()
    except Exception:
        name = None
    if not lines:
        return name or "<anonymous>"
    if name is None:
        return None
    try:
        written = _parse_c_line(lines[-1])[2]
    except Exception:
        return None
    if written == name or written.startswith((name + ",", name + " ")):
        return None
    return name


def _split_levels(tb_text):
    """(C lines of the innermost level, token, C lines after the token):
    the text is [lines][token][frames of that crossing][C lines]..."""
    m = None
    for m in _TOKEN_RE.finditer(tb_text):
        pass
    if m is None:
        return tb_text, None, ""
    return tb_text[:m.start()], m.group(1), tb_text[m.end():]


def last_error(level=None):
    """The calling thread's packedfunc error as a Python exception object.

    A Python exception that a callback raised comes back as the same
    object, with the C levels it crossed added to its traceback as frames.
    An error that began in C becomes a new exception of its kind's class
    (see _new_exception) with ``kind``, ``c_traceback`` (the C lines,
    innermost first) and its C levels as frames. For the error of a call
    that Python made, `level` gives the called function's name: the call is
    a C level too, and becomes a frame when C wrote no line for it."""
    kind = (PFErrorGetKind() or b"").decode("utf-8", "replace") or "RuntimeError"
    raw_msg = PFErrorGetMessage() or b""
    msg = raw_msg.decode("utf-8", "replace")
    tb_text = (PFErrorGetTraceback() or b"").decode("utf-8", "replace")
    before, token, after = _split_levels(tb_text)
    ident = threading.get_ident()
    original = None
    evicted = []
    with _errors_lock:
        if token is not None:
            original = _saved_exceptions.pop(token, None)
        # This thread's error has now been read: anything else it kept is
        # for an error that was replaced, and can never come back.
        mine = _owned.pop(ident, None)
        if mine is not None:
            evicted.append(_saved_exceptions.pop(mine, None))
        for owner, tok in list(_owned.items()):
            if tok == token:
                del _owned[owner]
    del evicted
    if original is not None and kind_of(type(original)) == kind:
        try:
            own = _c_message(getattr(original, "_pf_message", None) or str(original))
        except BaseException:
            own = None
        if own == raw_msg:
            written = getattr(original, "_pf_c_text", None)
            if isinstance(written, str) and tb_text.startswith(written):
                lines = [ln for ln in tb_text[len(written):].split("\n") if ln.strip()]
            else:
                lines = []
            try:
                original.__traceback__ = _with_c_frames(original.__traceback__, lines,
                                                        _missing_level(lines, level))
                original._pf_seen_tb = original.__traceback__
                original._pf_c_text = tb_text
            except BaseException:
                pass
            return original
    lines = [ln for ln in (before if token is None else after).split("\n") if ln.strip()]
    exc, message = _new_exception(kind, msg)
    try:
        exc.kind = kind
        exc.c_traceback = [ln for ln in tb_text.split("\n") if ln.strip()]
        exc._pf_message = message
        exc._pf_c_text = tb_text
        exc.__traceback__ = _with_c_frames(None, lines, _missing_level(lines, level))
        exc._pf_seen_tb = exc.__traceback__
    except BaseException:
        pass
    if original is not None:
        exc.__cause__ = original
    return exc


class FunctionNotFoundError(KeyError, ValueError):
    """A name that names no function: raised by get_global_func,
    remove_global_func, Module.get_function and ``module[name]``.

    A subclass of both KeyError and ValueError, so that code written
    against either habit catches it. Its message names the function.
    """

    def __str__(self):
        # KeyError's str shows its argument's repr (quotes around the
        # whole message); this error's argument is a message to read.
        return BaseException.__str__(self)


def check_call(rc):
    """Raise the thread's packedfunc error if a C call returned nonzero.

    Every call into libpackedfunc that can fail goes through here."""
    if rc != 0:
        raise last_error()
    return rc


def _after_fork_in_child():
    # Another thread may have held the lock when the process forked; in
    # the child that thread does not exist, and would never release it.
    # The child's tokens are its own (the exceptions it inherited keep
    # theirs, which still find them).
    global _errors_lock, _process_tag
    _errors_lock = threading.Lock()
    _process_tag = os.urandom(8).hex()


os.register_at_fork(after_in_child=_after_fork_in_child)
