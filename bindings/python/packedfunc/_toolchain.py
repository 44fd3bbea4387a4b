"""Where a C plugin or program finds packedfunc to build against.

The installed package carries what a compiler needs (`make python` puts it
beside the package, and the wheel ships it): the public headers in
``include/``, the shared libraries and, for ``-lpackedfunc``, linker
scripts that name their sonames, and pkg-config files in ``pkgconfig/``
that locate the package from where they are. ``python -m packedfunc``
prints the flags (see __main__.py). Everything here is private; the
package re-exports get_include and get_library_dir.
"""
import os

from ._library import LIB_PATH

_HERE = os.path.dirname(os.path.abspath(__file__))


def get_include():
    """The directory that holds ``packedfunc/c_api.h``: compile with
    ``-I`` it. The package's own copy of the headers; in a source tree
    without one (before `make python`), the tree's ``include``.

    The headers include ``<dlpack/dlpack.h>``: the package ships the copy
    it was built against beside them (a source tree before `make python`
    has none: it comes from the system, Debian's libdlpack-dev)."""
    own = os.path.join(_HERE, "include")
    tree = os.path.normpath(os.path.join(_HERE, "..", "..", "..", "include"))
    for d in (own, tree):
        if os.path.isfile(os.path.join(d, "packedfunc", "c_api.h")):
            return d
    return own


def get_library_dir():
    """The directory of the libpackedfunc that this process loaded
    (``packedfunc.library_path``), which also holds libpackedfunc_rpc:
    link with ``-L`` it ``-lpackedfunc``, and give a program an rpath to it
    (``-Wl,-rpath,DIR``) so that it finds the library when it runs. A
    plugin loaded by this package needs no rpath: it binds to the copy
    already loaded."""
    return os.path.dirname(os.path.abspath(LIB_PATH))


def get_pkgconfig_dir():
    """The directory of the package's packedfunc.pc and packedfunc-rpc.pc,
    for PKG_CONFIG_PATH. They describe the package's own copies of the
    headers and libraries, with an rpath to them."""
    return os.path.join(_HERE, "pkgconfig")


def cflags():
    return ["-I" + get_include()]


def libs():
    lib_dir = get_library_dir()
    return ["-L" + lib_dir, "-lpackedfunc", "-Wl,-rpath," + lib_dir]
