"""`pip install` into a venv, offline, ships the library inside the package,
with the compiled extension when it can be built and without it when not."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

PKG_SRC = os.path.join(ROOT, "bindings", "python")

# What pip builds does not depend on the backend that runs this suite:
# `make test-python` runs these once, in the extension's pass.
pytestmark = pytest.mark.skipif(os.environ.get("PACKEDFUNC_BACKEND") == "ctypes",
                                reason="backend-independent; runs in the cext pass")


def _install_and_run(tmp_path, build_env=None):
    """pip-installs a copy of bindings/python into a fresh venv, then runs
    a call there; (library path, package dir, answer, backend)."""
    if not os.path.exists(os.path.join(PKG_SRC, "packedfunc", "libpackedfunc.so.0")):
        pytest.skip("run `make python` first: the package has no library to ship")
    try:
        import ensurepip  # noqa: F401  (python3-venv provides pip for venvs)
    except ImportError:
        pytest.skip("python3-venv is not installed, so venvs have no pip")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, capture_output=True, timeout=300)
    # Build from a copy, so that the build leaves nothing in the tree.
    src = tmp_path / "src"
    shutil.copytree(PKG_SRC, src, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__", "_cext*.so"))
    env = {k: v for k, v in os.environ.items()
           if k not in ("PACKEDFUNC_LIBRARY", "PYTHONPATH", "BUILD", "PACKEDFUNC_BACKEND")}
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation",
                        "--no-index", "--quiet", str(src)], env=dict(env, **(build_env or {})),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    code = ("import packedfunc, os\n"
            "print(packedfunc.library_path)\n"
            "print(os.path.dirname(packedfunc.__file__))\n"
            "f = packedfunc.convert(lambda a, b: a + b)\n"
            "print(f(40, 2))\n"
            "print(packedfunc.backend)\n")
    r = subprocess.run([str(venv / "bin" / "python"), "-c", code], env=env,
                       cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lib, pkg_dir, answer, backend = r.stdout.split()
    assert pkg_dir.startswith(str(venv))
    assert lib == os.path.join(pkg_dir, "libpackedfunc.so.0")
    assert answer == "42"
    return backend


def test_pip_install_builds_the_extension(tmp_path):
    # The copy is outside the source tree: it finds c_api.h through
    # PACKEDFUNC_INCLUDE.
    backend = _install_and_run(tmp_path, {"PACKEDFUNC_INCLUDE": os.path.join(ROOT, "include")})
    assert backend == "cext"


def test_pip_install_without_a_compiler_falls_back_to_ctypes(tmp_path):
    # A compiler that always fails: the extension is optional, and the
    # installed package runs on ctypes.
    backend = _install_and_run(tmp_path, {"PACKEDFUNC_INCLUDE": os.path.join(ROOT, "include"),
                                          "CC": "false"})
    assert backend == "ctypes"
