"""Builds packedfunc._cext, the package's optional compiled fast path.

Everything else is in pyproject.toml. The extension needs a C compiler, the
Python headers (Debian: python3-dev) and packedfunc's own header
(packedfunc/c_api.h): from $PACKEDFUNC_INCLUDE, the source tree this
directory sits in, or an installed copy. When any of them is missing, or
the build fails, the package installs without it and runs on ctypes.
"""
import os

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def _include_dir():
    candidates = [os.environ.get("PACKEDFUNC_INCLUDE", ""),
                  os.path.join(HERE, "..", "..", "include"),
                  "/usr/local/include", "/usr/include"]
    for d in candidates:
        if d and os.path.exists(os.path.join(d, "packedfunc", "c_api.h")):
            return os.path.normpath(d)
    return None


_include = _include_dir()
_ext = []
if _include is not None:
    _ext.append(Extension(
        "packedfunc._cext", [os.path.join("src", "cext.c")], include_dirs=[_include],
        extra_compile_args=["-std=c11", "-fvisibility=hidden"],
        # A failed build leaves the pure-ctypes package.
        optional=True))

setup(ext_modules=_ext)
