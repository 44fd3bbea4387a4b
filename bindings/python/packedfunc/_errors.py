"""Errors: C error kinds as Python exception classes, and back.

Every call into libpackedfunc that can fail goes through check_call, which
raises the calling thread's packedfunc error as the exception class of its
kind. A Python exception leaving a callback becomes that thread's
packedfunc error (record_exception), and comes back as the same object
when the error reaches Python again, its traceback extended with a frame
for each C level it crossed; the text that C holds meanwhile has the
message once and each level's frames once. Everything here is private; the
package re-exports register_error and check_call.
"""
import builtins
import itertools
import os
import re
import threading
import traceback
import types

from ._ffi import (PFErrorAppendTraceback, PFErrorGetKind, PFErrorGetMessage,
                   PFErrorGetTraceback, PFErrorSet)

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


def class_of(kind):
    """The exception class for an error kind: its registered class, else the
    built-in exception of that name; RuntimeError when unknown, or when that
    class is not an Exception subclass."""
    cls = _kind_to_class.get(kind) or _builtin_exception(kind)
    return cls if cls is not None and issubclass(cls, Exception) else RuntimeError


def _new_exception(kind, msg):
    """(A new exception for a C error, its message): of its kind's class
    (see class_of) with the message as its one argument. An unknown kind is
    a RuntimeError; a kind that names a class outside Exception, or one
    that cannot be made from a message alone (UnicodeDecodeError, a
    registered class that refuses), is a RuntimeError whose message names
    the kind."""
    cls = _kind_to_class.get(kind) or _builtin_exception(kind)
    if cls is None:
        return RuntimeError(msg), msg
    if issubclass(cls, Exception):
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
    stored as the exception's traceback. Frames of user code and the C
    levels stay, in order."""
    kept = []
    t = tb_obj
    while t is not None:
        if not t.tb_frame.f_code.co_filename.startswith(_OWN_DIR):
            kept.append(t)
        t = t.tb_next
    if not kept:
        return tb_obj
    try:
        for a, b in zip(kept, kept[1:]):
            a.tb_next = b
        kept[-1].tb_next = None
        exc.__traceback__ = kept[0]
    except BaseException:  # pragma: no cover - a traceback that refuses
        return tb_obj
    return kept[0]


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


_c_code_cache = {}


def _c_frame_tb(tb_next, line):
    """A traceback entry for one C traceback line: a frame of a small code
    object named after the C function, in its file at its line, so that
    traceback.format_exception shows C levels as frames of their own."""
    m = _C_FRAME_RE.fullmatch(line)
    if m:
        filename, lineno, name = m.group(1), int(m.group(2)), m.group(3).strip()
    else:
        filename, lineno, name = "<C>", 1, line.strip().removeprefix("in ").strip() or "<C>"
    lineno = max(1, min(lineno, 1 << 20))
    key = (filename, lineno, name)
    code = _c_code_cache.get(key)
    if code is None:
        code = compile("\n" * (lineno - 1) + "raise _pf_exc", filename, "exec")
        try:
            code = code.replace(co_name=name)
        except BaseException:
            pass
        if len(_c_code_cache) < 1024:
            _c_code_cache[key] = code
    try:
        exec(code, {"_pf_exc": _CFrameMarker()})
    except _CFrameMarker as marker:
        frame_tb = marker.__traceback__.tb_next
        return types.TracebackType(tb_next, frame_tb.tb_frame, frame_tb.tb_lasti,
                                   frame_tb.tb_lineno)
    return tb_next  # pragma: no cover


class _CFrameMarker(Exception):
    pass


def _with_c_frames(tb, lines):
    """tb with one entry per C traceback line in front of it. C appends its
    lines innermost first, and a traceback reads outermost first."""
    for line in lines:
        try:
            tb = _c_frame_tb(tb, line)
        except BaseException:
            pass
    return tb


def _split_levels(tb_text):
    """(C lines of the innermost level, token, C lines after the token):
    the text is [lines][token][frames of that crossing][C lines]..."""
    m = None
    for m in _TOKEN_RE.finditer(tb_text):
        pass
    if m is None:
        return tb_text, None, ""
    return tb_text[:m.start()], m.group(1), tb_text[m.end():]


def last_error():
    """The calling thread's packedfunc error as a Python exception object.

    A Python exception that a callback raised comes back as the same
    object, with the C levels it crossed added to its traceback as frames.
    An error that began in C becomes a new exception of its kind's class
    with ``kind``, ``c_traceback`` (the C lines, innermost first) and its
    C levels as frames."""
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
                original.__traceback__ = _with_c_frames(original.__traceback__, lines)
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
        exc.__traceback__ = _with_c_frames(None, lines)
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
