"""Errors: C error kinds as Python exception classes, and back.

Every call into libpackedfunc that can fail goes through check_call, which
raises the calling thread's packedfunc error as the exception class of its
kind. A Python exception leaving a callback becomes that thread's
packedfunc error (record_exception), and comes back as the same object
when the error reaches Python again. Everything here is private; the
package re-exports register_error and check_call.
"""
import builtins
import collections
import itertools
import os
import re
import threading
import traceback

from ._ffi import (PFErrorAppendTraceback, PFErrorGetKind, PFErrorGetMessage,
                   PFErrorGetTraceback, PFErrorSet)

# fullmatch: "$" would also match before a final newline.
_KIND_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_kind_to_class = {}
_class_to_kind = {}
# Guards _saved_exceptions. Held only for dictionary operations on int
# keys: nothing that can run user code (a __del__, a __hash__) happens while
# it is held. Recreated in a child process after fork (see the end).
_errors_lock = threading.Lock()

for _cls in (TypeError, ValueError, KeyError, IndexError, AttributeError,
             NotImplementedError, MemoryError, RuntimeError, KeyboardInterrupt):
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
    kind or a class that is not an exception type.
    """
    if isinstance(kind, type) and cls is None:
        kind, cls = kind.__name__, kind
    if cls is None:
        return lambda c: register_error(kind, c)
    if not isinstance(kind, str):
        raise TypeError("register_error: kind must be a str, not %s" % type(kind).__name__)
    if len(kind.encode("utf-8", "surrogatepass")) >= 64 or not _KIND_RE.fullmatch(kind):
        raise ValueError("register_error: kind %r is not an identifier of at most 63 bytes" % kind)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        raise TypeError("register_error: cls must be an exception class, not %r" % (cls,))
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
    """The exception class for an error kind (RuntimeError when unknown)."""
    cls = _kind_to_class.get(kind)
    if cls is None:
        cls = _builtin_exception(kind) or RuntimeError
    return cls


# Python exceptions raised by callbacks, kept so that the same object can be
# chained when its error comes back to Python. Keyed by a token written into
# the error's traceback text, so it survives being carried across threads.
# Bounded: an error that C swallows never comes back.
_saved_exceptions = collections.OrderedDict()
_SAVED_MAX = 256
_tokens = itertools.count(1)
_TOKEN_RE = re.compile(r"\[python exception #(\d+)\]")


def _c_message(msg):
    """A message as C stores it: NUL-terminated UTF-8. A NUL is written as
    the four characters \\x00 (C would cut the text there) and what UTF-8
    cannot encode as "?"."""
    return msg.replace("\0", "\\x00").encode("utf-8", "replace")


def record_exception(exc, skip_frames=1):
    """Record a Python exception as the calling thread's packedfunc error
    (for a callback about to return -1). The first `skip_frames` traceback
    entries (the binding's own trampoline) are left out. Never raises."""
    try:
        kind = kind_of(type(exc))
        try:
            msg = str(exc)
        except BaseException:
            msg = "<unprintable %s>" % type(exc).__name__
        token = next(_tokens)
        evicted = []
        with _errors_lock:
            _saved_exceptions[token] = exc
            while len(_saved_exceptions) > _SAVED_MAX:
                evicted.append(_saved_exceptions.popitem(last=False))
        # Dropped outside the lock: freeing an old exception frees what its
        # traceback kept, whose __del__ may call back into packedfunc and
        # record another exception on this very thread.
        del evicted
        tb_obj = exc.__traceback__
        for _ in range(skip_frames):
            if tb_obj is not None and tb_obj.tb_next is not None:
                tb_obj = tb_obj.tb_next
        tb = "".join(traceback.format_exception(type(exc), exc, tb_obj))
        PFErrorSet(kind.encode(), _c_message(msg))
        PFErrorAppendTraceback(
            ("[python exception #%d]\n%s" % (token, tb.rstrip("\n"))).encode("utf-8", "replace"))
    except BaseException:  # pragma: no cover - last resort, e.g. at shutdown
        try:
            PFErrorSet(b"RuntimeError", b"packedfunc: a Python callback failed")
        except BaseException:
            pass
    return -1


def last_error():
    """The calling thread's packedfunc error as a Python exception object."""
    kind = (PFErrorGetKind() or b"").decode("utf-8", "replace") or "RuntimeError"
    raw_msg = PFErrorGetMessage() or b""
    msg = raw_msg.decode("utf-8", "replace")
    tb = (PFErrorGetTraceback() or b"").decode("utf-8", "replace")
    original = None
    m = _TOKEN_RE.search(tb)
    if m:
        with _errors_lock:
            original = _saved_exceptions.pop(int(m.group(1)), None)
        tb = _TOKEN_RE.sub("Python callback:", tb)
    if original is not None:
        # A message that crossed C unchanged comes back as the callback's
        # own text, including what C cannot hold (a NUL character).
        try:
            own = str(original)
            if _c_message(own) == raw_msg:
                msg = own
        except BaseException:
            pass
    text = msg + ("\n" + tb if tb else "")
    cls = class_of(kind)
    exc = None
    if original is not None and kind_of(type(original)) == kind:
        # The callback's own class, even when it is an unregistered subclass.
        try:
            exc = type(original)(text)
        except BaseException:
            exc = None
    if exc is None:
        exc = cls(text)
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
    global _errors_lock
    _errors_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
