"""conftest.py of tools/peer-tvm-ffi.sh: tvm-ffi's tests, renamed, run
against packedfunc.

- pf_testlib (PF_TESTLIB) is loaded: its testing.* functions carry tvm-ffi's
  names (testing.echo, ...).
- tvm-ffi's own internals (OUT_OF_SCOPE: its C++ test objects, its Cython
  core, its C++ builder, its Python dataclasses) are placeholders: a test
  that uses one is reported as skipped, "out of scope", not failed, since
  no renaming can give packedfunc tvm-ffi's test fixtures.
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

OUT_OF_SCOPE = ("testing", "core", "cpp", "dataclasses", "container", "libinfo", "stream")


class OutOfScope(Exception):
    pass


class MissingInPackedfunc(AttributeError):
    pass


class _Placeholder(types.ModuleType):
    """Stands for packedfunc.NAME; fails as soon as it is used."""

    def __init__(self, name, out_of_scope):
        super().__init__(name)
        self.__dict__["_oos"] = out_of_scope

    def _fail(self, *args, **kwargs):
        if self.__dict__["_oos"]:
            raise OutOfScope("tvm-ffi internal: %s" % self.__name__)
        raise MissingInPackedfunc("packedfunc has no %s" % self.__name__)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Placeholder(self.__name__ + "." + name, self.__dict__["_oos"])

    __call__ = __iter__ = __getitem__ = __mro_entries__ = _fail


def _missing(name):
    return _Placeholder("packedfunc." + name, name in OUT_OF_SCOPE)


packedfunc.__getattr__ = _missing
for _name in OUT_OF_SCOPE:
    sys.modules["packedfunc." + _name] = _missing(_name)
sys.modules["packedfunc.testing.testing"] = _missing("testing").testing


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and report.failed and call.excinfo.errisinstance(OutOfScope):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), 0, "out of scope: %s" % call.excinfo.value)
