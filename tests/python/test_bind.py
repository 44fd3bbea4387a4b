"""Function.bind and PrePackCache: constants bound from Python, numpy
arrays taken without a copy, pre-packing once, sharing through a cache."""
import gc
import sys

import numpy as np
import pytest


def test_bind_inserts_constants(pf, fn):
    add = fn("add")
    add5 = add.bind({0: 5})
    assert add5(3) == 8
    with pytest.raises(TypeError, match="at least 1 arguments, but it was given 0"):
        add.bind({1: 5})()


def test_bind_typed_signature_drops_bound(pf, fn):
    f = fn("typed_add").bind({1: 10})
    assert f.signature == "int64(int64)"
    assert f(1) == 11


def test_bind_str_is_copied(fn):
    s = "".join(["con", "stant"])
    f = fn("echo").bind({0: s})
    del s
    gc.collect()
    assert f() == "constant"


def test_bind_bad_input(pf, fn):
    add = fn("add")
    with pytest.raises(TypeError, match="dict"):
        add.bind([(0, 1)])
    with pytest.raises(TypeError, match="not an int"):
        add.bind({"0": 1})
    with pytest.raises(ValueError, match="positions\\[0\\]' is negative"):
        add.bind({-1: 1})
    with pytest.raises(TypeError, match="PrePackCache"):
        add.bind({0: 1}, cache=object())
    with pytest.raises(ValueError, match="out of range for signature"):
        fn("typed_add").bind({2: 1})


def test_numpy_constant_without_copy(pf, fn, testlib):
    w = np.arange(4, dtype=np.float64)
    refs = sys.getrefcount(w)
    f = fn("wsum")
    before = testlib.pft_prepack_calls()
    g = f.bind({1: w})
    assert testlib.pft_prepack_calls() == before + 1
    assert g(2.0) == 12.0
    assert g(1.0) == 6.0
    assert testlib.pft_prepack_calls() == before + 1  # not on calls
    # Keep: a constant the hook leaves as it is is the array's own memory.
    h = fn("echo").bind({0: w})
    t = h()
    assert np.shares_memory(np.asarray(t), w)  # the array's memory: no copy
    del t
    assert sys.getrefcount(w) > refs  # kept alive by the bound function
    del h
    gc.collect()


def test_cache_shares_equal_constants(pf, fn, testlib):
    cache = pf.PrePackCache()
    assert cache.stats() == (0, 0, 0)
    f = fn("wsum")
    before = testlib.pft_prepack_calls()
    bound = [f.bind({1: np.ones(8)}, cache=cache) for _ in range(5)]
    assert testlib.pft_prepack_calls() == before + 1
    entries, nbytes, hits = cache.stats()
    assert (entries, hits) == (1, 4)
    assert nbytes == 0  # the packed value is a boxed double, not a tensor
    assert all(b(1.0) == 8.0 for b in bound)
    other = f.bind({1: np.ones(9)}, cache=cache)
    assert cache.stats()[0] == 2
    del bound, other
    gc.collect()
    assert cache.stats()[0] == 0


def test_hook_error_fails_bind(pf, fn):
    with pytest.raises(TypeError, match="w must be 1-d float64"):
        fn("wsum").bind({1: np.ones(3, dtype=np.float32)})


# ---- the demo plugin's pre-packed matmul ----

@pytest.fixture
def matmul(pf):
    import os
    from conftest import ROOT
    path = os.environ.get("PF_DEMO_PLUGIN") or os.path.join(
        ROOT, os.environ.get("BUILD", "build"), "examples", "demo_plugin.so")
    return pf.load_module(path).demo.matmul


def test_matmul_bound_and_unbound_agree(pf, matmul):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 33), dtype=np.float32)
    w = rng.standard_normal((33, 17), dtype=np.float32)
    want = x @ w
    cache = pf.PrePackCache()
    for f in (lambda x: matmul(x, w), matmul.bind({1: w}), matmul.bind({1: w}, cache=cache)):
        np.testing.assert_allclose(f(x), want, rtol=1e-4, atol=1e-4)
    # Any layout of either operand gives the same product.
    np.testing.assert_allclose(matmul(np.asfortranarray(x), w[::1]), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(matmul(x[:, ::3], w[::3]), x[:, ::3] @ w[::3],
                               rtol=1e-4, atol=1e-4)
    assert matmul(np.zeros((0, 4), np.float32), np.zeros((4, 2), np.float32)).shape == (0, 2)


def test_matmul_cache_holds_one_column_major_copy(pf, matmul):
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    cache = pf.PrePackCache()
    bound = [matmul.bind({1: w.copy()}, cache=cache) for _ in range(10)]
    assert cache.stats() == (1, w.nbytes, 9)
    x = np.eye(3, dtype=np.float32)
    assert all((b(x) == w).all() for b in bound)
    # A different weight is a second entry; without a cache, no sharing.
    other = matmul.bind({1: w + 1}, cache=cache)
    alone = matmul.bind({1: w})
    assert cache.stats()[:2] == (2, 2 * w.nbytes)
    assert (alone(x) == w).all() and (other(x) == w + 1).all()
    del bound, other
    gc.collect()
    assert cache.stats()[:2] == (0, 0)


def test_matmul_bad_weight_fails_bind(pf, matmul):
    cache = pf.PrePackCache()
    with pytest.raises(ValueError, match=r"pre-packing the weight.*2-D float32.*float64"):
        matmul.bind({1: np.zeros((3, 3))}, cache=cache)
    with pytest.raises(TypeError, match=r"argument 1 \(w\) must be a tensor, got int"):
        matmul.bind({1: 3})
    assert cache.stats() == (0, 0, 0)
    b = matmul.bind({1: np.zeros((3, 2), np.float32)})
    with pytest.raises(ValueError, match="x is 2 x 4 and w is 3 x 2"):
        b(np.zeros((2, 4), np.float32))
