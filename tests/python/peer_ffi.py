"""The thin adaptation under the peer suites (test_peer_*.py).

Those suites re-express, in this project's tests, the checks of tvm-ffi's
own Python tests (tests/python/test_dtype.py, test_tensor.py,
test_string.py) whose behaviour packedfunc shares. They are written
against the names tvm-ffi uses; the `ffi` fixture maps those names onto
packedfunc's API, so that the checks read as the peer's and the mapping is
in one place (each suite's `ffi` fixture returns FFI):

    tvm-ffi                          packedfunc
    dtype(x), dtype.from_dlpack_...  DataType (same constructor and helper)
    Shape                            Shape
    repr "dtype('f32')"              "DataType('f32')"
    the module's dtype constants     DataType(name)
    from_dlpack(x) -> Tensor         from_dlpack(x), seen through TensorView
    Tensor.numel(), .size(i),        math.prod(shape), shape[i],
      .data_ptr(), .device.index     data_ptr (a property), device.device_id
    x.__chandle__() of tensors       the address of their data
"""
import math

import numpy as np

import packedfunc as pf
from packedfunc import _object

# The dtype constants that tvm_ffi exports at module level.
_DTYPE_CONSTANTS = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "bfloat16", "float8_e3m4", "float8_e4m3",
    "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
    "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float4_e2m1fnx2",
)


class DeviceView:
    def __init__(self, device):
        self._d = device

    def dlpack_device_type(self):
        return self._d.device_type

    @property
    def index(self):
        return self._d.device_id

    def __repr__(self):
        return repr(self._d)


class TensorView(pf.Tensor):
    """A pf.Tensor under tvm-ffi's method names (and so a tensor object,
    as tvm-ffi's Tensor is one)."""

    __slots__ = ()

    @property
    def device(self):
        return DeviceView(pf.Tensor.device.__get__(self))

    def numel(self):
        return math.prod(self.shape)

    def size(self, i):
        return self.shape[i]

    def data_ptr(self):
        return pf.Tensor.data_ptr.__get__(self)


class _Ffi:
    dtype = pf.DataType
    DTYPE_REPR = "DataType(%r)"
    Tensor = TensorView
    Shape = pf.Shape
    kDLCPU = 1
    convert = staticmethod(pf.convert)
    get_global_func = staticmethod(pf.get_global_func)

    @staticmethod
    def from_dlpack(x):
        handle = _object.tensor_object_from(x, "from_dlpack's argument")
        return TensorView._adopt(handle.value, _object.TENSOR_TYPE)

    @staticmethod
    def data_address(x):
        """What a tensor's handle identifies: its memory."""
        if isinstance(x, pf.Tensor):
            return pf.Tensor.data_ptr.__get__(x)
        return np.asarray(x).ctypes.data

    def __getattr__(self, name):
        if name in _DTYPE_CONSTANTS:
            return pf.DataType(name)
        raise AttributeError(name)


#: The adapter, which each peer suite's `ffi` fixture gives.
FFI = _Ffi()
