"""Ships the shared libraries the package loads and what a C plugin builds
against, and builds packedfunc._cext, the package's optional compiled fast
path.

Everything else is in pyproject.toml.

The libraries are libpackedfunc and libpackedfunc_rpc, which `make python`
at the root of the source tree builds and copies into packedfunc/, with the
toolchain files beside them: the public headers (include/packedfunc/*.h,
and DLPack's include/dlpack/dlpack.h, which they include),
the linker scripts libpackedfunc.so and libpackedfunc_rpc.so (for
-lpackedfunc) and the pkg-config files (pkgconfig/*.pc). They are not built
here: their build is the Makefile's (with its checks of the Debian packages
it needs). Without them the build fails at once and says what to run,
instead of installing a package that cannot import or cannot build a
plugin.

The extension needs a C compiler, the Python headers (Debian: python3-dev)
and packedfunc's own header (packedfunc/c_api.h): from $PACKEDFUNC_INCLUDE,
the package's copy, the source tree this directory sits in, or an installed
copy. When any of them is missing, or the build fails, the package installs
without it and runs on ctypes.
"""
import ast
import glob
import os

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(HERE, "packedfunc")


def _constant(module, name):
    """A constant assigned at the top level of packedfunc/MODULE.py, read
    without importing the package (which would load the library)."""
    with open(os.path.join(PKG, module + ".py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise RuntimeError("setup.py: packedfunc/%s.py assigns no %s" % (module, name))


# The sonames of the libraries the package loads, as the modules that load
# them spell them: the core (_ffi.py's first choice) and the rpc library.
LIBRARIES = (_constant("_ffi", "_LIB_FILES")[0], _constant("rpc", "_SONAME"))
# What a plugin builds against (see the Makefile's `python` target), as
# package_data patterns; each must match at least one file.
TOOLCHAIN = ("include/packedfunc/c_api.h", "include/packedfunc/*.h", "include/dlpack/dlpack.h",
             "libpackedfunc.so", "libpackedfunc_rpc.so",
             "pkgconfig/packedfunc.pc", "pkgconfig/packedfunc-rpc.pc")
# What a wheel of `make wheel` adds (tools/build-wheel.sh stages them):
# the pf program and the libraries the package's ELF files load, other
# than glibc's. A package built straight from bindings/python has neither
# (its libraries load the system's); the marker for type checkers is
# always there.
OPTIONAL = ("bin/pf", "_libs/*.so*", "py.typed")


class BuildPyWithLibraries(build_py):
    """build_py that refuses to go on without the libraries and the
    toolchain files to ship."""

    def run(self):
        missing = [n for n in LIBRARIES + TOOLCHAIN if not glob.glob(os.path.join(PKG, n))]
        if missing:
            root = os.path.normpath(os.path.join(HERE, "..", ".."))
            where = ("in %s" % root if os.path.isfile(os.path.join(root, "Makefile"))
                     else "at the root of the packedfunc source tree")
            raise SystemExit(
                "packedfunc: %s lacks %s, which the package loads or ships. Run "
                "`make python` %s first: it builds the libraries and copies them, with the "
                "headers and pkg-config files, into %s. Then install again."
                % (PKG, ", ".join(missing[:-1]) + (" and " if len(missing) > 1 else "")
                   + missing[-1], where, PKG))
        super().run()


def _include_dir():
    candidates = [os.environ.get("PACKEDFUNC_INCLUDE", ""),
                  os.path.join(PKG, "include"),
                  os.path.join(HERE, "..", "..", "include"),
                  "/usr/local/include", "/usr/include"]
    for d in candidates:
        if d and os.path.exists(os.path.join(d, "packedfunc", "c_api.h")):
            return os.path.normpath(d)
    return None


_include = _include_dir()
# Every C file of src/ (as the Makefile compiles them), relative to here.
_sources = sorted(os.path.relpath(p, HERE)
                  for p in glob.glob(os.path.join(HERE, "src", "*.c")))
_ext = []
if _include is not None and _sources:
    _ext.append(Extension(
        "packedfunc._cext", _sources, include_dirs=[_include, os.path.join(HERE, "src")],
        extra_compile_args=["-std=c11", "-fvisibility=hidden"],
        # A failed build leaves the pure-ctypes package.
        optional=True))

setup(ext_modules=_ext, package_data={"packedfunc": list(LIBRARIES + TOOLCHAIN + OPTIONAL)},
      cmdclass={"build_py": BuildPyWithLibraries})
