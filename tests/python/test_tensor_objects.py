"""packedfunc.Tensor: its attributes, from_dlpack, and tensors on devices
that numpy cannot view."""
import gc
import sys
import weakref

import numpy as np
import pytest

import packedfunc as pf


def test_from_dlpack_views_a_numpy_array_without_a_copy():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    t = pf.from_dlpack(a)
    assert type(t) is pf.Tensor
    assert t.shape == (3, 4) and t.ndim == 2
    assert t.dtype == pf.DataType("int32")
    assert t.device == pf.Device("cpu", 0)
    assert t.strides == (4, 1) and t.is_contiguous()
    assert t.data_ptr == a.ctypes.data
    assert t.__dlpack_device__() == (1, 0)
    v = np.from_dlpack(t)  # back to numpy: the same memory
    assert v.ctypes.data == a.ctypes.data and (v == a).all()
    a[0, 0] = 99
    assert v[0, 0] == 99
    assert pf.from_dlpack(t) is t


def test_from_dlpack_keeps_the_array_alive():
    class Array(np.ndarray):
        pass

    a = np.arange(5.0).view(Array)
    watch = weakref.ref(a)
    t = pf.from_dlpack(a)
    del a
    gc.collect()
    assert watch() is not None
    del t
    gc.collect()
    assert watch() is None


def test_strides_of_a_view_are_in_elements():
    base = np.arange(24.0).reshape(4, 6)
    t = pf.from_dlpack(base[::2, 1::3])
    assert t.shape == (2, 2)
    assert t.strides == (12, 3)
    assert not t.is_contiguous()
    assert t.data_ptr == base.ctypes.data + 8
    # A dimension of extent 1 may have any stride.
    assert pf.from_dlpack(base[1:2, :]).is_contiguous()
    assert pf.from_dlpack(np.array(1.0, dtype=np.float32)).shape == ()


def test_passing_a_tensor_object_to_c(fn):
    a = np.arange(4.0)
    t = pf.from_dlpack(a)
    back = fn("echo")(t)
    assert isinstance(back, np.ndarray) and back.ctypes.data == a.ctypes.data


@pytest.mark.parametrize("device", [pf.Device("cuda", 1), pf.Device("rocm", 0)])
def test_tensor_on_another_device_comes_back_as_a_tensor(fn, device):
    t = fn("make_device_tensor")(device)
    assert type(t) is pf.Tensor
    assert t.device == device and t.__dlpack_device__() == (device.device_type,
                                                            device.device_id)
    assert t.shape == (2, 3) and t.ndim == 2
    assert t.strides == (3, 1) and t.is_contiguous()  # compact: no strides given
    assert t.dtype == pf.DataType("float32")
    assert t.data_ptr == 0x1000 + 8
    assert "shape=(2, 3)" in repr(t)
    with pytest.raises(TypeError, match="cannot be viewed from numpy"):
        t.numpy()


def test_cpu_tensor_from_c_is_still_a_numpy_array(fn):
    a = fn("make_tensor")(3)
    assert isinstance(a, np.ndarray) and a.tolist() == [0.0, 1.0, 2.0]


def test_released_tensor(fn):
    t = fn("make_device_tensor")(pf.Device("cuda", 0))
    t.__del__()
    assert repr(t) == "<packedfunc.Tensor (released)>"
    with pytest.raises(ValueError, match="the Tensor was released"):
        t.shape


@pytest.mark.parametrize("bad", [3, "x", None, [1.0]], ids=lambda b: type(b).__name__)
def test_from_dlpack_of_something_without_dlpack(bad):
    with pytest.raises(TypeError, match="from_dlpack's argument .* cannot be exported through "
                                        "DLPack"):
        pf.from_dlpack(bad)


def test_from_dlpack_no_leak(testlib):
    a = np.arange(3.0)
    refs = sys.getrefcount(a)
    for _ in range(10_000):
        pf.from_dlpack(a)
    gc.collect()
    assert sys.getrefcount(a) == refs


# ---- numel() and size(dim) (issue 36) -----------------------------------------

def test_numel_and_size():
    t = pf.from_dlpack(np.zeros((2, 3, 4)))
    assert t.numel() == 24
    assert [t.size(d) for d in range(3)] == [2, 3, 4]
    assert [t.size(d) for d in (-1, -2, -3)] == [4, 3, 2]
    assert t.size(np.int64(1)) == 3  # any __index__ integer
    assert t.size() == (2, 3, 4)
    assert pf.from_dlpack(np.array(1.0)).numel() == 1  # a scalar has one element
    assert pf.from_dlpack(np.zeros((3, 0))).numel() == 0


@pytest.mark.parametrize("dim", [3, -4, 1 << 70])
def test_size_of_a_dimension_out_of_range_is_an_index_error(dim):
    t = pf.from_dlpack(np.zeros((2, 3, 4)))
    with pytest.raises(IndexError, match=r"Tensor.size: dimension %d out of range "
                                         r"\(the tensor has 3\)" % dim):
        t.size(dim)


class _IndexGives:
    """An object whose __index__ returns `value`, which need not be an int."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


@pytest.mark.parametrize("dim", [1.0, "1", True, _IndexGives("0"), _IndexGives(0.5)],
                         ids=["float", "str", "bool", "index-gives-str", "index-gives-float"])
def test_size_of_a_non_integer_dimension_is_a_type_error(dim):
    # (Before, for an __index__ that returns no int: Python's own TypeError
    # from a comparison or a tuple index, naming neither Tensor.size nor
    # the dimension.)
    with pytest.raises(TypeError, match="Tensor.size: the dimension must be an integer"):
        pf.from_dlpack(np.zeros(2)).size(dim)


def test_numel_and_size_of_a_released_tensor(fn):
    t = fn("make_device_tensor")(pf.Device("cuda", 0))
    t.__del__()
    for call in (t.numel, lambda: t.size(0)):
        with pytest.raises(ValueError, match="the Tensor was released"):
            call()
