"""Protected names and the sealed registry, from Python.

register_func(..., protected=True) marks one name that can then never be
overridden or removed; seal_registry() freezes the whole registry for the
rest of the process. Both are permanent, so protected names here are unique
to the test run, and sealing runs in a child interpreter.
"""
import itertools
import json
import os
import subprocess
import sys

import pytest

import packedfunc as pf

BINDINGS = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..",
                                         "bindings", "python"))
_ids = itertools.count()


def protected_name():
    # Never removable: a name no other test (or rerun in this process) uses.
    return "pytest.sealing.protected.%d.%d" % (os.getpid(), next(_ids))


def test_public_names_are_exported():
    for name in ("seal_registry", "registry_sealed"):
        assert name in pf.__all__
        assert getattr(pf, name).__doc__


def test_registry_is_not_sealed_in_the_test_process():
    # The sealing test below runs in a child; this process must stay open.
    assert pf.registry_sealed() is False


def test_protected_name_cannot_be_overridden_or_removed():
    name = protected_name()
    pf.register_func(name, lambda x: x * 3, protected=True)
    with pytest.raises(RuntimeError, match="'%s' is protected and cannot be overridden"
                       % name.replace(".", r"\.")):
        pf.register_func(name, lambda x: x, override=True)
    # Without override too: the protection is reported, not "taken".
    with pytest.raises(RuntimeError, match="protected"):
        pf.register_func(name, lambda x: x)
    with pytest.raises(RuntimeError, match="'%s' is protected and cannot be removed"
                       % name.replace(".", r"\.")):
        pf.remove_global_func(name)
    # Lookups and calls go on, and the original function is still there.
    assert pf.get_global_func(name)(5) == 15
    assert name in pf.list_global_func_names(name)
    assert pf.get_global_func("testing.call")(pf.get_global_func(name), 2) == 6


def test_protected_decorator_form():
    name = protected_name()

    @pf.register_func(name, protected=True)
    def tripled(x):
        return 3 * x

    assert tripled(2) == 6  # still the plain Python function
    with pytest.raises(RuntimeError, match="protected"):
        pf.remove_global_func(name)


def test_override_can_make_a_name_protected():
    name = protected_name()
    pf.register_func(name, lambda: 1)
    pf.register_func(name, lambda: 2, override=True, protected=True)
    assert pf.get_global_func(name)() == 2
    with pytest.raises(RuntimeError, match="protected"):
        pf.register_func(name, lambda: 3, override=True)
    assert pf.get_global_func(name)() == 2


def test_protected_taken_name_is_key_error_and_not_protected(unique_name):
    # A failed protected registration protects nothing.
    name = unique_name()
    pf.register_func(name, lambda: 1)
    with pytest.raises(KeyError, match="already registered"):
        pf.register_func(name, lambda: 2, protected=True)
    pf.remove_global_func(name)  # still removable
    assert pf.get_global_func(name, allow_missing=True) is None


def test_unprotected_names_stay_changeable(unique_name):
    name = unique_name()
    pf.register_func(name, lambda: 1, protected=False)
    pf.register_func(name, lambda: 2, override=True)
    assert pf.get_global_func(name)() == 2
    pf.remove_global_func(name)


# The child process: sets up, seals, then tries every operation and reports
# what each gave, as JSON. The parent asserts, so a failure prints both
# sides.
CHILD = r"""
import ctypes, json, sys
sys.path.insert(0, sys.argv[1])
import packedfunc as pf

lib = ctypes.CDLL(sys.argv[2])
assert lib.pft_init() == 0
out = {}

def attempt(label, f):
    try:
        r = f()
        out[label] = ["ok", r if isinstance(r, (int, str, bool, list, type(None))) else repr(r)]
    except Exception as e:
        out[label] = [type(e).__name__, str(e)]

pf.register_func("seal.kept", lambda x: x + 1)
pf.register_func("seal.doomed", lambda: 0)
pf.register_func("seal.guarded", lambda: "guarded", protected=True)
held = pf.get_global_func("seal.kept")

attempt("sealed_before", pf.registry_sealed)
attempt("seal", pf.seal_registry)
attempt("sealed_after", pf.registry_sealed)
attempt("seal_again", pf.seal_registry)
attempt("sealed_still", pf.registry_sealed)
# Everything that changes the registry fails.
attempt("register_new", lambda: pf.register_func("seal.new", lambda: 1))
attempt("register_protected", lambda: pf.register_func("seal.new2", lambda: 1, protected=True))
attempt("override", lambda: pf.register_func("seal.kept", lambda x: x, override=True))
attempt("override_protected", lambda: pf.register_func("seal.guarded", lambda: 0, override=True))
attempt("register_c_function", lambda: pf.register_func("seal.add", pf.get_global_func("testing.add")))
attempt("remove", lambda: pf.remove_global_func("seal.doomed"))
attempt("remove_unknown", lambda: pf.remove_global_func("seal.unknown"))
attempt("c_registers", lambda: lib.pft_init())  # C's PFFuncRegisterGlobal: -1
# Bad input is still reported as such.
attempt("register_empty_name", lambda: pf.register_func("", lambda: 1))
# Lookups and calls go on.
attempt("call_kept", lambda: pf.get_global_func("seal.kept")(41))
attempt("call_guarded", lambda: pf.get_global_func("seal.guarded")())
attempt("call_doomed", lambda: pf.get_global_func("seal.doomed")())
attempt("call_held", lambda: held(1))
attempt("call_c", lambda: pf.get_global_func("testing.add")(40, 2))
attempt("callback_from_c", lambda: pf.get_global_func("testing.call")(held, 9))
attempt("callback_from_c_thread",
        lambda: pf.get_global_func("testing.call_in_thread")(lambda s: s + "!", "hi"))
attempt("missing", lambda: pf.get_global_func("seal.new", allow_missing=True))
attempt("names", lambda: pf.list_global_func_names("seal."))
attempt("convert", lambda: pf.convert(lambda: 5)())  # anonymous functions are not registry changes
print(json.dumps(out))
"""


def test_sealed_registry_in_a_child_process(testlib):
    env = dict(os.environ)
    env.setdefault("PACKEDFUNC_LIBRARY", pf.library_path)
    proc = subprocess.run([sys.executable, "-c", CHILD, BINDINGS, testlib._name],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    out = json.loads(proc.stdout)

    assert out["sealed_before"] == ["ok", False]
    assert out["seal"] == ["ok", None]
    assert out["sealed_after"] == ["ok", True]
    assert out["seal_again"] == ["ok", None]  # idempotent
    assert out["sealed_still"] == ["ok", True]

    for label, name in [("register_new", "seal.new"), ("register_protected", "seal.new2"),
                        ("override", "seal.kept"), ("override_protected", "seal.guarded"),
                        ("register_c_function", "seal.add"), ("remove", "seal.doomed"),
                        ("remove_unknown", "seal.unknown")]:
        kind, message = out[label]
        assert kind == "RuntimeError", (label, out[label])
        assert "the registry is sealed; '%s' cannot be changed" % name in message, (label, message)
    assert out["c_registers"] == ["ok", -1]
    kind, message = out["register_empty_name"]
    assert kind == "ValueError" and "empty" in message, out["register_empty_name"]

    assert out["call_kept"] == ["ok", 42]
    assert out["call_guarded"] == ["ok", "guarded"]
    assert out["call_doomed"] == ["ok", 0]  # removal failed: still there
    assert out["call_held"] == ["ok", 2]
    assert out["call_c"] == ["ok", 42]
    assert out["callback_from_c"] == ["ok", 10]
    assert out["callback_from_c_thread"] == ["ok", "hi!"]
    assert out["missing"] == ["ok", None]
    assert out["names"] == ["ok", ["seal.doomed", "seal.guarded", "seal.kept"]]
    assert out["convert"] == ["ok", 5]

