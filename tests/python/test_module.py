"""packedfunc.load_module and Module: plugins written in C, from Python.

Uses the demo plugin ($PF_DEMO_PLUGIN) and the C tests' fixture modules
($PF_TEST_MODULE_DIR); `make test-python` builds both and sets the paths.
"""
import gc
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT

BUILD = os.environ.get("BUILD", "build")
DEMO_PLUGIN = os.environ.get("PF_DEMO_PLUGIN") or os.path.join(
    ROOT, BUILD, "examples", "demo_plugin.so")
MODULE_DIR = os.environ.get("PF_TEST_MODULE_DIR") or os.path.join(ROOT, BUILD, "modules")
DEMO_NAMES = ["demo.add", "demo.call_n_times", "demo.fail", "demo.fill", "demo.greet",
              "demo.hypot", "demo.matmul", "demo.reverse", "demo.sort"]
DEMO_TYPES = ["demo.Base", "demo.Counter"]  # examples/plugin/counter.c


def fixture_module(name):
    path = os.path.join(MODULE_DIR, name)
    assert os.path.exists(path), "%s is missing; run `make test-python`" % path
    return path


@pytest.fixture
def plugin(pf):
    assert os.path.exists(DEMO_PLUGIN), "%s is missing; run `make test-python`" % DEMO_PLUGIN
    return pf.load_module(DEMO_PLUGIN)


# ---- loading ----------------------------------------------------------------

def test_load_module_gives_a_module_with_its_functions(pf, plugin):
    assert isinstance(plugin, pf.Module)
    assert isinstance(plugin, pf.Object)
    assert plugin.path == DEMO_PLUGIN
    assert plugin.list_function_names() == DEMO_NAMES
    assert repr(plugin) == "<packedfunc.Module %r, %d functions>" % (DEMO_PLUGIN, len(DEMO_NAMES))
    assert "load_module" in pf.__all__ and "Module" in pf.__all__


def test_load_module_accepts_pathlike_and_bytes(pf):
    assert pf.load_module(pathlib.Path(DEMO_PLUGIN)).demo.add(1, 2) == 3
    assert pf.load_module(os.fsencode(DEMO_PLUGIN)).demo.add(2, 2) == 4


def test_loading_twice_gives_independent_modules(pf, plugin):
    again = pf.load_module(DEMO_PLUGIN)
    assert again.handle != plugin.handle
    assert again.demo.add != plugin.demo.add  # separate function objects
    assert again.demo.add(20, 22) == plugin.demo.add(20, 22) == 42


def test_missing_file_is_file_not_found_error(pf, tmp_path):
    path = str(tmp_path / "nope.so")
    with pytest.raises(FileNotFoundError) as info:
        pf.load_module(path)
    assert isinstance(info.value, OSError)
    assert "cannot load %r" % path in str(info.value)
    assert "No such file" in str(info.value)
    assert isinstance(info.value.__cause__, RuntimeError)  # the C error's kind


def test_a_file_that_is_no_shared_library_is_os_error(pf, tmp_path):
    bad = tmp_path / "garbage.so"
    bad.write_bytes(b"this is not an ELF file")
    with pytest.raises(OSError) as info:
        pf.load_module(str(bad))
    assert type(info.value) is OSError
    assert "garbage.so" in str(info.value)


def test_a_bare_name_not_on_the_search_path_is_os_error(pf):
    with pytest.raises(OSError) as info:
        pf.load_module("libpf_no_such_plugin.so")
    assert type(info.value) is OSError  # searched, so not a missing path
    assert "libpf_no_such_plugin.so" in str(info.value)


def test_a_library_that_is_no_module_is_value_error(pf, testlib):
    for path in (testlib._name, fixture_module("mod_plain.so")):
        with pytest.raises(ValueError) as info:
            pf.load_module(path)
        assert "is not a packedfunc module" in str(info.value), path


def test_a_name_registered_twice_in_a_module_is_key_error(pf):
    with pytest.raises(KeyError) as info:
        pf.load_module(fixture_module("mod_dup.so"))
    assert "dup.twice" in str(info.value)


def test_a_bad_typed_signature_in_a_module_is_value_error(pf):
    with pytest.raises(ValueError) as info:
        pf.load_module(fixture_module("mod_badsig.so"))
    assert "int64(int64" in str(info.value)
    assert any("badsig.broken" in line for line in info.value.c_traceback)


def test_a_plugin_checked_against_a_stale_header_is_refused(pf):
    with pytest.raises(ValueError) as info:
        pf.load_module(fixture_module("mod_stale.so"))
    assert ("function stale.half was checked against a header whose float64 is `float/float`, "
            "this library's is `double/double`") in str(info.value)


def test_a_plugin_whose_checked_method_is_stale_is_refused(pf):
    with pytest.raises(ValueError) as info:
        pf.load_module(fixture_module("mod_stale_method.so"))
    assert ("object type 'stale.Gauge': method 'scale' was checked against a header whose "
            "float64 is `float/float`, this library's is `double/double`") in str(info.value)
    assert any("mod_stale_method.so" in line for line in info.value.c_traceback)
    assert "stale.Gauge" not in pf.registered_types()


@pytest.mark.parametrize("bad, exc, text", [
    (None, TypeError, "load_module: path must be a str, bytes or os.PathLike, not NoneType"),
    (42, TypeError, "not int"),
    ("", ValueError, "PFModLoadFromFile"),
    ("a\0b.so", ValueError, "NUL"),
])
def test_bad_path_arguments(pf, bad, exc, text):
    with pytest.raises(exc) as info:
        pf.load_module(bad)
    assert text in str(info.value)


# ---- functions as attributes --------------------------------------------------

def test_dotted_names_are_nested_attributes(pf, plugin):
    demo = plugin.demo
    assert demo.add(40, 2) == 42
    assert demo.hypot(3, 4) == 5.0
    assert demo.greet("module") == "Hello, module!"
    assert demo.reverse(b"abc") == b"cba"
    assert isinstance(demo.add, pf.Function)
    assert demo.add == plugin["demo.add"] == plugin.get_function("demo.add")
    assert demo.add is plugin.demo.add  # cached
    assert "namespace 'demo'" in repr(demo)


def test_dir_lists_the_functions(plugin):
    assert "demo" in dir(plugin)
    assert "export_global" in dir(plugin)  # the methods stay listed
    # Its object types are attributes too (as their classes).
    assert dir(plugin.demo) == sorted(n.split(".", 1)[1] for n in DEMO_NAMES + DEMO_TYPES)
    assert plugin.list_types() == DEMO_TYPES


def test_undotted_names_are_direct_attributes(pf):
    basic = pf.load_module(fixture_module("mod_basic.so"))
    assert basic.mul(6, 7) == 42
    assert basic.add(1, 2) == 3
    assert {"add", "mul", "half", "greet"} <= set(dir(basic))


def test_missing_names(pf, plugin):
    with pytest.raises(AttributeError) as info:
        plugin.nothing
    assert "has no function or object type 'nothing'" in str(info.value)
    with pytest.raises(AttributeError) as info:
        plugin.demo.nothing
    assert "namespace 'demo'" in str(info.value) and "'demo.nothing'" in str(info.value)
    with pytest.raises(KeyError):
        plugin["demo.nothing"]
    with pytest.raises(KeyError):
        plugin["demo"]  # a namespace is no function
    with pytest.raises(TypeError):
        plugin[0]
    with pytest.raises(ValueError) as info:
        plugin.get_function("demo.nothing")
    assert "'demo.nothing'" in str(info.value)
    assert plugin.get_function("demo.nothing", allow_missing=True) is None
    with pytest.raises(TypeError):
        plugin.get_function(b"demo.add")
    with pytest.raises(ValueError):
        plugin.get_function("demo.add\0x")
    assert "demo.add" in plugin and "demo.nothing" not in plugin and 3 not in plugin
    assert not hasattr(plugin, "__wrapped__")  # dunders never look up functions


def test_c_errors_keep_their_kind(plugin):
    with pytest.raises(ValueError) as info:
        plugin.demo.fail("from C")
    assert str(info.value).startswith("from C")
    with pytest.raises(TypeError) as info:
        plugin.demo.add(1, "two")
    assert "argument 1 'b': expected int64, got str" in str(info.value)


def test_callbacks_comparators_and_tensors(pf, plugin):
    seen = []
    assert plugin.demo.call_n_times(lambda i: seen.append(i) or i, 5) == 10
    assert seen == [0, 1, 2, 3, 4]
    a = np.array([3, 1, 2], dtype=np.int64)
    plugin.demo.sort(a, lambda x, y: (x > y) - (x < y))
    assert a.tolist() == [1, 2, 3]
    b = np.zeros(4, dtype=np.int32)
    plugin.demo.fill(b, 7)
    assert b.tolist() == [7, 7, 7, 7]


# ---- lifetime -----------------------------------------------------------------

def test_functions_outlive_the_module_object(pf):
    mod = pf.load_module(DEMO_PLUGIN)
    add, greet = mod.demo.add, mod["demo.greet"]
    del mod
    gc.collect()
    assert add(1, 2) == 3
    assert greet("later") == "Hello, later!"


def test_the_library_stays_loaded_while_a_function_lives():
    # In a fresh process, so that no other test holds the library.
    code = r"""
import gc, sys
import packedfunc as pf
def loaded():
    with open("/proc/self/maps") as f:
        return "demo_plugin.so" in f.read()
mod = pf.load_module(sys.argv[1])
ns = mod.demo
add = mod.demo.add
del mod
gc.collect()
print(loaded(), add(2, 3), ns.greet("ns"))
del ns
gc.collect()
print(loaded(), add(4, 5))
del add
gc.collect()
print(loaded())
"""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"))
    r = subprocess.run([sys.executable, "-c", code, DEMO_PLUGIN], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["True 5 Hello, ns!", "True 9", "False"]


# ---- export, imports, modules passed through C --------------------------------

def test_export_global(pf, plugin, request):
    prefix = "pytest.%s." % request.node.name
    names = plugin.export_global(prefix)
    assert names == [prefix + n for n in DEMO_NAMES]
    assert pf.list_global_func_names(prefix) == names
    assert pf.get_global_func(prefix + "demo.add")(2, 3) == 5
    # All or nothing: a taken name fails the whole export.
    other = pf.load_module(DEMO_PLUGIN)
    with pytest.raises(KeyError) as info:
        other.export_global(prefix)
    assert prefix + "demo.add" in str(info.value)
    # ...unless overriding.
    assert other.export_global(prefix, override=True) == names
    assert pf.get_global_func(prefix + "demo.add") == other.demo.add
    for n in names:
        pf.remove_global_func(n)
    assert pf.list_global_func_names(prefix) == []


def test_export_global_protected(pf, plugin, request):
    prefix = "pytest.%s." % request.node.name
    plugin.export_global(prefix, protected=True)
    with pytest.raises(RuntimeError):
        pf.remove_global_func(prefix + "demo.add")
    assert pf.get_global_func(prefix + "demo.add")(1, 1) == 2


def test_export_global_bad_arguments(plugin):
    with pytest.raises(TypeError):
        plugin.export_global(1)
    with pytest.raises(ValueError):
        plugin.export_global("a\0b")


def test_import_module(pf, plugin):
    basic = pf.load_module(fixture_module("mod_basic.so"))
    other = pf.load_module(fixture_module("mod_other.so"))
    basic.import_module(other)
    assert basic.neg(5) == -5  # found in the import
    assert basic.add(1, 2) == 3  # its own first
    assert basic.get_function("neg", query_imports=False, allow_missing=True) is None
    assert "neg" not in dir(basic)  # dir lists the module's own functions
    with pytest.raises(ValueError):
        other.import_module(basic)  # a cycle
    with pytest.raises(ValueError):
        plugin.import_module(plugin)
    with pytest.raises(TypeError):
        plugin.import_module(object())


def test_a_module_that_crosses_c_comes_back_as_a_module(pf, plugin):
    echo = pf.convert(lambda m: m)
    back = echo(plugin)  # passed to C as a module handle, returned as one
    assert isinstance(back, pf.Module)
    assert back.handle == plugin.handle
    assert back.path is None  # not known on this side
    assert back.demo.add(1, 1) == 2
    assert "(not from a file)" in repr(back)
    seen = []
    pf.convert(lambda m: seen.append(m))(plugin)  # a callback receives a Module
    assert isinstance(seen[0], pf.Module) and seen[0].demo.greet("x") == "Hello, x!"


def test_module_cannot_be_created_or_pickled(pf, plugin):
    import pickle
    with pytest.raises(TypeError):
        pf.Module()
    with pytest.raises(TypeError):
        pickle.dumps(plugin)


# ---- objects made by a module's code, and bad module files --------------------

def _run_fresh(code, *args, env=None, timeout=60, cwd=None):
    """Runs `code` in a fresh interpreter, so that a crash or a loaded
    library cannot leak into this process."""
    env = dict(env or os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"))
    return subprocess.run([sys.executable, "-c", code, *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def test_a_tensor_from_a_module_outlives_the_module():
    # The module's code made the tensor; its DLPack deleter is the module's.
    # With the Module and the Function gone the library must stay mapped
    # until the array is deleted: before, dlclose ran first and deleting
    # the array called the deleter in unmapped code (SIGSEGV).
    code = r"""
import gc, sys
import numpy as np
import packedfunc as pf
def loaded():
    with open("/proc/self/maps") as f:
        return "mod_owner.so" in f.read()
mod = pf.load_module(sys.argv[1])
make = mod.owner.tensor
a = make(5)
del mod, make
gc.collect()
print(type(a).__name__, loaded(), a.tolist(), float(np.sum(a)))
del a
gc.collect()
print(loaded())
"""
    r = _run_fresh(code, fixture_module("mod_owner.so"))
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stdout.splitlines() == ["ndarray True [0.0, 1.0, 2.0, 3.0, 4.0] 10.0", "False"]


def test_functions_and_objects_made_by_a_module_outlive_it():
    code = r"""
import gc, sys
import packedfunc as pf
def loaded():
    with open("/proc/self/maps") as f:
        return "mod_owner.so" in f.read()
mod = pf.load_module(sys.argv[1])
f, typed, boxed = mod.owner.function(), mod.owner.typed(), mod["owner.boxed"](7)
del mod
gc.collect()
print(loaded(), f(), typed(14), type(boxed).__name__)
del f, typed
gc.collect()
print(loaded())
del boxed
gc.collect()
print(loaded())
"""
    r = _run_fresh(code, fixture_module("mod_owner.so"))
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stdout.splitlines() == ["True 42 42 Object", "True", "False"]


def test_a_truncated_module_file_is_os_error(pf, tmp_path):
    src = pathlib.Path(fixture_module("mod_basic.so")).read_bytes()
    cut = tmp_path / "cut.so"
    cut.write_bytes(src[:3000])
    # In a fresh process: before, dlopen died of SIGBUS.
    code = r"""
import sys
import packedfunc as pf
try:
    pf.load_module(sys.argv[1])
except OSError as e:
    print(type(e).__name__, "|", e)
"""
    r = _run_fresh(code, str(cut))
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stdout.startswith("OSError | ")
    assert "file truncated" in r.stdout and str(cut) in r.stdout
    # A bare name is found in LD_LIBRARY_PATH and checked the same way.
    (tmp_path / "libpf_cut.so").write_bytes(src[:3000])
    env = dict(os.environ, LD_LIBRARY_PATH=str(tmp_path))
    r = _run_fresh(code, "libpf_cut.so", env=env)
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert "found as" in r.stdout and "file truncated" in r.stdout


def test_a_bare_name_of_a_file_in_the_working_directory_loads_that_file(pf, tmp_path):
    # load_module("mylib.so") with mylib.so right here: the user means that
    # file, which dlopen alone would not look for (it searches only the
    # library path), even when the library path holds another of that name.
    src = pathlib.Path(fixture_module("mod_other.so")).read_bytes()
    (tmp_path / "mylib.so").write_bytes(src)
    (tmp_path / "cut.so").write_bytes(src[:3000])
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "mylib.so").write_bytes(src[:3000])
    code = r"""
import packedfunc as pf
m = pf.load_module("mylib.so")
print(m.path, m["add"](40, 2))
try:
    pf.load_module("cut.so")
except OSError as e:
    print(type(e).__name__, "|", e)
"""
    env = dict(os.environ, LD_LIBRARY_PATH=str(tmp_path / "lib"))
    r = _run_fresh(code, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, (r.returncode, r.stderr)
    first, second = r.stdout.splitlines()
    assert first == "mylib.so 1042"
    assert second.startswith("OSError | ")
    assert "found as './cut.so'" in second and "file truncated" in second


def test_a_fifo_is_os_error_not_a_hang(pf, tmp_path):
    fifo = tmp_path / "plugin.so"
    os.mkfifo(fifo)
    code = r"""
import sys
import packedfunc as pf
try:
    pf.load_module(sys.argv[1])
except OSError as e:
    print(type(e).__name__, "|", e)
"""
    try:
        r = _run_fresh(code, str(fifo), timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("load_module blocked on a FIFO")
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stdout.startswith("OSError | ") and "a FIFO, not a regular file" in r.stdout


def test_a_corrupt_function_table_is_value_error(pf):
    for name, text in [("mod_junk.so", "outside the library's loaded data"),
                       ("mod_badname.so", "not a string in the library"),
                       ("mod_badcode.so", "not in any loaded code"),
                       ("mod_badprepack.so", "not in any loaded code")]:
        with pytest.raises(ValueError) as info:
            pf.load_module(fixture_module(name))
        assert text in str(info.value), name
