"""The few header macros the ctypes backend cannot ask the library for
(a macro is not a symbol) are restated in _ffi.py; this checks each copy
against the header it comes from, so that the header stays their one
source."""
import os
import re

import pytest

from packedfunc import _ffi
from conftest import ROOT

# (the Python copy, the header, the macro)
COPIES = [
    ("REGISTER_OVERRIDE", "registry.h", "kPFRegisterOverride"),
    ("REGISTER_PROTECTED", "registry.h", "kPFRegisterProtected"),
    ("NAME_MAX", "registry.h", "PF_NAME_MAX"),
    ("FUNC_NON_BLOCKING", "function.h", "kPFFuncNonBlocking"),
]


def _macro(header, name):
    with open(os.path.join(ROOT, "include", "packedfunc", header), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^#define\s+%s\s+(\d+)u?\b" % re.escape(name), text, re.M)
    assert m, "%s: no #define %s" % (header, name)
    return int(m.group(1))


@pytest.mark.parametrize("copy,header,macro", COPIES)
def test_python_copies_of_header_macros_match_the_header(copy, header, macro):
    assert getattr(_ffi, copy) == _macro(header, macro)
