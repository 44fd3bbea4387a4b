"""python -m packedfunc --cflags --libs: the flags to build a C plugin or
program against this package, as pkg-config prints them (one line, in the
order asked for). A program built with them runs without LD_LIBRARY_PATH:
--libs has an rpath to the library's directory.

run_pf is the wheel's `pf` console script."""
import argparse
import os
import sys

from . import __version__, _toolchain

# Option -> what it prints, in the order the options are given.
_ITEMS = {
    "cflags": ("the compiler flags: -I the headers' directory", _toolchain.cflags),
    "libs": ("the linker flags: -L, -lpackedfunc and an rpath to the library's directory",
             _toolchain.libs),
    "includedir": ("the directory that holds packedfunc/c_api.h",
                   lambda: [_toolchain.get_include()]),
    "libdir": ("the directory of libpackedfunc (and libpackedfunc_rpc)",
               lambda: [_toolchain.get_library_dir()]),
    "pkgconfigdir": ("the directory of packedfunc.pc and packedfunc-rpc.pc, for PKG_CONFIG_PATH",
                     lambda: [_toolchain.get_pkgconfig_dir()]),
}


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m packedfunc",
        description="Print what a C compiler needs to build against this packedfunc, "
                    "for example: cc -shared -fPIC plugin.c $(python3 -m packedfunc "
                    "--cflags --libs) -o plugin.so")
    for name, (text, _) in _ITEMS.items():
        parser.add_argument("--" + name, dest="items", action="append_const", const=name,
                            help=text)
    parser.add_argument("--version", action="version", version=__version__)
    args = parser.parse_args(argv)
    if not args.items:
        parser.error("nothing asked for: give --cflags, --libs, --includedir, --libdir "
                     "or --pkgconfigdir")
    words = []
    for name in args.items:
        words.extend(_ITEMS[name][1]())
    print(" ".join(words))
    return 0


def run_pf():
    """The `pf` console script: runs the pf program that the wheel ships
    (packedfunc/bin/pf, the one `make install` installs, which finds the
    package's libraries through its rpath) with this process's arguments.
    Its `pf stubgen` runs this Python unless PF_PYTHON says otherwise."""
    program = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "pf")
    if not os.access(program, os.X_OK):
        sys.exit("pf: this packedfunc has no pf program (%s): the wheel of `make wheel` "
                 "ships it; from a source tree, run build/bin/pf" % program)
    os.environ.setdefault("PF_PYTHON", sys.executable)
    os.execv(program, ["pf"] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
