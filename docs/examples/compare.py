"""Runs the comparison's small library (docs/guide.md, "Compared") in both
of packedfunc's forms, from Python: docs/examples/compare_c.c and
examples/cxx_layer.cc, built as plugins, whose paths are the arguments. Each must
give clamp with its defaults, the class with its string field and its
failing method, and the total of a float64 array. tools/test-readme.sh
runs it."""
import sys

import numpy as np

import packedfunc as pf


def check(path, namespace):
    lib = getattr(pf.load_module(path), namespace)
    assert lib.clamp(7.5) == 1.0 and lib.clamp(-2.0) == 0.0 and lib.clamp(7.5, 0, 5) == 5.0
    assert lib.clamp(7.5, hi=3) == 3.0
    a = lib.Account("ada")
    assert a.owner == "ada", a.owner
    a.owner = "bob"
    a.balance = 10
    assert a.owner == "bob" and a.withdraw(3) == 7
    try:
        a.withdraw(100)
    except ValueError as e:
        assert "withdraw: not enough money" in str(e), e
    else:
        raise AssertionError("withdraw(100) did not fail")
    assert a.balance == 7
    assert lib.total(np.arange(5, dtype=np.float64)) == 10.0
    return namespace


if __name__ == "__main__":
    done = [check(sys.argv[1], "cmpc"), check(sys.argv[2], "mylib")]
    print("compare.py: %s hold" % " and ".join(done))
