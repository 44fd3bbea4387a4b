"""DLPack 1.x both ways, with the read-only flag, and DLPack 0.x kept.

Consumed here: a producer that speaks DLPack 1.x (asked
__dlpack__(max_version=...), answering a "dltensor_versioned" capsule) is
taken by from_dlpack and as an argument; its read-only flag is honoured (a
read-only export never reaches C as a writable DLTensor*). Produced here:
a packedfunc Tensor gives a versioned capsule to a consumer that passes
max_version >= (1, 0), with the read-only flag of a read-only tensor, and
an unversioned one to any other (numpy 1.24's from_dlpack). Capsules are
renamed and deleters run exactly once, as the protocol says. The peers are
the ctypes producers and consumers of dlpack_peers (numpy 1.24 cannot
speak DLPack 1.x).
"""
import gc
import sys

import numpy as np
import pytest

import packedfunc as pf
from dlpack_peers import (EXPORTS, FLAG_IS_SUBBYTE_TYPE_PADDED, FLAG_READ_ONLY, LegacyProducer,
                          Producer, Taken, name_of)


@pytest.fixture(autouse=True)
def exports_balance():
    """Every export made in a test is deleted exactly once by its end."""
    gc.collect()
    before = EXPORTS.serial
    stray = EXPORTS.stray
    yield
    gc.collect()
    made = range(before + 1, EXPORTS.serial + 1)
    assert [s for s in made if s in EXPORTS.live] == [], "exports never deleted"
    assert EXPORTS.stray == stray, "deleters that ran twice"


# ---- consuming DLPack 1.x --------------------------------------------------------------

def test_from_dlpack_takes_a_versioned_export_and_renames_the_capsule():
    a = np.arange(6.0).reshape(2, 3)
    p = Producer(a)
    names = len(EXPORTS.capsule_names)
    t = pf.from_dlpack(p)
    assert p.max_versions and p.max_versions[0][0] == 1  # asked for DLPack 1.x
    assert (t.shape, t.dtype, t.data_ptr, t.read_only) == ((2, 3), "float64", a.ctypes.data,
                                                           False)
    assert EXPORTS.capsule_names[names:] == [b"used_dltensor_versioned"]  # taken over
    serial = EXPORTS.serial
    assert serial in EXPORTS.live  # the Tensor owns the export now
    view = t.numpy()
    view[0, 0] = 42.0
    assert a[0, 0] == 42.0 and view.flags.writeable
    del t, view
    gc.collect()
    assert serial not in EXPORTS.live


def test_from_dlpack_of_a_read_only_export_is_a_read_only_tensor():
    a = np.arange(4.0)
    t = pf.from_dlpack(Producer(a, read_only=True))
    assert t.read_only and "read-only" in repr(t)
    view = t.numpy()
    assert not view.flags.writeable and view.tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="read-only"):
        view[0] = 1.0


def test_a_producer_without_max_version_is_asked_again_without_it(fn):
    a = np.arange(3.0)
    t = pf.from_dlpack(LegacyProducer(a))
    assert t.data_ptr == a.ctypes.data and not t.read_only
    fn("fill")(LegacyProducer(a), 5.0)  # as an argument, too
    assert a.tolist() == [5.0, 5.0, 5.0]


def test_a_producer_may_answer_a_versioned_request_unversioned(fn):
    a = np.arange(3.0)
    p = Producer(a, always_legacy=True)
    assert pf.from_dlpack(p).data_ptr == a.ctypes.data
    fn("fill")(p, 2.0)
    assert a.tolist() == [2.0, 2.0, 2.0]


def test_a_writable_versioned_argument_is_a_borrowed_dltensor(fn):
    a = np.zeros(4)
    p = Producer(a)
    assert fn("type_name")(p) == "tensor"
    fn("fill")(p, 3.0)  # C writes through the DLTensor inside the versioned struct
    assert a.tolist() == [3.0] * 4
    info = fn("tensor_info")(p).split()
    assert info[:4] == ["1", "2", "64", "1"] and int(info[4]) == a.ctypes.data
    assert fn("echo")(p) is p  # the same object comes back, as for numpy arrays
    seen = []
    fn("call")(seen.append, p)
    assert seen == [p]


def test_a_read_only_argument_never_reaches_c_as_writable(fn, testlib):
    a = np.arange(3.0)
    p = Producer(a, read_only=True)
    # A packed function that wants a DLTensor* gets a read-only tensor
    # object instead, and a typed DLTensor* parameter refuses it.
    assert fn("type_name")(p) == "object"
    with pytest.raises(TypeError, match="argument 0 must be tensor, not object"):
        fn("fill")(p, 9.0)
    with pytest.raises(TypeError, match="read-only tensor object"):
        fn("typed_ndim")(p)
    assert a.tolist() == [0.0, 1.0, 2.0]
    back = fn("echo")(p)  # comes back as a read-only view of the same memory
    assert isinstance(back, np.ndarray) and not back.flags.writeable
    assert back.ctypes.data == a.ctypes.data
    seen = []
    fn("call")(seen.append, p)
    assert not seen[0].flags.writeable and seen[0].tolist() == [0.0, 1.0, 2.0]
    # The same array, writable, is written.
    fn("fill")(Producer(a), 9.0)
    assert a.tolist() == [9.0] * 3


def test_a_read_only_tensor_that_reached_python_goes_back_as_one(fn, testlib):
    # numpy 1.24 refuses to export a read-only array (DLPack 0.x cannot say
    # read-only): such an array crosses to C as a read-only tensor object,
    # whichever way it goes (an argument, a callback's result, an item,
    # from_dlpack), viewing the same memory.
    gc.collect()
    alive = testlib.pft_tensors_alive()
    c_owned = pf.from_dlpack(Producer(fn("make_tensor")(3), read_only=True))
    back = fn("echo")(c_owned)
    assert not back.flags.writeable and back.tolist() == [0.0, 1.0, 2.0]
    plain = np.arange(4.0)
    plain.flags.writeable = False
    refs = sys.getrefcount(plain)
    for ro, where in ((back, c_owned.data_ptr), (back[1:], c_owned.data_ptr + 8),
                      (plain, plain.ctypes.data)):
        assert fn("type_name")(ro) == "object"
        with pytest.raises(TypeError, match="read-only tensor object"):
            fn("typed_ndim")(ro)
        again = fn("echo")(ro)
        assert not again.flags.writeable and again.ctypes.data == where
        assert again.tolist() == ro.tolist()
        assert fn("call")(lambda x: x, ro).ctypes.data == where  # an identity callback
        t = pf.from_dlpack(ro)
        assert t.read_only and t.data_ptr == where and t.shape == ro.shape
        item = pf.List([ro])[0]
        assert not item.flags.writeable and item.ctypes.data == where
    del back, c_owned, t, again, item, ro
    gc.collect()
    assert testlib.pft_tensors_alive() == alive  # every crossing released its tensor
    assert sys.getrefcount(plain) == refs  # and its array
    # What numpy cannot export even writable is refused, naming the argument.
    fields = np.zeros(3, dtype=[("a", "<f8"), ("b", "u1")])["a"]  # 9-byte strides
    fields.flags.writeable = False
    with pytest.raises(TypeError, match=r"argument 0 \(ndarray\) cannot be exported through "
                       "DLPack: .*strides"):
        fn("type_name")(fields)


def test_padded_sub_byte_elements_cross_as_a_tensor_object(fn):
    # A DLTensor* cannot say that 4-bit elements are padded to bytes: the
    # tensor object (which keeps the flag) crosses instead.
    a = np.zeros(4, dtype=np.uint8)
    fp4 = (17, 4, 1)  # kDLFloat4_e2m1fn
    padded = Producer(a, dtype=fp4, flags=FLAG_IS_SUBBYTE_TYPE_PADDED)
    assert fn("type_name")(padded) == "object"
    assert fn("type_name")(Producer(a, dtype=fp4)) == "tensor"  # packed: a DLTensor*
    t = pf.from_dlpack(Producer(a, dtype=fp4, flags=FLAG_IS_SUBBYTE_TYPE_PADDED))
    assert t.dtype == "float4_e2m1fn" and isinstance(t, pf.Tensor)
    with pytest.raises(BufferError, match="padded"):
        t.__dlpack__()
    taken = Taken(t.__dlpack__(max_version=(1, 0)))
    assert taken.flags == FLAG_IS_SUBBYTE_TYPE_PADDED
    taken.release()


@pytest.mark.parametrize("version", [(2, 0), (0, 9)])
def test_a_major_version_other_than_1_is_refused_and_freed(fn, version):
    p = Producer(np.zeros(2), version=version)
    with pytest.raises(TypeError, match=r"argument 0 \(Producer\) cannot be exported through "
                                        r"DLPack: its DLPack version %d\.%d is not supported"
                                        % version):
        fn("fill")(p, 1.0)
    with pytest.raises(TypeError, match="from_dlpack's argument .*version %d.%d" % version):
        pf.from_dlpack(p)
    # (The fixture checks that each export was deleted once, by its capsule.)


def test_producer_errors_name_the_argument(fn):
    class Broken:
        def __dlpack__(self, stream=None, max_version=None):
            raise BufferError("cannot export this")

    with pytest.raises(TypeError, match="argument 1 .*cannot be exported through DLPack: "
                                        "cannot export this"):
        fn("echo")(1, Broken())

    class NotACapsule:
        def __dlpack__(self, stream=None, max_version=None):
            return 42

    with pytest.raises(TypeError, match="not a DLPack capsule named 'dltensor' or "
                                        "'dltensor_versioned'"):
        pf.from_dlpack(NotACapsule())


def test_numpy_arrays_still_use_the_unversioned_protocol(fn):
    # numpy 1.24 takes no max_version: its arrays keep crossing as before.
    a = np.zeros(3)
    fn("fill")(a, 1.5)
    assert a.tolist() == [1.5] * 3
    assert pf.from_dlpack(a).data_ptr == a.ctypes.data


# ---- producing ----------------------------------------------------------------------

def test_tensor_exports_versioned_when_asked_and_unversioned_otherwise():
    a = np.arange(5.0)
    t = pf.from_dlpack(a)
    cap = t.__dlpack__(max_version=(1, 0))
    assert name_of(cap) == b"dltensor_versioned"
    taken = Taken(cap)
    assert name_of(cap) == b"used_dltensor_versioned"
    assert taken.version[0] == 1 and taken.flags == 0
    assert taken.data_ptr() == a.ctypes.data and taken.dl_tensor.ndim == 1
    taken.release()
    for max_version in (None, (0, 8)):
        cap = t.__dlpack__(max_version=max_version)
        assert name_of(cap) == b"dltensor"
        taken = Taken(cap)
        assert taken.data_ptr() == a.ctypes.data
        taken.release()
    assert t.__dlpack_device__() == (1, 0)


def test_numpy_consumes_the_unversioned_export():
    a = np.arange(4.0)
    t = pf.from_dlpack(a)
    b = np.from_dlpack(t)  # numpy 1.24 calls __dlpack__() without max_version
    assert b.tolist() == a.tolist() and b.ctypes.data == a.ctypes.data


def test_read_only_tensor_exports_only_versioned_with_the_flag():
    t = pf.from_dlpack(Producer(np.arange(3.0), read_only=True))
    taken = Taken(t.__dlpack__(max_version=(1, 1)))
    assert taken.flags & FLAG_READ_ONLY
    taken.release()
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__()
    with pytest.raises(BufferError, match="read-only"):
        np.from_dlpack(t)


def test_a_capsule_nobody_took_frees_its_export(testlib):
    gc.collect()
    before = testlib.pft_tensors_alive()
    t = pf.from_dlpack(pf.get_global_func("testing.make_tensor")(3))
    assert testlib.pft_tensors_alive() == before + 1
    caps = [t.__dlpack__(max_version=(1, 0)), t.__dlpack__()]
    del t
    gc.collect()
    assert testlib.pft_tensors_alive() == before + 1  # the exports hold it
    del caps  # their destructors run the deleters
    gc.collect()
    assert testlib.pft_tensors_alive() == before


def test_a_consumers_error_is_kept_and_the_capsule_still_frees_its_export(testlib,
                                                                          monkeypatch):
    # numpy 1.24 cannot take a bfloat16 tensor: it raises its own error and
    # drops the capsule, whose destructor runs while that error is pending.
    ignored = []
    monkeypatch.setattr(sys, "unraisablehook", ignored.append)
    gc.collect()
    before = testlib.pft_tensors_alive()
    t = pf.from_dlpack(Producer(pf.get_global_func("testing.make_tensor")(4), dtype=(4, 16, 1)))
    serial = EXPORTS.serial
    for _ in range(3):
        if pf.backend == "cext":  # numpy's own error, as itself
            with pytest.raises(RuntimeError, match="Unsupported dtype in DLTensor"):
                np.from_dlpack(t)
        else:
            # A ctypes callback cannot leave an exception pending: numpy
            # returns without one (SystemError), and its own error goes to
            # sys.unraisablehook rather than nowhere.
            with pytest.raises(SystemError):
                np.from_dlpack(t)
            assert "Unsupported dtype" in str(ignored.pop().exc_value)
    assert ignored == []
    del t
    gc.collect()
    # Each destructor ran its deleter: the export and the C tensor are freed.
    assert serial not in EXPORTS.live
    assert testlib.pft_tensors_alive() == before


def test_a_taken_capsule_is_not_freed_by_its_destructor(testlib):
    gc.collect()
    before = testlib.pft_tensors_alive()
    t = pf.from_dlpack(pf.get_global_func("testing.make_tensor")(3))
    cap = t.__dlpack__(max_version=(1, 0))
    taken = Taken(cap)
    del cap, t
    gc.collect()
    assert testlib.pft_tensors_alive() == before + 1  # the consumer owns it
    taken.release()
    assert testlib.pft_tensors_alive() == before


def test_a_round_trip_through_a_versioned_producer_keeps_the_flag():
    t = pf.from_dlpack(Producer(np.arange(2.0), read_only=True))
    again = pf.from_dlpack(_Reexport(t))
    assert again.read_only and again.data_ptr == t.data_ptr


class _Reexport:
    """A consumer-producer that hands on a Tensor's versioned capsule."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None, max_version=None):
        return self.t.__dlpack__(max_version=max_version)


@pytest.mark.parametrize("kwargs,exc,match", [
    ({"max_version": 1}, TypeError, "max_version must be a \\(major, minor\\) tuple"),
    ({"max_version": (1,)}, TypeError, "max_version must be"),
    ({"dl_device": (2, 0)}, BufferError, "not dl_device \\(2, 0\\)"),
    ({"copy": True}, BufferError, "copy=True is not supported"),
    ({"stream": 5}, ValueError, "stream must be None for CPU memory"),
])
def test_dlpack_arguments_that_cannot_be_honoured(kwargs, exc, match):
    t = pf.from_dlpack(np.zeros(2))
    with pytest.raises(exc, match=match):
        t.__dlpack__(**kwargs)
    # What can be honoured is.
    for ok in ({"dl_device": (1, 0)}, {"copy": False}, {"stream": None}, {"stream": -1}):
        Taken(t.__dlpack__(**ok)).release()


def test_tensor_results_numpy_has_no_dtype_for_come_as_tensors(fn):
    # A float8 tensor from C is a pf.Tensor (numpy has no float8), not an error.
    a = np.zeros(3, dtype=np.uint8)
    back = fn("echo")(pf.from_dlpack(Producer(a, dtype=(10, 8, 1))))
    assert isinstance(back, pf.Tensor) and back.dtype == "float8_e4m3fn"
    with pytest.raises(TypeError, match="numpy has no dtype for it"):
        back.numpy()


# ---- leaks ------------------------------------------------------------------------------

def _tensor_kinds(fn):
    """One conversion of each kind of tensor crossing, by name."""
    a = np.zeros(4)
    type_name = fn("type_name")
    writable, read_only = Producer(a), Producer(a, read_only=True)
    c_owned = pf.from_dlpack(fn("make_tensor")(4))  # a C tensor: its release is counted

    def export_versioned():
        Taken(c_owned.__dlpack__(max_version=(1, 1))).release()

    return {
        "numpy argument": lambda: type_name(a),
        "versioned argument": lambda: type_name(writable),
        "read-only argument": lambda: type_name(read_only),
        "from_dlpack of a versioned export": lambda: pf.from_dlpack(read_only),
        "versioned export, taken": export_versioned,
        "unversioned export, dropped": lambda: c_owned.__dlpack__(),
    }


@pytest.mark.parametrize("kind", ["numpy argument", "versioned argument", "read-only argument",
                                  "from_dlpack of a versioned export", "versioned export, taken",
                                  "unversioned export, dropped"])
def test_no_leak_over_5000_tensor_conversions(kind, fn, testlib):
    # The export counts are exact, and a block leaked per conversion is
    # 5000 more than the bound: 5000 conversions find what 100000 did.
    gc.collect()
    alive = testlib.pft_tensors_alive()
    EXPORTS.record = False
    try:
        cycle = _tensor_kinds(fn)[kind]
        for _ in range(1000):
            cycle()
        gc.collect()
        blocks, exports = sys.getallocatedblocks(), EXPORTS.alive()
        for _ in range(5000):
            cycle()
        gc.collect()
        assert EXPORTS.alive() == exports  # every producer's export was deleted
        assert sys.getallocatedblocks() - blocks < 1000
        del cycle
    finally:
        EXPORTS.record = True
    gc.collect()
    assert testlib.pft_tensors_alive() == alive  # and every export of a C tensor
