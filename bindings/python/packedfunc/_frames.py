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
# `capacity` values, then as many type codes. Each concurrent or nested call
# takes its own frame from a free list (a callback into Python may call
# another Function while C still reads the outer call's arguments), and
# gives it back afterwards. The fast path calls PFFuncCallFrame with it,
# writing only the function and, when the argument types change, the codes
# and their count; the general path calls PFFuncCall with its parts.

MAX_FAST = 8
RET_OFF = PFCallFrame.ret_val.offset
_RCODE_OFF = PFCallFrame.ret_type_code.offset
VALS_OFF = ctypes.sizeof(PFCallFrame)
CODES_OFF = VALS_OFF + 8 * MAX_FAST  # where a MAX_FAST frame's codes begin
RET = struct.Struct("=qi")  # ret_val as int64, ret_type_code
assert _RCODE_OFF == RET_OFF + 8 and VALS_OFF % 8 == 0

# Where the fields are in a frame's views by 8-byte word (ret_val is word 0,
# func FUNC_WORD, value i word VAL_WORD + i) and by 4-byte word
# (ret_type_code is word RCODE_WORD, num_args word NARGS_WORD): storing
# into them one item at a time is cheaper than a struct pack of the call.
VAL_WORD, RCODE_WORD = VALS_OFF // 8, _RCODE_OFF // 4
FUNC_WORD, NARGS_WORD = PFCallFrame.func.offset // 8, PFCallFrame.num_args.offset // 4
# Which of Frame.value_views takes an argument: int64 words or double words.
I64, F64 = 0, 1


class Frame:
    """The memory of one call in progress, and the views that read and
    write it (see above)."""

    __slots__ = (
        "buf",            # the ctypes buffer that owns the memory
        "mem",            # all of it, by byte
        "i64",            # by 8-byte word, as int64
        "f64",            # by 8-byte word, as double
        "i32",            # by 4-byte word, as int32
        "value_views",    # (i64, f64), indexed by I64 or F64
        "head",           # a pointer to the PFCallFrame, for PFFuncCallFrame
        "args",           # pointers to the parts, for PFFuncCall
        "type_codes",
        "ret_val",
        "ret_type_code",
        "codes_off",      # the offset of the type codes
        "capacity",       # how many values it holds
        "plan",           # the Plan whose codes and count it holds, or None
    )

    def __init__(self, capacity=MAX_FAST):
        codes_off = VALS_OFF + 8 * capacity
        # Rounded up to whole 8-byte words, for the views.
        buf = (ctypes.c_char * ((codes_off + 4 * capacity + 7) // 8 * 8))()
        head = PFCallFrame.from_buffer(buf)
        head.args = ctypes.addressof(buf) + VALS_OFF
        head.type_codes = ctypes.addressof(buf) + codes_off
        self.buf = buf
        self.mem = memoryview(buf).cast("B")
        self.i64, self.f64, self.i32 = self.mem.cast("q"), self.mem.cast("d"), self.mem.cast("i")
        self.value_views = (self.i64, self.f64)
        self.head = byref(buf)
        self.args, self.type_codes = byref(buf, VALS_OFF), byref(buf, codes_off)
        self.ret_val, self.ret_type_code = byref(buf, RET_OFF), byref(buf, _RCODE_OFF)
        self.codes_off, self.capacity = codes_off, capacity
        self.plan = None


_free_frames = [Frame() for _ in range(4)]
take_frame = _free_frames.pop
give_frame = _free_frames.append


# ---------------------------------------------------------------------------
# Fast-path plans: a tuple of exact argument types -> a Plan
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

_FAST_TYPES = {int: (I64, INT), bool: (I64, BOOL), float: (F64, FLOAT)}
if STR_DATA_OFFSET is not None:
    _FAST_TYPES[str] = (I64, STR)


class Plan:
    """How the fast path stores arguments of one tuple of exact types."""

    __slots__ = (
        "views",  # for each argument, the frame view that takes it (I64 or F64)
        "codes",  # their type codes, packed as a frame holds them
        "strs",   # the positions of the str arguments
    )

    def __init__(self, types):
        self.views = tuple(_FAST_TYPES[t][0] for t in types)
        self.codes = struct.pack("=%di" % len(types), *(_FAST_TYPES[t][1] for t in types))
        self.strs = tuple(i for i, t in enumerate(types) if t is str)


_plans = {}
plans_get = _plans.get
# The same plans for one argument, by its type, and for two, by the first
# type then the second: lookups by type are cheaper than building and
# hashing a tuple.
plans1 = {}
plans2 = {}
PLANS_MAX = 4096


def make_plan(types):
    """A Plan for these exact types, or False when they need the general
    path."""
    if len(types) > MAX_FAST or any(t not in _FAST_TYPES for t in types):
        plan = False
    else:
        plan = Plan(types)
    if len(_plans) < PLANS_MAX:
        _plans[types] = plan
        if len(types) == 1:
            plans1[types[0]] = plan
        elif len(types) == 2:
            plans2.setdefault(types[0], {})[types[1]] = plan
    return plan
