"""Ctrl-C during a long C function ends it with KeyboardInterrupt, also
while C is calling a Python callback, and nothing is printed."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT


def test_keyboard_interrupt_stops_c_loop(fn):
    poll = fn("poll_signals")
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
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
    timer.start()
    try:
        with pytest.raises(Stop):
            fn("poll_signals")(20000)
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, old)


def run_script(script, testlib, **extra_env):
    """Runs `script` in a fresh interpreter (no pytest hooks around it);
    returns the completed process."""
    env = dict(os.environ, **extra_env)
    env["PYTHONPATH"] = os.path.join(ROOT, "bindings", "python")
    env["PF_TESTLIB_PATH"] = testlib._name
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120)


# A signal handler runs on entry to the first Python frame after the
# signal: here the callback's trampoline, before its own `try`. The
# exception then escapes into ctypes, which used to print "Exception
# ignored on calling ctypes callback function" and hand C a garbage result.
ENTRY_SCRIPT = r"""
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
DEMO_SCRIPT = r"""
import os, signal, sys, threading
import numpy as np
import packedfunc as pf
demo = pf.load_module(os.environ["PF_DEMO_PLUGIN"]).demo

def interrupt_soon():
    t = threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGINT))
    t.start()
    return t

results = []
for i in range(8):
    t = interrupt_soon()
    try:
        demo.call_n_times(lambda i: i, 5000000)
        results.append("call_n_times finished")
    except KeyboardInterrupt:
        results.append("ok")
    t.join()
rng = np.random.default_rng(0)
for i in range(4):
    a = rng.integers(0, 1 << 40, 400000)
    t = interrupt_soon()
    try:
        demo.sort(a, lambda x, y: (x > y) - (x < y))
        results.append("sort finished")
    except KeyboardInterrupt:
        results.append("ok")
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
