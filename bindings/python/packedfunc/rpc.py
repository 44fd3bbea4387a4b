"""Remote functions: call the functions of packedfunc servers on other
processes and machines (libpackedfunc_rpc, over ZeroMQ and MessagePack).

::

    from packedfunc import rpc

    with rpc.connect("tcp://127.0.0.1:9190", timeout=10) as mod:
        mod["demo.add"](40, 2)           # -> 42, computed by the server

    server = rpc.serve("tcp://127.0.0.1:*", expose=["py."])   # serve this process
    server.endpoint                      # 'tcp://127.0.0.1:40231'
    server.stop()

:func:`connect` returns a :class:`RemoteModule`, a :class:`Module` whose
functions are remote functions: ordinary Functions that send their
arguments to a server and bring back its result or its exception (with the
server's traceback and a line naming the server). Everything that a
Function call accepts crosses, except opaque handles and objects that only
make sense in this process (TypeError naming the argument); Python
functions cross as callbacks that the server may call while the call is in
progress. A call that gets no reply in time raises TimeoutError; a server
that is unreachable or dies during a call raises ConnectionError.

The connection stays open while the module or any remote function of it
is alive (those taken from the module, and those that a server returned),
or until :meth:`RemoteModule.close`, which closes it at once: functions
used after that raise ConnectionError. The library is found through $PF_RPC_LIBRARY, then
beside this package, beside libpackedfunc, in the source tree's build
output, and last by its soname through the system's library path.
"""
import ctypes
import os
from ctypes import POINTER, byref, c_char_p, c_int, c_int64, c_void_p

from ._errors import check_call
from ._ffi import LIB_PATH
from ._library import OBJECT_TYPES
from ._module import Module

__all__ = ["connect", "serve", "RemoteModule", "Server", "curve_keypair", "curve_public_key"]

_SONAME = "libpackedfunc_rpc.so.0"


def _load():
    env = os.environ.get("PF_RPC_LIBRARY")
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.normpath(os.path.join(here, "..", "..", ".."))
    build = os.environ.get("BUILD", "build")
    candidates = [env] if env else [
        os.path.join(here, _SONAME),                      # beside the package
        os.path.join(os.path.dirname(LIB_PATH), _SONAME),  # beside libpackedfunc
        os.path.join(root, build, "lib", _SONAME),        # the source tree's build
        _SONAME]                                          # the system's library path
    candidates = [c for c in candidates if os.path.sep not in c or os.path.exists(c)] or [_SONAME]
    errors = []
    for path in candidates:
        try:
            # This is libpackedfunc_rpc, a library of its own with its own
            # header: its prototypes live here, while _ffi.py keeps every
            # prototype of libpackedfunc. Loaded as a CDLL (cdll), since
            # every entry point may wait for the network or run user code
            # on other threads: the GIL is released during calls.
            return ctypes.cdll.LoadLibrary(path)
        except OSError as err:
            errors.append("  %s: %s" % (path, err))
    raise ImportError("packedfunc.rpc: cannot load libpackedfunc_rpc:\n" + "\n".join(errors))


_lib = _load()

# The mirrors of PFRPCOptions and PFRPCServerOptions (include/packedfunc/rpc.h).
_LOG_FUNC = ctypes.CFUNCTYPE(None, c_void_p, c_char_p)


class _Options(ctypes.Structure):
    _fields_ = [("timeout_ms", c_int), ("server_key", c_char_p),
                ("client_public_key", c_char_p), ("client_secret_key", c_char_p),
                ("max_message_size", c_int64)]


class _ServerOptions(ctypes.Structure):
    _fields_ = [("num_workers", c_int), ("expose", POINTER(c_char_p)), ("num_expose", c_int),
                ("curve_secret_key", c_char_p), ("authorized_keys", POINTER(c_char_p)),
                ("num_authorized_keys", c_int), ("callback_timeout_ms", c_int),
                ("max_message_size", c_int64), ("log", _LOG_FUNC), ("log_user_data", c_void_p),
                ("max_calls_per_client", c_int), ("max_workers_per_client", c_int),
                ("max_callbacks_per_client", c_int), ("max_exports_per_client", c_int)]


def _proto(name, argtypes):
    fn = getattr(_lib, name)
    fn.argtypes = argtypes
    fn.restype = c_int
    return fn


_Connect = _proto("PFRPCConnect", [c_char_p, POINTER(_Options), POINTER(c_void_p)])
_Disconnect = _proto("PFRPCDisconnect", [c_void_p])
_Detach = _proto("PFRPCDetach", [c_void_p])
_Serve = _proto("PFRPCServe", [c_char_p, POINTER(_ServerOptions), POINTER(c_void_p)])
_GetEndpoint = _proto("PFRPCServerGetEndpoint", [c_void_p, POINTER(c_char_p)])
_Stop = _proto("PFRPCServerStop", [c_void_p])
_Keypair = _proto("PFRPCCurveKeypair", [c_char_p, c_char_p])
_PublicKey = _proto("PFRPCCurvePublicKey", [c_char_p, c_char_p])
_StructSize = _proto("PFRPCGetStructSize", [c_char_p, POINTER(ctypes.c_size_t)])
_KEY_SIZE = 41


def check_mirrors(mirrors=(("PFRPCOptions", _Options), ("PFRPCServerOptions", _ServerOptions))):
    """Refuse (ImportError) a library whose option structs differ in size
    from this module's mirrors of them."""
    for name, mirror in mirrors:
        size = ctypes.c_size_t()
        if _StructSize(name.encode(), byref(size)) != 0:
            raise ImportError("packedfunc.rpc: the library cannot report the size of %s" % name)
        if size.value != ctypes.sizeof(mirror):
            raise ImportError("packedfunc.rpc: struct %s is %d bytes in the library but %d bytes "
                              "in the Python mirror; the package and the library do not match"
                              % (name, size.value, ctypes.sizeof(mirror)))


check_mirrors()


def _text(what, value):
    """A str (or bytes) for C. C reads it up to its first NUL, so a NUL
    inside would cut it short silently: an expose prefix "testing\0x"
    would expose every "testing..." name. That is a ValueError."""
    if not isinstance(value, (str, bytes)):
        raise TypeError("packedfunc.rpc: %s must be a str, not %s" % (what, type(value).__name__))
    if ("\0" if isinstance(value, str) else b"\0") in value:
        raise ValueError("packedfunc.rpc: %s contains a NUL character" % what)
    return value if isinstance(value, bytes) else value.encode("utf-8")


def _millis(what, seconds):
    if seconds is None:
        return 0
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError("packedfunc.rpc: %s must be a number of seconds, not %s"
                        % (what, type(seconds).__name__))
    if not seconds > 0:
        raise ValueError("packedfunc.rpc: %s must be positive, got %r" % (what, seconds))
    return max(1, min(int(seconds * 1000), 2**31 - 1))


class _Connection:
    """The duty to end a C connection: closed explicitly (close), or, when
    the module is collected first, detached (PFRPCDetach), so that the
    connection closes by itself once no remote function of it is left."""

    __slots__ = ("handle", "__weakref__")

    def __init__(self, handle):
        self.handle = handle

    def close(self):
        handle, self.handle = self.handle, None
        if handle:
            check_call(_Disconnect(handle))

    def __del__(self):
        handle, self.handle = self.handle, None
        try:
            if handle:
                _Detach(handle)
        except Exception:  # interpreter shutdown: nothing left to tell
            pass


class RemoteModule(Module):
    """The module of a connection (see :func:`connect`). The connection
    stays open while the module or any remote function of it is alive. Use
    it as a context manager, or call :meth:`close`, to close the connection
    at a known point."""

    __slots__ = ("_conn",)

    def close(self):
        """Close the connection now: calls in flight and later calls of its
        functions raise ConnectionError."""
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def connect(endpoints, timeout=None, server_key=None, client_keys=None):
    """Connect to one server, or several ("tcp://h1:9190,tcp://h2:9190",
    or a list); calls spread over the servers. ``timeout`` (seconds; 30 by
    default) bounds every call and the wait for the first server.
    ``server_key`` is the server's CURVE public key and ``client_keys`` the
    client's (public, secret) pair, each 40 characters of Z85 (see
    :func:`curve_keypair`). Returns a :class:`RemoteModule`.

    Raises ConnectionError when no server answers in time, ValueError for a
    malformed endpoint or key or a server of another protocol version,
    TypeError for arguments of the wrong type."""
    if isinstance(endpoints, (list, tuple)):
        endpoints = ",".join(endpoints)
    raw = _text("endpoints", endpoints)
    opts = _Options()
    opts.timeout_ms = _millis("timeout", timeout)
    if server_key is not None or client_keys is not None:
        if server_key is None or client_keys is None:
            raise ValueError("packedfunc.rpc.connect: server_key and client_keys go together")
        try:
            public, secret = client_keys
        except (TypeError, ValueError):
            raise TypeError("packedfunc.rpc.connect: client_keys must be a (public, secret) "
                            "pair") from None
        opts.server_key = _text("server_key", server_key)
        opts.client_public_key = _text("client_keys[0]", public)
        opts.client_secret_key = _text("client_keys[1]", secret)
    out = c_void_p()
    check_call(_Connect(raw, byref(opts), byref(out)))
    conn = _Connection(out.value)
    mod = RemoteModule._adopt(out.value, OBJECT_TYPES["module"], endpoints)
    mod._conn = conn
    return mod


class Server:
    """A server running in this process (see :func:`serve`)."""

    __slots__ = ("_handle", "endpoint", "_log", "__weakref__")

    def stop(self):
        """Stop serving: wait for the calls in progress, then close."""
        handle, self._handle = self._handle, None
        if handle:
            check_call(_Stop(handle))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def __del__(self):
        try:
            self.stop()
        except Exception:
            pass


def _count(what, value):
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("packedfunc.rpc.serve: %s must be an int, not %s"
                        % (what, type(value).__name__))
    if not 0 < value < 2**31:
        raise ValueError("packedfunc.rpc.serve: %s must be a positive int, got %r" % (what, value))
    return value


def serve(endpoint, expose=(), workers=4, curve_secret_key=None, authorized_keys=(),
          log=None, callback_timeout=None, max_calls_per_client=None,
          max_workers_per_client=None, max_callbacks_per_client=None,
          max_exports_per_client=None):
    """Serve this process's global registry on ``endpoint``
    ("tcp://127.0.0.1:*" picks a free port; see :attr:`Server.endpoint`):
    only the names that begin with one of the ``expose`` prefixes (none by
    default; "" exposes all). ``log`` (a callable taking a str) receives one
    line per connection problem. Returns a running :class:`Server`.

    ``callback_timeout`` (seconds; 30 by default) bounds the wait for a
    callback's reply. Clients take turns for the workers, and each client
    (connection) may have at most ``max_calls_per_client`` calls queued or
    running (64 by default), hold at most ``max_workers_per_client`` workers
    (all by default) and have at most ``max_callbacks_per_client`` workers
    waiting for its callbacks (``workers - 1`` by default, at least 1) and
    hold at most ``max_exports_per_client`` functions of the server that it
    has not released (1024 by default); a call or callback beyond a limit
    fails at once with a RuntimeError that names it (see
    PFRPCServerOptions in packedfunc/rpc.h)."""
    if isinstance(expose, str):
        expose = [expose]
    prefixes = [_text("expose", p) for p in expose]
    keys = [_text("authorized_keys", k) for k in authorized_keys]
    opts = _ServerOptions()
    opts.num_workers = workers
    opts.max_calls_per_client = _count("max_calls_per_client", max_calls_per_client)
    opts.max_workers_per_client = _count("max_workers_per_client", max_workers_per_client)
    opts.max_callbacks_per_client = _count("max_callbacks_per_client", max_callbacks_per_client)
    opts.max_exports_per_client = _count("max_exports_per_client", max_exports_per_client)
    opts.callback_timeout_ms = _millis("callback_timeout", callback_timeout)
    opts.expose = (c_char_p * (len(prefixes) + 1))(*prefixes)
    opts.num_expose = len(prefixes)
    if curve_secret_key is not None:
        opts.curve_secret_key = _text("curve_secret_key", curve_secret_key)
    opts.authorized_keys = (c_char_p * (len(keys) + 1))(*keys)
    opts.num_authorized_keys = len(keys)
    server = Server()
    server._handle = None
    server._log = None
    if log is not None:
        server._log = _LOG_FUNC(lambda _user, line: log(line.decode("utf-8", "replace")))
        opts.log = server._log
    out = c_void_p()
    check_call(_Serve(_text("endpoint", endpoint), byref(opts), byref(out)))
    server._handle = out.value
    ep = c_char_p()
    check_call(_GetEndpoint(out.value, byref(ep)))
    server.endpoint = ep.value.decode("utf-8")
    return server


def curve_keypair():
    """A new CURVE key pair: (public, secret), each 40 characters of Z85."""
    public, secret = ctypes.create_string_buffer(_KEY_SIZE), ctypes.create_string_buffer(_KEY_SIZE)
    check_call(_Keypair(public, secret))
    return public.value.decode(), secret.value.decode()


def curve_public_key(secret):
    """The public key of a CURVE secret key."""
    public = ctypes.create_string_buffer(_KEY_SIZE)
    check_call(_PublicKey(_text("secret", secret), public))
    return public.value.decode()
