"""`pip install` into a venv, offline, ships every library the package uses
inside it (libpackedfunc and libpackedfunc_rpc), with the compiled
extension when it can be built and without it when not; without the
libraries it fails at install time and says what to run. The installed
wheel is a toolchain: a plugin and a program build against it alone."""
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


# The libraries that `make python` puts beside the package.
CORE_LIB, RPC_LIB = "libpackedfunc.so.0", "libpackedfunc_rpc.so.0"

# What the installed package runs: a local call, and a remote one through
# libpackedfunc_rpc, which must come from the package too.
INSTALLED_CODE = """
import os
import packedfunc
from packedfunc import rpc
print(packedfunc.library_path)
print(os.path.dirname(packedfunc.__file__))
print(rpc._lib._name)
f = packedfunc.convert(lambda a, b: a + b)
print(f(40, 2))
packedfunc.register_func("installed.add", lambda a, b: a + b)
with rpc.serve("tcp://127.0.0.1:*", expose="installed.", workers=1) as server:
    with rpc.connect(server.endpoint, timeout=30) as remote:
        print(remote["installed.add"](40, 2))
print(packedfunc.backend)
"""

# Nothing of this build may reach the installed package but what pip put
# in it.
_NOT_INHERITED = ("PACKEDFUNC_LIBRARY", "PF_RPC_LIBRARY", "PYTHONPATH", "BUILD",
                  "PACKEDFUNC_BACKEND", "LD_LIBRARY_PATH")


def _venv(tmp_path, system_site_packages=True):
    try:
        import ensurepip  # noqa: F401  (python3-venv provides pip for venvs)
    except ImportError:
        pytest.skip("python3-venv is not installed, so venvs have no pip")
    venv = tmp_path / "venv"
    # A venv that sees the system's packages has the system's pip (Debian's
    # python3-pip, run as `python -m pip`), which installs into the venv: it
    # needs no copy of its own, which ensurepip takes seconds to install.
    subprocess.run([sys.executable, "-m", "venv", str(venv)]
                   + ["--system-site-packages", "--without-pip"] * system_site_packages,
                   check=True, capture_output=True, timeout=300)
    return venv


def _pip(venv):
    """The command that runs pip in `venv`."""
    return [str(venv / "bin" / "python"), "-m", "pip"]


def _pip_install(tmp_path, venv, build_env=None, without=(), isolation=False):
    """pip-installs a copy of bindings/python (without the files named in
    `without`) into `venv`; returns the completed process and the env."""
    # Build from a copy, so that the build leaves nothing in the tree.
    src = tmp_path / "src"
    shutil.copytree(PKG_SRC, src, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__", "_cext*.so", *without))
    env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
    r = subprocess.run(_pip(venv) + ["install", "--no-index", "--quiet", str(src)]
                       + ["--no-build-isolation"] * (not isolation),
                       env=dict(env, **(build_env or {})),
                       capture_output=True, text=True, timeout=600)
    return r, env


def _install_and_run(tmp_path, build_env=None):
    """pip-installs a copy of bindings/python into a fresh venv, then runs
    INSTALLED_CODE there; returns the backend it ran on."""
    for lib in (CORE_LIB, RPC_LIB):
        if not os.path.exists(os.path.join(PKG_SRC, "packedfunc", lib)):
            pytest.skip("run `make python` first: the package has no %s to ship" % lib)
    venv = _venv(tmp_path)
    r, env = _pip_install(tmp_path, venv, build_env)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([str(venv / "bin" / "python"), "-c", INSTALLED_CODE], env=env,
                       cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lib, pkg_dir, rpc_lib, answer, remote_answer, backend = r.stdout.split()
    assert pkg_dir.startswith(str(venv))
    assert lib == os.path.join(pkg_dir, CORE_LIB)
    assert rpc_lib == os.path.join(pkg_dir, RPC_LIB)
    assert answer == remote_answer == "42"
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


@pytest.mark.parametrize("without", [(CORE_LIB, RPC_LIB), (RPC_LIB,)],
                         ids=["no-libraries", "no-rpc-library"])
def test_pip_install_without_the_libraries_fails_and_says_what_to_run(tmp_path, without):
    # Before, pip installed a package that could not import (or whose
    # packedfunc.rpc could not), with a message about paths in the venv.
    venv = _venv(tmp_path)
    r, _ = _pip_install(tmp_path, venv, {"PACKEDFUNC_INCLUDE": os.path.join(ROOT, "include")},
                        without=without)
    text = r.stdout + r.stderr
    assert r.returncode != 0, text
    assert "make python" in text, text
    for lib in (CORE_LIB, RPC_LIB):
        assert (lib in text) == (lib in without), text
    site = list(venv.glob("lib/python*/site-packages/packedfunc"))
    assert site == [], "a package was installed"


@pytest.mark.parametrize("isolation", [True, False], ids=["isolated", "no-build-isolation"])
def test_pip_install_in_a_plain_venv_fails_and_says_what_to_run(tmp_path, isolation):
    # A venv without the system's packages has setuptools but no wheel
    # package, and pip's isolated build sees neither. Before, pip went on
    # to download setuptools (isolated) or failed with setuptools'
    # "invalid command 'bdist_wheel'" (not isolated).
    venv = _venv(tmp_path, system_site_packages=False)
    r, _ = _pip_install(tmp_path, venv, isolation=isolation)
    text = r.stdout + r.stderr
    assert r.returncode != 0, text
    assert "make wheel && pip install dist/packedfunc-*.whl" in text, text
    assert "bdist_wheel" not in text and "Traceback" not in text, text
    assert "Could not find a version" not in text, text


def test_a_stub_with_a_tensor_passes_mypy_strict(tmp_path, mypy_cache):
    # numpy.ndarray is generic: bare, mypy --strict refused the stub
    # ("Missing type parameters for generic type").
    r = subprocess.run([sys.executable, "-m", "mypy", "--version"], capture_output=True)
    if r.returncode != 0:
        pytest.skip("mypy is not installed (Debian: python3-mypy)")
    from packedfunc import stubgen
    plugin = os.path.join(os.environ.get("PF_TEST_MODULE_DIR")
                          or os.path.join(ROOT, os.environ.get("BUILD", "build"), "modules"),
                          "mod_cxx.so")
    (tmp_path / "mod_cxx.pyi").write_text(stubgen.generate_module(plugin))
    (tmp_path / "prog.py").write_text(
        "import typing\nimport numpy\nif typing.TYPE_CHECKING:\n    import mod_cxx\n"
        "x: float = mod_cxx.cxx.total(numpy.zeros(3))\n")
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", mypy_cache, "--follow-imports=silent", "prog.py",
                        "mod_cxx.pyi"], env=dict(os.environ, MYPYPATH=PKG_SRC),
                       cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


# ---------------------------------------------------------------------------
# The wheel as a toolchain: a plugin and a program build against the
# installed package alone.
# ---------------------------------------------------------------------------

# A plugin as a user of the wheel writes it: a typed function, and a packed
# one that returns a new tensor made with PFTensorAlloc.
WHEEL_PLUGIN = r"""
#include <packedfunc/c_api.h>

static int64_t twice(int64_t x) { return 2 * x; }
PF_REGISTER_TYPED("wheel.twice", twice, "int64(x: int64)", "2 x.");

/* wheel.iota(n): a new float64 tensor [0, 1, ..., n - 1]. */
static int iota(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 1 || codes[0] != kPFInt)
    return PFErrorSetFormat(kPFErrTypeError, "wheel.iota: takes one int");
  int64_t len = args[0].v_int64;
  DLDataType f64 = {kDLFloat, 64, 1};
  PFObjectHandle t;
  DLTensor* view;
  if (PFTensorAlloc(1, &len, f64, 0, &t, &view) != 0) return -1;
  for (int64_t i = 0; i < len; ++i) ((double*)view->data)[i] = (double)i;
  PFValue v;
  v.v_handle = t;
  int code = kPFObjectHandle;
  int rc = PFCFuncSetReturn(ret, &v, &code, 1);
  PFObjectFree(t);
  return rc;
}
PF_REGISTER_PACKED("wheel.iota", iota, "iota(n): [0, 1, ..., n - 1] as a new tensor.");
"""

# A program: it runs without LD_LIBRARY_PATH, through the rpath of the flags.
WHEEL_PROGRAM = r"""
#include <packedfunc/c_api.h>
#include <stdio.h>
int main(void) {
  printf("%s\n", PFGetApiBase()->GetVersionString());
  return 0;
}
"""

WHEEL_CODE = """
import os, sys
import numpy
import packedfunc
print(packedfunc.get_include())
print(packedfunc.get_library_dir())
plugin = packedfunc.load_module(sys.argv[1])
assert plugin.wheel.twice(21) == 42
y = plugin.wheel.iota(4)
assert isinstance(y, numpy.ndarray) and y.dtype == numpy.float64, repr(y)
assert y.tolist() == [0.0, 1.0, 2.0, 3.0], y
print("ok")
"""


def _have_compiler():
    return shutil.which("cc") is not None and shutil.which("pkg-config") is not None


def test_a_plugin_builds_against_the_installed_wheel(tmp_path):
    """Build a wheel, install it into a fresh venv, and build a plugin and
    a program with nothing but what the installed package says: its
    `python -m packedfunc` flags, and its pkg-config files."""
    for lib in (CORE_LIB, RPC_LIB):
        if not os.path.exists(os.path.join(PKG_SRC, "packedfunc", lib)):
            pytest.skip("run `make python` first: the package has no %s to ship" % lib)
    if not _have_compiler():
        pytest.skip("no cc or pkg-config")
    venv = _venv(tmp_path)
    src = tmp_path / "src"
    shutil.copytree(PKG_SRC, src, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__", "_cext*.so"))
    env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
    env.pop("PKG_CONFIG_PATH", None)
    dist = tmp_path / "dist"
    r = subprocess.run(_pip(venv) + ["wheel", "--no-deps", "--no-build-isolation", "--no-index",
                                     "--quiet", "-w", str(dist), str(src)],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    wheel, = dist.glob("packedfunc-*.whl")
    r = subprocess.run(_pip(venv) + ["install", "--no-deps", "--no-index", "--quiet", str(wheel)],
                       env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    py = str(venv / "bin" / "python")
    work = tmp_path / "work"  # outside the source tree and the venv
    work.mkdir()

    def run(*cmd, **kw):
        r = subprocess.run(list(cmd), env=dict(env, **kw.pop("extra_env", {})), cwd=str(work),
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, "%s: %s%s" % (" ".join(cmd), r.stdout, r.stderr)
        return r.stdout.strip()

    flags = run(py, "-m", "packedfunc", "--cflags", "--libs").split()
    include, libdir = run(py, "-m", "packedfunc", "--includedir", "--libdir").split()
    site = list(venv.glob("lib/python*/site-packages/packedfunc"))[0]
    assert include == str(site / "include"), include
    assert libdir == str(site), libdir
    assert flags == ["-I" + include, "-L" + libdir, "-lpackedfunc", "-Wl,-rpath," + libdir]
    (work / "plugin.c").write_text(WHEEL_PLUGIN)
    run("cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", "plugin.c",
        *flags, "-o", "plugin.so")
    out = run(py, "-c", WHEEL_CODE, str(work / "plugin.so")).splitlines()
    assert out == [include, libdir, "ok"], out
    # Its stubs, from the installed package's generator.
    stub = run(py, "-m", "packedfunc.stubgen", str(work / "plugin.so"))
    assert '    def twice(x: int) -> int:\n        """2 x."""' in stub, stub
    # A program, built through the package's pkg-config files, runs as is.
    pkgconfig = run(py, "-m", "packedfunc", "--pkgconfigdir")
    (work / "main.c").write_text(WHEEL_PROGRAM)
    pc_flags = run("pkg-config", "--cflags", "--libs", "packedfunc",
                   extra_env={"PKG_CONFIG_PATH": pkgconfig}).split()
    run("cc", "-std=c11", "-Wall", "-Werror", "main.c", *pc_flags, "-o", "main")
    assert run(str(work / "main")) == run(py, "-c", "import packedfunc; "
                                                    "print(packedfunc.library_version)")
    # libpackedfunc_rpc too: its own .pc, which requires packedfunc's.
    rpc_flags = run("pkg-config", "--cflags", "--libs", "packedfunc-rpc",
                    extra_env={"PKG_CONFIG_PATH": pkgconfig}).split()
    (work / "rpc.c").write_text('#include <packedfunc/rpc.h>\n'
                                'int main(void) { return PFRPCServerStop(NULL) == 0 ? 0 : 1; }\n')
    run("cc", "-std=c11", "-Wall", "-Werror", "rpc.c", *rpc_flags, "-o", "rpc_main")
    r = subprocess.run([str(work / "rpc_main")], env=env, capture_output=True, text=True,
                       timeout=60)
    assert "error while loading shared libraries" not in r.stderr, r.stderr
