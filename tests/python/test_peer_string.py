"""The peer suite for strings and bytes: tvm-ffi's tests/python/
test_string.py (and test_container.py's string-keyed map), the cases whose
behaviour packedfunc shares, re-expressed against the `ffi` adapter
(peer_ffi.py). Left out: tvm-ffi's String and Bytes object classes (their
cached C object and String.find), which packedfunc does not have: a str
crosses as a kPFStr and comes back as a str; the representation of Arrays
and Maps as text (test_container's test_repr), which is the containers'.
"""
import pickle

import pytest

import peer_ffi


@pytest.fixture
def ffi():
    """tvm-ffi's names over packedfunc's (peer_ffi.py)."""
    return peer_ffi.FFI


def test_strings_cross_and_pickle_as_str(ffi):
    echo = ffi.get_global_func("testing.echo")
    assert echo("hello") == "hello"
    assert isinstance(ffi.convert("hello"), str)
    longer = "hello long string"
    assert echo(longer) == longer
    back = echo("x" * 200)
    assert back == "x" * 200 and type(back) is str
    again = pickle.loads(pickle.dumps(back))
    assert again == back and type(again) is str


def test_bytes_cross_and_pickle_as_bytes(ffi):
    echo = ffi.get_global_func("testing.echo")
    assert echo(b"hello") == b"hello"
    assert isinstance(ffi.convert(b"hello"), bytes)
    # A bytearray crosses as bytes (convert gives it back as itself, equal).
    assert ffi.convert(bytearray(b"hello")) == b"hello"
    assert type(echo(bytearray(b"hello"))) is bytes
    back = echo(b"x" * 200)
    assert back == b"x" * 200 and type(back) is bytes
    again = pickle.loads(pickle.dumps(back))
    assert again == back and type(again) is bytes


def test_a_map_with_string_keys_keeps_their_order(ffi):
    pairs = [("a%d" % i, i) for i in reversed(range(10))]
    m = ffi.convert(dict(pairs))
    assert tuple(m.items()) == tuple(pairs)
    for k, v in pairs:
        assert k in m and m[k] == v and m.get(k) == v
    assert tuple(iter(m)) == tuple(k for k, _ in pairs)
