"""Tensors through DLPack: no copies in either direction, owners kept alive."""
import gc

import numpy as np
import pytest

import packedfunc as pf


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
    from packedfunc import _base
    out, rc = ctypes.c_void_p(), ctypes.c_int()
    vals = (ctypes.c_int64 * 1)(n)
    codes = (ctypes.c_int * 1)(_base.TYPE_CODES["int"])
    f = pf.get_global_func("testing.make_tensor")
    _base.check_call(_base._cdll.PFFuncCall(ctypes.c_void_p(f.handle), vals, codes, 1,
                                            ctypes.byref(out), ctypes.byref(rc)))
    assert rc.value == _base.TYPE_CODES["object"]
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


def test_readonly_array_error_names_position(fn):
    a = np.zeros(3)
    a.setflags(write=False)
    with pytest.raises(TypeError, match="argument 0.*DLPack"):
        fn("fill")(a, 1.0)
