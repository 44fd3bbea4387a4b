"""Tensors through DLPack: no copies in either direction, owners kept alive;
a tensor that C lends to a callback arrives as a private copy."""
import gc
import os
import subprocess
import sys
import traceback

import numpy as np
import pytest

import packedfunc as pf

from conftest import ROOT


def test_numpy_array_is_passed_without_copy(fn):
    a = np.zeros((3, 4), dtype=np.float64)
    assert fn("fill")(a, 2.5) is None
    assert (a == 2.5).all()  # C wrote into the numpy array itself
    info = fn("tensor_info")(a).split()
    assert info[:4] == ["2", "2", "64", "1"]  # ndim, kDLFloat, bits, lanes
    assert int(info[4]) == a.ctypes.data


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_other_dtypes_and_strided_views(fn, dtype):
    a = np.zeros((4, 6), dtype=dtype)
    view = a[::2, 1::2]
    fn("fill")(view, 7.0)
    assert (a[::2, 1::2] == 7).all()
    assert a.sum() == 7 * view.size


def test_any_dlpack_object_is_accepted(fn):
    class Wrapper:
        def __init__(self, arr):
            self.arr = arr

        def __dlpack__(self, stream=None):
            return self.arr.__dlpack__()

        def __dlpack_device__(self):
            return self.arr.__dlpack_device__()

    a = np.zeros(5)
    fn("fill")(Wrapper(a), 1.0)
    assert (a == 1).all()


def test_dlpack_is_looked_up_on_each_value_unless_its_type_has_it(fn):
    # Values of a type with __dlpack__ (numpy arrays, subclasses) always
    # pass as tensors; a value that only has it as its own attribute
    # passes as a tensor, and another value of its type is refused.
    a = np.arange(3.0)
    info = fn("tensor_info")

    class Sub(np.ndarray):
        pass

    class Holder:
        pass

    for _ in range(2):
        assert info(a) == info(a.view(Sub))
        h = Holder()
        h.__dlpack__ = a.__dlpack__
        assert info(h) == info(a)
        # (Another Holder crosses as an opaque host object, not a tensor.)
        with pytest.raises(TypeError, match="argument 0 must be tensor, not object"):
            info(Holder())


def test_echo_returns_the_same_array(fn):
    a = np.arange(6.0)
    assert fn("echo")(a) is a


def test_tensor_returned_from_c_is_numpy_without_copy_and_keeps_owner(fn, testlib):
    gc.collect()
    before = testlib.pft_tensors_alive()
    arr = fn("make_tensor")(5)
    assert isinstance(arr, np.ndarray)
    assert arr.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert testlib.pft_tensors_alive() == before + 1
    # The array views C's memory: C writes through it and we see it.
    fn("fill")(arr, 9.0)
    assert (arr == 9).all()
    view = arr[1:3]
    del arr
    gc.collect()
    assert testlib.pft_tensors_alive() == before + 1  # the view keeps it
    assert view.tolist() == [9.0, 9.0]
    del view
    gc.collect()
    assert testlib.pft_tensors_alive() == before


def test_tensor_object_without_numpy_conversion(fn, testlib):
    gc.collect()
    before = testlib.pft_tensors_alive()
    arr = fn("make_tensor")(3)
    # Tensor objects also export DLPack themselves.
    t = pf.Tensor._adopt(_new_tensor_handle(3), 3)
    again = np.from_dlpack(t)
    assert again.tolist() == [0.0, 1.0, 2.0]
    assert t.__dlpack_device__() == (1, 0)
    assert testlib.pft_tensors_alive() == before + 2
    capsule = t.__dlpack__()  # never consumed: its destructor frees it
    del capsule, t, again, arr
    gc.collect()
    assert testlib.pft_tensors_alive() == before


def _new_tensor_handle(n):
    """A raw new reference to a C tensor object (testing.make_tensor called
    through the C API, so that no numpy conversion happens)."""
    import ctypes
    from packedfunc import _errors, _ffi, _library
    out, rc = ctypes.c_void_p(), ctypes.c_int()
    vals = (ctypes.c_int64 * 1)(n)
    codes = (ctypes.c_int * 1)(_library.TYPE_CODES["int"])
    f = pf.get_global_func("testing.make_tensor")
    _errors.check_call(_ffi._cdll.PFFuncCall(ctypes.c_void_p(f.handle), vals, codes, 1,
                                              ctypes.byref(out), ctypes.byref(rc)))
    assert rc.value == _library.TYPE_CODES["object"]
    return out.value


def test_borrowed_tensor_is_copied(fn):
    a = fn("borrowed_tensor")()
    assert a.tolist() == [1.5, 2.5, 3.5]
    a[0] = 100.0  # our own copy
    assert fn("borrowed_tensor")().tolist() == [1.5, 2.5, 3.5]


def test_callback_gets_the_callers_array(fn):
    a = np.zeros(3)
    seen = []
    fn("call")(lambda t: seen.append(t), a)
    assert seen[0] is a


def test_callback_gets_a_view_of_a_c_tensor(fn, unique_name):
    name = unique_name()
    got = []

    @pf.register_func(name)
    def cb(t):
        got.append(t.copy())
        t[:] = 5.0  # a view: writes reach C's memory

    arr = fn("make_tensor")(4)
    # C passes its own tensor object; the callback sees it as numpy.
    fn("call")(pf.get_global_func(name), arr)
    assert got[0].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert (arr == 5.0).all()


def test_callback_returns_an_array_without_copy(fn, testlib):
    src = np.arange(4.0)
    back = fn("call")(lambda: src)
    assert isinstance(back, np.ndarray)
    assert np.shares_memory(back, src)
    del src
    gc.collect()
    assert back.tolist() == [0.0, 1.0, 2.0, 3.0]  # the export keeps it alive


def test_readonly_array_is_refused_where_c_would_write_naming_the_position(fn):
    # It crosses as a read-only tensor object, never as a DLTensor* that C
    # may write (see test_dlpack_versions.py).
    a = np.zeros(3)
    a.setflags(write=False)
    with pytest.raises(TypeError, match="argument 0 must be tensor, not object"):
        fn("fill")(a, 1.0)
    assert a.tolist() == [0.0, 0.0, 0.0]


# A DLTensor that C lends to a callback (kPFDLTensorHandle) is C's memory
# only for the call. The callback gets a private copy, which it may keep;
# what it changes is written back to C's memory when it returns, and only
# if it changed anything. testing.call_with_tensor(f, kind) lends 1, 2, 3, 4
# and returns what C reads after the call, then reuses its memory (kind 0),
# with strides {2} over 8 values (kind 1), or unmaps it (kind 2, a page
# that is read-only during the call).

def test_callback_may_keep_a_tensor_c_lent_it(fn):
    kept = []
    assert fn("call_with_tensor")(kept.append, 0) == "1 2 3 4"
    # C has overwritten its memory with -7 and freed it since.
    assert kept[0].tolist() == [1.0, 2.0, 3.0, 4.0]
    kept[0][0] = 9.0  # a copy of our own: no one else sees this
    assert kept[0].tolist() == [9.0, 2.0, 3.0, 4.0]


def test_callback_writes_reach_c_through_the_copy(fn):
    def double(t):
        t *= 2

    assert fn("call_with_tensor")(double, 0) == "2 4 6 8"

    def set_second(t):
        assert t.tolist() == [1.0, 2.0, 3.0, 4.0]
        t[1] = 20.0

    # Strided: only the tensor's own elements are written, through strides.
    assert fn("call_with_tensor")(set_second, 1) == "1 101 20 103 3 105 4 107"

    def change_first(a, b):
        assert a is not b
        a[0] = 50.0

    # The same memory lent twice: the unchanged second copy does not undo
    # what the first wrote.
    assert fn("call_with_tensor")(change_first, 3) == "50 2 3 4"


def test_callback_that_fails_writes_nothing_back(fn):
    def fail(t):
        t[:] = 0.0
        raise ValueError("no result")

    with pytest.raises(ValueError, match="no result") as info:
        fn("call_with_tensor")(fail, 0)
    # testing.call_with_tensor adds what it read as a line of the C traceback.
    names = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert "C read after the call: 1 2 3 4" in names


READONLY_SCRIPT = r"""
import ctypes, os
import packedfunc as pf
ctypes.CDLL(os.environ["PF_TESTLIB_PATH"]).pft_init()
call_with_tensor = pf.get_global_func("testing.call_with_tensor")
kept = []
def read_only(t):
    kept.append(t)
    return float(t.sum())
# The memory is read-only during the call: an unchanged copy is not written
# back. It is unmapped after the call: the kept copy is still readable.
print(call_with_tensor(read_only, 2), kept[0].tolist())
"""


def test_read_only_tensor_is_never_written_and_may_be_kept(testlib):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"),
               PF_TESTLIB_PATH=testlib._name)
    r = subprocess.run([sys.executable, "-c", READONLY_SCRIPT], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, (r.returncode, r.stderr)  # -11: SIGSEGV
    assert r.stdout == "1 2 3 4 [1.0, 2.0, 3.0, 4.0]\n"
    assert r.stderr == ""


def test_tensor_object_argument_is_a_view_that_keeps_it_alive(fn, testlib):
    gc.collect()
    before = testlib.pft_tensors_alive()
    kept = []

    def cb(t):
        kept.append(t)
        t[0] = 100.0  # no copy: C sees it

    # C drops its own reference right after the call.
    assert fn("call_with_tensor_object")(cb, 4) == "100 1 2 3"
    assert testlib.pft_tensors_alive() == before + 1  # the array keeps it
    assert kept[0].tolist() == [100.0, 1.0, 2.0, 3.0]
    del kept[:], cb
    gc.collect()
    assert testlib.pft_tensors_alive() == before
