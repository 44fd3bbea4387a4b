"""Loading the library: lookup order, version and layout checks, API surface."""
import ast
import ctypes
import os
import re
import subprocess
import sys

import pytest

import packedfunc
from packedfunc import _ffi, _library

from conftest import ROOT

PKG_DIR = os.path.join(ROOT, "bindings", "python")


def run_python(code, env_updates=None, cwd=None):
    env = dict(os.environ)
    env.pop("PACKEDFUNC_LIBRARY", None)
    env.update(env_updates or {})
    env["PYTHONPATH"] = PKG_DIR
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd or ROOT,
                          capture_output=True, text=True, timeout=60)


def test_public_names_have_docstrings():
    assert set(packedfunc.__all__) >= {
        "get_global_func", "register_func", "remove_global_func", "list_global_func_names",
        "convert", "Function", "init_api", "Device", "DataType", "register_error"}
    for name in packedfunc.__all__:
        obj = getattr(packedfunc, name)
        assert obj.__doc__ and len(obj.__doc__.strip()) > 20, name


def test_library_version_matches():
    assert packedfunc.library_version.startswith("%d." % _library.EXPECTED_MAJOR)
    assert os.path.exists(packedfunc.library_path)


def test_type_codes_come_from_library():
    for number, name in _library.TYPE_CODE_NAMES.items():
        assert _ffi.PFTypeCodeName(number).decode() == name
    assert _library.TYPE_CODES["int"] == 0 and len(_library.TYPE_CODES) >= 13


def test_object_types_come_from_library():
    for name, index in _library.OBJECT_TYPES.items():
        assert _ffi.PFObjectTypeName(index).decode() == name
    assert set(_library.OBJECT_TYPES) >= {"function", "module", "tensor", "boxed", "closure",
                                          "host gate"}
    assert len(set(_library.OBJECT_TYPES.values())) == len(_library.OBJECT_TYPES)


def test_one_version():
    # __version__ is the package's only spelling of its version: the header
    # and the library must agree with it, and pyproject.toml reads it.
    with open(os.path.join(ROOT, "include", "packedfunc", "base.h")) as f:
        header = re.search(r'^#define PF_VERSION_STRING "([^"]*)"', f.read(), re.M).group(1)
    assert packedfunc.__version__ == header == packedfunc.library_version
    # setuptools reads the version without importing the package, which
    # needs a plain string literal.
    with open(os.path.join(PKG_DIR, "packedfunc", "__init__.py")) as f:
        tree = ast.parse(f.read())
    literals = [node.value.value for node in tree.body if isinstance(node, ast.Assign)
                and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["__version__"]
                and isinstance(node.value, ast.Constant)]
    assert literals == [packedfunc.__version__]
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(PKG_DIR, "pyproject.toml"), "rb") as f:
        pyproject = tomllib.load(f)
    assert "version" not in pyproject["project"]
    assert "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "packedfunc.__version__"}


def test_only_ffi_declares_entry_points():
    # One module holds every prototype of libpackedfunc and of the Python C
    # API; the others import them from it.
    pkg = os.path.join(PKG_DIR, "packedfunc")
    pattern = re.compile(r"\b(_fn|_py)\(|\b(CDLL|PyDLL)\(|pythonapi\[|_cdll|_pydll")
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py") and name != "_ffi.py":
            with open(os.path.join(pkg, name)) as f:
                for number, line in enumerate(f, 1):
                    assert not pattern.search(line), "%s:%d: %s" % (name, number, line)


def test_wrong_major_version_is_refused():
    with pytest.raises(ImportError, match="needs major version 99"):
        _library.check_library(expected_major=99)


def test_missing_api_version_is_refused():
    with pytest.raises(ImportError, match="API version 9999"):
        _library.check_library(api_version=9999)


def test_struct_size_mismatch_is_refused():
    class WrongValue(ctypes.Structure):
        _fields_ = [("a", ctypes.c_int64), ("b", ctypes.c_int64)]

    with pytest.raises(ImportError, match="PFValue is 8 bytes .* but 16 bytes"):
        _library.check_library(mirrors=(("PFValue", WrongValue),))


def test_unknown_struct_is_refused():
    with pytest.raises(ImportError, match="cannot report the size of NoSuchStruct"):
        _library.check_library(mirrors=(("NoSuchStruct", ctypes.c_int),))


def test_env_var_wins_and_bad_path_says_where_it_looked(tmp_path):
    bogus = str(tmp_path / "nope.so")
    r = run_python("import packedfunc", {"PACKEDFUNC_LIBRARY": bogus})
    assert r.returncode != 0
    assert "ImportError" in r.stderr
    assert bogus in r.stderr and "make python" in r.stderr


def test_env_var_path_is_used():
    lib = packedfunc.library_path
    r = run_python("import packedfunc; print(packedfunc.library_path)",
                   {"PACKEDFUNC_LIBRARY": lib})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == lib


def test_default_lookup_finds_a_library():
    # Without the variable: beside the package (make python), else build/lib.
    r = run_python("import packedfunc; print(packedfunc.library_path)", cwd="/")
    assert r.returncode == 0, r.stderr
    found = r.stdout.strip()
    beside = os.path.join(PKG_DIR, "packedfunc", "libpackedfunc.so.0")
    if os.path.exists(beside):
        assert found == beside
    else:
        assert os.path.join("lib", "libpackedfunc.so") in found


def test_not_found_message_lists_places(tmp_path):
    # A copy of the package with no library beside it and no tree around it.
    import shutil
    pkg = tmp_path / "packedfunc"
    shutil.copytree(os.path.join(PKG_DIR, "packedfunc"), pkg,
                    ignore=shutil.ignore_patterns("*.so*", "__pycache__"))
    env = dict(os.environ)
    env.pop("PACKEDFUNC_LIBRARY", None)
    env.pop("BUILD", None)
    env["PYTHONPATH"] = str(tmp_path)
    r = subprocess.run([sys.executable, "-c", "import packedfunc"], env=env, cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "beside the package" in r.stderr
    assert "build output" in r.stderr
    assert "make python" in r.stderr


def test_check_call_raises_last_error():
    assert packedfunc.check_call(0) == 0
    _ffi.PFErrorSet(b"IndexError", b"from the test")
    with pytest.raises(IndexError, match="from the test"):
        packedfunc.check_call(-1)
