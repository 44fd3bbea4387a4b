"""Ctrl-C during a long C function ends it with KeyboardInterrupt, also
while C is calling a Python callback, and nothing is printed.

Python installs its KeyboardInterrupt handler only when SIGINT is not
ignored at start, and a suite started in the background (`make test &`
from a script, nohup) inherits SIGINT ignored. So each test that needs the
handler installs it itself, and the scripts run in fresh interpreters start
with SIGINT ignored on purpose: they must not depend on the disposition
they inherit. With SIGINT ignored, the binding itself carries on as if no
signal came."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT


def test_keyboard_interrupt_stops_c_loop(fn, sigint_raises):
    poll = fn("poll_signals")
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            timer.start()  # inside: a stalled main thread may take it at once
            poll(20000)  # would poll for 20 s
    finally:
        timer.cancel()
    assert time.monotonic() - start < 10


def test_no_signal_means_normal_return(fn):
    assert fn("poll_signals")(5) == 5


def test_custom_signal_handler_exception_kind(fn):
    class Stop(Exception):
        pass

    def handler(signum, frame):
        raise Stop("stop requested")

    old = signal.signal(signal.SIGUSR1, handler)
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGUSR1))
    try:
        with pytest.raises(Stop):
            timer.start()
            fn("poll_signals")(20000)
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, old)


# Execs the interpreter on the script in argv[1] with SIGINT ignored, which
# the exec keeps: as a shell starts a command in the background.
_START_WITH_SIGINT_IGNORED = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "os.execv(sys.executable, [sys.executable, '-c', sys.argv[1]])")

# What a script that wants Ctrl-C to raise KeyboardInterrupt starts with.
_SIGINT_RAISES = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"


def run_script(script, testlib, **extra_env):
    """Runs `script` in a fresh interpreter (no pytest hooks around it),
    started with SIGINT ignored; returns the completed process."""
    env = dict(os.environ, **extra_env)
    env["PYTHONPATH"] = os.path.join(ROOT, "bindings", "python")
    env["PF_TESTLIB_PATH"] = testlib._name
    return subprocess.run([sys.executable, "-c", _START_WITH_SIGINT_IGNORED, script], env=env,
                          capture_output=True, text=True, timeout=120)


# A signal handler runs on entry to the first Python frame after the
# signal: here the callback's trampoline, before its own `try`. The
# exception then escapes into ctypes, which used to print "Exception
# ignored on calling ctypes callback function" and hand C a garbage result.
ENTRY_SCRIPT = _SIGINT_RAISES + r"""
import ctypes, os, signal
import packedfunc as pf
ctypes.CDLL(os.environ["PF_TESTLIB_PATH"]).pft_init()
signal_then_call = pf.get_global_func("testing.signal_then_call")
call = pf.get_global_func("testing.call")
ran = []

def cb(x):
    ran.append(x)
    return x

interrupted = 0
for i in range(50):
    try:
        signal_then_call(signal.SIGINT, cb, i)
    except KeyboardInterrupt as err:
        interrupted += 1
# The same from inside a callback, one level down.
try:
    call(lambda: signal_then_call(signal.SIGINT, cb, -1))
except KeyboardInterrupt:
    interrupted += 1

class Stop(Exception):
    pass

def stop(signum, frame):
    raise Stop("stopped on entry")

signal.signal(signal.SIGUSR1, stop)
try:
    signal_then_call(signal.SIGUSR1, cb, 0)
except Stop as err:
    assert "stopped on entry" in str(err), err
    interrupted += 1
assert call(cb, 7) == 7  # without a signal, the callback runs
print(interrupted, len(ran))
"""


def test_interrupt_on_callback_entry_raises_in_the_caller(testlib):
    r = run_script(ENTRY_SCRIPT, testlib)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    # Every call was interrupted before its callback ran; then one ran.
    assert r.stdout.split() == ["52", "1"]


# Ctrl-C (a real SIGINT from another thread) while the README's demo
# functions have C call Python: demo.call_n_times (a packed function calls
# the callback) and demo.sort (qsort calls the comparator through a C
# function pointer). Each run is long enough to be interrupted well before
# it ends; an interrupt that got lost lets it finish, which the script
# reports.
DEMO_SCRIPT = _SIGINT_RAISES + r"""
import os, signal, sys, threading
import numpy as np
import packedfunc as pf
demo = pf.load_module(os.environ["PF_DEMO_PLUGIN"]).demo

def interrupt_soon():
    t = threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGINT))
    t.start()
    return t

results = []
# The timer starts inside the try: on a loaded machine it may fire before
# the call begins, and that interrupt must land in the except too.
for i in range(8):
    t = None
    try:
        t = interrupt_soon()
        demo.call_n_times(lambda i: i, 5000000)
        results.append("call_n_times finished")
    except KeyboardInterrupt:
        results.append("ok")
    if t is not None:
        t.join()
rng = np.random.default_rng(0)
for i in range(4):
    a = rng.integers(0, 1 << 40, 400000)
    t = None
    try:
        t = interrupt_soon()
        demo.sort(a, lambda x, y: (x > y) - (x < y))
        results.append("sort finished")
    except KeyboardInterrupt:
        results.append("ok")
    if t is not None:
        t.join()
print(" ".join(results))
"""


def test_ctrl_c_during_demo_callbacks_raises_keyboard_interrupt(testlib):
    demo_plugin = os.environ.get("PF_DEMO_PLUGIN") or os.path.join(
        ROOT, os.environ.get("BUILD", "build"), "examples", "demo_plugin.so")
    r = run_script(DEMO_SCRIPT, testlib, PF_DEMO_PLUGIN=demo_plugin)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout.split() == ["ok"] * 12


# SIGINT ignored, as a process started in the background inherits it: no
# handler runs, so C polling for signals and callbacks entered right after
# a SIGINT carry on as if none came, nothing is printed, and a handler
# installed later works.
IGNORED_SCRIPT = r"""
import ctypes, os, signal, threading
import packedfunc as pf
assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
ctypes.CDLL(os.environ["PF_TESTLIB_PATH"]).pft_init()
poll = pf.get_global_func("testing.poll_signals")
signal_then_call = pf.get_global_func("testing.signal_then_call")
timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT))
timer.start()
print(poll(300))
timer.join()
ran = []
print(signal_then_call(signal.SIGINT, lambda x: ran.append(x) or x, 7), ran)
signal.signal(signal.SIGINT, signal.default_int_handler)
try:
    signal_then_call(signal.SIGINT, lambda: None)
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted")
"""


def test_with_sigint_ignored_nothing_interrupts(testlib):
    r = run_script(IGNORED_SCRIPT, testlib)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout.splitlines() == ["300", "7 [7]", "interrupted"]
