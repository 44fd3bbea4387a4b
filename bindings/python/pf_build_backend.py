"""The build backend of bindings/python: setuptools' own, when the Python
that builds the package has setuptools and wheel, and otherwise a failure
that says what to run instead.

pip builds a package in an isolated environment that holds only what
pyproject.toml's build-system.requires lists, downloaded from an index.
Listing setuptools there makes `pip install bindings/python` fail without
a network, and a venv's own setuptools (with --no-build-isolation) lacks
the wheel package's bdist_wheel: either way the user gets a traceback about
something else. So requires is empty, and this module, which pip loads
from the tree (backend-path), checks for both first. The way that always
works is the wheel: `make wheel` at the root of the source tree builds it
with Debian's packages (docs/building.md).
"""
import sys

_HOOKS = ("get_requires_for_build_wheel", "prepare_metadata_for_build_wheel", "build_wheel",
          "get_requires_for_build_sdist", "build_sdist", "get_requires_for_build_editable",
          "prepare_metadata_for_build_editable", "build_editable")

_MESSAGE = """\
packedfunc: cannot build bindings/python with this Python: it has no {missing}
(pip's build isolation hides the system's; a venv has setuptools but no wheel).
Build the wheel at the root of the source tree instead, then install it:
    make wheel && pip install dist/packedfunc-*.whl
"""


def _setuptools():
    """setuptools' build_meta, or SystemExit with _MESSAGE."""
    try:
        from setuptools import build_meta
    except ImportError:
        sys.stderr.write(_MESSAGE.format(missing="setuptools"))
        raise SystemExit(1) from None
    try:  # bdist_wheel: the wheel package's, or setuptools' own since 70.1
        import wheel.bdist_wheel  # noqa: F401
    except ImportError:
        try:
            import setuptools.command.bdist_wheel  # noqa: F401
        except ImportError:
            sys.stderr.write(_MESSAGE.format(missing="wheel package"))
            raise SystemExit(1) from None
    return build_meta


def _hook(name):
    def hook(*args, **kwargs):
        return getattr(_setuptools(), name)(*args, **kwargs)
    hook.__name__ = hook.__qualname__ = name
    return hook


for _name in _HOOKS:
    globals()[_name] = _hook(_name)
