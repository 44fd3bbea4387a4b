"""Ctrl-C during a long C function ends it with KeyboardInterrupt."""
import os
import signal
import threading
import time

import pytest


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
