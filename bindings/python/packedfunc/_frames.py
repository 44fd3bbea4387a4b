"""Call frames and fast-path plans behind Function.__call__.

Hot paths avoid isinstance chains and per-call ctypes objects: argument
types are looked up by ``type(x)`` in a cache of plans, arguments are
stored one by one into typed views of preallocated call frames, and C
results are read from those views. Everything else takes the general
path (see _convert). Everything here is private.
"""
import ctypes
import struct

from ._library import TYPE_CODES
from ._mirrors import PFCallFrame

byref = ctypes.byref
INT, FLOAT, BOOL, STR = (TYPE_CODES["int"], TYPE_CODES["float"], TYPE_CODES["bool"],
                        TYPE_CODES["str"])

# ---------------------------------------------------------------------------
# Call frames
# ---------------------------------------------------------------------------
#
# A frame is the memory of one call in progress: a PFCallFrame (ret_val,
# ret_type_code, num_args, func, and pointers to the next two parts), then
# MAX_FAST values, then MAX_FAST type codes. Each concurrent or nested call
# takes its own frame from a free list (a callback into Python may call
# another Function while C still reads the outer call's arguments), and
# gives it back afterwards. The fast path calls PFFuncCallFrame with it,
# writing only the function and, when the argument types change, the codes
# and their count; the general path calls PFFuncCall with its parts.

MAX_FAST = 8
RET_OFF = PFCallFrame.ret_val.offset
_RCODE_OFF = PFCallFrame.ret_type_code.offset
VALS_OFF = ctypes.sizeof(PFCallFrame)
RET = struct.Struct("=qi")  # ret_val as int64, ret_type_code
assert _RCODE_OFF == RET_OFF + 8 and VALS_OFF % 8 == 0


# The frame's views by 8-byte word (ret_val is word 0, func word
# FUNC_WORD, value i word VAL_WORD + i) and by 4-byte word (ret_type_code
# is word RCODE_WORD, num_args word NARGS_WORD): storing into them one item
# at a time is cheaper than a struct pack of the whole call.
Q_VIEW, D_VIEW, I_VIEW, FRAME = 9, 10, 11, 12
VAL_WORD, RCODE_WORD = VALS_OFF // 8, _RCODE_OFF // 4
FUNC_WORD, NARGS_WORD = PFCallFrame.func.offset // 8, PFCallFrame.num_args.offset // 4


def new_frame(capacity=MAX_FAST):
    codes_off = VALS_OFF + 8 * capacity
    # Rounded up to whole 8-byte words, for the views.
    buf = (ctypes.c_char * ((codes_off + 4 * capacity + 7) // 8 * 8))()
    head = PFCallFrame.from_buffer(buf)
    head.args = ctypes.addressof(buf) + VALS_OFF
    head.type_codes = ctypes.addressof(buf) + codes_off
    mv = memoryview(buf).cast("B")
    # [view, args, type_codes, ret_val, ret_type_code, plan whose codes are
    #  in the frame, codes offset, capacity, buffer, int64 view, double
    #  view, int32 view, the whole frame]
    return [mv, byref(buf, VALS_OFF), byref(buf, codes_off), byref(buf, RET_OFF),
            byref(buf, _RCODE_OFF), None, codes_off, capacity, buf, mv.cast("q"), mv.cast("d"),
            mv.cast("i"), byref(buf)]


CODES_OFF = new_frame()[6]
_free_frames = [new_frame() for _ in range(4)]
take_frame = _free_frames.pop
give_frame = _free_frames.append


# ---------------------------------------------------------------------------
# Fast-path plans: a tuple of exact argument types -> (views, codes, strs)
# ---------------------------------------------------------------------------

# A str crosses as the address of its UTF-8 bytes, kept alive by the call:
# CPython's id() of a bytes object is its address, and its characters sit
# at a fixed offset from it. Checked here, once; an interpreter where it
# does not hold sends strings down the general path.
_probe = b"packedfunc"
STR_DATA_OFFSET = ctypes.cast(_probe, ctypes.c_void_p).value - id(_probe)
if ctypes.string_at(id(_probe) + STR_DATA_OFFSET, len(_probe)) != _probe:  # pragma: no cover
    STR_DATA_OFFSET = None
del _probe

_FAST_TYPES = {int: (Q_VIEW, INT), bool: (Q_VIEW, BOOL), float: (D_VIEW, FLOAT)}
if STR_DATA_OFFSET is not None:
    _FAST_TYPES[str] = (Q_VIEW, STR)
_plans = {}
plans_get = _plans.get
# The same plans for one argument, by its type, and for two, by the first
# type then the second: lookups by type are cheaper than building and
# hashing a tuple.
plans1 = {}
plans2 = {}
PLANS_MAX = 4096


def make_plan(types):
    """A plan for these exact types, or False when they need the general
    path: (the frame view that takes each argument, codes bytes, the
    positions of str arguments)."""
    if len(types) > MAX_FAST or any(t not in _FAST_TYPES for t in types):
        plan = False
    else:
        views = tuple(_FAST_TYPES[t][0] for t in types)
        codes = struct.pack("=%di" % len(types), *(_FAST_TYPES[t][1] for t in types))
        plan = (views, codes, tuple(i for i, t in enumerate(types) if t is str))
    if len(_plans) < PLANS_MAX:
        _plans[types] = plan
        if len(types) == 1:
            plans1[types[0]] = plan
        elif len(types) == 2:
            plans2.setdefault(types[0], {})[types[1]] = plan
    return plan
