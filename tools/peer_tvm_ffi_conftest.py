"""conftest.py of tools/peer-tvm-ffi.sh: tvm-ffi's tests, renamed, run
against packedfunc.

- pf_testlib (PF_TESTLIB) is loaded: its testing.* functions carry tvm-ffi's
  names (testing.echo, ...).
- tvm-ffi's own internals (OUT_OF_SCOPE: its C++ test objects, its Cython
  core, its C++ builder, its Python dataclasses, and any private name:
  _parse_backtrace...) are placeholders, and its
  C++ test functions (testing.* names that pf_testlib lacks) are missing
  on purpose: a test that fails after touching one is reported as skipped,
  "out of scope", not failed, since no renaming can give packedfunc
  tvm-ffi's test fixtures. So is a failing test parametrized by such a
  fixture, or one that reads a name its file imported from such a module.
  Python's own probes of a placeholder's dunders (pytest's report of a
  failure makes them) do not count as touching it.
- Any other name that packedfunc lacks is a placeholder too, so that the
  file still imports, but a test that uses it FAILS (MissingInPackedfunc):
  that is a gap the measure counts.
"""
import ctypes
import os
import sys
import types

import pytest

ROOT = os.environ["PF_PEER_ROOT"]
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
import packedfunc  # noqa: E402

_lib = ctypes.CDLL(os.environ.get("PF_TESTLIB",
                                  os.path.join(ROOT, "build", "python", "libpf_testlib.so")))
if _lib.pft_init() != 0:
    raise RuntimeError("pft_init failed")

# tvm-ffi's test fixtures and internals, and get_global_func_metadata, whose
# record is tvm-ffi's JSON type schema, read back with core.TypeSchema
# (packedfunc's counterpart is Function.signature / inspect.signature).
OUT_OF_SCOPE = ("testing", "core", "cpp", "dataclasses", "container", "libinfo", "stream",
                "get_global_func_metadata")
# Submodules that packedfunc lacks: importable, failing when used.
MISSING_MODULES = ()


class OutOfScope(Exception):
    pass


# Whether the running test touched one of tvm-ffi's fixtures.
_touched = []


def _out_of_scope(what):
    _touched.append(what)
    return OutOfScope("tvm-ffi internal: %s" % what)


class MissingInPackedfunc(AttributeError):
    pass


class _Placeholder(types.ModuleType):
    """Stands for packedfunc.NAME; fails as soon as it is used."""

    def __init__(self, name, out_of_scope):
        super().__init__(name)
        self.__dict__["_oos"] = out_of_scope

    def _fail(self, *args, **kwargs):
        if self.__name__.endswith(".requires_py310") and len(args) == 1:
            return args[0]  # tvm-ffi's skip marker, as a decorator: Python is 3.10 or newer
        if self.__dict__["_oos"]:
            raise _out_of_scope(self.__name__)
        raise MissingInPackedfunc("packedfunc has no %s" % self.__name__)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__") and not name.startswith("__pf_"):
            # Python's own (__path__, __wrapped__...), which pytest and
            # inspect probe on every module while reporting a failure: not
            # a use by the test.
            raise AttributeError(name)
        # A private name (_parse_backtrace...) is one of tvm-ffi's internals.
        oos = self.__dict__["_oos"] or name.startswith("_")
        if oos:
            _touched.append(self.__name__)
        return _Placeholder(self.__name__ + "." + name, oos)

    __call__ = __iter__ = __getitem__ = __mro_entries__ = _fail


def _missing(name):
    return _Placeholder("packedfunc." + name, name in OUT_OF_SCOPE or name.startswith("_"))


packedfunc.__getattr__ = _missing
_get_global_func = packedfunc.get_global_func


def _get_global_func_or_fixture(name, *args, **kwargs):
    try:
        return _get_global_func(name, *args, **kwargs)
    except packedfunc.FunctionNotFoundError:
        # tvm-ffi's C++ test functions and its own ffi.* functions.
        if name.startswith(("testing.", "ffi.")):
            return _Placeholder("the tvm-ffi function " + name, True)
        raise


packedfunc.get_global_func = _get_global_func_or_fixture
for _name in OUT_OF_SCOPE + MISSING_MODULES:
    sys.modules["packedfunc." + _name] = _missing(_name)
sys.modules["packedfunc.testing.testing"] = _missing("testing").testing


# Tests of tvm-ffi's own document layout (its JSON graph's members, such as
# root_index, and its metadata member): packedfunc's documents have their
# own, versioned format (docs/serialization.md); the round trips of the
# same file, which test behaviour, stay in scope.
OUT_OF_SCOPE_TESTS = {
    "test_serialization.py::TestJSONStructure::": "tvm-ffi's JSON graph layout",
    "test_serialization.py::TestMetadata::": "tvm-ffi's JSON graph metadata member",
}


def _fixture_in(value):
    """The out-of-scope placeholder that a test parameter is or holds."""
    if isinstance(value, _Placeholder) and value.__dict__["_oos"]:
        return value
    if isinstance(value, (tuple, list)):
        return next(filter(None, map(_fixture_in, value)), None)
    return None


def _fixture_of(item):
    """The fixture of tvm-ffi that a test holds without touching it while
    it runs: a parameter that is one, or a name its file imported from one
    of tvm-ffi's internal modules (from tvm_ffi.core import MISSING)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    fixture = next(filter(None, map(_fixture_in, params.values())), None)
    code = getattr(getattr(item, "function", None), "__code__", None)
    module = getattr(item, "module", None)
    for name in code.co_names if fixture is None and code and module else ():
        fixture = _fixture_in(getattr(module, name, None))
        if fixture is not None:
            break
    return fixture.__name__ if fixture is not None else None


def pytest_runtest_setup(item):
    del _touched[:]
    for prefix, why in OUT_OF_SCOPE_TESTS.items():
        if item.nodeid.startswith(prefix):
            pytest.skip("out of scope: %s" % why)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and report.failed:
        fixture = _touched[0] if _touched else _fixture_of(item)
        if fixture is not None:
            report.outcome = "skipped"
            report.longrepr = (str(item.path), 0, "out of scope: %s (%s)"
                               % (fixture, call.excinfo.typename))


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    # A file that uses one of tvm-ffi's fixtures at import time (its Python
    # dataclasses, as a decorator) is out of scope as a whole: skipped, not
    # an error of the measure.
    outcome = yield
    report = outcome.get_result()
    if report.failed and "conftest.OutOfScope" in str(report.longrepr):
        report.outcome = "skipped"
        report.longrepr = (str(collector.path), 0, "out of scope: %s (at import)"
                           % (_touched[-1] if _touched else "a tvm-ffi fixture"))
