"""The packedfunc demo: a plugin written in C, driven from Python.

    make demo                                      # builds everything, runs this
    /usr/bin/python3 examples/demo.py [PLUGIN.so]  # after `make demo` or `make python`

The plugin is examples/plugin/demo_plugin.c, built into
$BUILD/examples/demo_plugin.so (BUILD defaults to "build"); pass another
path as the argument or in $PF_DEMO_PLUGIN. The output is deterministic:
the README shows it, and a test checks that it still matches.
"""
import inspect
import os
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
try:
    import packedfunc as pf
except ImportError:  # run from a checkout without PYTHONPATH
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    import packedfunc as pf
import numpy as np


def section(title):
    print("\n== %s" % title)


def plugin_path():
    if len(sys.argv) > 1:
        return sys.argv[1]
    return os.environ.get("PF_DEMO_PLUGIN") or os.path.join(
        ROOT, os.environ.get("BUILD") or "build", "examples", "demo_plugin.so")


def main():
    path = plugin_path()
    plugin = pf.load_module(path)
    print("Loaded %s: %d functions" % (os.path.basename(path),
                                       len(plugin.list_function_names())))

    section("What it contains (name, signature, doc)")
    for name in plugin.list_function_names():
        f = plugin[name]  # by full name; plugin.demo.add is the same function
        print("  %-17s %-28s %s" % (name, f.signature or "(packed)",
                                    textwrap.shorten(f.doc or "", 40, placeholder=" ...")))

    section("Calling C from Python")
    demo = plugin.demo  # functions named "demo.*" are attributes of plugin.demo
    print("demo.add(40, 2)          =", demo.add(40, 2))
    print("demo.hypot(3, y=4)       =", demo.hypot(3, y=4))  # by keyword, too
    print("demo.greet('world')      =", repr(demo.greet("world")))
    print("demo.reverse('stressed') =", repr(demo.reverse("stressed")))
    print("inspect.signature(demo.hypot):", inspect.signature(demo.hypot))

    section("A C struct as a Python class (demo.Counter)")
    c = demo.Counter("clicks", 10)  # the class of the plugin's type; C's __init__
    print("c =", c)
    print("c.increment() = %d, c.count = %d" % (c.increment(), c.count))
    c.step = 5
    print("c.step = 5; c.add(2) = %d" % c.add(2))
    print("isinstance(c, demo.Base):", isinstance(c, demo.Base))
    print("inspect.signature(demo.Counter):", inspect.signature(demo.Counter))
    try:
        c.name = "renamed"
    except AttributeError as err:
        print("AttributeError:", err)

    section("A Python function that C calls")

    @pf.register_func("demo_py.square")
    def square(i):
        """Returns i * i."""
        calls[0] += 1
        return i * i

    calls = [0]
    square_fn = pf.get_global_func("demo_py.square")  # what C code sees
    print("registered:", square_fn.name, "-", square_fn.doc)
    total = demo.call_n_times(square_fn, 100_000)
    print("demo.call_n_times(square, 100000) = %d (C called Python %d times)"
          % (total, calls[0]))

    section("A Python comparator for the C sort (qsort)")
    a = np.array([5, 3, 9, 1, 7, 2, 8], dtype=np.int64)
    demo.sort(a, lambda x, y: (y > x) - (y < x))  # descending
    print("sorted in place, descending:", a.tolist())
    words = np.array([2.5, -1.0, 10.0, 0.5])
    demo.sort(words, lambda x, y: (abs(x) > abs(y)) - (abs(x) < abs(y)))
    print("sorted by absolute value:   ", words.tolist())

    section("numpy arrays, filled by C without a copy")
    grid = np.zeros((2, 3), dtype=np.float32)
    demo.fill(grid, 1.5)
    print(grid)

    section("A constant weight, bound once and pre-packed")
    w = np.arange(6, dtype=np.float32).reshape(3, 2)
    cache = pf.PrePackCache()
    layers = [demo.matmul.bind({1: w}, cache=cache) for _ in range(3)]
    print("layers[0](ones(1, 3)) =", layers[0](np.ones((1, 3), dtype=np.float32)).tolist())
    entries, nbytes, hits = cache.stats()
    print("3 functions bound to w share %d packed copy of %d bytes (%d cache hits)"
          % (entries, nbytes, hits))

    section("Errors raised in C, caught in Python")
    try:
        demo.fail("the C code says no")
    except ValueError as err:
        print("ValueError:", err)
    try:
        demo.add(1, "two")
    except TypeError as err:
        print("TypeError:", err)

    def bad_comparator(x, y):
        raise ZeroDivisionError("comparator gave up")

    try:
        demo.sort(np.array([3, 1, 2], dtype=np.int64), bad_comparator)
    except ZeroDivisionError as err:  # the comparator's own error, back through qsort
        print("ZeroDivisionError from the comparator, through qsort:", str(err).splitlines()[0])

    section("Publishing the module's functions in the global registry")
    plugin.export_global("plugin.")
    print("pf.list_global_func_names('plugin.demo.g'):",
          pf.list_global_func_names("plugin.demo.g"))
    print("pf.get_global_func('plugin.demo.add')(1, 2) =",
          pf.get_global_func("plugin.demo.add")(1, 2))


if __name__ == "__main__":
    main()
