"""fork() while other threads use packedfunc: the child can use it.

Each case runs in a subprocess whose threads keep calling C, Python
callbacks (some of which raise, so that the binding's error bookkeeping and
its lock are busy) and the registry, while the main thread forks, with
os.fork and with multiprocessing's fork start method. Each child looks a
function up, registers one, calls a callback that raises, and exits. The
parent waits for each child with a deadline: a child that hangs (a lock
that was held at the fork by a thread that does not exist in the child)
prints its stack and exits, or is killed, and the test fails instead of
hanging.
"""
import os
import subprocess
import sys

from conftest import ROOT

COMMON = r"""
import ctypes, faulthandler, multiprocessing, os, signal, sys, threading, time
import packedfunc as pf
from packedfunc import _errors
ctypes.CDLL(os.environ["PF_TESTLIB_PATH"]).pft_init()
add = pf.get_global_func("testing.add")
call = pf.get_global_func("testing.call")


def raises(k):
    raise KeyError("raised in %d" % k)


def child_work():
    # A child that hangs prints where (to the captured stderr) and exits 1.
    faulthandler.dump_traceback_later(5, exit=True)
    assert pf.get_global_func("testing.add")(1, 2) == 3
    pf.register_func("fork.child.%d" % os.getpid(), lambda x: x * 2)
    assert call(pf.get_global_func("fork.child.%d" % os.getpid()), 21) == 42
    try:
        call(raises, 0)
    except KeyError as err:
        assert "raised in 0" in str(err)
    else:
        raise AssertionError("the callback did not raise")
    faulthandler.cancel_dump_traceback_later()


def in_child():
    try:
        child_work()
        code = 0
    except BaseException as err:
        print("child failed: %r" % (err,), flush=True)
        code = 1
    os._exit(code)


def wait_for(pid, what, deadline_s=15):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.002)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "%s hung" % what
"""

BUSY_SCRIPT = COMMON + r"""
stop = threading.Event()


def busy(k):
    name = "fork.busy.%d" % k
    while not stop.is_set():
        assert add(k, 1) == k + 1
        assert call(lambda: k) == k
        try:
            call(raises, k)
        except KeyError:
            pass
        pf.register_func(name, lambda: k, override=True)
        assert pf.get_global_func(name)() == k
        pf.remove_global_func(name)


sys.setswitchinterval(1e-5)  # switch threads often: forks land anywhere
threads = [threading.Thread(target=busy, args=(k,)) for k in range(4)]
for t in threads:
    t.start()
results = []
for i in range(int(sys.argv[1])):
    pid = os.fork()
    if pid == 0:
        in_child()
    results.append(wait_for(pid, "os.fork child %d" % i))
ctx = multiprocessing.get_context("fork")
for i in range(int(sys.argv[2])):
    p = ctx.Process(target=child_work)
    p.start()
    p.join(15)
    if p.is_alive():
        p.kill()
        p.join()
        results.append("multiprocessing child %d hung" % i)
    else:
        results.append(p.exitcode)
stop.set()
for t in threads:
    t.join()
print(results)
"""

# Deterministic: another thread holds the binding's error lock (as a
# raising callback briefly does) at the moment of the fork.
HELD_LOCK_SCRIPT = COMMON + r"""
held, release = threading.Event(), threading.Event()


def hold():
    with _errors._errors_lock:
        held.set()
        release.wait()


t = threading.Thread(target=hold)
t.start()
held.wait()
pid = os.fork()
if pid == 0:
    in_child()
result = wait_for(pid, "the child")
release.set()
t.join()
print(result)
"""


def run(script, testlib, *args):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"),
               PF_TESTLIB_PATH=testlib._name)
    return subprocess.run([sys.executable, "-c", script] + list(args), env=env,
                          capture_output=True, text=True, timeout=600)


def test_fork_while_another_thread_holds_the_error_lock(testlib):
    r = run(HELD_LOCK_SCRIPT, testlib)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "0\n", r.stdout + r.stderr
    assert r.stderr == ""


def test_fork_while_threads_call_c_callbacks_and_the_registry(testlib):
    r = run(BUSY_SCRIPT, testlib, "30", "10")
    assert r.returncode == 0, r.stderr
    # A child that hung printed its stack to stderr: where it waited.
    assert r.stdout == "%r\n" % ([0] * 40), r.stdout + r.stderr
    assert r.stderr == ""
