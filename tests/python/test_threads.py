"""Threads: C threads calling Python, the GIL released during C calls."""
import sys
import threading
import time

import packedfunc as pf


def test_callback_from_a_thread_python_did_not_start(fn):
    idents = []

    def cb(x):
        idents.append(threading.get_ident())
        return x * 2

    assert fn("call_in_thread")(cb, 21) == 42
    assert idents and idents[0] != threading.get_ident()


def test_callback_returning_str_from_c_thread(fn):
    assert fn("call_in_thread")(lambda s: s.upper(), "abc") == "ABC"


def test_gil_is_released_during_c_calls(fn):
    sleep = fn("sleep_ms")
    count = [0]
    stop = threading.Event()
    started = threading.Event()

    def spin():
        started.set()
        while not stop.is_set():
            count[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    started.wait()
    before = count[0]
    sleep(300)
    during = count[0] - before
    stop.set()
    t.join()
    # With the GIL held for 300 ms the other thread could not count at all
    # (beyond a switch interval's worth).
    assert during > 10000, during


def test_concurrent_calls_from_python_threads(fn):
    add = fn("add")
    call = fn("call")
    errors = []

    def work(k):
        try:
            for i in range(2000):
                assert add(i, k) == i + k
                assert call(lambda a, b: a * b, i, k) == i * k
                assert call(lambda s: s + "!", "t%d" % k) == "t%d!" % k
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_reentrant_calls_use_separate_frames(fn):
    call = fn("call")
    add = fn("add")

    def cb(a, b):
        # A nested call while C still holds the outer call's arguments.
        inner = add(a * 10, b * 10)
        return inner + a + b

    assert call(cb, 1, 2) == 33
    assert call(lambda: call(lambda: call(add, 4, 5))) == 9


def test_many_threads_register_and_call(unique_name):
    names = [unique_name() for _ in range(4)]

    def work(name, k):
        pf.register_func(name, lambda x: x + k)
        f = pf.get_global_func(name)
        for i in range(500):
            assert f(i) == i + k

    threads = [threading.Thread(target=work, args=(n, k)) for k, n in enumerate(names)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, n in enumerate(names):
        assert pf.get_global_func(n)(1) == 1 + k
    time.sleep(0)


def test_callback_results_stay_with_their_thread(fn):
    """Each of several Python threads has C call back a Python function
    that returns a value only that thread uses: an int, a float, a str, a
    bytes and a Function. Every result must be that value. (The callback
    trampoline once wrote every thread's result into one shared buffer
    before handing it to C, and the GIL can switch threads in between.)"""
    call = fn("call")
    threads, rounds = 8, 5000
    funcs = [pf.convert(lambda k=k: k) for k in range(threads)]
    wrong = []

    def work(k):
        try:
            for i in range(rounds):
                n = k * 1000000 + i
                x = n + 0.25
                s = "thread-%d-%d" % (k, i)
                b = s.encode() + b"\0\xff"
                got = (call(lambda: n), call(lambda: x), call(lambda: s), call(lambda: b),
                       call(lambda: funcs[k]))
                want = (n, x, s, b, funcs[k])
                if got != want:
                    wrong.append((k, i, got, want))
                if i % 100 == 0:
                    assert got[4]() == k  # the Function is really this thread's
        except BaseException as e:  # pragma: no cover - reported below
            wrong.append((k, e))

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not wrong, "%d wrong results, the first: %r" % (len(wrong), wrong[0])
