"""packedfunc.rpc: remote functions from Python, against servers started by
the tests on 127.0.0.1 (in this process, and `pf serve` processes)."""
import gc
import os
import re
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

import packedfunc as pf
from packedfunc import rpc

from conftest import load_fixture_module

PF = os.environ.get("PF_TEST_CLI_REL")
DEMO = os.environ.get("PF_DEMO_PLUGIN")


@pf.register_func("pyrpc.echo", override=True)
def _echo(x):
    return x


@pf.register_func("pyrpc.add", override=True)
def _add(a, b):
    return a + b


@pf.register_func("pyrpc.fail", override=True)
def _fail(n):
    raise IndexError("index %d is out of range" % n)


@pf.register_func("pyrpc.apply", override=True)
def _apply(f, *args):
    return f(*args)


@pf.register_func("pyrpc.make_scale", override=True)
def _make_scale(k):
    return pf.convert(lambda x: x * k)


@pf.register_func("pyrpc.total", override=True)
def _total(arr):
    return float(np.asarray(arr).sum()), list(np.asarray(arr).shape)


_gate = threading.Event()


@pf.register_func("pyrpc.wait", override=True)
def _wait():
    _gate.wait(30)
    return "done"


_wake_sleepers = threading.Event()


@pf.register_func("pyrpc.sleep", override=True)
def _sleep(seconds):
    _wake_sleepers.wait(seconds)
    return seconds


@pf.register_func("pyrpc.shout_note", override=True)
def _shout_note(note):
    note.text = note.show().upper()  # a method of the server's rebuilt C++ object
    return note


@pf.register_func("hiddenrpc.secret", override=True)
def _secret():
    return "secret"


@pytest.fixture(scope="module")
def server():
    s = rpc.serve("tcp://127.0.0.1:*", expose=["pyrpc."], workers=4)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def remote(server):
    with rpc.connect(server.endpoint, timeout=20) as mod:
        yield mod


def test_values_cross(remote):
    echo = remote["pyrpc.echo"]
    for v in (0, -2**63, 2**63 - 1, 1.5, True, False, None, "héllo", b"a\x00b",
              pf.DataType("float32"), pf.Device("cpu", 0)):
        got = echo(v)
        assert got == v and type(got) is type(v)
    assert echo([1, "x", [2.5, {"k": b"v"}]]) == [1, "x", [2.5, {"k": b"v"}]]
    assert echo({1: "one", "two": 2}) == {1: "one", "two": 2}


def test_tensors_cross_compact(remote):
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    total, shape = remote["pyrpc.total"](a.T)  # strided
    assert total == a.sum() and list(shape) == [4, 3]
    back = remote["pyrpc.echo"](a[:, ::2])
    assert np.array_equal(np.asarray(back), a[:, ::2])
    assert np.asarray(back).flags["C_CONTIGUOUS"]


def test_large_tensors_cross_both_ways(remote):
    # 1 MiB: a numpy array (copied into the message) and a Tensor (its
    # bytes sent straight from the array in a frame of their own) come back
    # whole; the array the Tensor views stays the caller's, unchanged, and
    # is let go once the message is sent.
    a = np.arange(1 << 18, dtype=np.float32)
    want = a.copy()
    assert np.array_equal(np.asarray(remote["pyrpc.echo"](a)), want)
    t = pf.from_dlpack(a)
    for _ in range(3):
        back = remote["pyrpc.echo"](t)
        assert np.array_equal(np.asarray(back), want)
        total, shape = remote["pyrpc.total"](t)
        assert total == float(want.sum()) and list(shape) == [1 << 18]
    assert np.array_equal(a, want)
    del t, back
    gc.collect()


def test_module_lists_exposed_names_only(remote):
    names = remote.list_function_names()
    assert "pyrpc.add" in names
    assert all(n.startswith("pyrpc.") for n in names)
    assert "hiddenrpc.secret" not in remote


def test_remote_error_keeps_kind_and_server(remote, server):
    with pytest.raises(IndexError) as info:
        remote["pyrpc.fail"](7)
    assert "index 7 is out of range" in str(info.value)
    text = "".join(__import__("traceback").format_exception(info.value))
    assert server.endpoint in text


@pytest.mark.parametrize("kind", ["StopIteration", "StopAsyncIteration", "GeneratorExit"])
def test_remote_control_flow_kinds_arrive_as_runtime_error(testlib, kind):
    # A remote StopIteration would end map() silently: kinds that change
    # control flow arrive as a RuntimeError naming the kind.
    server = rpc.serve("tcp://127.0.0.1:*", expose=["testing.raise_error"], workers=1)
    try:
        with rpc.connect(server.endpoint, timeout=20) as mod:
            fail = mod["testing.raise_error"]
            with pytest.raises(RuntimeError, match=kind + r": no item after 3"):
                list(map(lambda x: fail(kind, "no item after %d" % x), [3, 4]))
    finally:
        server.stop()


def test_ctrl_c_interrupts_a_remote_call(server, sigint_raises):
    # The wait for a reply checks for signals, as a local call does:
    # Ctrl-C arrives within a fraction of a second, not at the timeout.
    _wake_sleepers.clear()
    with rpc.connect(server.endpoint, timeout=8) as mod:
        timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
        t0 = time.monotonic()
        try:
            with pytest.raises(KeyboardInterrupt):
                timer.start()  # inside: a stalled main thread may take it at once
                mod["pyrpc.sleep"](6)
            took = time.monotonic() - t0
        finally:
            timer.cancel()
            _wake_sleepers.set()
        assert took < 3
        assert mod["pyrpc.add"](40, 2) == 42  # the connection goes on


def test_opaque_handle_cannot_cross(remote):
    import ctypes
    with pytest.raises(TypeError, match="argument 0.*opaque handle"):
        remote["pyrpc.echo"](ctypes.c_void_p(1234))


def test_callbacks_both_ways(remote):
    apply = remote["pyrpc.apply"]
    assert apply(lambda x, y: x * y, 6, 7) == 42
    # The callback calls the server again while the server waits for it.
    add = remote["pyrpc.add"]
    assert apply(lambda x: add(x, 1000), 5) == 1005

    def depth(n):
        return 0 if n == 0 else 1 + apply(depth, n - 1)
    assert depth(8) == 8  # deeper than the server has workers


def test_callback_error_comes_back(remote):
    def bad():
        raise KeyError("from the client")
    with pytest.raises(KeyError, match="from the client"):
        remote["pyrpc.apply"](bad)


def test_returned_function_is_remote(remote):
    triple = remote["pyrpc.make_scale"](3)
    assert isinstance(triple, pf.Function)
    assert triple(14) == 42
    assert remote["pyrpc.apply"](triple, 2) == 6


def test_timeout(server):
    _gate.clear()
    with rpc.connect(server.endpoint, timeout=2) as mod:
        with pytest.raises(TimeoutError):
            mod["pyrpc.wait"]()
        _gate.set()
        assert mod["pyrpc.add"](1, 2) == 3


# How late a timeout may fire on a loaded 2-core machine.
_SLACK = 0.45


def test_timeout_is_kept(server):
    """A call fails with TimeoutError at its timeout, never later and never
    with the result that comes after it; the late reply is dropped and the
    next call on the connection gets its own result."""
    import time
    timeout = 1.0
    _wake_sleepers.clear()
    try:
        with rpc.connect(server.endpoint, timeout=timeout) as mod:
            sleep, add = mod["pyrpc.sleep"], mod["pyrpc.add"]
            t0 = time.monotonic()
            assert sleep(0.5 * timeout) == 0.5 * timeout
            assert time.monotonic() - t0 >= 0.5 * timeout
            for factor in (1.5, 5):
                t0 = time.monotonic()
                with pytest.raises(TimeoutError, match="no reply"):
                    sleep(factor * timeout)
                took = time.monotonic() - t0
                assert timeout - 0.01 <= took < timeout + _SLACK, (factor, took)
                assert add(2, 3) == 5
            time.sleep(0.6 * timeout)  # the 1.5x call's late reply has come and gone
            assert add(20, 22) == 42
            assert sleep(0.01) == 0.01
    finally:
        _wake_sleepers.set()


def test_pf_connect_timeout_is_kept(server):
    """`pf --connect ... --timeout MS call` of a function that takes longer
    (1.5 times) fails with TimeoutError after about the timeout, and does
    not print the result that comes later."""
    import time
    if not PF:
        pytest.skip("needs PF_TEST_CLI_REL (make test-python)")
    _wake_sleepers.clear()
    try:
        t0 = time.monotonic()
        out = subprocess.run([PF, "--connect", server.endpoint, "--timeout", "1000", "call",
                              "pyrpc.sleep", "1.5"], capture_output=True, text=True, timeout=60)
        took = time.monotonic() - t0
    finally:
        _wake_sleepers.set()
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "TimeoutError" in out.stderr
    assert took < 1.0 + 2 * _SLACK + 0.5, took


def test_close_then_connection_error(server):
    mod = rpc.connect(server.endpoint, timeout=10)
    add = mod["pyrpc.add"]
    assert add(1, 1) == 2
    mod.close()
    with pytest.raises(ConnectionError, match="closed"):
        add(1, 1)


def test_function_keeps_connection_open(server):
    add = rpc.connect(server.endpoint, timeout=10)["pyrpc.add"]
    import gc
    gc.collect()
    assert add(20, 22) == 42


def _threads():
    return len(os.listdir("/proc/self/task"))


def test_returned_function_keeps_connection_open(server):
    """A function that the server returned keeps working after the module
    it came from is collected (without close()); the connection closes by
    itself once nothing of it is referenced."""
    import gc
    base = _threads()
    mod = rpc.connect(server.endpoint, timeout=10)
    triple = mod["pyrpc.make_scale"](3)
    add = mod["pyrpc.add"]
    del mod
    gc.collect()
    assert triple(14) == 42
    assert add(1, 2) == 3
    del add
    gc.collect()
    assert triple(2) == 6
    assert _threads() > base
    del triple
    gc.collect()
    assert _threads() == base  # its threads are gone: it closed


def test_close_closes_returned_functions_too(server):
    mod = rpc.connect(server.endpoint, timeout=10)
    triple = mod["pyrpc.make_scale"](3)
    assert triple(1) == 3
    mod.close()
    with pytest.raises(ConnectionError, match="closed"):
        triple(1)


def test_per_client_limits():
    """A server's per-client limits (rpc.serve's options, those of
    PFRPCServerOptions): a call beyond max_calls_per_client, and a callback
    beyond max_callbacks_per_client, fail at once with a RuntimeError that
    names the limit; another client is served meanwhile."""
    import time
    _gate.clear()
    with rpc.serve("tcp://127.0.0.1:*", expose=["pyrpc."], workers=3, max_calls_per_client=2,
                   max_callbacks_per_client=1, callback_timeout=20) as s, \
            rpc.connect(s.endpoint, timeout=20) as mod, \
            rpc.connect(s.endpoint, timeout=20) as other:
        results = []
        first = threading.Thread(target=lambda: results.append(mod["pyrpc.wait"]()))
        first.start()
        stuck = threading.Event()

        def blocked():
            stuck.set()
            _gate.wait(30)
            return 1
        second = threading.Thread(target=lambda: results.append(mod["pyrpc.apply"](blocked)))
        second.start()
        assert stuck.wait(10)  # one call waits, one callback waits
        t0 = time.monotonic()
        with pytest.raises(RuntimeError, match="max_calls_per_client"):
            mod["pyrpc.add"](1, 2)
        assert other["pyrpc.apply"](lambda: 5) == 5  # a callback of another client
        assert time.monotonic() - t0 < 5
        _gate.set()
        first.join(30)
        second.join(30)
        assert sorted(map(str, results)) == ["1", "done"]
        # One callback may wait: a second one at the same time is refused.
        stuck.clear()
        _gate.clear()
        second = threading.Thread(target=lambda: results.append(mod["pyrpc.apply"](blocked)))
        second.start()
        assert stuck.wait(10)
        with pytest.raises(RuntimeError, match="max_callbacks_per_client"):
            mod["pyrpc.apply"](lambda: 1)
        _gate.set()
        second.join(30)


def test_max_exports_per_client():
    """A client holds at most max_exports_per_client functions of the server
    (those returned to it and not released); one more fails with a
    RuntimeError naming the limit, and releasing one makes room."""
    import gc
    import time
    with rpc.serve("tcp://127.0.0.1:*", expose=["pyrpc."], workers=2,
                   max_exports_per_client=3) as s, \
            rpc.connect(s.endpoint, timeout=20) as mod:
        held = [mod["pyrpc.make_scale"](k) for k in (1, 2, 3)]
        assert [f(2) for f in held] == [2, 4, 6]
        with pytest.raises(RuntimeError, match="already holds 3 functions.*max_exports_per_client"):
            mod["pyrpc.make_scale"](4)
        del held[0]
        gc.collect()
        deadline = time.monotonic() + 10
        while True:  # the release travels on its own
            try:
                held.append(mod["pyrpc.make_scale"](4))
                break
            except RuntimeError:
                assert time.monotonic() < deadline
                time.sleep(0.02)
        assert held[-1](2) == 8


def test_serve_bad_limits():
    for name in ("max_calls_per_client", "max_workers_per_client", "max_callbacks_per_client",
                 "max_exports_per_client", "callback_timeout"):
        with pytest.raises(ValueError, match=name):
            rpc.serve("tcp://127.0.0.1:*", **{name: -1})
        with pytest.raises(TypeError, match=name):
            rpc.serve("tcp://127.0.0.1:*", **{name: "3"})


def test_unreachable_is_connection_error():
    s = rpc.serve("tcp://127.0.0.1:*")
    endpoint = s.endpoint
    s.stop()
    with pytest.raises(ConnectionError, match="no server answered"):
        rpc.connect(endpoint, timeout=0.2)


def test_curve_accept_and_refuse():
    spub, ssec = rpc.curve_keypair()
    cpub, csec = rpc.curve_keypair()
    assert rpc.curve_public_key(ssec) == spub
    with rpc.serve("tcp://127.0.0.1:*", expose=["pyrpc."], curve_secret_key=ssec,
                   authorized_keys=[cpub]) as s:
        with rpc.connect(s.endpoint, timeout=10, server_key=spub,
                         client_keys=(cpub, csec)) as mod:
            assert mod["pyrpc.add"](2, 3) == 5
        opub, osec = rpc.curve_keypair()
        with pytest.raises(ConnectionError):
            rpc.connect(s.endpoint, timeout=0.3, server_key=spub, client_keys=(opub, osec))
        with pytest.raises(ConnectionError):
            rpc.connect(s.endpoint, timeout=0.3)


def test_bad_arguments():
    with pytest.raises(TypeError, match="endpoints"):
        rpc.connect(123)
    with pytest.raises(ValueError, match="timeout"):
        rpc.connect("tcp://127.0.0.1:1", timeout=-1)
    with pytest.raises(ValueError, match="go together"):
        rpc.connect("tcp://127.0.0.1:1", server_key="x" * 40)
    with pytest.raises(ValueError, match="server_key"):
        rpc.connect("tcp://127.0.0.1:1", server_key="short", client_keys=("a", "b"))
    with pytest.raises(ValueError, match="endpoint"):
        rpc.connect("")
    with pytest.raises(RuntimeError, match="cannot bind"):
        rpc.serve("bogus://x")


@pytest.fixture
def pf_serve():
    if not PF or not DEMO:
        pytest.skip("needs PF_TEST_CLI_REL and PF_DEMO_PLUGIN (make test-python)")
    proc = subprocess.Popen([PF, "serve", "--listen", "tcp://127.0.0.1:*", "--load", DEMO,
                             "--expose", "demo."], stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    m = re.search(r"tcp://\S+", line)
    assert m, line
    yield m.group(0)
    proc.terminate()
    assert proc.wait(30) == 0


def test_pf_serve_from_python_and_pf_connect(pf_serve):
    with rpc.connect(pf_serve, timeout=10) as demo:
        assert demo["demo.add"](40, 2) == 42
        assert all(n.startswith("demo.") for n in demo.list_function_names())
    out = subprocess.run([PF, "--connect", pf_serve, "call", "demo.add", "40", "2"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "42\n"
    out = subprocess.run([PF, "--connect", pf_serve, "list"], capture_output=True, text=True,
                         timeout=60)
    assert "demo.add" in out.stdout.split()
    out = subprocess.run([PF, "--connect", pf_serve, "describe", "demo.add"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "name: demo.add" in out.stdout
    out = subprocess.run([PF, "--connect", pf_serve, "call", "demo.nothing"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "KeyError" in out.stderr


def test_mirrors_are_checked():
    import ctypes

    class Wrong(ctypes.Structure):
        _fields_ = [("x", ctypes.c_int)]
    rpc.check_mirrors()  # the real ones match
    with pytest.raises(ImportError, match="PFRPCOptions is .* bytes in the library but 4"):
        rpc.check_mirrors((("PFRPCOptions", Wrong),))


def test_a_cxx_instance_crosses_by_value(remote):
    # A C++ class (pf::class_, tests/modules/mod_cxx_layer.cc): each side
    # rebuilds the instance from its fields into a default-constructed one.
    cxxl = load_fixture_module("mod_cxx_layer.so").cxxl
    n = cxxl.Note("hi", 2)
    back = remote["pyrpc.shout_note"](n)
    assert type(back) is cxxl.Note and not pf.same_as(back, n)
    assert (back.text, back.stars) == ("HI**", 2) and back.show() == "HI****"
    assert (n.text, n.stars) == ("hi", 2)  # a copy went: the caller's is as it was
    # One without a default constructor cannot be rebuilt on the server.
    with pytest.raises(TypeError, match=re.escape(
            "cxxl.Counter cannot be rebuilt from its fields: its C++ type has no default "
            "constructor")):
        remote["pyrpc.echo"](cxxl.Counter(1, "x"))
