#!/usr/bin/env python3
"""Speed of the Python binding against floors measured in the same run.

Every row pairs a packedfunc operation with a baseline doing the same work:
the floor, a hand-written METH_FASTCALL extension function (bench_floor.c;
for callbacks, C calling Python through PyObject_Vectorcall), or raw
ctypes calling a plain C function of bench/bench_pylib.c (argtypes and
restype set). Trials of the two alternate, and each ratio is taken trial by
trial, so that drifting machine load hits both sides alike. The rows and
their targets depend on the backend in use (packedfunc.backend, chosen by
$PACKEDFUNC_BACKEND); row ids end with it.

    /usr/bin/python3 bench/bench_python.py [--quick] [--json] [--trials N] [--only PREFIX...]
    /usr/bin/python3 bench/bench_python.py --count ID N [ID N...]

--count runs one side of a row N times, for each ID in order, and nothing
else, for callgrind (report.py): ID is a row id without the backend
("py_add_keep"), or with "_base" appended for its baseline. Before each run
and after the last it calls the C library's bench_count_mark(), which
makes callgrind write a count and start the next.

Needs $BUILD/bench/libpf_benchlib.so and the floor extension
$BUILD/bench/pf_bench_floor*.so (built by `make bench`).
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))

import numpy as np  # noqa: E402
import packedfunc as pf  # noqa: E402


def load_benchlib():
    path = os.environ.get("PF_BENCHLIB") or os.path.join(
        ROOT, os.environ.get("BUILD", "build"), "bench", "libpf_benchlib.so")
    if not os.path.exists(path):
        sys.exit("bench_python: %s is missing; run `make bench` first" % path)
    lib = ctypes.CDLL(path)
    if lib.bench_init() != 0:
        sys.exit("bench_python: bench_init failed")
    return lib


def load_floor():
    build = os.path.join(ROOT, os.environ.get("BUILD", "build"), "bench")
    sys.path.insert(0, build)
    try:
        import pf_bench_floor
    except ImportError as err:
        sys.exit("bench_python: the floor extension is missing in %s (%s); run `make bench` "
                 "first" % (build, err))
    finally:
        sys.path.remove(build)
    return pf_bench_floor


def raw(lib, name, restype, *argtypes):
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    return fn


def per_op_ns(run, loops):
    start = time.perf_counter()
    run(loops)
    return (time.perf_counter() - start) / loops * 1e9


def measure(case, base, loops, trials):
    """Alternates trials of case and base (the order flipping each time)."""
    a, b = [], []
    case(loops // 10)
    base(loops // 10)
    for t in range(trials):
        if t % 2:
            a.append(per_op_ns(case, loops))
            b.append(per_op_ns(base, loops))
        else:
            b.append(per_op_ns(base, loops))
            a.append(per_op_ns(case, loops))
    ratios = [x / y for x, y in zip(a, b)]

    def spread(v):
        return [statistics.median(v), min(v), max(v)]

    return spread(a), spread(b), spread(ratios)


def loop(fn, *args):
    def run(n):
        for _ in range(n):
            fn(*args)
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="short trials (a smoke run)")
    ap.add_argument("--json", action="store_true", help="one JSON object per row")
    ap.add_argument("--only", nargs="*", default=(), metavar="PREFIX",
                    help="run only the rows whose id starts with one of these")
    ap.add_argument("--count", nargs="+", metavar="ID N",
                    help="run one side of a row N times, for each ID (for callgrind)")
    args = ap.parse_args()
    trials = 3 if args.quick else args.trials
    loops = 5000 if args.quick else 100000

    lib = load_benchlib()
    g = pf.get_global_func
    add, noarg, strlen_, first, call_n = (g("bench.add"), g("bench.noarg"), g("bench.strlen"),
                                         g("bench.first"), g("bench.call_n"))
    # The same C functions marked kPFFuncNonBlocking: calls keep the GIL.
    add_k, noarg_k, strlen_k, call_n_k = (g("bench.add_quick"), g("bench.noarg_quick"),
                                          g("bench.strlen_quick"), g("bench.call_n_quick"))
    assert not (add_k.release_gil or noarg_k.release_gil or strlen_k.release_gil
                or call_n_k.release_gil) and add.release_gil
    r_add = raw(lib, "raw_add", ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
    r_noarg = raw(lib, "raw_noarg", ctypes.c_int64)
    r_strlen = raw(lib, "raw_strlen", ctypes.c_int64, ctypes.c_char_p)
    r_first = raw(lib, "raw_first", ctypes.c_double, ctypes.c_void_p)
    CB = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
    r_call_n = raw(lib, "raw_call_n", ctypes.c_int64, CB, ctypes.c_int64)

    def py_add(a, b):
        return a + b

    raw_cb = CB(py_add)
    packed_cb = pf.convert(py_add)
    arr = np.arange(4, dtype=np.float64) + 1.5

    # Both sides of every row compute the same thing.
    assert add(1, 2) == r_add(1, 2) == 3
    assert noarg() == r_noarg() == 7
    assert strlen_("hello") == r_strlen(b"hello") == 5
    assert first(arr) == r_first(arr.ctypes.data) == 1.5
    assert call_n(packed_cb, 10) == r_call_n(raw_cb, 10) == call_n_k(packed_cb, 10) == 90
    assert add_k(1, 2) == 3 and noarg_k() == 7 and strlen_k("hello") == 5

    # Containers: 1,000 ints as a list (an Array, read in C through the bulk
    # reader) against the same ints as a numpy array (one DLTensor, read in
    # place) and against the floor reading the list itself; an echo of the
    # list; a returned Array read in Python; a dict of 100 str -> int
    # echoed, and a returned Map's items read in Python.
    n_items = 1000
    array_sum, tensor_sum, make_array, echo = (g("bench.array_sum"), g("bench.tensor_sum"),
                                               g("bench.make_array"), g("bench.echo"))
    ints = list(range(n_items))
    ints_np = np.arange(n_items, dtype=np.int64)
    from_c = make_array(n_items)
    n_entries = 100
    str_ints = {"key%d" % i: i for i in range(n_entries)}
    map_c = echo(str_ints)
    assert array_sum(ints) == tensor_sum(ints_np) == sum(ints)
    assert [x for x in from_c] == [x for x in ints]
    assert list(echo(ints)) == ints and dict(map_c.items()) == str_ints

    n_cb = 20 if args.quick else 200  # callbacks per C call, for the per-callback rows
    floor = load_floor()
    assert floor.add(1, 2) == 3 and floor.noarg() == 7 and floor.strlen("hello") == 5
    assert floor.call_n(py_add, 10) == 90
    assert floor.list_sum(ints) == sum(ints) and floor.list_echo(ints) == ints

    def per_callback(fn, cb):
        def run(n):
            for _ in range(n):
                fn(cb, n_cb)
        return run

    # Registered object types (bench_pylib.c's bench.Pair, two int64
    # fields and a no-argument method) against a Python class with the same
    # __slots__: a field read, a method call, an instance made.
    Pair = pf.get_class("bench.Pair")

    class SlotsPair:
        __slots__ = ("a", "b")

        def __init__(self, a, b):
            self.a = a
            self.b = b

    pair, slots_pair = Pair(3, 4), SlotsPair(3, 4)
    assert (pair.a, pair.b, pair.sum()) == (slots_pair.a, slots_pair.b, 7)

    def read_a(obj):
        def run(n):
            for _ in range(n):
                obj.a
        return run

    def call_sum(obj):
        def run(n):
            for _ in range(n):
                obj.sum()
        return run

    def call_floor_noarg(n):
        for _ in range(n):
            floor.noarg()

    def make(cls):
        def run(n):
            for _ in range(n):
                cls(1, 2)
        return run

    backend = pf.backend
    fastcall = "a METH_FASTCALL extension function doing the same (the floor)"
    c_calls_python = "C calling the Python function through PyObject_Vectorcall (the floor)"
    # (id, what, baseline, case, baseline run, target, operations per run)
    rows = []

    def floor_rows(suffix, how, fns, targets):
        """The calls f(1, 2), f(), f("hello") and a C -> Python callback of
        the functions `fns` (add, noarg, strlen, call_n), each against the
        floor doing the same, with `targets` (0: reported)."""
        f_add, f_noarg, f_str, f_call_n = fns
        return [
            ("py_add" + suffix, "Python f(1, 2) of a packed C add" + how, fastcall,
             loop(f_add, 1, 2), loop(floor.add, 1, 2), targets[0], 1),
            ("py_noarg" + suffix, "Python f() of a packed C function" + how, fastcall,
             loop(f_noarg), loop(floor.noarg), targets[1], 1),
            ("py_str" + suffix, "Python f(\"hello\"), packed strlen" + how, fastcall,
             loop(f_str, "hello"), loop(floor.strlen, "hello"), targets[2], 1),
            ("py_callback" + suffix, "C calls a Python callback, per call" + how, c_calls_python,
             per_callback(f_call_n, packed_cb), per_callback(floor.call_n, py_add), targets[3],
             n_cb),
        ]

    # Issue 34: calls of functions that keep the GIL (marked
    # kPFFuncNonBlocking), and the C -> Python callback from such a call,
    # which then needs no GIL switch, as the floor's loop needs none.
    released = (add, noarg, strlen_, call_n)
    kept = (add_k, noarg_k, strlen_k, call_n_k)
    keeping = " (keeping the GIL)"
    if backend == "cext":
        rows += floor_rows("_keep", keeping, kept, (1.5, 1.8, 1.8, 1.8))
        rows += floor_rows("", "", released, (2.2, 3.0, 4.0, 2.5))
        rows += [
            ("py_numpy", "Python f(array): numpy array as a DLTensor",
             "raw ctypes f(arr.ctypes.data)", loop(first, arr),
             lambda n: [r_first(arr.ctypes.data) for _ in range(n)], 3.0, 1),
        ]
    else:
        rows += [
            ("py_add", "Python f(1, 2) of a packed C add", "raw ctypes add(1, 2) with argtypes",
             loop(add, 1, 2), loop(r_add, 1, 2), 2.5, 1),
            ("py_str", "Python f(\"hello\"), packed strlen", "Python f(1, 2) of the packed add, "
             "same backend", loop(strlen_, "hello"), loop(add, 1, 2), 1.5, 1),
            ("py_callback", "C calls a Python callback, per call",
             "C calls a raw ctypes CFUNCTYPE callback", per_callback(call_n, packed_cb),
             per_callback(r_call_n, raw_cb), 3.0, n_cb),
            ("py_numpy", "Python f(array): numpy array as a DLTensor",
             "raw ctypes f(arr.ctypes.data)", loop(first, arr),
             lambda n: [r_first(arr.ctypes.data) for _ in range(n)], 0, 1),
        ]
        # The same calls against the floor, for comparison with the other
        # backend and with the anchors measured elsewhere; and keeping the
        # GIL on this backend (PyDLL). Reported.
        rows += floor_rows("_floor", "", released, (0, 0, 0, 0))
        rows += floor_rows("_keep_floor", keeping, kept, (0, 0, 0, 0))
    # Targets for the compiled backend, whose fields and methods are
    # native; with ctypes each is Python code over ctypes, reported.
    obj_target = 1 if backend == "cext" else 0
    rows += [
        ("py_field_read", "Python obj.a, an int64 field of a registered type",
         "obj.a of a Python object with __slots__", read_a(pair), read_a(slots_pair),
         3.0 * obj_target, 1),
        ("py_method", "Python obj.sum(), a no-argument typed method of a registered type",
         fastcall, call_sum(pair), call_floor_noarg, 3.0 * obj_target, 1),
        ("py_object_new", "Python Pair(1, 2), a registered type with two int64 fields "
         "(C __init__)", "SlotsPair(1, 2), a Python __slots__ class setting the same fields",
         make(Pair), make(SlotsPair), 5.0 * obj_target, 1),
    ]
    # Keyword calls: the library binds the names (PFFuncCallKw) and fills
    # lo from its default; the positional call of every parameter is the
    # fast path, untouched.
    clamp = g("bench.clamp")
    assert clamp(1.5, hi=1.0) == clamp(1.5, 0.0, 1.0) == 1.0
    rows += [
        ("py_kw", "Python clamp(1.5, hi=1.0): a keyword and a default, bound in C",
         "Python clamp(1.5, 0.0, 1.0) of the same typed function, same backend",
         lambda n: [clamp(1.5, hi=1.0) for _ in range(n)],
         lambda n: [clamp(1.5, 0.0, 1.0) for _ in range(n)], 2.0 if backend == "cext" else 0, 1),
    ]
    rows += [
        ("py_roundtrip", "Python -> C -> Python callback, once",
         "raw ctypes doing the same", lambda n: [call_n(packed_cb, 1) for _ in range(n)],
         lambda n: [r_call_n(raw_cb, 1) for _ in range(n)], 0, 1),
        # Per item. The list side builds an Array (one C object) that C
        # reads with the bulk reader; the numpy side passes one pointer.
        ("py_list_sum", "Python f(list of 1,000 ints), summed in C, per item",
         "f(numpy int64 array of the same ints), summed in C",
         loop(array_sum, ints), loop(tensor_sum, ints_np), 0, n_items),
    ]
    # Element types (issue 36): the same C function typed with an
    # array<int64> parameter, whose elements C checks, and with an
    # unconstrained array.
    typed_el = pf.typed(lib.raw_array_sum, "int64(xs: array<int64>)")
    typed_any = pf.typed(lib.raw_array_sum, "int64(xs: array)")
    assert typed_el(ints) == typed_any(ints) == sum(ints)
    rows += [
        ("py_typed_array", "Python f(list of 1,000 ints), f typed int64(xs: array<int64>), per "
         "item", "the same C function typed int64(xs: array), same backend",
         loop(typed_el, ints), loop(typed_any, ints), 1.3, n_items),
    ]
    cext = backend == "cext"

    def each(it):
        def run(n):
            for _ in range(n):
                for _x in it:
                    pass
        return run

    def each_item(m):
        def run(n):
            for _ in range(n):
                for _k, _v in m.items():
                    pass
        return run

    def index(seq, i):
        def run(n):
            for _ in range(n):
                seq[i]
        return run

    # The container targets (the issue "Containers at native speed"), per
    # item or entry; held on the compiled backend, reported on ctypes.
    rows += [
        ("py_list_arg", "Python f(list of 1,000 ints), summed in C, per item",
         "floor.list_sum(list): " + fastcall, loop(array_sum, ints),
         loop(floor.list_sum, ints), 3.0 if cext else 0, n_items),
        ("py_list_echo", "Python list(echo(list of 1,000 ints)): to C and back, read, per item",
         "floor.list_echo(list): list -> C int64 array -> list, " + fastcall,
         lambda n: [list(echo(ints)) for _ in range(n)], loop(floor.list_echo, ints),
         2.0 if cext else 0, n_items),
        ("py_list_echo_only", "Python echo(list of 1,000 ints), the Array not read, per item",
         "floor.list_echo(list): list -> C int64 array -> list, " + fastcall,
         loop(echo, ints), loop(floor.list_echo, ints), 0, n_items),
        ("py_array_iter", "Python for x in arr: a returned 1,000-int Array, per item",
         "for x in lst: a Python list", each(from_c), each(ints), 3.0 if cext else 0, n_items),
        ("py_array_index", "Python arr[500] of a returned 1,000-int Array", "lst[500]",
         index(from_c, 500), index(ints, 500), 3.0 if cext else 0, 1),
        ("py_array_fresh", "Python list(make_array(1000)): a new Array each time, read, per "
         "item", "floor.list_echo(list): list -> C int64 array -> list, " + fastcall,
         lambda n: [list(make_array(n_items)) for _ in range(n)], loop(floor.list_echo, ints),
         0, n_items),
        ("py_dict_echo", "Python echo(dict of 100 str -> int), per entry", "dict(d)",
         loop(echo, str_ints), loop(dict, str_ints), 20.0 if cext else 0, n_entries),
        ("py_dict_echo_read", "Python dict(echo(dict of 100 str -> int)), read, per entry",
         "dict(d)", lambda n: [dict(echo(str_ints)) for _ in range(n)], loop(dict, str_ints),
         0, n_entries),
        ("py_map_items", "Python for k, v in m.items(): a returned 100-entry Map, per entry",
         "the same over a dict", each_item(map_c), each_item(str_ints), 3.0 if cext else 0,
         n_entries),
    ]
    # Object graphs as JSON (issue 36): a tree of 5,000 bench.Node instances,
    # each holding a List of its children (10,000 nodes in the document),
    # against the json module on the same tree as dicts and lists. --quick
    # (the test command's run) takes a tenth of the tree.
    node_cls = pf.get_class("bench.Node")
    # A count (for callgrind) of other rows builds a one-node graph: the
    # whole one, built and checked under callgrind, would cost more than
    # every count together.
    graph_counted = any(rid.startswith(("py_to_json", "py_from_json"))
                        for rid in (args.count or [])[::2])
    n_graph = 500 if args.quick else 1 if args.count and not graph_counted else 5000
    nodes, dicts = [], []
    for i in range(n_graph):
        node = node_cls()
        node.value, node.name, node.children = i, "node%d" % i, pf.List()
        nodes.append(node)
        dicts.append({"value": i, "name": "node%d" % i, "children": []})
        if i:
            nodes[(i - 1) // 4].children.append(node)
            dicts[(i - 1) // 4]["children"].append(dicts[i])
    graph_doc, dicts_doc = pf.to_json(nodes[0]), json.dumps(dicts[0])
    assert pf.structural_equal(pf.from_json(graph_doc), nodes[0])
    rows += [
        ("py_to_json", "pf.to_json of a 10,000-node graph (5,000 instances, each with a List of "
         "children), per node", "json.dumps of the same tree as dicts and lists",
         lambda n: [pf.to_json(nodes[0]) for _ in range(n)],
         lambda n: [json.dumps(dicts[0]) for _ in range(n)], 2.0, 2 * n_graph),
        ("py_from_json", "pf.from_json of that graph's document, per node",
         "json.loads of the dicts' document", loop(pf.from_json, graph_doc),
         loop(json.loads, dicts_doc), 2.0, 2 * n_graph),
    ]
    if args.count:
        # One side of a row, N operations, for each ID: every ID is found
        # before anything runs.
        if len(args.count) % 2:
            sys.exit("bench_python: --count takes pairs ID N")
        runs = []
        for rid, n in zip(args.count[::2], args.count[1::2]):
            side = 4 if rid.endswith("_base") else 3
            row = [r for r in rows if r[0] == (rid[:-5] if side == 4 else rid)]
            if not row:
                sys.exit("bench_python: no row %r on the %s backend" % (rid, backend))
            runs.append((row[0][side], max(int(n) // row[0][6], 1)))
        mark = lib.bench_count_mark
        mark.restype = None
        for run, n in runs:
            mark()
            run(n)
        mark()
        return
    for rid, what, base, case_fn, base_fn, target, per in rows:
        if args.only and not any(rid.startswith(p) for p in args.only):
            continue
        # Rows whose one operation holds many callbacks run fewer operations.
        ops = max(loops // per, 50)
        a, b, r = measure(case_fn, base_fn, ops, trials)
        a = [x / per for x in a]
        b = [x / per for x in b]
        rid = "%s_%s" % (rid, backend)
        what = "%s [%s]" % (what, backend)
        row = {"id": rid, "what": what, "base_id": rid + "_base", "baseline": base,
               "ns": a, "base_ns": b, "ratio": r, "target": target, "trials": trials}
        if args.json:
            print(json.dumps(row))
        else:
            tgt = "target <= %gx" % target if target else "reported"
            print("%-24s %8.0f ns  base %8.0f ns  ratio %5.2fx (%s)"
                  % (rid, a[0], b[0], r[0], tgt))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
