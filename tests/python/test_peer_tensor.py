"""The peer suite for tensors: tvm-ffi's tests/python/test_tensor.py, the
cases whose behaviour packedfunc shares, re-expressed against the `ffi`
adapter (peer_ffi.py); torch's cases are re-expressed with numpy. Left
out: Shape's cached object identity (tvm-ffi's _tvm_ffi_cached_object) and
its being a tuple subclass (packedfunc's Shape is a sequence equal to a
tuple), overriding the Tensor class (_set_class_tensor), and ROCm/CUDA
devices."""
from typing import NamedTuple

import numpy as np
import pytest

from dlpack_peers import Producer
import peer_ffi


@pytest.fixture
def ffi():
    """tvm-ffi's names over packedfunc's (peer_ffi.py)."""
    return peer_ffi.FFI


def test_attributes_of_a_compact_tensor(ffi):
    data = np.zeros((10, 8, 4, 2), dtype="int16")
    x = ffi.from_dlpack(data)
    assert isinstance(x, ffi.Tensor)
    assert x.shape == (10, 8, 4, 2) and x.ndim == 4
    assert x.numel() == 640 and x.size(0) == 10 and x.size(-1) == 2
    assert x.is_contiguous() and x.strides == (64, 8, 2, 1)
    assert x.dtype == ffi.dtype("int16")
    assert x.device.dlpack_device_type() == ffi.kDLCPU and x.device.index == 0
    np.testing.assert_equal(np.from_dlpack(x), data)


def test_data_ptr_includes_the_offset(ffi):
    data = np.arange(8, dtype="int32")
    assert ffi.from_dlpack(data).data_ptr() == data.ctypes.data
    tail = data[2:]
    assert ffi.from_dlpack(tail).data_ptr() == tail.ctypes.data


def test_an_empty_tensor_is_contiguous_whatever_its_strides(ffi):
    # (Before: False when the producer gave the empty dimension's neighbours
    # other strides than compact ones.)
    assert ffi.from_dlpack(np.zeros((4, 0, 4), dtype="int16")).is_contiguous()
    # (numpy 2.3 gives (0, 0, 0); numpy 1.24 compact strides.)
    odd = Producer(np.zeros((4, 0, 4), dtype="int16"), strides=(0, 0, 0))
    assert ffi.from_dlpack(odd).strides == (0, 0, 0)
    assert ffi.from_dlpack(odd).is_contiguous()


def test_attributes_of_a_strided_view(ffi):
    data = np.zeros((4, 4, 4), dtype="int16")
    x = ffi.from_dlpack(data[1:3, :, 1:3])
    assert x.shape == (2, 4, 2) and x.numel() == 16
    assert x.size(0) == 2 and x.size(-1) == 2
    assert not x.is_contiguous() and x.strides == (16, 4, 1)


def test_a_shape_crosses_as_a_shape(ffi):
    # tvm-ffi's test_shape_object, less the cached object and the tuple base.
    shape = ffi.Shape((10, 8, 4, 2))
    assert isinstance(shape, ffi.Shape) and shape == (10, 8, 4, 2)
    back = ffi.convert(lambda x: x)(shape)
    assert isinstance(back, ffi.Shape) and back == (10, 8, 4, 2)
    again = ffi.convert(shape)
    assert isinstance(again, ffi.Shape) and again == shape


def test_an_array_echoed_through_c_comes_back_as_itself(ffi):
    x = np.arange(128)
    y = ffi.get_global_func("testing.echo")(x)
    assert y is x


def test_a_callback_error_with_an_array_argument(ffi):
    def fails(arr):
        raise ValueError("error XYZ")

    with pytest.raises(ValueError, match="error XYZ"):
        ffi.convert(fails)(np.arange(128))


class Wrapped:
    """Crosses as the tensor it wraps (tvm-ffi: __tvm_ffi_object__)."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __packedfunc_value__(self):
        return self.tensor


class Pair(NamedTuple):
    a: Wrapped
    b: int


class Custom:
    """Crosses as a tuple (tvm-ffi: __tvm_ffi_value__)."""

    def __init__(self, a, b):
        self.a, self.b = a, b

    def __packedfunc_value__(self):
        return (self.a, self.b)


def test_wrappers_cross_as_the_tensor_they_hold(ffi):
    x = ffi.from_dlpack(np.zeros((10, 8, 4, 2), dtype="int32"))
    echo = ffi.get_global_func("testing.echo")
    y = Wrapped(x)
    assert ffi.data_address(echo(y)) == x.data_ptr()
    z = echo(Pair(a=y, b=1))
    assert ffi.data_address(z[0]) == x.data_ptr() and z[1] == 1
    z = echo(Custom(a=y, b=2))
    assert ffi.data_address(z[0]) == x.data_ptr() and z[1] == 2


def test_an_optional_tensor_parameter(ffi):
    # tvm-ffi's optional_tensor_view_has_value: a typed `tensor` parameter
    # takes None as NULL (testing.typed_ndim gives -1 for it).
    ndim = ffi.get_global_func("testing.typed_ndim")
    assert ndim(None) == -1
    assert ndim(np.zeros((128,), dtype="float32")) == 1
