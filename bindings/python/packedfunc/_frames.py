"""Call frames and fast-path plans behind Function.__call__.

Hot paths avoid isinstance chains and per-call ctypes objects: argument
types are looked up by ``type(x)`` in a cache of precompiled ``struct``
packers, arguments are written into preallocated call frames, and C results
are read with ``struct.unpack_from``. Everything else takes the general
path (see _convert). Everything here is private.
"""
import ctypes
import struct

from ._library import TYPE_CODES

byref = ctypes.byref
INT, FLOAT, BOOL = TYPE_CODES["int"], TYPE_CODES["float"], TYPE_CODES["bool"]

# ---------------------------------------------------------------------------
# Call frames
# ---------------------------------------------------------------------------
#
# A frame is the memory of one call in progress: ret_val (8 bytes),
# ret_type_code (4, then 4 of padding), MAX_FAST values, MAX_FAST type codes.
# Each concurrent or nested call takes its own frame from a free list (a
# callback into Python may call another Function while C still reads the
# outer call's arguments), and gives it back afterwards.

MAX_FAST = 8
RET_OFF, _RCODE_OFF, VALS_OFF = 0, 8, 16
RET = struct.Struct("=qi")  # ret_val as int64, ret_type_code


def new_frame(capacity=MAX_FAST):
    codes_off = VALS_OFF + 8 * capacity
    buf = (ctypes.c_char * (codes_off + 4 * capacity))()
    mv = memoryview(buf).cast("B")
    # [view, args, type_codes, ret_val, ret_type_code, plan whose codes are
    #  in the frame, codes offset, capacity, buffer]
    return [mv, byref(buf, VALS_OFF), byref(buf, codes_off), byref(buf, RET_OFF),
            byref(buf, _RCODE_OFF), None, codes_off, capacity, buf]


CODES_OFF = new_frame()[6]
_free_frames = [new_frame() for _ in range(4)]
take_frame = _free_frames.pop
give_frame = _free_frames.append


# ---------------------------------------------------------------------------
# Fast-path plans: a tuple of exact argument types -> (packer, codes)
# ---------------------------------------------------------------------------

_FAST_FORMATS = {int: ("q", INT), bool: ("q", BOOL), float: ("d", FLOAT)}
_plans = {}
plans_get = _plans.get
PLANS_MAX = 4096


def make_plan(types):
    """A (pack_into, codes bytes) pair for these exact types, or False when
    they need the general path."""
    if len(types) > MAX_FAST or any(t not in _FAST_FORMATS for t in types):
        plan = False
    else:
        fmt = "=" + "".join(_FAST_FORMATS[t][0] for t in types)
        codes = struct.pack("=%di" % len(types), *(_FAST_FORMATS[t][1] for t in types))
        plan = (struct.Struct(fmt).pack_into, codes)
    if len(_plans) < PLANS_MAX:
        _plans[types] = plan
    return plan
