"""Registered object types as Python classes.

A C library registers a type of its own (object_type.h): a key such as
"demo.Counter", a parent, fields and methods. The first time Python meets
the type (an instance crosses, or get_class, or a module's attribute), a
class is made from the library's description: a subclass of Object, or of
its parent type's class, with a descriptor per field (read through the
field's handle, or in place for plain numbers), a method per method (the
method's Function, called with the instance first), ``__init__`` from the
type's __init__, and a repr, pickling and copying. ``register_object``
binds a class of the user's instead, adding to it what it does not define.

Identity: an instance that crosses into Python is wrapped once; while that
wrapper lives, the instance comes back as the same Python object (an
identity map from handle to wrapper, which a wrapper leaves when it is
released). A Python subclass of a type's class that is not registered
makes instances of that type, which come back as that subclass while the
Python object lives, and as the type's class once Python let it go.

With the compiled backend the descriptors, the identity map and the
instances' creation are _cext's (objects.c), which calls back here only for
what it does not convert itself; with ctypes they are the classes below.
Both give the same values and errors. Everything here is private; the
package re-exports get_class, register_object and same_as.
"""
import ctypes
import inspect
import reprlib
import struct
import threading
import typing
import weakref

from . import _signature
from ._backend import cext as _cext
from ._convert import (BOOL, FLOAT, FUNC, INT, MEMORY, MODULE, NULL, OBJECT, P, TENSOR, decode,
                       encode, register_object_type)
from ._errors import check_call, for_caller, last_error
from ._ffi import (FIELD_WRITABLE, METHOD_STATIC, OBJECT_TYPE_REGISTERED_BEGIN, PFGetStructSize,
                   PFObjectAlloc, PFObjectFree, PFObjectGetData, PFObjectGetField,
                   PFObjectRetain, PFObjectSetField, PFObjectTypeFind, PFObjectTypeGetConstructor,
                   PFObjectTypeGetInfo, PFObjectTypeGetMethod, PFObjectTypeName)
from ._function import Function, _call_failed, func_handle
from ._holds import Held, refs_may_change, track
from ._library import LIB_PATH, OBJECT_TYPES
from ._mirrors import PFFieldInfo, PFMethodInfo, PFObjectTypeInfo
from ._serialize import reduce_by_json
from ._object import (Object, data_of, from_dlpack, handle_of, hooks as _object_hooks,
                      lock_instances, type_index_of, unlock_instances)
if not _cext:
    from ._object import init_state
from ._types import Device

c_void_p, c_uint32, byref = ctypes.c_void_p, ctypes.c_uint32, ctypes.byref
_CODE = struct.Struct("=i")
_HOST_OBJECT = OBJECT_TYPES["host object"]

# The description structs may grow at their ends in later versions, which
# read them through their pointers: the library's must be at least ours.
for _name, _mirror in (("PFObjectTypeInfo", PFObjectTypeInfo), ("PFFieldInfo", PFFieldInfo),
                       ("PFMethodInfo", PFMethodInfo)):
    _size = ctypes.c_size_t()
    if PFGetStructSize(_name.encode(), byref(_size)) != 0 or _size.value < ctypes.sizeof(_mirror):
        raise ImportError("packedfunc: struct %s is %d bytes in %s, smaller than the %d bytes "
                          "of the Python mirror; the package and the library do not match"
                          % (_name, _size.value, LIB_PATH, ctypes.sizeof(_mirror)))


# ---------------------------------------------------------------------------
# Descriptions
# ---------------------------------------------------------------------------

def _text(raw, errors="replace"):
    return raw.decode("utf-8", errors) if raw else None


class _FieldSpec:
    """One field, as PFObjectTypeGetInfo reports it."""

    def __init__(self, info_ptr):
        f = info_ptr.contents
        self.address = ctypes.addressof(f)  # the field's handle
        self.name = f.name.decode()
        self.type = f.type.decode()
        self.doc = _text(f.doc)
        self.offset = f.offset
        self.writable = bool(f.flags & FIELD_WRITABLE)
        self.declared_by = f.type_index
        # Its C type: the type itself, or for element types, optional and
        # union the one they pass as (list<str>: list), as the library
        # parses it.
        parsed = _signature.parse("void(x:%s)" % self.type)
        base = parsed[1][0].base if parsed else self.type
        code = _signature.SIGNATURE_TYPES.get(base)
        # What a read can take in place: the struct format of the field's C
        # type (object_type.h's storage rule) for the plain numbers; a
        # uint64 goes through C, which refuses one above INT64_MAX.
        self.fast = _fast_format(base, code, f.size)
        # Whether the field holds a reference (the handle types, tensor and
        # obj<KEY>), which a write may release.
        self.refs = base == "obj" or code in (FUNC, MODULE, OBJECT, TENSOR)


def _fast_format(ctype, code, size):
    if code == INT and not (ctype.startswith("uint") and size == 8):
        fmt = {1: "b", 2: "h", 4: "i", 8: "q"}.get(size, "")
        return fmt.upper() if ctype.startswith("uint") else fmt
    if code == FLOAT:
        return {4: "f", 8: "d"}.get(size, "")
    if code == BOOL and size == 1:
        return "?"
    return ""


class _MethodSpec:
    """One method, as PFObjectTypeGetInfo reports it."""

    def __init__(self, info_ptr):
        m = info_ptr.contents
        self.name = m.name.decode()
        self.signature = _text(m.signature)
        self.doc = _text(m.doc)
        self.static = bool(m.flags & METHOD_STATIC)
        self.declared_by = m.type_index


class _TypeSpec:
    """A registered type's description, read once (the library's copy is
    immutable and lives for the process)."""

    def __init__(self, type_index):
        ptr = c_void_p()
        check_call(PFObjectTypeGetInfo(type_index, byref(ptr)))
        info = PFObjectTypeInfo.from_address(ptr.value)
        self.index = type_index
        self.key = info.key.decode()
        self.doc = _text(info.doc)
        self.parent_index = info.parent_index
        self.fields = [_FieldSpec(info.fields[i]) for i in range(info.num_fields)]
        self.methods = [_MethodSpec(info.methods[i]) for i in range(info.num_methods)]
        self.init = _MethodSpec(info.init) if info.init else None
        self.ancestors = ([] if not self.parent_index else
                          [self.parent_index] + spec_of(self.parent_index).ancestors)
        self.copy_refusal = self._copy_refusal()
        # An instance with a handle field (own or inherited) may come to
        # hold a Python object through it at any time: such instances are
        # tracked for the collector (see _holds).
        self.tracked = any(f.refs for f in self.fields)
        if self.tracked:
            refs_may_change()
            if _cext:
                _cext.ObjectBase._track_type(type_index)

    def own_fields(self):
        return [f for f in self.fields if f.declared_by == self.index]

    def _copy_refusal(self):
        """Why Python cannot copy instances itself, or None when it can: when
        every field is writable (the fields are the whole state a host sees)
        and the constructor takes no arguments, a copy is made as the type
        makes any instance, then given the fields. Other instances are
        pickled and copied through a JSON document (_serialize)."""
        ro = [f.name for f in self.fields if not f.writable]
        if ro:
            return "its field %r is read-only" % ro[0]
        init = self.init
        if init is not None:
            parsed = _signature.parse(init.signature)
            if parsed is None:
                return "its constructor (a packed __init__) may take arguments"
            if len(parsed[1]) > (0 if init.static else 1):
                return "its constructor takes arguments"
        return None


class TypeField(typing.NamedTuple):
    """A field of a registered type, in its class's ``__pf_type_info__``:
    `name`, `type` (the canonical grammar text: "int64", "list<str>",
    "optional<obj<mylib.Node>>"), `writable`, `doc` (None when none) and
    `declared_by` (the key of the type that declares it)."""
    name: str
    type: str
    writable: bool
    doc: typing.Optional[str]
    declared_by: str


class TypeMethod(typing.NamedTuple):
    """A method: `name`, `signature` (canonical, the object first for an
    instance method; None for a packed method without one), `static`,
    `doc` and `declared_by`."""
    name: str
    signature: typing.Optional[str]
    static: bool
    doc: typing.Optional[str]
    declared_by: str


class TypeInfo(typing.NamedTuple):
    """What the library knows of a registered object type, as one record
    (``Cls.__pf_type_info__``): its `key`, `index`, `parent` (the parent's
    key, or None), `doc`, `fields` and `methods` (own and inherited, as the
    library lists them; the constructor is not among the methods) and
    `init_signature` (the constructor's signature; None without one)."""
    key: str
    index: int
    parent: typing.Optional[str]
    doc: typing.Optional[str]
    fields: typing.Tuple[TypeField, ...]
    methods: typing.Tuple[TypeMethod, ...]
    init_signature: typing.Optional[str]


def _type_info(spec):
    key_of = lambda index: spec_of(index).key  # noqa: E731
    return TypeInfo(
        spec.key, spec.index, key_of(spec.parent_index) if spec.parent_index else None, spec.doc,
        tuple(TypeField(f.name, f.type, f.writable, f.doc, key_of(f.declared_by))
              for f in spec.fields),
        tuple(TypeMethod(m.name, m.signature, m.static, m.doc, key_of(m.declared_by))
              for m in spec.methods if m.name != "__init__"),
        spec.init.signature if spec.init is not None else None)


def registered_types():
    """The keys of every registered object type, in the order they were
    registered (the loaded modules' among them). The library gives the
    registered types consecutive indices from kPFObjectTypeRegisteredBegin
    on and names each (PFObjectTypeName): this walks them."""
    out, index = [], OBJECT_TYPE_REGISTERED_BEGIN
    while True:
        key = PFObjectTypeName(index)
        if key is None:
            return out
        out.append(_text(key))
        index += 1


_specs = {}  # type index -> _TypeSpec


def spec_of(type_index):
    spec = _specs.get(type_index)
    if spec is None:
        spec = _specs.setdefault(type_index, _TypeSpec(type_index))
    return spec


def find_type(type_key, where):
    """The index of the registered type `type_key`; KeyError when none."""
    if not isinstance(type_key, str):
        raise TypeError("%s: the type key must be a str, not %s" % (where, type(type_key).__name__))
    if "\0" in type_key:
        raise ValueError("%s: type key %r contains a NUL character" % (where, type_key))
    ti = c_uint32()
    check_call(PFObjectTypeFind(type_key.encode("utf-8", "surrogateescape"), byref(ti)))
    if not ti.value:
        raise KeyError("%s: no object type %r is registered (load the module that registers "
                       "it first)" % (where, type_key))
    return ti.value


# ---------------------------------------------------------------------------
# Classes
# ---------------------------------------------------------------------------

_classes = {}  # type index -> its class: made here, or bound by register_object
# Orders register_object against the classes that are made meanwhile. It
# is never held while user code runs: classes are made outside it (a class
# statement may run a parent's __init_subclass__) and published in it.
_lock = threading.Lock()


def class_of(type_index):
    """The class of a registered type, made on first use."""
    cls = _classes.get(type_index)
    if cls is not None:
        return cls
    spec = spec_of(type_index)
    parent = class_of(spec.parent_index) if spec.parent_index else Object
    made, unsigned = _make_class(spec, parent)
    with _lock:
        # Two threads may make one type's class at once: the first wins.
        cls = _classes.setdefault(type_index, made)
    if cls is made:
        _sign(unsigned)
    return cls


def get_class(type_key):
    """The Python class of the registered object type ``type_key`` (e.g.
    ``"demo.Counter"``): the class bound with :func:`register_object`, or
    the one made from the type's description on first use (a subclass of
    :class:`Object`, or of its parent type's class). Instances of the type
    that cross into Python are instances of it. Raises KeyError when no
    such type is registered (load the module that registers it first)."""
    return class_of(find_type(type_key, "get_class"))


def _split_key(key):
    module, _, name = key.rpartition(".")
    return module, name


def _make_class(spec, parent):
    module, name = _split_key(spec.key)
    ns = {"__slots__": (), "__module__": module or "packedfunc", "__qualname__": name,
          "__doc__": _class_doc(spec)}
    cls = type(name, (parent,), ns)
    return cls, _add_members(cls, spec)


def _class_doc(spec):
    return _signature.docstring(spec.key, None, spec.doc)


def _add_members(cls, spec):
    """Sets on cls what it does not define itself: its type record, the
    fields and methods its type declares (own or overriding), __init__ and,
    for a root type, the instance protocol (repr, pickling). Returns the
    methods to sign (see _sign) once the class is published."""
    _check_names(spec)
    own = cls.__dict__
    factory = None
    if spec.init is not None and spec.init.static:
        factory = _constructor(spec)
    members = {"__pf_type__": (spec.index, factory), "__pf_type_info__": _type_info(spec)}
    unsigned = []
    for f in spec.own_fields():
        members[f.name] = _make_field(cls, spec, f)
    for m in spec.methods:
        if m.declared_by == spec.index and m.name != "__init__":
            members[m.name] = _make_method_member(cls, spec, m, unsigned)
    init = _make_init(cls, spec, factory, unsigned)
    members["__init__"] = init
    if spec.init is not None and not spec.init.static:
        members["__pf_init__"] = init
    if not spec.parent_index:
        members.update(_PROTOCOL)
    for name, value in members.items():
        if name not in own or name in ("__pf_type__", "__pf_type_info__"):
            setattr(cls, name, value)
    return unsigned


def _check_names(spec):
    """TypeError when one of the type's own members has a name that Python
    keeps for itself (__class__, __dict__...: any __*__ but __init__, the
    constructor). Any other name works: the binding's own state is read
    through Object's descriptors, which a member cannot shadow."""
    members = [("field", f.name) for f in spec.own_fields()] + [
        ("method", m.name) for m in spec.methods if m.declared_by == spec.index]
    for kind, name in members:
        if name != "__init__" and name.startswith("__") and name.endswith("__"):
            raise TypeError("packedfunc: the object type %s cannot have a Python class: its %s "
                            "name %r is one that Python keeps for itself (__*__)"
                            % (spec.key, kind, name))


def _sign(unsigned):
    """Gives each method its __signature__. Only once its class is
    published: a signature's obj<KEY> annotations are classes, maybe this
    one or one derived from it."""
    for member, signature in unsigned:
        member.__signature__ = signature()


def _method_function(spec, name):
    out = c_void_p()
    check_call(PFObjectTypeGetMethod(spec.index, name.encode(), byref(out)))
    return Function._adopt(out.value)


def _constructor(spec):
    out = c_void_p()
    check_call(PFObjectTypeGetConstructor(spec.index, byref(out)))
    return Function._adopt(out.value)


def _method_signature(m):
    """inspect.Signature of a method: `self` first for an instance method,
    the other parameters numbered as C's messages number the arguments."""
    if m.signature is None:
        params = [inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL)]
        ret = inspect.Signature.empty
    else:
        sig = _signature.to_inspect(m.signature)
        params, ret = list(sig.parameters.values()), sig.return_annotation
    if not m.static:
        if m.signature is not None:
            params = params[1:]
        params.insert(0, inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY))
    return inspect.Signature(params, return_annotation=ret)


def _make_method_member(cls, spec, m, unsigned):
    func = _method_function(spec, m.name)
    if m.static:
        return staticmethod(func)  # the Function's own signature
    doc = _signature.docstring("%s.%s" % (spec.key, m.name), m.signature, m.doc)
    method = _method(func, cls, m.name, doc, False)
    unsigned.append((method, lambda: _method_signature(m)))
    return method


def _make_init(cls, spec, factory, unsigned):
    """__init__: the type's own or inherited C __init__ (an instance
    method, called on the zeroed instance that __new__ made); for a static
    factory (whose result __new__ returns) or a type without __init__, a
    Python one that does nothing (taking the factory's arguments, or
    none)."""
    init = spec.init
    if init is not None and not init.static:
        func = _method_function(spec, "__init__")
        doc = _signature.docstring("%s.__init__" % spec.key, init.signature, init.doc)
        method = _method(func, cls, "__init__", doc, True)
        unsigned.append((method, lambda: _method_signature(init)))
        return method
    if init is None:
        def __init__(self):
            pass
        __init__.__doc__ = "%s takes no arguments: its instances start zeroed." % spec.key
    else:
        def __init__(self, *args, **kwargs):
            pass  # the factory made the instance (see __new__)
        __init__.__doc__ = factory.__doc__

        def signature():
            sig = _method_signature(init)  # the factory's: the caller's arguments
            return sig.replace(parameters=[
                inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY),
                *sig.parameters.values()], return_annotation=None)
        unsigned.append((__init__, signature))
    __init__.__qualname__ = "%s.__init__" % cls.__qualname__
    __init__.__module__ = cls.__module__
    return __init__


def _no_apply(name, owner, obj):
    return TypeError("descriptor '%s' for '%s' objects doesn't apply to a '%s' object"
                     % (name, owner.__name__, type(obj).__name__))


if _cext:
    def _method(func, owner, name, doc, discard):
        return _cext.Method(func, owner, name, "%s.%s" % (owner.__qualname__, name), doc,
                            None, discard)
else:
    def _method(func, owner, name, doc, discard):
        def method(*args, **kwargs):
            # Whatever fails, the caller's traceback holds no frame of the
            # binding (as a Function call's).
            try:
                if not args:
                    raise TypeError("descriptor '%s' of '%s' object needs an argument"
                                    % (name, owner.__name__))
                if not isinstance(args[0], owner):
                    raise _no_apply(name, owner, args[0])
                r = func(*args, **kwargs)
                return None if discard else r
            except BaseException as exc:
                for_caller(exc)
                raise
        method.__name__ = name
        method.__qualname__ = "%s.%s" % (owner.__qualname__, name)
        method.__module__ = owner.__module__
        method.__doc__ = doc
        method.__objclass__ = owner
        method.function = func
        return method


# ---------------------------------------------------------------------------
# Fields
# ---------------------------------------------------------------------------

def _field_what(f, spec):
    return "field '%s' of %s" % (f.name, spec.key)


def _field_doc(f):
    facts = "%s, %s" % (f.type, "writable" if f.writable else "read-only")
    return "%s\n\n%s" % (f.doc, facts) if f.doc else facts


def _field_value(value, ctype):
    """A value written to a field as a function's parameter of the field's
    type converts it first: a str at a device field is a Device, a list or
    tuple at a shape field a Shape; a DLPack array (a numpy array) at a
    tensor field becomes a tensor object that keeps it alive, since the
    field keeps the tensor beyond the write."""
    if ctype == "device" and isinstance(value, str):
        return Device(value)
    if ctype == "shape" and isinstance(value, (list, tuple)):
        from ._collections import Shape
        return Shape(value)
    if ctype == "tensor" and not isinstance(value, Object) and hasattr(value, "__dlpack__"):
        return from_dlpack(value)
    return value


def _encode_field(value, what, ctype):
    """(type code, the PFValue's 64 bits, what must live until the write is
    done) for a value written to a field; the encoder table's errors name
    the field. (Also _cext's hook: its errors leave no frame of the
    binding in the caller's traceback.)"""
    try:
        try:
            value = _field_value(value, ctype)
        except (TypeError, ValueError, OverflowError) as err:
            raise type(err)("packedfunc: %s: %s" % (what, err)) from None
        keep = [value]
        code, raw = encode(value, what, keep)
        if code == OBJECT and ctype != "object" and _is_opaque(value, keep):
            # Crossed as an opaque host object, which only an object field
            # takes: C would say "got object"; this names the value's type.
            raise TypeError("packedfunc: %s: expected %s, got %s"
                            % (what, ctype, type(value).__name__))
        return code, P.unpack(raw)[0], keep
    except BaseException as exc:
        for_caller(exc)
        raise


def _is_opaque(value, keep):
    """Whether encoding `value` made an opaque host object of it (the
    encoder table's last fallback, which keeps the new object's wrapper)."""
    return not isinstance(value, Object) and any(
        isinstance(k, Object) and type_index_of(k) == _HOST_OBJECT for k in keep)


def _make_field(cls, spec, f):
    doc = _field_doc(f)
    if _cext:
        return _cext.Field(f.address, cls, "%s.%s" % (cls.__qualname__, f.name), doc,
                           _field_what(f, spec), f.fast or "\0", f.refs)
    return _Field(f, cls, doc, _field_what(f, spec))


# Orders, with ctypes, the reads and writes of fields that go through C:
# the value a read gets is borrowed from the instance (a str, or a handle
# it then takes a reference to), and a write may free the one it replaces.
# (The compiled backend does each under the GIL, in one piece.) Held only
# for C calls that run no user code: a write's old value is released after.
_field_lock = threading.RLock()
_value_buf = threading.local()


def _scratch():
    buf = getattr(_value_buf, "buf", None)
    if buf is None:
        buf = _value_buf.buf = (ctypes.c_char * 16)()
    return buf


class _Field:
    """A field of a registered type's class, with ctypes (the compiled
    backend's is _cext.Field). A data descriptor: read, written through
    C's conversions, never deleted."""

    def __init__(self, f, owner, doc, what):
        self.__name__ = f.name
        self.__qualname__ = "%s.%s" % (owner.__qualname__, f.name)
        self.__doc__ = doc
        self.__objclass__ = owner
        self.type = f.type
        self.writable = f.writable
        self._what = what
        self._address = f.address
        self._refs = f.refs
        self._offset = f.offset
        self._unpack = struct.Struct("=" + f.fast).unpack_from if f.fast else None

    def _check(self, obj):
        if not isinstance(obj, self.__objclass__):
            raise _no_apply(self.__name__, self.__objclass__, obj)
        if not data_of(obj):
            raise ValueError("packedfunc: the %s was released" % type(obj).__name__)

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        try:
            self._check(obj)
            if self._unpack is not None:
                return self._unpack(MEMORY, data_of(obj) + self._offset)[0]
            buf = _scratch()
            instance = [obj]
            lock_instances(instance)  # not while a call of another thread holds it
            try:
                with _field_lock:
                    check_call(PFObjectGetField(handle_of(obj), self._address, buf,
                                                byref(buf, 8)))
                    code = _CODE.unpack_from(buf, 8)[0]
                    if code not in (FUNC, MODULE, OBJECT):
                        return decode(buf, 0, code)  # copied out under the lock
                    check_call(PFObjectRetain(P.unpack_from(buf, 0)[0]))
                    raw = bytes(buf)
            finally:
                unlock_instances(instance)
            return decode(raw, 0, code)  # owns the reference taken above
        except BaseException as exc:
            for_caller(exc)
            raise

    def __set__(self, obj, value):
        try:
            self._check(obj)
            # The write holds the instance from here on: the value's
            # conversion may run user code that releases it.
            held = Held(handle_of(obj))
            code, bits, keep = NULL, 0, None
            if self.writable:  # else C refuses it, whatever the value
                code, bits, keep = _encode_field(value, self._what, self.type)
            handle, old = held.handle, None
            buf = _scratch()
            instance = [obj]
            lock_instances(instance)  # not while a call of another thread holds it
            try:
                with _field_lock:
                    if self._refs and self.writable:
                        if PFObjectGetField(handle, self._address, buf, byref(buf, 8)) == 0:
                            if _CODE.unpack_from(buf, 8)[0] != NULL:
                                old = P.unpack_from(buf, 0)[0]
                                PFObjectRetain(old)
                    rc = PFObjectSetField(handle, self._address, bits, code)
                    err = last_error() if rc else None
            finally:
                unlock_instances(instance)
            del keep, held
            if old is not None:
                PFObjectFree(old)  # without the GIL: it may be the last reference
            if err is not None:
                raise err
        except BaseException as exc:
            for_caller(exc)
            raise

    def __delete__(self, obj):
        self._check(obj)
        raise AttributeError("packedfunc: %s cannot be deleted" % self._what)

    def __repr__(self):
        return "<packedfunc field %s: %s%s>" % (self.__qualname__, self.type,
                                                "" if self.writable else ", read-only")


# ---------------------------------------------------------------------------
# The instance protocol of a root type's class
# ---------------------------------------------------------------------------

@reprlib.recursive_repr()
def _repr(self):
    spec = spec_of(type_index_of(self))
    if not handle_of(self):
        return "<%s (released)>" % spec.key
    parts = []
    for f in spec.fields:
        try:
            shown = repr(getattr(self, f.name))
        except Exception as err:  # a repr never fails on a field
            shown = "<%s>" % type(err).__name__
        parts.append("%s=%s" % (f.name, shown))
    return "%s(%s)" % (spec.key, ", ".join(parts))


def _reduce(self):
    spec = spec_of(type_index_of(self))
    if not handle_of(self):
        raise ValueError("packedfunc: the %s was released" % type(self).__name__)
    if spec.copy_refusal is not None:
        # A read-only field, or a constructor that wants arguments: Python
        # cannot make the copy, C can (PFFromJSON writes every field of an
        # instance it allocates). So the copy is of the whole graph, for
        # copy.copy too; it fails (TypeError naming the path) on a value
        # that JSON cannot hold, such as a function or a Python object.
        return reduce_by_json(self)
    state = {f.name: getattr(self, f.name) for f in spec.fields}
    # A class bound to the type is found again by its key (in the process
    # that unpickles, once it has loaded the module); any other by pickle's
    # usual rule, its module and name.
    cls = type(self)
    return (_restore, (spec.key if _classes.get(spec.index) is cls else cls,), state)


def _setstate(self, state):
    for name, value in state.items():
        setattr(self, name, value)


def _restore(key_or_class):
    cls = get_class(key_or_class) if isinstance(key_or_class, str) else key_or_class
    return cls()

_PROTOCOL = {"__repr__": _repr, "__reduce__": _reduce, "__setstate__": _setstate}


# ---------------------------------------------------------------------------
# register_object
# ---------------------------------------------------------------------------

def register_object(type_key):
    """Class decorator: bind a class of one's own to the registered object
    type ``type_key``, so that instances of the type come back as it::

        @packedfunc.register_object("demo.Counter")
        class Counter(plugin_base_class):    # or packedfunc.Object for a root type
            def twice(self):
                return 2 * self.count

    The class must subclass :class:`Object` (for a type without a parent)
    or the class of the type's parent (``get_class(parent_key)``). A class
    that declares no ``__slots__`` is made again with ``__slots__ = ()``,
    and the decorator returns that class: its instances have no
    ``__dict__``, as those of the classes made for types have not, so a
    misspelt attribute is an AttributeError. Declare ``__slots__ =
    ("__dict__",)`` to have one (or slots of your own). Its own
    attributes stay; the type's fields and methods, ``__init__`` from the
    type's constructor and, for a root type, repr and pickling are added
    where the class does not define them. A class that defines its own
    ``__init__`` runs the C one with ``self.__pf_init__(...)``.

    Register before any instance of the type or of a type derived from it
    reaches Python (before ``get_class`` of either): a type has one class
    for the whole process. Raises KeyError when the type is not registered
    (load its module first), TypeError for a class that does not derive as
    above, ValueError when the type already has a class.
    """
    if isinstance(type_key, type):
        raise TypeError("register_object needs the type key: @register_object(\"mylib.Type\")")
    ti = find_type(type_key, "register_object")

    def bind(cls):
        if not (isinstance(cls, type) and issubclass(cls, Object)):
            raise TypeError("register_object(%r): %r is not a subclass of packedfunc.Object"
                            % (type_key, cls))
        spec = spec_of(ti)
        parent = class_of(spec.parent_index) if spec.parent_index else Object
        if not issubclass(cls, parent):
            raise TypeError("register_object(%r): %s must subclass %s, the class of the parent "
                            "type %s" % (type_key, cls.__qualname__, parent.__qualname__,
                                         spec_of(spec.parent_index).key))
        if "__pf_type__" in cls.__dict__:
            raise ValueError("register_object(%r): %s is bound to %s already"
                             % (type_key, cls.__qualname__,
                                spec_of(cls.__dict__["__pf_type__"][0]).key))
        _check_no_class(spec)
        cls = _slotted(cls)
        unsigned = _add_members(cls, spec)
        with _lock:
            if _classes.setdefault(ti, cls) is not cls:
                raise ValueError("register_object(%r): the type got a class meanwhile" % type_key)
        _sign(unsigned)
        return cls

    return bind


def _slotted(cls):
    """cls when it declares __slots__; else cls made again with __slots__ =
    () from the same namespace, the __class__ cells of its functions (of
    super() and __class__) pointing at the new class."""
    if "__slots__" in cls.__dict__:
        return cls
    ns = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
    ns["__slots__"] = ()
    new = type(cls)(cls.__name__, cls.__bases__, ns)
    new.__qualname__ = cls.__qualname__
    for value in ns.values():
        if isinstance(value, (classmethod, staticmethod)):
            value = value.__func__
        funcs = (value.fget, value.fset, value.fdel) if isinstance(value, property) else (value,)
        for f in funcs:
            code, cells = getattr(f, "__code__", None), getattr(f, "__closure__", None)
            for name, cell in zip(code.co_freevars if code else (), cells or ()):
                if name == "__class__" and cell.cell_contents is cls:
                    cell.cell_contents = new
    return new


def _check_no_class(spec):
    for index, cls in list(_classes.items()):
        if index == spec.index or spec.index in spec_of(index).ancestors:
            raise ValueError("register_object(%r): the type %s has a class already (%s.%s): "
                             "register before its instances or those of types derived from it "
                             "reach Python" % (spec.key, spec_of(index).key, cls.__module__,
                                              cls.__qualname__))


# ---------------------------------------------------------------------------
# Instances: the identity map, and making them
# ---------------------------------------------------------------------------

def same_as(a, b):
    """True when ``a`` and ``b`` are the same packedfunc object: the same
    Python object, or two wrappers (Object, Function, Array...) of one C
    object. Unlike ``==``, it never compares contents (an Array's
    items)."""
    if a is b:
        return True
    if isinstance(a, Object) and isinstance(b, Object):
        return handle_of(a) != 0 and handle_of(a) == handle_of(b)
    if isinstance(a, Function) and isinstance(b, Function):
        return func_handle(a) != 0 and func_handle(a) == func_handle(b)
    return False


def live_count():
    """How many instances of registered types have a Python wrapper now."""
    if _cext:
        return _cext.ObjectBase._live_count()
    return len(_live)


def _adopt_any(handle, type_index):
    """The wrapper of a new reference to an object of any type without an
    adopter of its own: an instance of a registered type through its class
    and the identity map, anything else as a plain Object."""
    if type_index < OBJECT_TYPE_REGISTERED_BEGIN:
        return Object._adopt(handle, type_index)
    try:
        cls = class_of(type_index)
    except BaseException:
        PFObjectFree(handle)
        raise
    if _cext:
        return _cext.ObjectBase._adopt_instance(cls, handle, type_index)
    return _adopt_instance(cls, handle, type_index)


# With ctypes: handle -> weak reference to its wrapper. Changed under
# _live_lock, which is reentrant: a collection that the allocations below
# start may finalize another wrapper, whose __del__ calls _forget.
_live = {}
_live_lock = threading.RLock()


def _wrap(cls, handle, type_index):
    """A new wrapper (ctypes) of an instance, owning the reference."""
    data = c_void_p()
    if PFObjectGetData(handle, byref(data)) != 0:
        err = last_error()
        PFObjectFree(handle)
        raise err
    return init_state(object.__new__(cls), handle, type_index, data.value)


def _adopt_instance(cls, handle, type_index):
    with _live_lock:
        ref = _live.get(handle)
        alive = ref() if ref is not None else None
        if alive is None:
            obj = _wrap(cls, handle, type_index)
            _live[handle] = weakref.ref(obj)
    if alive is not None:
        PFObjectFree(handle)  # the wrapper holds one: not the last
        return alive
    if spec_of(type_index).tracked:
        track(obj)
    return obj


def _forget(obj, handle):
    with _live_lock:
        ref = _live.get(handle)
        if ref is not None and ref() in (obj, None):
            del _live[handle]


def _new(cls, args, kwargs):
    """Object.__new__ of a registered type's class, with ctypes (the
    compiled backend's is ObjectBase's)."""
    ti, factory = cls.__pf_type__
    if factory is not None:
        made = factory(*args, **kwargs)
        if not isinstance(made, cls):
            raise TypeError("packedfunc: cannot make a %s: the constructor of its type is a "
                            "static factory, whose objects come back as the class registered "
                            "for their type (here %s); register %s with "
                            "packedfunc.register_object to have it"
                            % (cls.__name__, type(made).__name__, cls.__name__))
        return made
    out = c_void_p()
    check_call(PFObjectAlloc(ti, byref(out)))
    with _live_lock:
        obj = _wrap(cls, out.value, ti)
        _live[out.value] = weakref.ref(obj)
    if spec_of(ti).tracked:
        track(obj)
    return obj


def _decode_field(addr, code):
    """_cext's hook: a field's value or a method's result that it does not
    convert itself (for a field it took a reference to a handle; a result
    is one), which the value takes over."""
    try:
        return decode(MEMORY, addr, code)
    except BaseException as exc:
        for_caller(exc)
        raise


def _raise_last():
    try:
        raise last_error()
    except BaseException as exc:
        for_caller(exc)
        raise


if _cext:
    _cext.ObjectBase._set_hooks(_decode_field, _encode_field, _raise_last, track, _call_failed)
else:
    _object_hooks.new = _new
    _object_hooks.forget = _forget

register_object_type(None, _adopt_any)
_signature.register_family_annotation(
    "obj", lambda ctype, result: class_of(find_type(ctype[4:-1], "annotation")))
