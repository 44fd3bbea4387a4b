"""Type stubs from the library's metadata: `python -m packedfunc.stubgen`
and `pf stubgen` (which runs it), for a module (the demo plugin, the C++
fixture mod_cxx.so) and for the registry; the stubs type-check a program
with mypy (Debian's python3-mypy), which reports a wrong call."""
import os
import subprocess
import sys
import typing

import pytest

from conftest import ROOT

import packedfunc
from packedfunc import stubgen

BUILD = os.environ.get("BUILD", "build")
DEMO_PLUGIN = os.environ.get("PF_DEMO_PLUGIN") or os.path.join(
    ROOT, BUILD, "examples", "demo_plugin.so")
MODULE_DIR = os.environ.get("PF_TEST_MODULE_DIR") or os.path.join(ROOT, BUILD, "modules")
CXX_PLUGIN = os.path.join(MODULE_DIR, "mod_cxx.so")
PF = os.environ.get("PF_TEST_CLI_REL") or os.path.join(ROOT, BUILD, "bin", "pf")
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"))


def _stubgen(*args, env=None):
    return subprocess.run([sys.executable, "-m", "packedfunc.stubgen", *args], env=env or ENV,
                          capture_output=True, text=True, timeout=120)


def test_a_module_stub_has_names_defaults_annotations_and_docstrings():
    text = stubgen.generate_module(CXX_PLUGIN)
    compile(text, "mod_cxx.pyi", "exec")  # valid Python
    assert "\nclass cxx:\n" in text  # "cxx.clamp" reads as plugin.cxx.clamp
    for want in [
        # typed, named, with defaults
        '    @staticmethod\n'
        '    def clamp(x: float, lo: float = 0.0, hi: float = 1.0) -> float:\n'
        '        """Clamps x."""\n',
        # a tensor's constraint
        "    def total(x: typing.Annotated[numpy.ndarray[typing.Any, numpy.dtype[typing.Any]], "
        "'tensor<float64,1,contiguous>'], "
        "scale: float = 1.0) -> float:\n",
        # packed: its metadata signature, or any arguments without one
        "    def sum2(a: int, b: int = 40) -> int:\n        ...\n",
        '    def sum(*args: typing.Any) -> typing.Any:\n        """Sums ints."""\n',
        # an object type: constructor, a writable field, a method
        '    class Counter(packedfunc.Object):\n        """A counter from C++."""\n'
        "        def __init__(self, start: int = 0) -> None:\n",
        "        @property\n        def count(self) -> int:\n",
        "        @count.setter\n        def count(self, value: int) -> None: ...\n",
        '        def add(self, by: int = 1) -> int:\n            """Adds."""\n',
    ]:
        assert want in text, want
    for module in ("numpy", "packedfunc", "typing"):
        assert "\nimport %s\n" % module in text


def test_the_demo_plugins_stub():
    text = stubgen.generate_module(DEMO_PLUGIN)
    compile(text, "demo_plugin.pyi", "exec")
    for want in [
        # named parameters, which calls may pass by keyword
        "    def add(a: int, b: int) -> int:\n",
        # a subclass, a read-only field, a method without a signature, a static one
        '    class Counter(demo.Base):\n        """A Base that counts."""\n',
        "        @property\n        def name(self) -> str:\n",
        "        def reset(self, *args: typing.Any) -> typing.Any:\n",
        "        @staticmethod\n        def max_step() -> int:\n",
        # an object field: any object in, an Object out
        "        def tag(self) -> packedfunc.Object:\n",
        "        def tag(self, value: object) -> None: ...\n",
    ]:
        assert want in text, want
    assert "def name(self, value" not in text  # read-only


def test_the_registrys_stub(unique_name):
    prefix = unique_name()
    packedfunc.load_module(CXX_PLUGIN).export_global(prefix + ".")
    for bad in ("not-an-identifier", "class"):
        packedfunc.register_func(prefix + ".cxx." + bad, lambda: None)
    text = stubgen.generate_registry(prefix + ".cxx")
    compile(text, "cxx.pyi", "exec")
    # One level below the prefix: module functions, as init_api sets them.
    assert "\ndef clamp(x: float, lo: float = 0.0, hi: float = 1.0) -> float:\n" in text
    assert "@staticmethod" not in text.split("\nclass Counter")[0]
    assert "# Left out: 'class' (not a Python identifier)." in text
    assert "# Left out: 'not-an-identifier' (not a Python identifier)." in text
    assert "packedfunc.init_api(%r, __name__)" % (prefix + ".cxx") in text
    for name in packedfunc.list_global_func_names(prefix + "."):
        packedfunc.remove_global_func(name)


@pytest.mark.backend_independent
def test_the_command_and_pf_stubgen_write_the_same_stub(tmp_path):
    a, b = tmp_path / "a.pyi", tmp_path / "b.pyi"
    r = _stubgen(CXX_PLUGIN, "-o", str(a))
    assert r.returncode == 0 and r.stdout == r.stderr == "", r.stderr
    r = subprocess.run([PF, "stubgen", CXX_PLUGIN, "-o", str(b)],
                       env=dict(ENV, PF_PYTHON=sys.executable), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert a.read_text() == b.read_text() == stubgen.generate_module(CXX_PLUGIN)
    # The registry, with pf's --prefix and --load.
    r = subprocess.run([PF, "--prefix", "x.", "--load", CXX_PLUGIN, "stubgen", "--registry", "x.cxx"],
                       env=dict(ENV, PF_PYTHON=sys.executable), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "\ndef clamp(x: float" in r.stdout


@pytest.mark.backend_independent
def test_the_commands_errors(tmp_path):
    r = _stubgen(str(tmp_path / "absent.so"))
    assert r.returncode == 1
    assert r.stderr.startswith("python -m packedfunc.stubgen: FileNotFoundError: "), r.stderr
    assert len(r.stderr.splitlines()) == 1, r.stderr
    for args in ([], [CXX_PLUGIN, "--registry", "x"], [CXX_PLUGIN, "--load", CXX_PLUGIN]):
        r = _stubgen(*args)
        assert r.returncode == 2 and "usage:" in r.stderr, r.stderr


# A program that uses the stubs rightly, and one that does not.
GOOD = """
import typing
import packedfunc
if typing.TYPE_CHECKING:
    import demo_plugin as plugin
    import mod_cxx
else:
    plugin = packedfunc.load_module("demo_plugin.so")
    mod_cxx = packedfunc.load_module("mod_cxx.so")

total: int = plugin.demo.add(40, 2)
length: float = plugin.demo.hypot(3, 4.5)
counter = plugin.demo.Counter("clicks", 10)
count: int = counter.increment() + counter.add(2) + counter.count
counter.step = 3
base: plugin.demo.Base = counter
print(base.describe(), base.name)
x: float = mod_cxx.cxx.clamp(1.5, hi=1.0)
mod_cxx.cxx.Counter(start=4).add(by=2)
"""
BAD = """
import typing
if typing.TYPE_CHECKING:
    import demo_plugin as plugin
    import mod_cxx
plugin.demo.add(40, "2")
mod_cxx.cxx.clamp(1.5, top=1.0)
plugin.demo.Counter("clicks", 10).name = "other"
s: str = plugin.demo.add(1, 2)
plugin.demo.greet()
"""
# mypy's error for each line of BAD (from the 6th), in order.
BAD_ERRORS = ['Argument 2 to "add" of "demo" has incompatible type "str"; expected "int"',
              'Unexpected keyword argument "top" for "clamp" of "cxx"',
              'Property "name" defined in "Base" is read-only',
              'Incompatible types in assignment (expression has type "int", variable has type '
              '"str")',
              'Missing positional argument "name" in call to "greet" of "demo"']


@pytest.mark.skipif(os.environ.get("PACKEDFUNC_BACKEND") == "ctypes",
                    reason="backend-independent; runs in the cext pass")
def test_the_stubs_type_check_a_program(tmp_path, mypy_cache):
    r = subprocess.run([sys.executable, "-m", "mypy", "--version"], capture_output=True)
    if r.returncode != 0:
        pytest.skip("mypy is not installed (Debian: python3-mypy)")
    for plugin, name in ((DEMO_PLUGIN, "demo_plugin.pyi"), (CXX_PLUGIN, "mod_cxx.pyi")):
        (tmp_path / name).write_text(stubgen.generate_module(plugin))
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "bad.py").write_text(BAD)
    # One run for both programs (mypy takes seconds to start); packedfunc's
    # own sources are followed silently.
    r = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", mypy_cache,
                        "--follow-imports=silent", "--no-error-summary", "--hide-error-context",
                        "good.py", "bad.py"],
                       env=dict(ENV, MYPYPATH=ENV["PYTHONPATH"]), cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=300)
    errors = [line for line in r.stdout.splitlines() if ": error: " in line]
    assert not [e for e in errors if not e.startswith("bad.py:")], r.stdout + r.stderr
    got = [(int(e.split(":")[1]), e.split(": error: ")[1].rsplit("  [", 1)[0]) for e in errors]
    assert got == list(enumerate(BAD_ERRORS, start=6)), r.stdout + r.stderr


# Functions named as the names that annotations use.
SHADOWED = """
import typing
import numpy
if typing.TYPE_CHECKING:
    import shadow
n: int = shadow.int(1, "a", 2.5, True, b"x")
s: str = shadow.str.int(numpy.zeros(2), lambda: None)
shadow.typing(1, 2)
shadow.bool(object())
shadow.int(1, 2, 2.5, True, b"x")
"""


@pytest.mark.skipif(os.environ.get("PACKEDFUNC_BACKEND") == "ctypes",
                    reason="backend-independent; runs in the cext pass")
def test_names_that_annotations_use_do_not_shadow_them(tmp_path, unique_name, mypy_cache):
    r = subprocess.run([sys.executable, "-m", "mypy", "--version"], capture_output=True)
    if r.returncode != 0:
        pytest.skip("mypy is not installed (Debian: python3-mypy)")
    import numpy
    prefix = unique_name()

    def every_type(i: int, s: str, x: float, b: bool, raw: bytes) -> int:
        return i

    def arrays(a: numpy.ndarray, f: typing.Callable) -> str:
        return ""

    def anything(*args):
        return None

    for name, f in (("int", every_type), ("str.int", arrays), ("typing", anything),
                    ("bool", lambda o: o), ("builtins", every_type), ("numpy", arrays),
                    ("packedfunc", every_type), ("typing_", every_type), ("float", arrays),
                    ("bytes", every_type), ("object", arrays), ("Callable", arrays)):
        packedfunc.register_func("%s.%s" % (prefix, name), f)
    text = stubgen.generate_registry(prefix)
    (tmp_path / "shadow.pyi").write_text(text)
    (tmp_path / "prog.py").write_text(SHADOWED)
    r = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", mypy_cache,
                        "--follow-imports=silent", "--no-error-summary", "--hide-error-context",
                        "prog.py"],
                       env=dict(ENV, MYPYPATH=ENV["PYTHONPATH"]), cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=300)
    errors = [line.split(": error: ")[1].rsplit("  [", 1)[0] for line in r.stdout.splitlines()
              if ": error: " in line]
    assert errors == ['Argument 2 to "int" has incompatible type "int"; expected "str"'], \
        r.stdout + r.stderr + text
    # Spelt so: builtins and typing are the stub's own names here.
    assert "\ndef int(i: builtins_.int, s: builtins_.str" in text, text
    assert "\nimport builtins as builtins_\nimport numpy as numpy_\nimport typing as typing__\n" \
        in text, text
