"""Function: a packed function, called from Python.

Function.__call__ is the hot path. With the compiled backend it is the
extension's vectorcall (Function then derives from _cext.FunctionBase,
which holds the handle), which converts the common types itself and hands
every other call to _call_general here. With ctypes, for arguments that
are all int, float, bool or str it stores them, by a plan cached for their
types, into a preallocated call frame (see _frames) and reads an int
result directly; everything else takes the general path through the
encoder and decoder tables. A Function also shows its metadata (name,
signature, doc) to help() and inspect.
Everything here is private; the package re-exports Function.
"""
import collections.abc
import ctypes
import inspect
import sys

from . import _holds, _signature
from ._convert import (FUNC, INT as _INT, MEMORY as _MEMORY, P, RANK_HANDLES, TENSOR,
                       VALS_OFF as _VALS_OFF, decode as _decode, decoders_get as _decoders_get,
                       released,
                       pack_args, register_decoder, register_encoder, register_fallback,
                       register_object_type, tensors_in_flight)
from ._frames import (CODES_OFF as _CODES_OFF, FUNC_WORD as _FUNC_WORD, MAX_FAST,
                      NARGS_WORD as _NARGS_WORD, RCODE_WORD as _RCODE_WORD, RET as _RET,
                      RET_OFF, STR_DATA_OFFSET as _STR_DATA_OFFSET, VAL_WORD as _VAL_WORD,
                      Frame as _Frame, give_frame as _give_frame, make_plan as _make_plan,
                      plans_get as _plans_get, plans1 as _plans1, plans2 as _plans2,
                      take_frame as _take_frame)
from ._errors import check_call, for_caller as _for_caller, last_error as _last_error
from ._ffi import (CALLS as _CALLS, FUNC_NON_BLOCKING, PFFuncCreateFromCFunc, PFFuncFree,
                   PFFuncGetFlags, PFFuncGetInfo, PFFuncRetain, PFFuncSetInfo,
                   PFObjectGetRefCount)
from ._backend import cext as _cext
from ._library import state as _state
from ._object import Object, handle_of, lock_instances, unlock_instances
from ._types import Device

byref = ctypes.byref
_ret_unpack = _RET.unpack_from
_id = id
# The ctypes fast path spells out the words of the first two values.
if _VAL_WORD != 5:  # pragma: no cover (a PFCallFrame of another size)
    raise ImportError("packedfunc: call frames put values at word %d, not 5" % _VAL_WORD)


def _made_from(cls, args):
    """The function that Function.__new__ and __init__ of `cls` take
    first in `args`; TypeError when there is none, when `cls` is Function
    itself, or when it is neither a Function nor a callable."""
    if cls is Function or not args:
        raise TypeError("packedfunc.Function cannot be created directly; use "
                        "get_global_func() or convert() (a subclass of Function is made "
                        "from a function: Sub(f, ...))")
    func = args[0]
    if not isinstance(func, Function) and not callable(func):
        raise TypeError("%s: argument 'func' must be a packedfunc Function or a "
                        "callable, not %s" % (cls.__name__, type(func).__name__))
    return func


class Function(_cext.FunctionBase if _cext else object):
    """A packed function: call it with positional arguments, and with
    keyword arguments when its signature names its parameters.

    A Function owns one reference to a PackedFunc and releases it when it is
    garbage collected. Functions come from :func:`get_global_func`,
    :func:`convert`, or as values returned by C. A PackedFunc is never
    wrapped twice: passing a Function to C passes its handle, and a handle
    coming back from C is wrapped as it is, so Functions compare equal (and
    hash alike) exactly when they share the same PackedFunc.

    Arguments are converted as described in the package documentation;
    the result comes back as the matching Python value. A failing C function
    raises the exception class of its error kind. Keyword arguments are
    matched by the library (PFFuncCallKw) against the signature's parameter
    names, and a parameter left out takes its default, with Python's own
    TypeErrors for a missing, repeated or unexpected argument.

    A subclass is made from a function: ``Sub(f, ...)`` (``f`` a Function
    or a callable, converted) shares ``f``'s PackedFunc. ``Function.__init__``
    takes the same arguments as ``__new__``, checks them the same way and
    does nothing more, so a subclass's ``__init__(self, f, ...)`` may call
    ``super().__init__(f)``, and a subclass without an ``__init__`` takes
    any further arguments.
    """

    # With the extension, _handle and _conversions are FunctionBase's fields.
    # _loan: what the collector was lent for this collection (see _holds).
    __slots__ = (("_hb", "_loan", "_looked_up", "__weakref__") if _cext else
                 ("_handle", "_hb", "_conversions", "_fill", "_keep_gil", "_loan", "_looked_up",
                  "_inflight", "_pending", "__weakref__"))

    def __new__(cls, *args, **kwargs):
        # A subclass is made from a function, whose PackedFunc it shares;
        # Python then calls the subclass's __init__ with the same arguments.
        return cls._share(_made_from(cls, args))

    def __init__(self, *args, **kwargs):
        """Takes what __new__ takes (a Function or a callable first, then
        anything a subclass's own __init__ wants), checks it the same way,
        and does nothing more: __new__ made the wrapper. So a subclass's
        ``__init__(self, f, ...)`` may call ``super().__init__(f)``."""
        _made_from(type(self), args)

    @classmethod
    def _share(cls, func):
        """A new wrapper of this class with its own reference to the
        PackedFunc of `func`, a Function or a callable (converted)."""
        if not isinstance(func, Function):
            from ._callback import convert
            func = convert(func)
        handle = func_handle(func)
        if not handle:
            raise ValueError("%s: argument 'func': the Function was released" % cls.__name__)
        check_call(PFFuncRetain(handle))
        self = cls._adopt(handle)
        self._looked_up = func._looked_up  # its name in tracebacks
        return self

    @classmethod
    def _adopt(cls, handle):
        """Wrap a new reference (which this call consumes)."""
        if _cext:
            self = _cext.adopt(cls, handle)  # it reads the C author's GIL hint
        else:
            self = object.__new__(cls)
            _set_func_handle(self, handle)
            self._keep_gil = _non_blocking(handle)
            # The ctypes calls in progress (an item each), and the handle
            # that __del__ released meanwhile: the last of them frees it
            # (list appends and pops are atomic under the GIL).
            self._inflight = []
            self._pending = []
        # A ready-made pointer argument: ctypes passes it without
        # converting anything per call.
        self._hb = byref(ctypes.c_char.from_address(handle))
        self._conversions = None  # parameters converted first: not looked up yet
        # Positional calls with fewer arguments take the signature's
        # defaults (through the general path): not looked up yet.
        self._fill = _FILL_UNKNOWN
        # The registry name it was found under, for its level in a
        # traceback when it has no recorded name.
        self._looked_up = None
        self._loan = None
        _holds.track(self)  # it may hold Python objects that hold it (see _holds)
        return self

    @classmethod
    def from_c_pointer(cls, fn):
        """A Function (of this class, a subclass too) that calls the
        packed C function `fn` (a PFPackedCFunc: ``int (PFValue* args,
        int* type_codes, int num_args, PFRetValueHandle ret, void*
        resource_handle)``), with a NULL resource handle.

        `fn` is an int address, a ctypes function or a ``ctypes.c_void_p``
        (a ctypes function object is then kept for the life of the
        process). Nothing checks that `fn` really is a packed function:
        the caller answers for its prototype, and keeps the library that
        holds it loaded while the Function, or any C holder of it, lives.
        TypeError or ValueError naming argument 'fn' for a NULL or
        non-pointer `fn`."""
        from ._typed import address
        addr = address(fn, "Function.from_c_pointer")
        out = ctypes.c_void_p()
        check_call(PFFuncCreateFromCFunc(addr, None, None, byref(out)))
        return cls._adopt(out.value)

    def __eq__(self, other):
        if not isinstance(other, Function):
            return NotImplemented
        return func_handle(self) == func_handle(other)

    def __hash__(self):
        return hash(func_handle(self))

    @property
    def handle(self):
        """The PFFunctionHandle as an int (borrowed: valid while this
        Function lives)."""
        return func_handle(self)

    # ---- metadata: name, signature, doc -------------------------------------

    def _info(self):
        """(name, signature, doc) as str or None; all None once released."""
        if not func_handle(self):
            return None, None, None
        fields = (ctypes.c_char_p(), ctypes.c_char_p(), ctypes.c_char_p())
        check_call(PFFuncGetInfo(func_handle(self), byref(fields[0]), byref(fields[1]),
                                byref(fields[2])))
        # The name as registry names are (surrogateescape: it can be used to
        # look the function up again); the others are text to read.
        return tuple(f.value.decode("utf-8", "surrogateescape" if i == 0 else "replace")
                     if f.value else None for i, f in enumerate(fields))

    @property
    def name(self):
        """The name recorded with PFFuncSetInfo (a module function's or a
        registered Python function's registry name), or None."""
        return self._info()[0]

    @property
    def signature(self):
        """The signature text in the typed-signature grammar of c_api.h
        (``"int64(int64,int64)"``; set for every typed C function), or None.
        ``inspect.signature(f)`` gives the same as Python annotations."""
        return self._info()[1]

    @property
    def doc(self):
        """The docstring recorded with PFFuncSetInfo, or None.
        ``f.__doc__`` adds the name and signature to it."""
        return self._info()[2]

    def set_info(self, name=None, signature=None, doc=None):
        """Record a name, a signature (typed-signature grammar, kept as
        metadata only) and a docstring; None leaves a field alone. Each
        field can be set once per function: setting it again raises
        ValueError. Raises TypeError for a non-str value."""
        values = []
        for what, value in (("name", name), ("signature", signature), ("doc", doc)):
            if value is not None and not isinstance(value, str):
                raise TypeError("Function.set_info: %s must be a str or None, not %s"
                                % (what, type(value).__name__))
            if value is not None and "\0" in value:
                raise ValueError("Function.set_info: %s contains a NUL character" % what)
            try:
                # A name is encoded as registry names are (see _name_arg).
                values.append(None if value is None else value.encode(
                    "utf-8", "surrogateescape" if what == "name" else "strict"))
            except UnicodeEncodeError as err:
                raise ValueError("Function.set_info: %s contains a lone surrogate (%r at index "
                                 "%d), which UTF-8 cannot encode"
                                 % (what, value[err.start], err.start)) from None
        if not func_handle(self):
            raise ValueError("packedfunc: the Function was released")
        check_call(PFFuncSetInfo(func_handle(self), *values))
        self._conversions = None  # the signature may name such parameters now
        self._fill = _FILL_UNKNOWN

    @property
    def release_gil(self):
        """Whether a call releases the GIL while the C function runs (True,
        the default), so that other Python threads run meanwhile; False
        when it keeps it, which saves the switch (a few hundred
        instructions a call) for a short function. The C author's hint
        (kPFFuncNonBlocking, set with PFFuncSetFlags) makes it False; set
        it to override that for this Function object (another lookup of
        the same name gives a new Function, which starts from the hint).

        A function that keeps the GIL may call back into Python on the
        calling thread, nested or not. It must not block or run long
        (every other Python thread waits until it returns), and must not
        wait for another thread that runs Python (a callback from a C
        thread it joins): that thread waits for the GIL, which this call
        keeps, and both hang. Signals are handled after it returns."""
        return not self._keep_gil

    @release_gil.setter
    def release_gil(self, value):
        if not isinstance(value, bool):
            raise TypeError("Function.release_gil must be True or False, not %s"
                            % type(value).__name__)
        self._keep_gil = int(not value)

    @property
    def __name__(self):
        """The metadata name, or "<anonymous>" (for help() and repr)."""
        return self.name or "<anonymous>"

    def __get__(self, obj, owner=None):
        # A Function stored as a class attribute stays a plain function (as
        # it was without this method); having __get__ makes it a routine
        # for inspect and pydoc, so that help(f) shows its signature.
        return self

    def __repr__(self):
        cls = type(self)
        what = ("packedfunc.Function" if cls is Function else
                "%s.%s" % (cls.__module__, cls.__qualname__))
        if not func_handle(self):
            return "<%s (released)>" % what
        name = self.name
        return "<%s %s at 0x%x>" % (what, repr(name) if name else "(anonymous)", func_handle(self))

    def __del__(self):
        # Idempotent, so that a hand-made second call cannot free twice; a
        # released Function has handle 0 and refuses calls (ValueError).
        handle = func_handle(self)
        if handle and not _state.shutting_down:
            self._hb = None
            if _cext:
                # The extension's handle and call target change only here;
                # calls in progress that use them free the handle as the
                # last one ends (0 then).
                handle = _cext.release(self)
            else:
                # A call in progress (this thread's, whose callback released
                # the Function, or another thread's) still uses the handle:
                # whoever sees no call left frees it, exactly once.
                _set_func_handle(self, 0)
                self._pending.append(handle)
                handle = 0 if self._inflight else _take_pending(self)
            if handle:
                PFFuncFree(handle)
            _holds.give_back(self)  # after the release, as Object.__del__

    def __reduce__(self):
        raise TypeError("packedfunc.Function cannot be pickled")

    def __init_subclass__(cls, **kwargs: object) -> None:  # annotated for mypy --strict on stubs
        super().__init_subclass__(**kwargs)
        _holds.release_after_own_del(cls, Function.__del__)

    def bind(self, constants, cache=None):
        """A new Function that calls this one with `constants` ({position:
        value}) inserted among its arguments; the remaining arguments fill
        the other positions in order. The new function owns the constants
        (strings and bytes copied, objects held); a numpy array or other
        DLPack array is taken as a Tensor object without a copy and kept
        alive. When this function has a pre-pack hook, each constant is
        packed once, here; with a :class:`PrePackCache`, equal CPU tensors
        share one packed copy. A typed function's signature loses the
        bound parameters. Raises TypeError or ValueError naming the bad
        position or value, or the hook's error."""
        from ._prepack import bind
        return bind(self, constants, cache)

    if not _cext:
        # The ctypes backend's call. (With the extension, the call is its
        # vectorcall: Function must then define no __call__.)
        def __call__(self, *args, **kwargs):
            # Whatever fails, the caller's traceback goes from its own frame
            # to the C levels below: this frame and the binding's others are
            # dropped (see _errors.for_caller). The handle stays valid until
            # the call ends, even if the Function is released meanwhile
            # (__del__ then leaves it to the last call in progress).
            inflight = self._inflight
            inflight.append(None)
            try:
                n = len(args)
                # Keywords, or defaults to take (or not looked up yet): the
                # library binds the call (PFFuncCallKw) on the general paths.
                if kwargs or n < self._fill:
                    if kwargs:
                        return _call_kw(self, args, kwargs)
                    return _call_general(self, args, None)
                # Plans by argument types; a miss (None) means types not seen
                # yet, which the general path looks at and plans.
                if n == 2:
                    a, b = args
                    try:
                        plan = _plans2[type(a)][type(b)]
                    except KeyError:
                        plan = None
                elif n == 1:
                    try:
                        plan = _plans1[type(args[0])]
                    except KeyError:
                        plan = None
                else:
                    plan = _plans_get(tuple(map(type, args)))
                if not plan:
                    return _call_general(self, args, plan)
                if plan.strs:
                    # Strings: not where a device parameter turns them into
                    # Devices (nor before the parameters are looked up), nor
                    # with a NUL or a lone surrogate (the general path raises).
                    given = args
                    if self._conversions != ():
                        return _call_general(self, given, False)
                    if n == 1:
                        # The common case, without the list: `data` (the UTF-8
                        # bytes) stays alive until the call returns.
                        try:
                            data = args[0].encode()
                        except UnicodeEncodeError:
                            return _call_general(self, given, False)
                        if 0 in data:  # a NUL (a memchr, unlike a bytes search)
                            return _call_general(self, given, False)
                        args = (_id(data) + _STR_DATA_OFFSET,)
                    else:
                        args = list(args)
                        keep = []  # the UTF-8 bytes, alive until the call returns
                        for i in plan.strs:
                            try:
                                data = args[i].encode()
                            except UnicodeEncodeError:
                                return _call_general(self, given, False)
                            if 0 in data:
                                return _call_general(self, given, False)
                            keep.append(data)
                            args[i] = _id(data) + _STR_DATA_OFFSET
                        if n == 2:
                            a, b = args
                try:
                    fr = _take_frame()
                except IndexError:
                    fr = _Frame()
                # Word 5 + i of the frame is argument i (_VAL_WORD), spelled
                # out on the hot lines.
                views = fr.value_views
                try:
                    if n == 2:
                        va, vb = plan.views
                        views[va][5] = a
                        views[vb][6] = b
                    elif n == 1:
                        views[plan.views[0]][5] = args[0]
                    else:
                        for i, v in enumerate(plan.views):
                            views[v][_VAL_WORD + i] = args[i]
                except ValueError:  # an int outside int64 (never a str's address)
                    _give_frame(fr)
                    return _call_general(self, given if plan.strs else args, False)
                if fr.plan is not plan:
                    fr.mem[_CODES_OFF:_CODES_OFF + 4 * n] = plan.codes
                    fr.i32[_NARGS_WORD] = n
                    fr.plan = plan
                fr.i64[_FUNC_WORD] = func_handle(self)  # 0 once released: C refuses it
                if _CALLS[self._keep_gil][1](fr.head):
                    _give_frame(fr)
                    _call_failed(self)
                c = fr.i32[_RCODE_WORD]
                if c == _INT:
                    v = fr.i64[0]
                    _give_frame(fr)
                    return v
                dec = _decoders_get(c)
                try:
                    if dec is not None:
                        return dec(fr.mem, RET_OFF, False, None)
                    return _decode(fr.mem, RET_OFF, c)  # raises: a code without a decoder
                finally:
                    _give_frame(fr)
            except BaseException as exc:
                _for_caller(exc)
                raise
            finally:
                inflight.pop()
                if self._pending and not inflight:
                    handle = _take_pending(self)
                    if handle:
                        PFFuncFree(handle)


def _take_pending(func):
    """The handle that func.__del__ left to the calls in progress, or 0 when
    another thread took it first."""
    try:
        return func._pending.pop()
    except IndexError:
        return 0


def use_count(obj):
    """The number of references that the C object behind `obj` (a
    :class:`Function` or any :class:`Object`: a container, tensor, module
    or instance) has now, this wrapper's own included (PFObjectGetRefCount).
    For tests and diagnostics: under threads the count may change at any
    moment. TypeError for anything else (a numpy array from C, a Device...),
    ValueError for a released wrapper."""
    if isinstance(obj, Function):
        handle, what = func_handle(obj), "Function"
    elif isinstance(obj, Object):
        handle, what = handle_of(obj), type(obj).__name__
    else:
        raise TypeError("use_count: argument 'obj' must be a packedfunc Function or Object, "
                        "not %s" % type(obj).__name__)
    if not handle:
        raise ValueError("use_count: the %s was released" % what)
    out = ctypes.c_int64()
    check_call(PFObjectGetRefCount(handle, byref(out)))
    return out.value


def _call_failed(func):
    """Raise the error of a failed PFFuncCall: a released Function (whose
    NULL handle C refused) says so; anything else is the callee's error,
    the call itself one of its C levels (named by the function's name).
    The extension's call raises through here too: the traceback carries no
    frame of the binding."""
    try:
        if func._hb is None:
            raise ValueError("packedfunc: the Function was released; it cannot be called")
        raise _last_error(level=lambda: func.name or func._looked_up)
    except BaseException as exc:
        _for_caller(exc)
        raise


def _call_general(func, args, plan):
    # The extension's call hands what it does not convert itself to here,
    # directly: like Function.__call__, this leaves no frame of the binding
    # in the caller's traceback.
    try:
        if func._fill == _FILL_UNKNOWN:
            func._fill = _fill_of(func)
        if len(args) < func._fill:  # defaults to take: the library binds them
            return _call_kw(func, args, {})
        if plan is None:  # not seen before: maybe it can take the fast path
            if _make_plan(tuple(map(type, args))):
                return func(*args)
        convs = func._conversions
        if convs is None:
            convs = func._conversions = _parameter_conversions(func)
        if convs:
            args = _convert_parameters(args, convs)
        n = len(args)
        if n <= MAX_FAST:
            try:
                fr = _take_frame()
            except IndexError:
                fr = _Frame()
        else:
            fr = _Frame(n)
        return _run(func, fr, args, None, _CALLS[func._keep_gil][0], n, fr.ret_val,
                    fr.ret_type_code)
    except BaseException as exc:
        _for_caller(exc)
        raise


def _run(func, fr, values, label, entry, *rest):
    """Packs `values` into the frame `fr` (label: as pack_args's), calls
    entry(func, fr.args, fr.type_codes, *rest) into C, and returns the
    result; the frame goes back to the pool, whatever happens."""
    keep, tensors = [], []
    mv = fr.mem
    try:
        pack_args(values, fr, keep, tensors, label)
        for i in range(0, len(tensors), 2):
            tensors_in_flight[tensors[i]] = tensors[i + 1]
        # func._hb is None once released: a NULL function, which C refuses.
        if _c_call(keep, entry, func._hb, fr.args, fr.type_codes, *rest):
            _call_failed(func)
        v, c = _ret_unpack(mv, 0)
        if c == _INT:
            return v
        if c == TENSOR:
            addr = v & 0xFFFFFFFFFFFFFFFF
            for i in range(0, len(tensors), 2):
                if tensors[i] == addr:
                    return tensors[i + 1]  # an argument coming back: itself
        return _decode(mv, RET_OFF, c)
    finally:
        for i in range(0, len(tensors), 2):
            tensors_in_flight.pop(tensors[i], None)
        if fr.capacity == MAX_FAST:
            _give_frame(fr)


def _c_call(keep, entry, *args):
    """entry(*args), a call into C, holding for this thread the instances
    of registered types among what the call took (`keep`: see
    _holds.Held) while C runs."""
    instances = _holds.instances_in(keep)
    if not instances:
        return entry(*args)
    lock_instances(instances)
    try:
        return entry(*args)
    finally:
        unlock_instances(instances)


def _non_blocking(handle):
    """1 when the C function's author marked it kPFFuncNonBlocking (its
    calls keep the GIL), else 0."""
    flags = ctypes.c_uint32()
    check_call(PFFuncGetFlags(handle, byref(flags)))
    return int(bool(flags.value & FUNC_NON_BLOCKING))


# Function._fill before the signature is looked up: every positional call
# takes the general path, which looks.
_FILL_UNKNOWN = sys.maxsize


def _fill_of(func):
    """The number of parameters of func's signature when some have defaults
    (a positional call with fewer arguments takes them, through
    PFFuncCallKw); 0 otherwise, and for a released function."""
    try:
        parsed = _signature.parse(func._info()[1])
    except Exception:  # a released function: its call raises
        parsed = None
    if parsed is None or not any(p.has_default for p in parsed[1]):
        return 0
    return len(parsed[1])


def _parameter_conversions(func):
    """(position, type, name) of the parameters in func's signature whose
    arguments a call converts first: a str at a `device` parameter becomes
    a Device, a list or tuple at a `shape` parameter a Shape, at a `list`
    parameter a List, a dict at a `dict` parameter a Dict; () without any,
    or without a signature. Cached as Function._conversions, which the
    fast paths read: a function with any of them sends strings, lists,
    tuples and dicts here."""
    try:
        parsed = _signature.parse(func._info()[1])
    except Exception:  # a released function: its call raises
        parsed = None
    if parsed is None:
        return ()
    return tuple((i, p.base, p.name) for i, p in enumerate(parsed[1])
                 if p.base in ("device", "shape", "list", "dict"))


def _convert_one(x, kind, what):
    from ._collections import Shape
    from ._mutable import Dict, List
    try:
        if kind == "device" and isinstance(x, str):
            return Device(x)
        if kind == "shape" and isinstance(x, (list, tuple)):
            return Shape(x)
        if kind == "list" and isinstance(x, (list, tuple)):
            return List(x)  # a new List: C's changes are not seen by `x`
        if kind == "dict" and isinstance(x, dict):
            return Dict(x)
    except (TypeError, ValueError, OverflowError) as err:
        raise type(err)("packedfunc: %s: %s" % (what, err)) from None
    return x


def _convert_parameters(args, convs):
    args = list(args)
    for i, kind, _ in convs:
        if i < len(args):
            args[i] = _convert_one(args[i], kind, "argument %d" % i)
    return args


def _convert_keywords(kwargs, convs):
    for _, kind, name in convs:
        if name is not None and name in kwargs:
            kwargs[name] = _convert_one(kwargs[name], kind, "argument '%s'" % name)
    return kwargs


# The keyword names' arrays by count, made once.
_NAME_ARRAYS = tuple(ctypes.c_char_p * k for k in range(MAX_FAST + 1))


def _call_kw(func, args, kwargs):
    """A call with keyword arguments: the positional arguments, then the
    keywords' values, go into one frame, and the library binds the names
    (PFFuncCallKw). Both backends' keyword calls that the extension does
    not convert itself come here; like the other paths, it leaves no frame
    of the binding in the caller's traceback."""
    try:
        convs = func._conversions
        if convs is None:
            convs = func._conversions = _parameter_conversions(func)
        if convs:
            args = _convert_parameters(args, convs)
            kwargs = _convert_keywords(dict(kwargs), convs)
        n, nkw = len(args), len(kwargs)
        names = []
        for name in kwargs:
            try:
                data = name.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:  # pragma: no cover - surrogateescape encodes any str
                data = b"\0"
            if b"\0" in data:
                # No parameter name holds a NUL (nor can C see past one).
                raise TypeError("%s() got an unexpected keyword argument %r"
                                % (func.name or "<anonymous>", name))
            names.append(data)
        total = n + nkw
        fr = _Frame(total) if total > MAX_FAST else None
        if fr is None:
            try:
                fr = _take_frame()
            except IndexError:
                fr = _Frame()
        values = list(args)
        values.extend(kwargs.values())
        try:
            names_type = _NAME_ARRAYS[nkw]
        except IndexError:
            names_type = ctypes.c_char_p * nkw
        return _run(func, fr, values, lambda i: i if i < n else "argument '%s'" % names[
            i - n].decode("utf-8", "surrogateescape"), _CALLS[func._keep_gil][2], n,
            names_type(*names),
            byref(fr.buf, _VALS_OFF + 8 * n), byref(fr.buf, fr.codes_off + 4 * n), nkw,
            fr.ret_val, fr.ret_type_code)
    except BaseException as exc:
        _for_caller(exc)
        raise


# ---- metadata for help() and inspect ----------------------------------------

class _PerInstance:
    """A non-data descriptor: `class_value` on the class, fget(instance) on
    an instance. Lets Function keep its class docstring while each function
    has its own __doc__ and __signature__."""

    def __init__(self, fget, class_value):
        self.fget, self.class_value = fget, class_value

    def __get__(self, obj, owner=None):
        return self.class_value if obj is None else self.fget(obj)


def _function_doc(func):
    try:
        return _signature.docstring(*func._info())
    except Exception:  # help() must never fail on a function
        return None


_ANY_ARGS = inspect.Signature([inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL)])


def _function_signature(func):
    # A function without a signature in the typed grammar (a packed C
    # function, a Python callable) takes any positional arguments.
    try:
        sig = _signature.to_inspect(func._info()[1])
    except Exception:
        sig = None
    return _ANY_ARGS if sig is None else sig


Function.__doc__ = _PerInstance(_function_doc, Function.__doc__)
Function.__signature__ = _PerInstance(_function_signature, None)

# A Function's handle, read (and, with ctypes, written) through Function's
# own slot or the extension's field, never as an attribute: a subclass may
# have one of that name (a slot of its own), which is no handle.
_HANDLE_SLOT = (_cext.FunctionBase if _cext else Function).__dict__["_handle"]
func_handle = _HANDLE_SLOT.__get__
_set_func_handle = _HANDLE_SLOT.__set__

# ---- conversions ------------------------------------------------------------

def _encode(x, pos, keep):
    handle = func_handle(x)
    if not handle:
        raise released(x, pos)
    keep.append(_holds.Held(handle))  # until the call ends (see Held)
    return FUNC, P.pack(handle)


def _decode_function(mem, off, borrowed, copies):
    handle = P.unpack_from(mem, off)[0]
    if borrowed:
        check_call(PFFuncRetain(handle))  # borrowed: take our own
    return Function._adopt(handle)


register_encoder((Function,), _encode)
register_fallback(RANK_HANDLES, Function, _encode)
register_decoder(FUNC, _decode_function)
register_object_type("function", lambda handle, type_index: Function._adopt(handle))
# Any callable may be passed; a function result is a Function.
_signature.register_annotation(
    "function", lambda result: Function if result else collections.abc.Callable)


# ---- the call ----------------------------------------------------------------

def _decode_result(addr, code):
    """The extension's result of a type it does not convert itself, through
    the decoder table (read from the PFValue's address). Like the call, it
    leaves no frame of the binding in the caller's traceback."""
    try:
        dec = _decoders_get(code)
        if dec is not None:
            return dec(_MEMORY, addr, False, None)
        return _decode(_MEMORY, addr, code)  # raises: a code without a decoder
    except BaseException as exc:
        _for_caller(exc)
        raise


if _cext:
    # The extension's vectorcall is the call; what it does not convert
    # itself goes through the general path above, and its results of other
    # types through _decode_result.
    _cext.set_hooks(call_general=_call_general, call_kw=_call_kw, call_failed=_call_failed,
                    decode_result=_decode_result)
    _cext.enable_vectorcall(Function)  # last: no __call__ may be set after it
