"""Shared fixtures: the package from the source tree and the C test library.

`make test-python` sets PACKEDFUNC_LIBRARY (this build's libpackedfunc) and
PF_TESTLIB (tests/python/pf_testlib.c, built into $(BUILD)/python). Run by
hand, the tree's default build output is used.
"""
import ctypes
import gc
import os
import signal
import sys

import pytest
from hypothesis import settings

# The test command is deterministic: hypothesis draws its examples from a
# seed fixed by each test's source, not a random one, and keeps no example
# database between runs. Open-ended exploration is a run with
# HYPOTHESIS_PROFILE=explore.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))

import packedfunc  # noqa: E402

# The fixture modules (tests/modules), which `make modules` builds.
MODULE_DIR = os.environ.get("PF_TEST_MODULE_DIR") or os.path.join(
    ROOT, os.environ.get("BUILD", "build"), "modules")
# The demo plugin (examples/plugin), which `make demo` builds.
DEMO_PLUGIN = os.environ.get("PF_DEMO_PLUGIN") or os.path.join(
    ROOT, os.environ.get("BUILD", "build"), "examples", "demo_plugin.so")


def load_fixture_module(file_name):
    """Loads the fixture module FILE_NAME of MODULE_DIR."""
    path = os.path.join(MODULE_DIR, file_name)
    assert os.path.exists(path), "%s is missing; run `make modules`" % path
    return packedfunc.load_module(path)


def _testlib_path():
    path = os.environ.get("PF_TESTLIB")
    if path:
        return path
    return os.path.join(ROOT, os.environ.get("BUILD", "build"), "python", "libpf_testlib.so")


_path = _testlib_path()
if not os.path.exists(_path):
    raise RuntimeError("the C test library %s is missing; run `make test-python`" % _path)
# Its DT_NEEDED libpackedfunc.so.0 binds to the copy the package loaded.
TESTLIB = ctypes.CDLL(_path)
TESTLIB.pft_tensors_alive.restype = ctypes.c_int64
if TESTLIB.pft_init() != 0:
    raise RuntimeError("pft_init failed: " + str(packedfunc._errors.last_error()))


# The one rule for tests that run once rather than once per backend: a test
# marked backend_independent checks what the backend in this process does
# not change (a command run as a subprocess: its usage errors, or that two
# commands write the same). make test runs it on the extension's run of the
# suite; the ctypes run (PACKEDFUNC_BACKEND=ctypes) deselects it. A run
# with the variable unset runs it.
def pytest_configure(config):
    config.addinivalue_line(
        "markers", "backend_independent: runs once: deselected when PACKEDFUNC_BACKEND=ctypes")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PACKEDFUNC_BACKEND") != "ctypes":
        return
    once = [item for item in items if item.get_closest_marker("backend_independent")]
    if once:
        config.hook.pytest_deselected(items=once)
        items[:] = [item for item in items if not item.get_closest_marker("backend_independent")]


class _MallInfo2(ctypes.Structure):
    """glibc's struct mallinfo2 (malloc.h)."""
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


_mallinfo2 = ctypes.CDLL(None).mallinfo2
_mallinfo2.restype = _MallInfo2


def malloc_in_use():
    """The bytes that malloc has handed out and not had back, in every arena
    (glibc's mallinfo2): what the C runtime holds, exactly. A leak check
    compares it before and after a loop: unlike the process's RSS, it does
    not move with pages that Python's own allocator or malloc keep cached,
    so that a few thousand rounds show a leak of one small block each."""
    info = _mallinfo2()
    return info.uordblks + info.hblkhd


@pytest.fixture(scope="session")
def mypy_cache(tmp_path_factory):
    """A mypy cache directory for the whole session: the first mypy run
    checks the standard library's and numpy's stubs, the others reuse that
    (mypy checks each cached module's source hash, so a changed file is
    checked again)."""
    return str(tmp_path_factory.mktemp("mypy-cache"))


@pytest.fixture
def testlib():
    return TESTLIB


@pytest.fixture
def pf():
    return packedfunc


@pytest.fixture
def fn():
    """fn("echo") -> the global function testing.echo."""
    return lambda name: packedfunc.get_global_func("testing." + name)


@pytest.fixture
def unique_name(request):
    """A registry name private to the test, removed afterwards."""
    names = []

    def make(suffix=""):
        name = "pytest.%s%s.%d" % (request.node.name, suffix, len(names))
        names.append(name)
        return name

    yield make
    for name in names:
        if packedfunc.get_global_func(name, allow_missing=True) is not None:
            packedfunc.remove_global_func(name)
    gc.collect()


@pytest.fixture
def sigint_raises():
    """SIGINT raises KeyboardInterrupt during the test, whatever the
    disposition this process inherited (SIG_IGN when it was started in the
    background by a shell without job control: Python then installs no
    handler of its own)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)
