"""The Python class of tensors and devices that come from C:
set_tensor_class and set_device_class (tvm-ffi's _set_class_tensor and
_set_class_device), on both backends."""
import threading

import numpy as np
import pytest

import packedfunc as pf


class MyTensor(pf.Tensor):
    def total(self):
        return float(np.from_dlpack(self).sum())


class MyDevice(pf.Device):
    __slots__ = ()

    def label(self):
        return "my " + str(self)


@pytest.fixture
def chosen():
    """Restores the default classes whatever the test did."""
    yield
    pf.set_tensor_class(None)
    pf.set_device_class(None)


def test_tensors_from_c_come_as_the_chosen_subclass(fn, chosen):
    assert pf.get_tensor_class() is None
    assert isinstance(fn("make_tensor")(3), np.ndarray)  # the default
    assert pf.set_tensor_class(MyTensor) is None
    assert pf.get_tensor_class() is MyTensor
    t = fn("make_tensor")(4)
    assert type(t) is MyTensor and t.total() == 6.0 and t.shape == (4,)
    # A Tensor passed to C and returned, and from_dlpack, make one too.
    x = pf.from_dlpack(np.arange(3.0))
    assert type(x) is MyTensor
    assert type(fn("echo")(x)) is MyTensor
    # A callback that C gives a tensor object receives one.
    seen = []
    fn("call")(lambda t: seen.append(type(t)), fn("make_tensor")(2))
    assert seen == [MyTensor]
    # pf.Tensor itself: every tensor object comes as a Tensor, never numpy.
    assert pf.set_tensor_class(pf.Tensor) is MyTensor
    assert type(fn("make_tensor")(2)) is pf.Tensor
    # None restores the default.
    assert pf.set_tensor_class(None) is pf.Tensor
    assert isinstance(fn("make_tensor")(2), np.ndarray)
    assert type(pf.from_dlpack(np.arange(3.0))) is pf.Tensor


def test_devices_from_c_come_as_the_chosen_subclass(fn, chosen):
    assert pf.get_device_class() is None
    assert type(fn("echo")(pf.Device("cuda", 1))) is pf.Device
    assert pf.set_device_class(MyDevice) is None
    d = fn("echo")(pf.Device("cuda", 1))
    assert type(d) is MyDevice and d == pf.Device("cuda", 1) and d.label() == "my cuda:1"
    assert type(pf.from_dlpack(np.zeros(2)).device) is MyDevice
    assert pf.set_device_class(None) is MyDevice
    assert type(fn("echo")(pf.Device("cpu", 0))) is pf.Device


def test_device_factory_makes_the_chosen_class(chosen):
    # pf.device takes what Device takes, and makes the chosen class, as
    # devices from C are; Device(...) stays a Device. repr names the factory.
    d = pf.device("cuda:1")
    assert type(d) is pf.Device and d == pf.Device("cuda", 1) == pf.device("cuda", 1)
    assert repr(d) == "device(type='cuda', index=1)" and str(d) == "cuda:1"
    assert eval(repr(d), {"device": pf.device}) == d
    pf.set_device_class(MyDevice)
    d = pf.device("cuda", 1)
    assert type(d) is MyDevice and d == pf.Device("cuda", 1)
    assert type(pf.Device("cuda", 1)) is pf.Device
    with pytest.raises(ValueError, match="Device: unknown device type 'llvm'"):
        pf.device("llvm")
    with pytest.raises(TypeError, match="Device: device_id"):
        pf.device("cuda", "x")


@pytest.mark.parametrize("setter, base", [(pf.set_tensor_class, "Tensor"),
                                          (pf.set_device_class, "Device")])
def test_what_is_no_subclass_is_refused(fn, chosen, setter, base):
    for bad in (int, object, "x", 1, pf.Object,
                pf.Device if base == "Tensor" else pf.Tensor, np.ndarray):
        with pytest.raises(TypeError, match=r"%s: argument 'cls' must be packedfunc\.%s or a "
                                            r"subclass of it, or None, not " % (setter.__name__,
                                                                                base)):
            setter(bad)
    # Nothing changed.
    assert pf.get_tensor_class() is None and pf.get_device_class() is None
    assert isinstance(fn("make_tensor")(2), np.ndarray)


def test_the_choice_is_safe_to_change_while_other_threads_call(fn, chosen):
    make = fn("make_tensor")
    kinds, errors = set(), []

    def work():
        try:
            for _ in range(200):
                kinds.add(type(make(2)))
        except BaseException as err:  # pragma: no cover (reported below)
            errors.append(err)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for i in range(200):
        pf.set_tensor_class(MyTensor if i % 2 else None)
    for t in threads:
        t.join()
    assert not errors and kinds <= {MyTensor, np.ndarray}
